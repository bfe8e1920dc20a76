humming::gemm! {
    pub kernel W { a: f16, b: u0 }
}

fn main() {}
