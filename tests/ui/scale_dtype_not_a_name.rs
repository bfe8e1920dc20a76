humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: group(128, [f16]) }
}

fn main() {}
