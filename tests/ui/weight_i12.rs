humming::gemm! {
    pub kernel W { a: bf16, b: i12 }
}

fn main() {}
