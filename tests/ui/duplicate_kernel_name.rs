humming::gemm! {
    pub kernel W { a: f16, b: u4 }
    pub kernel W { a: f16, b: u8 }
}

fn main() {
    let _ = W;
}
