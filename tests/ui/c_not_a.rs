humming::gemm! {
    pub kernel W { a: f16, b: u4, c: bf16 }
}

fn main() {}
