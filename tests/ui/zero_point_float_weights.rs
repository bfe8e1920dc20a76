humming::gemm! {
    pub kernel W { a: f16, b: e4m3, zero_point: int }
}

fn main() {}
