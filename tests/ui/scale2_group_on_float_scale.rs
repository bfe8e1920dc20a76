humming::gemm! {
    pub kernel W { a: f16, b: e4m3, scale: group(32, f16), scale2: group(256, f16) }
}

fn main() {}
