//! The quantized checkpoints of the `checkpoints` example: SmolLM2-135M's block layers (its GGUF
//! weights, dequantized exactly by humming-import) quantized by round to nearest and written by the
//! formats' published layouts, as the readers of `humming_import::QuantizedCheckpoint` document them:
//!
//! - GPTQ int4, group 128, act-order (`desc_act: true`, `sym: true`, `checkpoint_format: "gptq"`):
//!   the columns are visited in a fixed permuted order (descending mean |weight|, as GPTQ's act-order
//!   orders them by the Hessian diagonal), groups of 128 of that order; `qweight` int32 `[K / 8, N]`
//!   (code `k` at bits `4 (k % 8)` of word `k / 8`, in the checkpoint's own K order, stored `q + 8`),
//!   `qzeros` int32 `[groups, N / 8]` (v1: `8 - 1` in every nibble), `scales` f16 `[groups, N]`,
//!   `g_idx` int32 `[K]` (the group of each column);
//! - compressed-tensors `float-quantized` FP8 e4m3, `block` strategy 128 x 128: `weight` F8_E4M3
//!   `[N, K]`, `weight_scale` f32 `[ceil(N / 128), ceil(K / 128)]`, one config group targeting
//!   `Linear` as the package writes it.
//!
//! Only the quantized layers are written (no embedding, norms or LM head, which both formats leave
//! unquantized). Each folder is written once next to the GGUF file (into a `.partial` folder, renamed when whole)
//! and reused while it opens and lists every layer.

use super::host::quantize_parallel;
use super::timing::Res;
use humming::half::f16;
use humming::quant::QuantizedWeights;
use humming::spec::parse_kernel_str;
use humming_import::{LinearKind, LinearLayer, QuantizedCheckpoint};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The two formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    GptqActOrder,
    Fp8Block,
}

impl Format {
    pub const ALL: [Format; 2] = [Format::GptqActOrder, Format::Fp8Block];

    /// The folder's name next to the GGUF file.
    pub fn folder(self) -> &'static str {
        match self {
            Format::GptqActOrder => "SmolLM2-135M-GPTQ-int4-g128-actorder",
            Format::Fp8Block => "SmolLM2-135M-FP8-block128",
        }
    }

    /// What the folder holds, in words.
    pub fn title(self) -> &'static str {
        match self {
            Format::GptqActOrder => "GPTQ int4 g128 act-order (v1, sym)",
            Format::Fp8Block => "compressed-tensors FP8 e4m3, 128 x 128 block scales",
        }
    }

    /// The descriptor the layers are quantized for (and the reader must give back).
    pub fn spec_text(self) -> &'static str {
        match self {
            Format::GptqActOrder => "a: f16, b: i4, scale: group(128, f16)",
            Format::Fp8Block => "a: bf16, b: e4m3, scale: block(128, 128, f32)",
        }
    }

    fn quantization_config(self) -> serde_json::Value {
        match self {
            Format::GptqActOrder => json!({
                "quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true,
                "desc_act": true, "checkpoint_format": "gptq", "damp_percent": 0.01
            }),
            Format::Fp8Block => json!({
                "config_groups": {"group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 8, "type": "float", "symmetric": true, "group_size": null,
                        "strategy": "block", "block_structure": [128, 128], "dynamic": false
                    },
                    "input_activations": null, "output_activations": null,
                    "format": "float-quantized"
                }},
                "quant_method": "compressed-tensors", "kv_cache_scheme": null,
                "format": "float-quantized", "quantization_status": "compressed",
                "global_compression_ratio": null, "ignore": ["lm_head"],
                "moe_sparsity_config": null
            }),
        }
    }
}

/// The Hugging Face prefix of a block layer, e.g. `model.layers.0.self_attn.q_proj`.
pub fn hf_prefix(l: &LinearLayer) -> String {
    let module = match l.kind {
        LinearKind::AttnQ => "self_attn.q_proj",
        LinearKind::AttnK => "self_attn.k_proj",
        LinearKind::AttnV => "self_attn.v_proj",
        LinearKind::AttnOutput => "self_attn.o_proj",
        LinearKind::FfnGate => "mlp.gate_proj",
        LinearKind::FfnUp => "mlp.up_proj",
        LinearKind::FfnDown => "mlp.down_proj",
        LinearKind::TokenEmbd | LinearKind::Output => return "lm_head".to_owned(),
    };
    format!("model.layers.{}.{module}", l.block.unwrap_or_default())
}

/// One tensor of a safetensors file.
struct Tensor {
    name: String,
    dtype: &'static str,
    shape: Vec<usize>,
    data: Vec<u8>,
}

