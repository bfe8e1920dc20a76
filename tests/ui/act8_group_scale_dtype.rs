humming::gemm! {
    pub kernel W { a: i8, b: u4, c: bf16, scale: group(128, f16), zero_point: int }
}

fn main() {}
