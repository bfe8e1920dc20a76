//! Benchmark: quantized GEMM kernels declared with `gemm!` (W4A16, FP8 W8A16, MXFP4/6/8, NVFP4, GGUF
//! Q4_K) against cuBLAS (on the unquantized weights) and the DRAM floor, on one GPU.
//!
//! For every kernel, shape N x K and M it:
//! - quantizes random weights once per shape (on all cores where the scales are per row; NVFP4's
//!   tensor scale and Q4_K's super-group scales on one) and uploads them to as many device buffers
//!   as it takes to hold more than `--rotate-mib` (512 MiB) of packed weights, at most `--max-copies`
//!   (16): successive launches use successive copies, so the weights come from DRAM, not from the L2
//!   cache (60 MB on the H200). A and C are rotated with them;
//! - checks one launch against the f64 CPU reference (`reference_gemm`) on a few rows (0..4 and the
//!   last row of every M), with C poisoned with NaN first, so that a wrong kernel cannot look fast;
//! - times it by CUDA-graph replay: one graph of at least `--reps` (20) launches, a whole number of
//!   turns through the copies, replayed `--trials` (15) times after a warm-up, each replay timed with
//!   CUDA events; it reports the median per launch and the spread (min, quartiles, max) of the trials.
//!   If capture fails it falls back to CUDA events around as many back-to-back launches, and says so;
//! - times cuBLAS (`cublasGemmEx`, A's dtype in and out, f32 accumulation) on the unquantized weights,
//!   rotated the same way (more than 512 MiB of them, at least 2 copies);
//! - computes the DRAM floor: the bytes that must move once (what the kernel reads of the weights,
//!   `DeviceWeights::bytes`: packed weights, the scale grid in A's dtype, zero points and the f32
//!   channel factors; A and C) divided by the device-to-device copy bandwidth measured in the same run with a 4 GiB copy,
//!   counting bytes read and written (the convention of `scripts/humming-kernels-bench.py`).
//!
//! Output, in `--out` (default `$OUT`, else `./bench-out`): a table on the terminal, `bench.json`
//! (rewritten after every shape, so an interrupted run keeps what it measured) and one SVG chart per
//! kernel, `bench-<kernel>.svg` (one panel per shape; time against M; ours, cuBLAS and the floor).
//!
//! With `--reference humming_py_bench.json` (written by `scripts/humming-kernels-bench.py`, which
//! times the Python reference, humming-kernels) it also merges the two runs into `merged.md`,
//! `merged.json` and `merged.svg`: N x K, M, floor, ours, cuBLAS, humming-kernels, ours /
//! humming-kernels, ours / floor, and both sides' weight bytes. A reference row matches a kernel by its
//! `format` (our kernel name) and N, K, M; where no reference row carries the kernel's name, an integer
//! kernel matches the row of the same group and bits (`w4a16-u4` the "uint4" row). `--from bench.json [--reference ...]` measures nothing: it prints the
//! table of an earlier run, draws its charts again and merges it, with no GPU. `--cpu-only` runs only
//! the host-side preparation (weights, quantization, packing, reference) and reports its time.
//!
//! The timing, the JSON schema, the table, the charts and the merge are in `examples/common/`.
//!
//! The main kernel, `w4a16`, is `a: f16, b: i4, scale: group(128, f16)`: symmetric signed 4-bit codes,
//! which is what humming-kernels' "uint4" computes (it stores q + 8 and takes s · (q − 8)). The
//! literal `b: u4` (no zero point, `w = s · q`) is `w4a16-u4`; both move the same bytes. The float
//! formats carry humming-kernels' names (those of `scripts/humming-kernels-bench.py --formats`), all
//! with f16 activations: `w8a16_e4m3` (`b: e4m3, scale: channel(f16)`), `mxfp4` (`b: e2m1, scale:
//! group(32, ue8m0)`), `nvfp4` (`b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)`), `mxfp8`
//! (`b: e4m3, scale: group(32, ue8m0)`), `mxfp6` (`b: e2m3, scale: group(32, ue8m0)`). `q4_k` is GGUF
//! Q4_K (`b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float`), which
//! humming-kernels does not have: it is compared with cuBLAS and the floor only.
//!
//! ```text
//! cargo run --release --example bench -- --shapes 8192x8192 --ms 1,16,256 --kernels w4a16,w4a16-bf16
//! cargo run --release --example bench -- --shapes 8192x8192 --ms 1,16,64,256,1024 \
//!     --kernels w8a16_e4m3,mxfp4,nvfp4,mxfp8,mxfp6,q4_k
//! ```
//!
//! Without a GPU it prints `no GPU: <reason>` and exits 0. A failed correctness check makes the exit
//! status 1 (after everything was measured and written).

