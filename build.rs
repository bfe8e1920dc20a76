//! Compiles every `gemm!` kernel of this crate (src, tests, examples, benches) with NVCC.
//! The trybuild UI cases under tests/ui are compiled by trybuild without this script, so they are
//! not scanned.
fn main() {
    humming_build::Config::new().exclude("tests/ui").build();
}
