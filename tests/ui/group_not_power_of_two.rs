humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(96) }
}

fn main() {}
