humming::gemm! {
    pub kernel W { a: f16, b: u4, scale: rows(128) }
}

fn main() {}
