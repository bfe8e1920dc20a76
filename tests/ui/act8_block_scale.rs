humming::gemm! {
    pub kernel W { a: e4m3, b: i4, c: bf16, scale: block(128, 128, f32), arch: [sm_90a] }
}

fn main() {}
