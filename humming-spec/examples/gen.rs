//! Prints the generated CUDA for a kernel given as gemm! fields, e.g.
//! `cargo run -p humming-spec --example gen -- "a: f16, b: u4, scale: group(128)"`.
fn main() {
    let fields = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "a: f16, b: u4, scale: group(128)".into());
    match humming_spec::parse_kernel_str(&fields) {
        Ok(spec) => print!("{}", humming_spec::codegen::generate_cuda(&spec)),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
