humming::gemm! {
    pub kernel W { a: f16, b: e4m3, scale: block(32, 128, f32) }
}

fn main() {}
