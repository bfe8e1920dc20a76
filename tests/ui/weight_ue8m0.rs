humming::gemm! {
    pub kernel W { a: f16, b: ue8m0 }
}

fn main() {}