/// Writes `tensors` as one safetensors file: an 8-byte little-endian header length, the JSON header
/// (padded with spaces to 8 bytes), the data in order.
fn write_safetensors(path: &Path, tensors: &[Tensor]) -> Res<()> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut offset = 0;
    for t in tensors {
        let end = offset + t.data.len();
        header.insert(
            t.name.clone(),
            json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, end]}),
        );
        offset = end;
    }
    let mut text = serde_json::to_string(&header)?;
    while !text.len().is_multiple_of(8) {
        text.push(' ');
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    f.write_all(&(text.len() as u64).to_le_bytes())?;
    f.write_all(text.as_bytes())?;
    for t in tensors {
        f.write_all(&t.data)?;
    }
    f.flush()?;
    Ok(())
}

fn i32_bytes(v: impl IntoIterator<Item = u32>) -> Vec<u8> {
    v.into_iter().flat_map(u32::to_le_bytes).collect()
}

/// The act-order permutation: columns by descending mean |weight| (ties by index).
pub fn act_order(w: &[f32], n: usize, k: usize) -> Vec<usize> {
    let mut mean = vec![0f64; k];
    for row in w.chunks_exact(k) {
        for (m, &x) in mean.iter_mut().zip(row) {
            *m += f64::from(x.abs()) / n as f64;
        }
    }
    let mut perm: Vec<usize> = (0..k).collect();
    perm.sort_by(|&a, &b| mean[b].total_cmp(&mean[a]).then(a.cmp(&b)));
    perm
}

/// A GPTQ act-order layer: quantized in the permuted column order, stored in the checkpoint's own.
fn gptq_layer(prefix: &str, w: &[f32], n: usize, k: usize) -> Res<Vec<Tensor>> {
    const G: usize = 128;
    let spec = parse_kernel_str(Format::GptqActOrder.spec_text())?;
    let perm = act_order(w, n, k);
    let wp: Vec<f32> = w
        .chunks_exact(k)
        .flat_map(|row| perm.iter().map(move |&j| row[j]))
        .collect();
    let q = quantize_parallel(&spec, n, k, &wp)?;
    // Stored code `q + 8` (0..=15) at the column's own position.
    let mut stored = vec![0u8; n * k];
    for row in 0..n {
        for (j, &src) in perm.iter().enumerate() {
            stored[row * k + src] = (q.code_value(row, j) + 8) as u8;
        }
    }
    let mut g_idx = vec![0u32; k];
    for (j, &src) in perm.iter().enumerate() {
        g_idx[src] = (j / G) as u32;
    }
    let qweight = (0..k / 8).flat_map(|r| {
        let stored = &stored;
        (0..n).map(move |col| {
            (0..8).fold(0u32, |word, i| {
                word | u32::from(stored[col * k + 8 * r + i]) << (4 * i)
            })
        })
    });
    let groups = k.div_ceil(G);
    let scales: Vec<u8> = q
        .scales()
        .iter()
        .flat_map(|&s| f16::from_f32(s).to_bits().to_le_bytes())
        .collect();
    let t = |field: &str, dtype, shape: Vec<usize>, data| Tensor {
        name: format!("{prefix}.{field}"),
        dtype,
        shape,
        data,
    };
    Ok(vec![
        t("qweight", "I32", vec![k / 8, n], i32_bytes(qweight)),
        t(
            "qzeros",
            "I32",
            vec![groups, n / 8],
            i32_bytes(std::iter::repeat_n(0x7777_7777, groups * n / 8)),
        ),
        t("scales", "F16", vec![groups, n], scales),
        t("g_idx", "I32", vec![k], i32_bytes(g_idx)),
    ])
}

/// A compressed-tensors FP8 block layer.
fn fp8_layer(prefix: &str, w: &[f32], n: usize, k: usize) -> Res<Vec<Tensor>> {
    let spec = parse_kernel_str(Format::Fp8Block.spec_text())?;
    let q = QuantizedWeights::quantize(&spec, n, k, w)?;
    // The descriptor's block scales are [ceil(K / 128)][ceil(N / 128)]; the file's [N blocks, K blocks].
    let (kb, nb) = (k.div_ceil(128), n.div_ceil(128));
    let sc = q.scales();
    let scales = (0..nb).flat_map(|r| (0..kb).map(move |c| sc[c * nb + r].to_bits()));
    Ok(vec![
        Tensor {
            name: format!("{prefix}.weight"),
            dtype: "F8_E4M3",
            shape: vec![n, k],
            data: q.codes().to_vec(),
        },
        Tensor {
            name: format!("{prefix}.weight_scale"),
            dtype: "F32",
            shape: vec![nb, kb],
            data: i32_bytes(scales),
        },
    ])
}