use clap::Parser;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{CudaSlice, CudaStream};
use humming::act_quant::{ActScale, quantize_activations};
use humming::cuda::{
    self, DeviceActivations, DeviceWeights, Gemm, KReduction, LaunchOptions, Launcher,
    ModuleSource, Reduction,
};
use humming::half::{bf16, f16};
use humming::spec::layout::is_8bit_activation;
use humming::spec::{DType, KernelSpec, ScaleGranularity};
use humming::{Element, GemmKernel};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

mod common;
use common::bench_kernels::*;
use common::bench_merge::merge;
use common::bench_report::{
    DeviceInfo, Report, Row, Stats, finite, plot_kernel, table_header, table_line, write_json,
};
use common::device::{cublas, cublas_gemm, upload_copies};
use common::host::{quantize_parallel, random_matrix, threads, to_elements};
use common::lt_fp8;
use common::timing::{Res, copy_bandwidth, replay};

/// A weight shape `NxK`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    n: usize,
    k: usize,
}

impl FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (n, k) = s
            .trim()
            .split_once(['x', 'X'])
            .ok_or_else(|| format!("`{s}`: expected NxK, e.g. 4096x4096"))?;
        let parse = |v: &str| v.trim().parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
        let (n, k) = (parse(n)?, parse(k)?);
        if n == 0 || k == 0 || n % 64 != 0 || k % 128 != 0 {
            return Err(format!(
                "`{s}`: N must be a positive multiple of 64 and K of 128 (the group size)"
            ));
        }
        Ok(Shape { n, k })
    }
}

#[derive(Parser, Debug)]
#[command(
    about = "Times gemm!-declared quantized kernels against cuBLAS and the DRAM floor (CUDA-graph replay, weights rotated past the L2 cache)."
)]
struct Args {
    /// Weight shapes N x K, comma separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "4096x4096,8192x8192,28672x4096,4096x14336"
    )]
    shapes: Vec<Shape>,
    /// Values of M (rows of A), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,16,32,64,128,256")]
    ms: Vec<usize>,
    /// Kernels, comma separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "w4a16")]
    kernels: Vec<Kernel>,
    /// Folder for bench.json and the charts [default: $OUT, else ./bench-out].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Timed graph replays per case (the median is reported).
    #[arg(long, default_value_t = 15)]
    trials: usize,
    /// Launches per graph, at least; rounded up to a whole number of turns through the weight copies.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Weight bytes to rotate through, in MiB: copies are added until they hold more, up to
    /// --max-copies (each reuse of a copy is then far more than the L2 cache apart).
    #[arg(long, default_value_t = 512)]
    rotate_mib: usize,
    /// Most copies of the weights.
    #[arg(long, default_value_t = 16)]
    max_copies: usize,
    /// Size of the device-to-device copy that measures the bandwidth, in GiB.
    #[arg(long, default_value_t = 4)]
    copy_gib: usize,
    /// Skip cuBLAS.
    #[arg(long)]
    no_cublas: bool,
    /// Skip the charts.
    #[arg(long)]
    no_plot: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seed of the random weights and activations.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// humming_py_bench.json of the Python reference (humming-kernels) to merge with the results.
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Measure nothing: print the table of this bench.json, draw its charts again and merge it with
    /// --reference if given (no GPU needed).
    #[arg(long, value_name = "BENCH_JSON")]
    from: Option<PathBuf>,
    /// Run only the host-side preparation (weights, quantization, packing, CPU reference); no GPU.
    #[arg(long)]
    cpu_only: bool,
}

