humming::gemm! {
    pub kernel W { a: f16, b: i4, scale: group(32), zero_point: float }
}

fn main() {}
