humming::gemm! {
    pub kernel W { b: u4 }
}

fn main() {}
