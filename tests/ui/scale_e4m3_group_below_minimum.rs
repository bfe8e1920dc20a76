humming::gemm! {
    pub kernel W { a: bf16, b: e2m1, scale: group(8, e4m3) }
}

fn main() {}
