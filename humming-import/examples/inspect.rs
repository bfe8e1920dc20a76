//! Prints each quantized linear layer of a model, its format, shape `[N, K]`, bytes and the
//! `gemm!` fields that declare its kernel.
//!
//! `cargo run -p humming-import --example inspect -- <FOLDER | FILE.gguf> [--unpack]`
//!
//! - a folder: a quantized safetensors checkpoint ([`QuantizedCheckpoint`]): GPTQ, AWQ,
//!   compressed-tensors (`pack-quantized`, `float-quantized`, `nvfp4-pack-quantized`,
//!   `mxfp4-pack-quantized`; its config groups are listed), DeepSeek FP8 or ModelOpt NVFP4;
//!   `--unpack` also unpacks every layer (checking its values and that `QuantizedWeights` takes
//!   them) and reports act-order permutations and secondary scales;
//! - a `.gguf` file: every weight tensor of a type the lossless conversion takes
//!   ([`humming_import::convert::spec_text`]), others listed as not converted.

use humming_import::convert::spec_text;
use humming_import::{GgufFile, QuantizedCheckpoint, to_quantized};
use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut path = None;
    let mut unpack = false;
    for arg in std::env::args_os().skip(1) {
        if arg == "--unpack" {
            unpack = true;
        } else if path.is_none() {
            path = Some(PathBuf::from(arg));
        } else {
            return Err(format!("unexpected argument {}", arg.to_string_lossy()).into());
        }
    }
    let path = path.ok_or("usage: inspect <FOLDER | FILE.gguf> [--unpack]")?;
    if path.is_dir() {
        folder(&path, unpack)
    } else {
        gguf(&path, unpack)
    }
}

fn folder(path: &std::path::Path, unpack: bool) -> Result<(), Box<dyn std::error::Error>> {
    let ckpt = QuantizedCheckpoint::open(path)?;
    let layers = ckpt.layers()?;
    println!(
        "{}: {} ({}), quantized layers: {}",
        path.display(),
        ckpt.config().describe(),
        ckpt.config().file,
        layers.len()
    );
    if let Some(ct) = &ckpt.config().compressed {
        for g in &ct.groups {
            println!("  group {}: {} -> {:?}", g.name, g.describe(), g.targets);
        }
        if !ct.ignore.is_empty() {
            println!("  ignore: {:?}", ct.ignore);
        }
    }
    let total: usize = layers.iter().map(|l| l.bytes).sum();
    let width = layers.iter().map(|l| l.format.len()).max().unwrap_or(0);
    for l in &layers {
        println!(
            "  {:<44} {:<width$} [{:>5}, {:>5}] {:>9} B  {}",
            l.prefix, l.format, l.n, l.k, l.bytes, l.spec_text
        );
        if unpack {
            let layer = ckpt.layer(&l.prefix)?;
            let mut notes = Vec::new();
            if layer.k_perm.is_some() {
                notes.push("act-order: K permuted, gather A's columns by k_perm".to_owned());
            }
            if let [s2] = layer.weights.scale2() {
                notes.push(format!("scale2 = {s2:e}"));
            }
            if notes.is_empty() {
                println!("    unpacked");
            } else {
                println!("    unpacked; {}", notes.join("; "));
            }
        }
    }
    println!("  total {total} bytes");
    Ok(())
}

fn gguf(path: &std::path::Path, unpack: bool) -> Result<(), Box<dyn std::error::Error>> {
    let file = GgufFile::open(path)?;
    println!(
        "{}: GGUF v{}, {} tensors",
        path.display(),
        file.version(),
        file.tensors().len()
    );
    let mut total = 0u64;
    for t in file.tensors() {
        let Some((n, k)) = t.matrix_nk().filter(|_| t.dims.len() >= 2) else {
            continue;
        };
        let bytes = t.n_bytes.unwrap_or(0);
        let ty = t.ggml_type.to_string();
        match spec_text(t.ggml_type) {
            Some(spec) => {
                total += bytes;
                println!(
                    "  {:<32} {:<7} [{n:>5}, {k:>5}] {bytes:>9} B  {spec}",
                    t.name, ty
                );
                if unpack {
                    to_quantized(&file.tensor(&t.name)?)?;
                    println!("    unpacked");
                }
            }
            None => println!(
                "  {:<32} {:<7} [{n:>5}, {k:>5}] {bytes:>9} B  (not converted)",
                t.name, ty
            ),
        }
    }
    println!("  total {total} bytes converted");
    Ok(())
}
