// A valid declaration: the trybuild project has no build script, so there is no fatbin.
humming::gemm! {
    pub kernel W4A16 { a: f16, b: u4, scale: group(128), zero_point: int }
}

fn main() {
    let _ = <W4A16 as humming::GemmKernel>::IMAGE;
}
