humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(32, u6), scale2: group(32, f16), zero_point: float }
}

fn main() {}
