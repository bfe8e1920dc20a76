humming::gemm! {
    pub kernel W { a: i8, b: u4 }
}

fn main() {}