/// Writes `tensors` and the `config.json` of `format` into the folder `dir`.
fn write_folder(dir: &Path, format: Format, tensors: &[Tensor]) -> Res<()> {
    write_safetensors(&dir.join("model.safetensors"), tensors)?;
    let config = json!({
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "tie_word_embeddings": true,
        "quantization_config": format.quantization_config(),
    });
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(&config)?,
    )?;
    Ok(())
}

/// Whether the folder opens and lists `layers` layers.
fn complete(dir: &Path, layers: usize) -> bool {
    QuantizedCheckpoint::open(dir)
        .and_then(|c| c.layers())
        .is_ok_and(|l| l.len() == layers)
}

/// The folder of `format` next to `gguf`, written from `layers` unless already there and complete;
/// returns it and whether it was written now.
pub fn ensure(format: Format, gguf: &Path, layers: &[&LinearLayer]) -> Res<(PathBuf, bool)> {
    let parent = gguf.parent().unwrap_or(Path::new("."));
    let dir = parent.join(format.folder());
    if complete(&dir, layers.len()) {
        return Ok((dir, false));
    }
    let partial = parent.join(format!("{}.partial", format.folder()));
    for d in [&dir, &partial] {
        if d.exists() {
            std::fs::remove_dir_all(d)?;
        }
    }
    std::fs::create_dir_all(&partial)?;
    let pb = super::layer_sweep::progress(layers.len(), "writing checkpoint");
    let mut tensors = Vec::new();
    for l in layers {
        let (n, k) = (l.weights.n(), l.weights.k());
        let w: Vec<f32> = l.weights.dequantize().iter().map(|&x| x as f32).collect();
        let prefix = hf_prefix(l);
        tensors.extend(match format {
            Format::GptqActOrder => gptq_layer(&prefix, &w, n, k)?,
            Format::Fp8Block => fp8_layer(&prefix, &w, n, k)?,
        });
        pb.inc(1);
    }
    pb.finish_and_clear();
    write_folder(&partial, format, &tensors)?;
    std::fs::rename(&partial, &dir)?;
    if !complete(&dir, layers.len()) {
        return Err(format!(
            "{} was written but does not list every layer",
            dir.display()
        )
        .into());
    }
    Ok((dir, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::host::random_matrix;

    /// What the writer writes, the reader reads back exactly: GPTQ act-order (K = 320 ends in a
    /// partial group) gives the quantized values of each column at its own place; FP8 block (N = 192
    /// and K = 320 end in partial blocks) the same codes and scales.
    #[test]
    fn written_layers_read_back_exactly() {
        let (n, k) = (192, 320);
        let w = random_matrix(n, k, 7, true);
        let prefix = "model.layers.0.mlp.down_proj";
        for format in Format::ALL {
            let dir = std::env::temp_dir().join(format!(
                "humming-ckpt-writer-{}-{:?}",
                std::process::id(),
                format
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let tensors = match format {
                Format::GptqActOrder => gptq_layer(prefix, &w, n, k).unwrap(),
                Format::Fp8Block => fp8_layer(prefix, &w, n, k).unwrap(),
            };
            write_folder(&dir, format, &tensors).unwrap();
            let layer = QuantizedCheckpoint::open(&dir)
                .unwrap()
                .layer(prefix)
                .unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            assert_eq!(layer.spec_text, format.spec_text());
            let spec = parse_kernel_str(format.spec_text()).unwrap();
            match format {
                Format::GptqActOrder => {
                    let perm = act_order(&w, n, k);
                    assert_ne!(perm, (0..k).collect::<Vec<_>>());
                    let wp: Vec<f32> = w
                        .chunks_exact(k)
                        .flat_map(|row| perm.iter().map(move |&j| row[j]))
                        .collect();
                    let q = QuantizedWeights::quantize(&spec, n, k, &wp)
                        .unwrap()
                        .dequantize();
                    let mut want = vec![0f64; n * k];
                    for row in 0..n {
                        for (j, &src) in perm.iter().enumerate() {
                            want[row * k + src] = q[row * k + j];
                        }
                    }
                    assert!(layer.k_perm.is_some());
                    assert_eq!(layer.dequantize_unpermuted(), want);
                }
                Format::Fp8Block => {
                    let q = QuantizedWeights::quantize(&spec, n, k, &w).unwrap();
                    assert!(layer.k_perm.is_none());
                    assert_eq!(layer.weights.codes(), q.codes());
                    assert_eq!(layer.weights.scales(), q.scales());
                }
            }
        }
    }
}
