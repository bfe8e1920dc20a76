humming::gemm! {
    pub kernel W { a: f16, b: u9 }
}

fn main() {}
