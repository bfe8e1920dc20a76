humming::gemm! {
    pub kernel W { a: f16, b: e0m3, scale: group(32), zero_point: float }
}

fn main() {}
