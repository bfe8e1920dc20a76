humming::gemm! {
    pub kernel W { a: f16, b: e4m3, scale: block(128, 128, f32), scale2: tensor(f32) }
}

fn main() {}
