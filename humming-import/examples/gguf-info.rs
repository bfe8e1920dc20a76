//! Prints a GGUF file's metadata (arrays summarized) and tensor table.
//!
//! `cargo run -p humming-import --example gguf-info [-- FILE.gguf]` (default: the SmolLM2 test model).

use humming_import::{GgufFile, LlamaParams, MetaValue, smollm2_gguf_path};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os()
        .nth(1)
        .map(Into::into)
        .unwrap_or_else(smollm2_gguf_path);
    let t = std::time::Instant::now();
    let file = GgufFile::open(&path)?;
    println!(
        "{}: GGUF v{}, alignment {}, data at byte {}, {} metadata keys, {} tensors (parsed in {:.1?})",
        path.display(),
        file.version(),
        file.alignment(),
        file.data_offset(),
        file.metadata().len(),
        file.tensors().len(),
        t.elapsed()
    );
    for (k, v) in file.metadata() {
        match v {
            MetaValue::Array(_) | MetaValue::String(_) => println!("  {k} = {}", v.describe()),
            _ => println!("  {k} = {v:?}"),
        }
    }
    if let Ok(p) = LlamaParams::from_gguf(&file) {
        println!("{p:#?}");
    }
    for t in file.tensors() {
        println!(
            "  {:<32} {:<6} {:?}",
            t.name,
            t.ggml_type.to_string(),
            t.dims
        );
    }
    Ok(())
}