// ---------------------------------------------------------------------------------------------------
// Host-side helpers

/// Rows of A checked against the CPU reference: 0..4 and the last row of every M.
fn check_rows(ms: &[usize]) -> Vec<usize> {
    let max_m = ms.iter().copied().max().unwrap_or(1);
    let mut rows: Vec<usize> = (0..4.min(max_m)).collect();
    rows.extend(ms.iter().filter(|&&m| m > 0).map(|&m| m - 1));
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// Copies needed to rotate through more than `rotate_mib` MiB of `bytes`-sized buffers.
fn copies_for(bytes: usize, args: &Args) -> usize {
    ((args.rotate_mib << 20) / bytes.max(1) + 1).clamp(2, args.max_copies.max(2))
}

fn group_of(spec: &KernelSpec) -> u32 {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } => size,
        _ => 0,
    }
}

fn out_dir(args: &Args) -> PathBuf {
    args.out
        .clone()
        .or_else(|| std::env::var_os("OUT").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("bench-out"))
}

// ---------------------------------------------------------------------------------------------------
// GPU timing

struct Env<'a> {
    args: &'a Args,
    stream: Arc<CudaStream>,
    blas: Option<CudaBlas>,
    bw_tbs: f64,
    /// Compute capability as major * 10 + minor.
    capability: u32,
}

/// Times `launch(i)` (rotating over `copies`): `--trials` replays of a graph of at least `--reps`
/// launches.
fn time_launches(env: &Env, copies: usize, launch: impl FnMut(usize) -> Res<()>) -> Res<Stats> {
    let args = env.args;
    let trials = replay(&env.stream, args.reps, copies, args.trials, launch)?;
    Ok(Stats::new(trials, copies))
}

/// One kernel on one shape, ready to launch.
struct Case<E: Element> {
    kernel: Kernel,
    gemm: Gemm<E, E>,
    n: usize,
    k: usize,
    /// A for the largest M; a launch of M rows reads its first M rows.
    a_host: Vec<E>,
    /// The rows of A checked ([`check_rows`]) and the f64 reference on them, `[rows, N]`.
    rows: Vec<usize>,
    want: Vec<f64>,
    /// Rotating copies of the packed weights.
    weights: Vec<DeviceWeights>,
    /// Rotating copies of the unquantized weights for cuBLAS (none without cuBLAS).
    w_fp: Vec<CudaSlice<E>>,
    tol: f64,
}

