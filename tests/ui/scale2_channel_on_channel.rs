humming::gemm! {
    pub kernel W { a: f16, b: e4m3, scale: channel(f16), scale2: channel(f32) }
}

fn main() {}
