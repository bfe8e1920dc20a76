humming::gemm! {
    pub kernel W { a: i4, b: u8, c: f16, scale: channel(f32) }
}

fn main() {}
