humming::gemm! {
    pub kernel W { a: bf16, b: e4m3, scale: block(128, 128, bf16) }
}

fn main() {}
