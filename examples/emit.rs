//! Prints the generated CUDA source of one kernel declaration (gemm! fields as a string), for reading
//! and for `scripts/sass.sh`, which compiles it and prints the SASS instruction mix of the main loop.
//!
//! ```text
//! cargo run --example emit -- "a: f16, b: i4, scale: group(128)" > kernel.cu
//! ```

use humming::spec::{codegen, parse_kernel_str};

fn main() -> std::process::ExitCode {
    let Some(fields) = std::env::args().nth(1) else {
        eprintln!("usage: emit \"<gemm! fields>\"");
        return std::process::ExitCode::from(2);
    };
    match parse_kernel_str(&fields) {
        Ok(spec) => {
            print!("{}", codegen::generate_cuda(&spec));
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{fields}: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
