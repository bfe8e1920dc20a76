humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(128), scale2: channel(f32) }
}

fn main() {}
