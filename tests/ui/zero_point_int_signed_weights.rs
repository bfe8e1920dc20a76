humming::gemm! {
    pub kernel W { a: f16, b: i4, zero_point: int }
}

fn main() {}