/// Loads the kernel, quantizes `w` and computes the reference on the checked rows, uploads the
/// rotating copies of the packed (and, for cuBLAS, the unquantized) weights.
fn prepare<K, E>(env: &Env, kernel: Kernel, shape: Shape, w: &[f32], a: &[f32]) -> Res<Case<E>>
where
    K: GemmKernel<A = E, C = E>,
    E: Element,
{
    let (args, stream) = (env.args, &env.stream);
    let Shape { n, k } = shape;
    let spec = K::DESCRIPTOR;
    let t0 = Instant::now();
    let gemm = Gemm::<E, E>::load::<K>(stream)?;
    let q = quantize_parallel(&spec, n, k, w)?;
    let t_quant = t0.elapsed().as_secs_f64();

    let rows = check_rows(&args.ms);
    let a_host: Vec<E> = to_elements(a);
    let a_check: Vec<f64> = rows
        .iter()
        .flat_map(|&r| a_host[r * k..(r + 1) * k].iter().map(|v| v.to_f64()))
        .collect();
    // 8-bit activations: the reference of the codes the runtime makes (per token or per group of a
    // row, so the checked rows alone give the same codes).
    let a_check = if is_8bit_activation(spec.a) {
        let a32: Vec<f32> = a_check.iter().map(|&v| v as f32).collect();
        quantize_activations(&a32, rows.len(), k, spec.a, ActScale::of_kernel(&spec))?.dequantize()
    } else {
        a_check
    };
    let want = humming::reference_gemm(&q, &a_check, rows.len(), None)?;
    let t_ref = t0.elapsed().as_secs_f64() - t_quant;

    let first = gemm.upload(&q)?;
    let weight_bytes = first.bytes();
    let copies = copies_for(weight_bytes, args);
    let mut weights = vec![first];
    weights.extend(upload_copies(&gemm, &q, copies - 1)?);
    drop(q);
    let fp_bytes = n * k * 2;
    let mut w_fp = Vec::new();
    if env.blas.is_some() {
        let first = stream.clone_htod(&to_elements::<E>(w))?;
        for _ in 1..copies_for(fp_bytes, args) {
            w_fp.push(stream.clone_dtod(&first)?);
        }
        w_fp.push(first);
    }
    stream.synchronize()?;
    println!(
        "{} {}x{}: {} ({}), {copies} weight copies of {:.1} MiB, {} fp copies of {:.1} MiB; quantize {t_quant:.1} s, reference {t_ref:.1} s, total prep {:.1} s",
        kernel.name(),
        n,
        k,
        spec,
        module_name(&gemm),
        weight_bytes as f64 / (1 << 20) as f64,
        w_fp.len(),
        fp_bytes as f64 / (1 << 20) as f64,
        t0.elapsed().as_secs_f64()
    );
    let tol = if E::DTYPE == DType::BF16 { 2e-2 } else { 1e-2 };
    Ok(Case {
        kernel,
        gemm,
        n,
        k,
        a_host,
        rows,
        want,
        weights,
        w_fp,
        tol,
    })
}

fn module_name<E: Element>(gemm: &Gemm<E, E>) -> &'static str {
    match gemm.module_source() {
        ModuleSource::Fatbin => "fatbin",
        ModuleSource::Nvrtc => "nvrtc",
    }
}

