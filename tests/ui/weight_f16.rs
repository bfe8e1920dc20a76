humming::gemm! {
    pub kernel W { a: f16, b: f16 }
}

fn main() {}
