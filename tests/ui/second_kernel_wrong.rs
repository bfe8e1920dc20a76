humming::gemm! {
    /// Valid: no error of its own.
    pub kernel Good { a: f16, b: u4, scale: group(128) }

    /// Invalid weight width.
    pub kernel Bad { a: f16, b: u9 }
}

fn main() {
    let _ = Good;
    let _ = Good::DESCRIPTOR;
    let _ = Bad;
}
