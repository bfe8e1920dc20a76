humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(8) }
}

fn main() {}
