// Run with OUT_DIR set to an empty folder: a crate with a build script that did not compile this
// declaration (build.rs does not call humming_build::build(), or the gemm! is produced by another
// macro, which the build script cannot see).
macro_rules! declare {
    ($($body:tt)*) => {
        humming::gemm! { $($body)* }
    };
}

declare! {
    pub kernel Hidden { a: f16, b: u4, scale: group(64) }
}

fn main() {
    let _ = Hidden::IMAGE;
}
