//! Finds every `gemm!` kernel of this crate (sources, tests, examples, benches) and compiles it ahead
//! of time with NVCC; see `humming_build` for the environment variables it reads.
fn main() {
    humming_build::build();
}
