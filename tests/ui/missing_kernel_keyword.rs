humming::gemm! {
    pub W4 { a: f16, b: u4 }
}

fn main() {}
