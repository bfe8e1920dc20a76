humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(128u32) }
}

fn main() {}
