humming::gemm! {
    pub kernel W { a: f16, b: [u4] }
}

fn main() {}
