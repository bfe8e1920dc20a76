humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: block(128, 128, f32), zero_point: int }
}

fn main() {}
