humming::gemm! {
    pub kernel W { a: i4, b: i4, c: f16, scale: channel(f32), arch: [sm_90a] }
}

fn main() {}
