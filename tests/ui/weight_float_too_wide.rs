humming::gemm! {
    pub kernel W { a: f16, b: e6m1, scale: channel }
}

fn main() {}
