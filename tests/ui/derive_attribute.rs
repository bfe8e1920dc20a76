humming::gemm! {
    /// Docs are fine.
    #[derive(Debug)]
    pub kernel W { a: f16, b: u4 }
}

fn main() {
    let _ = format!("{:?}", W);
}
