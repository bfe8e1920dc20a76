humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(size = 128) }
}

fn main() {}