/// Checks and times one M: ours as the runtime launches by default, without programmatic dependent
/// launch, with the opt-in f16 atomics where they apply, and cuBLAS.
fn bench_m<E: Element>(env: &Env, case: &Case<E>, m: usize) -> Res<Row>
where
    CudaBlas: cudarc::cublas::Gemm<E>,
{
    let (stream, gemm) = (&env.stream, &case.gemm);
    let (n, k, weights) = (case.n, case.k, &case.weights);
    let copies = weights.len();
    let a: Vec<CudaSlice<E>> = (0..copies)
        .map(|_| stream.clone_htod(&case.a_host[..m * k]))
        .collect::<Result<_, _>>()?;
    let mut c: Vec<CudaSlice<E>> = (0..copies)
        .map(|_| stream.alloc_zeros::<E>(m * n))
        .collect::<Result<_, _>>()?;
    gemm.reserve(m, n, k)?;

    // Correctness of one launch, C poisoned with NaN first so that a launch that writes nothing
    // cannot pass: the relative error on the checked rows below M, and all of C.
    let checked: Vec<(usize, usize)> = case
        .rows
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, r)| r < m)
        .collect();
    let want: Vec<f64> = checked
        .iter()
        .flat_map(|&(i, _)| case.want[i * n..(i + 1) * n].iter().copied())
        .collect();
    let poison = vec![E::from_bits(0x7FFF); m * n];
    let mut check = |launcher: &Launcher<E, E>| -> Res<(f64, Vec<f64>)> {
        stream.memcpy_htod(&poison, &mut c[0])?;
        launcher.run(&a[0], m, &weights[0], None, &mut c[0])?;
        let all: Vec<f64> = stream
            .clone_dtoh(&c[0])?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let got: Vec<f64> = checked
            .iter()
            .flat_map(|&(_, r)| all[r * n..(r + 1) * n].iter().copied())
            .collect();
        let err = humming::relative_error(&got, &want);
        Ok((err, all))
    };
    let ours_launcher = gemm.with(gemm.options());
    let (rel_err, got_all) = check(&ours_launcher)?;
    // Where f16 atomics (the opt-in `Reduction::AtomicF16`) change how this launch sums its K splits,
    // that launch is checked too, and timed below.
    let atomic = gemm
        .with(LaunchOptions {
            reduction: Reduction::AtomicF16,
            ..gemm.options()
        })
        .plan(m, n, k)
        .reduction
        == KReduction::Atomic;
    let atomic_f16 = gemm.with(LaunchOptions {
        reduction: Reduction::AtomicF16,
        ..gemm.options()
    });
    let rel_err_atomic_f16 = match atomic {
        true => finite(check(&atomic_f16)?.0),
        false => None,
    };
    let tol = case.tol;
    let ok = rel_err <= tol && (!atomic || rel_err_atomic_f16.is_some_and(|e| e <= tol));

    let mut time = |launcher: &Launcher<E, E>| {
        time_launches(env, copies, |i| {
            Ok(launcher.run(&a[i], m, &weights[i], None, &mut c[i])?)
        })
    };
    let ours = time(&ours_launcher)?;
    // The same launches without programmatic dependent launch (each kernel then starts only
    // after the previous one has ended), where the GPU has it.
    let ours_no_pdl = match env.capability >= 90 {
        true => Some(time(&gemm.with(LaunchOptions {
            programmatic_launch: false,
            ..gemm.options()
        }))?),
        false => None,
    };
    let ours_atomic_f16 = match atomic {
        true => Some(time(&atomic_f16)?),
        false => None,
    };
    if let Some(t) = &ours_atomic_f16 {
        let err_ok = rel_err_atomic_f16.is_some_and(|e| e <= tol);
        println!(
            "    {n}x{k} M={m}: with Reduction::AtomicF16 {:.2} us, relative error {} {}",
            t.median_us,
            rel_err_atomic_f16.map_or("NaN".to_string(), |e| format!("{e:.1e}")),
            if err_ok { "ok" } else { "WRONG" }
        );
    }

    // 8-bit activations: the GEMM on codes quantized beforehand, and the quantization alone.
    let (ours_prequantized, quantize) = if is_8bit_activation(gemm.spec().a) {
        let mut qa: Vec<DeviceActivations> = (0..copies)
            .map(|i| gemm.quantize_activations(&a[i], m, k, k, ActScale::of_kernel(gemm.spec())))
            .collect::<Result<_, _>>()?;
        let pre = time_launches(env, copies, |i| {
            Ok(ours_launcher.run_quantized(&qa[i], &weights[i], None, &mut c[i])?)
        })?;
        let quant = time_launches(env, copies, |i| {
            let how = ActScale::of_kernel(gemm.spec());
            Ok(gemm.quantize_activations_into(&a[i], m, k, k, how, &mut qa[i])?)
        });
        println!(
            "    {n}x{k} M={m}: on quantized activations {:.2} us; quantization alone {}",
            pre.median_us,
            quant.as_ref().map_or("not timed".to_string(), |t| format!(
                "{:.2} us",
                t.median_us
            ))
        );
        (Some(pre), quant.ok())
    } else {
        (None, None)
    };

    let (cublas, rel_err_vs_cublas) = match &env.blas {
        Some(blas) => {
            let w_fp = &case.w_fp;
            let mut cc = stream.alloc_zeros::<E>(m * n)?;
            cublas_gemm(blas, &a[0], &w_fp[0], &mut cc, (m, n, k))?;
            let fp: Vec<f64> = stream.clone_dtoh(&cc)?.iter().map(|v| v.to_f64()).collect();
            let err = humming::relative_error(&got_all, &fp);
            let stats = time_launches(env, w_fp.len(), |i| {
                let j = i % copies;
                cublas_gemm(blas, &a[j], &w_fp[i], &mut c[j], (m, n, k))
            })?;
            (Some(stats), finite(err))
        }
        None => (None, None),
    };

    // 8-bit float activations: cuBLASLt FP8 on e4m3 codes of the same shape, with as many
    // rotating weight copies as cuBLAS f16 (the codes' values do not change its time).
    let fp8 = gemm.spec().a.is_float() && is_8bit_activation(gemm.spec().a);
    let cublaslt_fp8 = if fp8 {
        let copies = case.w_fp.len().max(2);
        match lt_fp8::time(stream, (m, n, k), copies, env.args.reps, env.args.trials) {
            Ok(t) => t.map(|t| {
                let t = Stats::new(t, copies);
                println!(
                    "    {n}x{k} M={m}: cuBLASLt FP8 (M padded to a multiple of 16) {:.2} us",
                    t.median_us
                );
                t
            }),
            Err(e) => {
                eprintln!("warning: cuBLASLt FP8 {n}x{k} M={m}: {e}");
                None
            }
        }
    } else {
        None
    };

    let spec = gemm.spec();
    let weight_bytes = weights[0].bytes();
    let (a_bytes, c_bytes) = (m * k * 2, m * n * 2);
    let floor_us = (weight_bytes + a_bytes + c_bytes) as f64 / (env.bw_tbs * 1e12) * 1e6;
    let plan = gemm.plan(m, n, k);
    Ok(Row {
        kernel: case.kernel.name().to_string(),
        descriptor: spec.to_string(),
        a: spec.a.to_string(),
        bits: spec.b.bits(),
        group: group_of(spec),
        n,
        k,
        m,
        tile: plan.tile.to_string(),
        splits: plan.splits,
        stream_k_ctas: plan.stream_k,
        module: module_name(gemm).to_string(),
        weight_bytes,
        a_bytes,
        c_bytes,
        floor_us,
        speedup_vs_cublas: cublas.as_ref().map(|s| s.median_us / ours.median_us),
        floor_pct: 100.0 * floor_us / ours.median_us,
        ours_no_pdl,
        atomic_f16: atomic,
        ours_atomic_f16,
        rel_err_atomic_f16,
        ours_prequantized,
        quantize,
        rel_err: finite(rel_err),
        checked_rows: checked.iter().map(|&(_, r)| r).collect(),
        tolerance: tol,
        ok,
        rel_err_vs_cublas,
        ours,
        cublas,
        cublaslt_fp8,
    })
}

