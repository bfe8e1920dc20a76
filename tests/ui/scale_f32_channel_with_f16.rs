humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: channel(f32) }
}

fn main() {}
