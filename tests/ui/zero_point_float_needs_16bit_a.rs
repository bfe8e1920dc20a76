humming::gemm! {
    pub kernel W { a: i8, b: u4, c: f16, scale: channel(f32), zero_point: float }
}

fn main() {}
