humming::gemm! {
    pub kernel W { a: f16, b: u4, bias: true, epilogue: silu_glu }
}

fn main() {}
