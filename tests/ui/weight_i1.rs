humming::gemm! {
    pub kernel W { a: f16, b: i1 }
}

fn main() {}
