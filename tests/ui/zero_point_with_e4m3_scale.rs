humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(32, e4m3), zero_point: int }
}

fn main() {}
