humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(32, u6), zero_point: float }
}

fn main() {}
