humming::gemm! {
    pub kernel W { a: f16, b: u4, bias: 1 }
}

fn main() {}