/// All (M) cases of one kernel on one shape.
fn bench_kernel<K, E>(
    env: &Env,
    kernel: Kernel,
    shape: Shape,
    w: &[f32],
    a: &[f32],
) -> Res<Vec<Row>>
where
    K: GemmKernel<A = E, C = E>,
    E: Element,
    CudaBlas: cudarc::cublas::Gemm<E>,
{
    let case = prepare::<K, E>(env, kernel, shape, w, a)?;
    let mut out = Vec::new();
    for &m in env.args.ms.iter().filter(|&&m| m > 0) {
        let row = bench_m(env, &case, m)?;
        println!("{}", table_line(&row));
        out.push(row);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// Main

fn cpu_only(args: &Args) -> Res<()> {
    let max_m = args.ms.iter().copied().max().unwrap_or(1);
    let rows = check_rows(&args.ms);
    println!(
        "host-side preparation only ({} threads); checked rows {rows:?}",
        threads()
    );
    for (si, &Shape { n, k }) in args.shapes.iter().enumerate() {
        let t0 = Instant::now();
        let w = random_matrix(n, k, args.seed ^ (si as u64 + 1) << 40, true);
        let a = random_matrix(max_m, k, args.seed ^ (si as u64 + 1) << 48, false);
        let t_rand = t0.elapsed().as_secs_f64();
        for &kernel in &args.kernels {
            let spec = kernel.spec();
            let t = Instant::now();
            let q = quantize_parallel(&spec, n, k, &w)?;
            let t_q = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let packed = q.pack()?;
            let t_pack = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let a_check: Vec<f64> = rows
                .iter()
                .flat_map(|&r| a[r * k..(r + 1) * k].iter().map(|&v| f64::from(v)))
                .collect();
            let c = humming::reference_gemm(&q, &a_check, rows.len(), None)?;
            let t_ref = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let fp = to_elements::<f16>(&w);
            let t_fp = t.elapsed().as_secs_f64();
            println!(
                "{} {n}x{k}: random {t_rand:.2} s, quantize {t_q:.2} s, pack {t_pack:.2} s ({:.3} MiB on the GPU), reference {t_ref:.2} s ({} values), to f16 {t_fp:.2} s ({} values)",
                kernel.name(),
                (packed.b.len()
                    + 2 * (packed.scales.len() + packed.zeros.len())
                    + 4 * packed.channel.len()) as f64
                    / (1 << 20) as f64,
                c.len(),
                fp.len()
            );
        }
    }
    Ok(())
}

fn run(args: &Args) -> Res<ExitCode> {
    let out = out_dir(args);
    if let Some(path) = &args.from {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let report: Report = serde_json::from_str(&text)?;
        std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
        return finish(args, &report, &out);
    }
    if args.cpu_only {
        cpu_only(args)?;
        return Ok(ExitCode::SUCCESS);
    }
    let stream = match cuda::default_stream(args.device) {
        Ok(s) => s,
        Err(e) => {
            println!("no GPU: {e}");
            return Ok(ExitCode::SUCCESS);
        }
    };
    let ctx = stream.context().clone();
    // SAFETY: before any buffer is allocated: no launch captured into a graph waits on an event
    // recorded outside the capture.
    unsafe { ctx.disable_event_tracking() };
    std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let (major, minor) = ctx.compute_capability()?;
    let device = DeviceInfo::of(&ctx)?;
    println!(
        "{} (sm {}), {} SMs, L2 {:.0} MB, {:.0} GB",
        device.name,
        device.capability,
        device.sms,
        device.l2_bytes as f64 / 1e6,
        device.memory_bytes as f64 / 1e9
    );
    let copy_bytes = args.copy_gib.max(1) << 30;
    let bw = copy_bandwidth(&stream, copy_bytes)?;
    let bw_tbs = bw / 1e12;
    println!(
        "copy bandwidth {bw_tbs:.2} TB/s (read + write, {} GiB device-to-device copy)",
        args.copy_gib.max(1)
    );
    let env = Env {
        args,
        stream: stream.clone(),
        blas: if args.no_cublas {
            None
        } else {
            cublas(&stream)?
        },
        bw_tbs,
        capability: (major * 10 + minor) as u32,
    };
    let mut report = Report {
        tool: "humming examples/bench.rs".into(),
        device,
        copy_bw_tbs: bw_tbs,
        copy_bytes,
        trials: args.trials,
        min_launches: args.reps,
        rotate_mib: args.rotate_mib,
        max_copies: args.max_copies,
        notes: vec![
            "times: median per launch over `trials` CUDA-graph replays of `launches_per_trial` launches (a whole number of turns through `copies` weight copies)".into(),
            "floor_us = (weight_bytes + a_bytes + c_bytes) / copy_bw; copy_bw counts bytes read + written, as scripts/humming-kernels-bench.py".into(),
            "weight_bytes = DeviceWeights::bytes(): packed weights, the scale grid (2 bytes per entry, A's dtype, as uploaded), zero points and the f32 channel factors".into(),
            "w4a16 is `b: i4` (symmetric), the format of humming-kernels' uint4 (q - 8)".into(),
            "w8a16_e4m3, mxfp4, nvfp4, mxfp8, mxfp6 are humming-kernels' formats of those names (scripts/humming-kernels-bench.py); q4_k (GGUF Q4_K) has no humming-kernels counterpart".into(),
        ],
        rows: Vec::new(),
    };
    let json_path = out.join("bench.json");
    let max_m = args.ms.iter().copied().max().unwrap_or(1);
    let mut failed = 0;
    println!("\n{}", table_header());
    for (si, &shape) in args.shapes.iter().enumerate() {
        let w = random_matrix(shape.n, shape.k, args.seed ^ (si as u64 + 1) << 40, true);
        let a = random_matrix(max_m, shape.k, args.seed ^ (si as u64 + 1) << 48, false);
        for &kernel in &args.kernels {
            let rows = match kernel {
                Kernel::W4a16 => bench_kernel::<W4A16, f16>(&env, kernel, shape, &w, &a),
                Kernel::W4a16Bf16 => bench_kernel::<W4A16Bf16, bf16>(&env, kernel, shape, &w, &a),
                Kernel::W4a16U4 => bench_kernel::<W4A16U4, f16>(&env, kernel, shape, &w, &a),
                Kernel::W8a16E4m3 => bench_kernel::<W8A16E4m3, f16>(&env, kernel, shape, &w, &a),
                Kernel::Mxfp4 => bench_kernel::<Mxfp4, f16>(&env, kernel, shape, &w, &a),
                Kernel::Nvfp4 => bench_kernel::<Nvfp4, f16>(&env, kernel, shape, &w, &a),
                Kernel::Mxfp8 => bench_kernel::<Mxfp8, f16>(&env, kernel, shape, &w, &a),
                Kernel::Mxfp6 => bench_kernel::<Mxfp6, f16>(&env, kernel, shape, &w, &a),
                Kernel::Q4K => bench_kernel::<Q4K, f16>(&env, kernel, shape, &w, &a),
                Kernel::W4a8 => bench_kernel::<W4A8, f16>(&env, kernel, shape, &w, &a),
                Kernel::W4a8Int8 => bench_kernel::<W4A8Int8, f16>(&env, kernel, shape, &w, &a),
                Kernel::W8a8Fp8 => bench_kernel::<W8A8Fp8, f16>(&env, kernel, shape, &w, &a),
                Kernel::W8a8Fp8Block => {
                    bench_kernel::<W8A8Fp8Block, f16>(&env, kernel, shape, &w, &a)
                }
                Kernel::W8a8Fp8Ss => bench_kernel::<W8A8Fp8Ss, f16>(&env, kernel, shape, &w, &a),
                Kernel::W8a8Fp8BlockSs => {
                    bench_kernel::<W8A8Fp8BlockSs, f16>(&env, kernel, shape, &w, &a)
                }
                Kernel::W4a8Ss => bench_kernel::<W4A8Ss, f16>(&env, kernel, shape, &w, &a),
                Kernel::W4a8Int8Ss => bench_kernel::<W4A8Int8Ss, f16>(&env, kernel, shape, &w, &a),
            };
            match rows {
                Ok(rows) => report.rows.extend(rows),
                Err(e) => {
                    // Go on with the other cases: device time is scarce.
                    eprintln!("error: {} {}x{}: {e}", kernel.name(), shape.n, shape.k);
                    failed += 1;
                }
            }
            write_json(&json_path, &report)?;
        }
    }

    println!("wrote {}", json_path.display());
    let code = finish(args, &report, &out)?;
    if failed > 0 {
        eprintln!("{failed} (kernel, shape) case(s) stopped with an error");
        return Ok(ExitCode::FAILURE);
    }
    Ok(code)
}

/// The summary table, the charts, the merge with --reference, and the exit status.
fn finish(args: &Args, report: &Report, out: &Path) -> Res<ExitCode> {
    println!("\n{}", table_header());
    for r in &report.rows {
        println!("{}", table_line(r));
    }
    println!(
        "\nspread = (max - min) / median over {} trials; speedup = cuBLAS / ours; % floor = 100 * floor / ours",
        report.trials
    );
    if !args.no_plot {
        let mut kernels: Vec<&str> = Vec::new();
        for r in &report.rows {
            if !kernels.contains(&r.kernel.as_str()) {
                kernels.push(&r.kernel);
            }
        }
        for kernel in kernels {
            match plot_kernel(out, kernel, report) {
                Ok(p) => println!("wrote {}", p.display()),
                Err(e) => eprintln!("warning: chart of {kernel}: {e}"),
            }
        }
    }
    if let Some(reference) = &args.reference {
        merge(report, reference, out, !args.no_plot)?;
    }
    let wrong = report.rows.iter().filter(|r| !r.ok).count();
    if wrong > 0 {
        eprintln!(
            "{wrong} case(s) failed the correctness check (relative error above tolerance or NaN)"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
