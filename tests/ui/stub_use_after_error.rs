use humming::GemmKernel;

humming::gemm! {
    pub kernel Bad { a: bf16, b: u4, scale: group(100) }
}

fn launch<K: GemmKernel>(_: K, _: &[K::A]) -> &'static str {
    K::NAME
}

fn main() {
    let k = Bad;
    let _ = Bad::default();
    let _ = (Bad::DESCRIPTOR, Bad::HASH, Bad::CUDA_SOURCE, Bad::IMAGE);
    let _ = launch(k, &[humming::half::bf16::ZERO]);
    let _ = <Bad as GemmKernel>::DESCRIPTOR.canonical();
}
