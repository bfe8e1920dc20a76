humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: channel(ue8m0) }
}

fn main() {}
