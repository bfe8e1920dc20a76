humming::gemm! {
    pub kernel W { a: f16, b: u4, epilogue: swish }
}

fn main() {}
