humming::gemm! {
    pub kernel W { a: f16, b: u4, groups: 128 }
}

fn main() {}
