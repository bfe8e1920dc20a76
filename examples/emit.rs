//! Prints the generated CUDA source of one kernel declaration (gemm! fields as a string), for reading
//! and for `scripts/sass.sh`, which compiles it and prints the SASS instruction mix of the main loop.
//! With `--headers DIR` it also writes the CUDA headers the source includes under `DIR`.
//!
//! ```text
//! cargo run --example emit -- "a: f16, b: i4, scale: group(128)" > kernel.cu
//! cargo run --example emit -- "a: f16, b: i4, scale: group(128)" --headers include > kernel.cu
//! ```

use humming::spec::{codegen, parse_kernel_str};
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (fields, headers) = match args.as_slice() {
        [fields] => (fields, None),
        [fields, flag, dir] if flag == "--headers" => (fields, Some(dir)),
        _ => {
            eprintln!("usage: emit \"<gemm! fields>\" [--headers DIR]");
            return ExitCode::from(2);
        }
    };
    let spec = match parse_kernel_str(fields) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("{fields}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(dir) = headers {
        for (path, contents) in codegen::headers() {
            let path = std::path::Path::new(dir).join(path);
            let written = path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(&path, contents.as_bytes()));
            if let Err(e) = written {
                eprintln!("writing {}: {e}", path.display());
                return ExitCode::from(1);
            }
        }
    }
    print!("{}", codegen::generate_cuda(&spec));
    ExitCode::SUCCESS
}
