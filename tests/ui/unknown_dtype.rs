humming::gemm! {
    pub kernel W { a: f16, b: q4 }
}

fn main() {}
