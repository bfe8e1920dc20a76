humming::gemm! {
    pub kernel W { a: f16 }
}

fn main() {}
