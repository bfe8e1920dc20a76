//! Benchmark: W4A16 kernels declared with `gemm!` against cuBLAS (on the unquantized weights) and the
//! DRAM floor, on one GPU.
//!
//! For every kernel, shape N x K and M it:
//! - quantizes random weights once per shape (on all cores) and uploads them to as many device buffers
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
//! - computes the DRAM floor: the bytes that must move once (packed weights, scales, zero points, A and
//!   C) divided by the device-to-device copy bandwidth measured in the same run with a 4 GiB copy,
//!   counting bytes read and written (the convention of `shared/bench/humming_py_bench.py`).
//!
//! Output, in `--out` (default `$OUT`, else `./bench-out`): a table on the terminal, `bench.json`
//! (rewritten after every shape, so an interrupted run keeps what it measured) and one SVG chart per
//! kernel, `bench-<kernel>.svg` (one panel per shape; time against M; ours, cuBLAS and the floor).
//!
//! With `--reference humming_py_bench.json` (written by the Python reference, humming-kernels) it also
//! merges the two runs into `merged.md`, `merged.json` and `merged.svg`: N x K, M, floor, ours, cuBLAS,
//! humming-kernels, ours / humming-kernels, ours / floor. `--from bench.json [--reference ...]` measures
//! nothing: it prints the table of an earlier run, draws its charts again and merges it, with no GPU.
//! `--cpu-only` runs only the host-side preparation (weights, quantization, packing, reference) and
//! reports its time.
//!
//! The main kernel, `w4a16`, is `a: f16, b: i4, scale: group(128, f16)`: symmetric signed 4-bit codes,
//! which is what humming-kernels' "uint4" computes (it stores q + 8 and takes s · (q − 8)). The
//! literal `b: u4` (no zero point, `w = s · q`) is `w4a16-u4`; both move the same bytes.
//!
//! ```text
//! cargo run --release --example bench -- --shapes 8192x8192 --ms 1,16,256 --kernels w4a16,w4a16-bf16
//! ```
//!
//! Without a GPU it prints `no GPU: <reason>` and exits 0. A failed correctness check makes the exit
//! status 1 (after everything was measured and written).

use clap::{Parser, ValueEnum};
use cudarc::cublas::{CudaBlas, GemmConfig, sys::cublasOperation_t};
use cudarc::driver::{CudaSlice, CudaStream, sys};
use humming::cuda::{
    self, DeviceWeights, Gemm, KReduction, LaunchOptions, ModuleSource, Reduction,
};
use humming::half::{bf16, f16};
use humming::quant::{QuantizedWeights, ZeroPoints};
use humming::spec::{KernelSpec, ScaleGranularity, ZeroPoint};
use humming::{Element, GemmKernel};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

humming::gemm! {
    /// W4A16, the side-by-side with humming-kernels' "uint4" (symmetric, group 128, fp16).
    pub kernel W4A16 { a: f16, b: i4, scale: group(128, f16) }

    /// The bf16 twin of `W4A16`.
    pub kernel W4A16Bf16 { a: bf16, b: i4, scale: group(128, bf16) }

    /// Unsigned 4-bit codes without a zero point (`w = s · q`): the same bytes as `W4A16`.
    pub kernel W4A16U4 { a: f16, b: u4, scale: group(128, f16) }
}

#[path = "common/timing.rs"]
mod timing;
use timing::{Res, capture, copy_bandwidth, event_flags};

/// The kernels `--kernels` can pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kernel {
    /// `a: f16, b: i4, scale: group(128, f16)` (the main one).
    W4a16,
    /// `a: bf16, b: i4, scale: group(128, bf16)`.
    W4a16Bf16,
    /// `a: f16, b: u4, scale: group(128, f16)`.
    W4a16U4,
}

impl Kernel {
    fn name(self) -> &'static str {
        match self {
            Kernel::W4a16 => "w4a16",
            Kernel::W4a16Bf16 => "w4a16-bf16",
            Kernel::W4a16U4 => "w4a16-u4",
        }
    }
    fn spec(self) -> KernelSpec {
        match self {
            Kernel::W4a16 => W4A16::DESCRIPTOR,
            Kernel::W4a16Bf16 => W4A16Bf16::DESCRIPTOR,
            Kernel::W4a16U4 => W4A16U4::DESCRIPTOR,
        }
    }
}

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
    about = "Times gemm!-declared W4A16 kernels against cuBLAS and the DRAM floor (CUDA-graph replay, weights rotated past the L2 cache)."
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
// Results

/// Per-launch times of one case, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Stats {
    median_us: f64,
    p25_us: f64,
    p75_us: f64,
    min_us: f64,
    max_us: f64,
    /// (max − min) / median, in percent.
    spread_pct: f64,
    /// Launches per timed graph replay (or per timed batch of back-to-back launches).
    launches_per_trial: usize,
    /// Weight copies rotated through.
    copies: usize,
    /// "graph" (CUDA-graph replay) or "events" (back-to-back launches between two events).
    method: String,
    trials_us: Vec<f64>,
}

impl Stats {
    fn new(mut ts: Vec<f64>, launches: usize, copies: usize, method: &str) -> Stats {
        ts.sort_by(f64::total_cmp);
        let at = |q: usize| ts[(q * ts.len() / 4).min(ts.len() - 1)];
        let median = ts[ts.len() / 2];
        let (min, max) = (ts[0], ts[ts.len() - 1]);
        Stats {
            median_us: median,
            p25_us: at(1),
            p75_us: at(3),
            min_us: min,
            max_us: max,
            spread_pct: (max - min) / median * 100.0,
            launches_per_trial: launches,
            copies,
            method: method.to_string(),
            trials_us: ts,
        }
    }
}

/// One (kernel, shape, M) case.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Row {
    kernel: String,
    descriptor: String,
    /// Activation dtype, "f16" or "bf16".
    a: String,
    bits: u32,
    group: u32,
    n: usize,
    k: usize,
    m: usize,
    tile: String,
    /// K splits of the runtime's split rule for this launch (`Gemm::plan`; a stream-K launch, see
    /// `stream_k_ctas`, ignores it).
    splits: usize,
    /// CTAs of a stream-K launch (`Gemm::set_stream_k`), absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stream_k_ctas: Option<usize>,
    /// "fatbin" (NVCC at build time) or "nvrtc".
    module: String,
    /// Packed weights, scales and zero points of one copy.
    weight_bytes: usize,
    a_bytes: usize,
    c_bytes: usize,
    floor_us: f64,
    ours: Stats,
    /// Ours with programmatic dependent launch off (None where it is not available: before compute
    /// capability 9.0). `ours` has it on, where available.
    #[serde(default)]
    ours_no_pdl: Option<Stats>,
    /// Whether `ours` adds its K splits into C with f16 atomics (the default where the launch can:
    /// `Gemm::uses_atomic_c`; the last bits may then vary from launch to launch).
    #[serde(default)]
    atomic: bool,
    /// Where `ours` is atomic: ours with `Gemm::set_deterministic(true)` (K splits summed in split
    /// order), and that mode's relative error on `checked_rows` (None elsewhere).
    #[serde(default)]
    ours_deterministic: Option<Stats>,
    #[serde(default)]
    rel_err_deterministic: Option<f64>,
    cublas: Option<Stats>,
    /// cuBLAS time / our time.
    speedup_vs_cublas: Option<f64>,
    /// 100 · floor / our time.
    floor_pct: f64,
    /// Relative Frobenius error against the f64 reference on `checked_rows` (None: NaN or ∞).
    rel_err: Option<f64>,
    checked_rows: Vec<usize>,
    tolerance: f64,
    ok: bool,
    /// Relative error of our C against cuBLAS on the unquantized weights (quantization error).
    rel_err_vs_cublas: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct DeviceInfo {
    name: String,
    capability: String,
    sms: usize,
    l2_bytes: usize,
    memory_bytes: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Report {
    tool: String,
    device: DeviceInfo,
    /// Device-to-device copy bandwidth, bytes read + written per second, in TB/s.
    copy_bw_tbs: f64,
    copy_bytes: usize,
    trials: usize,
    min_launches: usize,
    rotate_mib: usize,
    max_copies: usize,
    notes: Vec<String>,
    rows: Vec<Row>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

// ---------------------------------------------------------------------------------------------------
// Host-side helpers

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |t| t.get())
}

/// Calls `f(offset, part)` on about `threads()` contiguous parts of `data`, each a multiple of
/// `align` elements long (except the last), in parallel.
fn par_parts<T: Send>(data: &mut [T], align: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let units = data.len().div_ceil(align.max(1));
    let per = units.div_ceil(threads()).max(1) * align.max(1);
    std::thread::scope(|s| {
        for (i, part) in data.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || f(i * per, part));
        }
    });
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Random `[rows, cols]` values; each row has its own magnitude and offset (like real checkpoints)
/// when `per_row` is set, else uniform in [-1, 1). The same for any number of threads.
fn random_matrix(rows: usize, cols: usize, seed: u64, per_row: bool) -> Vec<f32> {
    let mut v = vec![0f32; rows * cols];
    par_parts(&mut v, cols, |offset, part| {
        for (i, row) in part.chunks_mut(cols).enumerate() {
            let mut rng = Rng::new(seed ^ ((offset / cols + i) as u64) << 20);
            let (mag, shift) = if per_row {
                (0.01 + 0.1 * rng.uniform().abs(), 0.02 * rng.uniform())
            } else {
                (1.0, 0.0)
            };
            for x in row {
                *x = mag * rng.uniform() + shift;
            }
        }
    });
    v
}

fn to_elements<E: Element>(v: &[f32]) -> Vec<E> {
    let mut out = vec![E::default(); v.len()];
    par_parts(&mut out, 1 << 16, |offset, part| {
        for (o, &x) in part.iter_mut().zip(&v[offset..]) {
            *o = E::from_f32(x);
        }
    });
    out
}

/// `QuantizedWeights::quantize` on blocks of rows in parallel, then joined (scales are `[groups][N]`).
fn quantize_parallel(spec: &KernelSpec, n: usize, k: usize, w: &[f32]) -> Res<QuantizedWeights> {
    let blocks = threads().min(n / 64).max(1);
    let rows_per = n.div_ceil(blocks);
    let parts: Vec<QuantizedWeights> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(rows_per)
            .map(|r0| {
                let r1 = (r0 + rows_per).min(n);
                s.spawn(move || QuantizedWeights::quantize(spec, r1 - r0, k, &w[r0 * k..r1 * k]))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a quantization thread panicked"))
            .collect::<humming::Result<Vec<_>>>()
    })?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    let groups = parts[0].groups();
    let mut codes = Vec::with_capacity(n * k);
    let mut scales = vec![0f32; groups * n];
    let mut zi = vec![
        0u8;
        if spec.zero_point == ZeroPoint::Integer {
            groups * n
        } else {
            0
        }
    ];
    let mut zf = vec![
        0f32;
        if spec.zero_point == ZeroPoint::FloatOffset {
            groups * n
        } else {
            0
        }
    ];
    let mut r0 = 0;
    for p in &parts {
        let rows = p.n();
        codes.extend_from_slice(p.codes());
        for g in 0..groups {
            let (dst, src) = (g * n + r0..g * n + r0 + rows, g * rows..(g + 1) * rows);
            scales[dst.clone()].copy_from_slice(&p.scales()[src.clone()]);
            match p.zeros() {
                ZeroPoints::None => {}
                ZeroPoints::Integer(z) => zi[dst].copy_from_slice(&z[src]),
                ZeroPoints::Float(z) => zf[dst].copy_from_slice(&z[src]),
            }
        }
        r0 += rows;
    }
    let zeros = match spec.zero_point {
        ZeroPoint::None => ZeroPoints::None,
        ZeroPoint::Integer => ZeroPoints::Integer(zi),
        ZeroPoint::FloatOffset => ZeroPoints::Float(zf),
    };
    Ok(QuantizedWeights::from_parts(
        spec, n, k, codes, scales, zeros,
    )?)
}

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

/// Times `launch(i)` (rotating over `copies`) per launch: warm-up, then `--trials` timed replays of a
/// graph of a whole number of turns (at least `--reps` launches).
fn time_launches(env: &Env, copies: usize, mut launch: impl FnMut(usize) -> Res<()>) -> Res<Stats> {
    let stream = &env.stream;
    let reps = env.args.reps.max(1).div_ceil(copies) * copies;
    let trials = env.args.trials.max(1);
    for i in 0..copies {
        launch(i)?;
    }
    stream.synchronize()?;
    let mut ts = Vec::with_capacity(trials);
    match capture(stream, reps, copies, &mut launch) {
        Ok(graph) => {
            graph.upload()?;
            graph.launch()?;
            stream.synchronize()?;
            for _ in 0..trials {
                let e0 = stream.record_event(event_flags())?;
                graph.launch()?;
                let e1 = stream.record_event(event_flags())?;
                ts.push(f64::from(e0.elapsed_ms(&e1)?) * 1e3 / reps as f64);
            }
            Ok(Stats::new(ts, reps, copies, "graph"))
        }
        Err(e) => {
            eprintln!("  (graph capture failed: {e}; timing back-to-back launches with events)");
            stream.synchronize()?;
            for i in 0..reps {
                launch(i % copies)?;
            }
            stream.synchronize()?;
            for _ in 0..trials {
                let e0 = stream.record_event(event_flags())?;
                for i in 0..reps {
                    launch(i % copies)?;
                }
                let e1 = stream.record_event(event_flags())?;
                ts.push(f64::from(e0.elapsed_ms(&e1)?) * 1e3 / reps as f64);
            }
            Ok(Stats::new(ts, reps, copies, "events"))
        }
    }
}

/// Row-major `C[m, n] = A[m, k] · W[n, k]ᵀ` with cuBLAS (column-major: `Cᵀ = W · Aᵀ`).
fn cublas_gemm<E: Element>(
    blas: &CudaBlas,
    a: &CudaSlice<E>,
    w: &CudaSlice<E>,
    c: &mut CudaSlice<E>,
    (m, n, k): (usize, usize, usize),
) -> Res<()>
where
    CudaBlas: cudarc::cublas::Gemm<E>,
{
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: E::from_f32(1.0),
        lda: k as i32,
        ldb: k as i32,
        beta: E::from_f32(0.0),
        ldc: n as i32,
    };
    // SAFETY: W holds n·k, A m·k and C m·n elements, as the configuration reads and writes.
    unsafe { cudarc::cublas::Gemm::gemm(blas, cfg, w, a, c) }?;
    Ok(())
}

/// Packs and uploads `count` copies of `q` (packing in parallel).
fn upload_copies<E: Element>(
    gemm: &Gemm<E, E>,
    q: &QuantizedWeights,
    count: usize,
) -> Res<Vec<DeviceWeights>> {
    let workers = threads().min(count).max(1);
    let per_worker: Vec<humming::Result<Vec<DeviceWeights>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|t| {
                s.spawn(move || {
                    (t..count)
                        .step_by(workers)
                        .map(|_| gemm.upload(q))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an upload thread panicked"))
            .collect()
    });
    let mut out = Vec::with_capacity(count);
    for w in per_worker {
        out.extend(w?);
    }
    Ok(out)
}

/// All (M) cases of one kernel on one shape.
fn bench_kernel<K, E>(
    env: &Env,
    kernel: Kernel,
    shape: Shape,
    w: &[f32],
    a_f32: &[f32],
) -> Res<Vec<Row>>
where
    K: GemmKernel<A = E, C = E>,
    E: Element,
    CudaBlas: cudarc::cublas::Gemm<E>,
{
    let args = env.args;
    let stream = &env.stream;
    let Shape { n, k } = shape;
    let spec = K::DESCRIPTOR;
    let t0 = Instant::now();
    let gemm = Gemm::<E, E>::load::<K>(stream)?;
    let module = match gemm.module_source() {
        ModuleSource::Fatbin => "fatbin",
        ModuleSource::Nvrtc => "nvrtc",
    };
    let q = quantize_parallel(&spec, n, k, w)?;
    let t_quant = t0.elapsed().as_secs_f64();

    // The f64 reference on the checked rows of A (the same A for every M: its first M rows).
    let rows = check_rows(&args.ms);
    let a_host: Vec<E> = to_elements(a_f32);
    let a_check: Vec<f64> = rows
        .iter()
        .flat_map(|&r| a_host[r * k..(r + 1) * k].iter().map(|v| v.to_f64()))
        .collect();
    let want = humming::reference_gemm(&q, &a_check, rows.len(), None)?;
    let t_ref = t0.elapsed().as_secs_f64() - t_quant;

    let first = gemm.upload(&q)?;
    let weight_bytes = first.bytes();
    let copies = copies_for(weight_bytes, args);
    let mut weights = vec![first];
    weights.extend(upload_copies(&gemm, &q, copies - 1)?);
    drop(q);
    let fp_bytes = n * k * 2;
    let fp_copies = copies_for(fp_bytes, args);
    let w_fp: Vec<CudaSlice<E>> = match env.blas {
        Some(_) => {
            let first = stream.clone_htod(&to_elements::<E>(w))?;
            let mut v = Vec::with_capacity(fp_copies);
            for _ in 1..fp_copies {
                v.push(stream.clone_dtod(&first)?);
            }
            v.push(first);
            v
        }
        None => Vec::new(),
    };
    stream.synchronize()?;
    println!(
        "{} {}x{}: {} ({module}), {copies} weight copies of {:.1} MiB, {} fp copies of {:.1} MiB; quantize {t_quant:.1} s, reference {t_ref:.1} s, total prep {:.1} s",
        kernel.name(),
        n,
        k,
        spec,
        weight_bytes as f64 / (1 << 20) as f64,
        w_fp.len(),
        fp_bytes as f64 / (1 << 20) as f64,
        t0.elapsed().as_secs_f64()
    );

    let tol = if E::DTYPE == humming::spec::DType::BF16 {
        2e-2
    } else {
        1e-2
    };
    let mut out = Vec::new();
    for &m in &args.ms {
        if m == 0 {
            continue;
        }
        let host = &a_host[..m * k];
        let a: Vec<CudaSlice<E>> = (0..copies)
            .map(|_| stream.clone_htod(host))
            .collect::<Result<_, _>>()?;
        let mut c: Vec<CudaSlice<E>> = (0..copies)
            .map(|_| stream.alloc_zeros::<E>(m * n))
            .collect::<Result<_, _>>()?;
        gemm.reserve(m, n, k)?;

        // Correctness of one launch, C poisoned with NaN first.
        let poison = vec![E::from_bits(0x7FFF); m * n];
        stream.memcpy_htod(&poison, &mut c[0])?;
        gemm.run(&a[0], m, &weights[0], None, &mut c[0])?;
        let got_all: Vec<f64> = stream
            .clone_dtoh(&c[0])?
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let (mut got, mut exp, mut checked) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &r) in rows.iter().enumerate().filter(|(_, r)| **r < m) {
            got.extend_from_slice(&got_all[r * n..(r + 1) * n]);
            exp.extend_from_slice(&want[i * n..(i + 1) * n]);
            checked.push(r);
        }
        let rel_err = humming::relative_error(&got, &exp);
        // The default launch may add its K splits into C with atomics (checked above like any other);
        // then the deterministic mode is checked once on poisoned C, and timed below.
        let atomic = gemm.plan(m, n, k).reduction == KReduction::Atomic;
        let deterministic = gemm.with(LaunchOptions {
            reduction: Reduction::Deterministic,
            ..gemm.options()
        });
        let rel_err_deterministic = if atomic {
            stream.memcpy_htod(&poison, &mut c[0])?;
            deterministic.run(&a[0], m, &weights[0], None, &mut c[0])?;
            let all: Vec<f64> = stream
                .clone_dtoh(&c[0])?
                .iter()
                .map(|v| v.to_f64())
                .collect();
            let got: Vec<f64> = checked
                .iter()
                .flat_map(|&r| all[r * n..(r + 1) * n].iter().copied())
                .collect();
            finite(humming::relative_error(&got, &exp))
        } else {
            None
        };
        let ok = rel_err <= tol && (!atomic || rel_err_deterministic.is_some_and(|e| e <= tol));

        let mut launch_ours = |i: usize| -> Res<()> {
            gemm.run(&a[i], m, &weights[i], None, &mut c[i])?;
            Ok(())
        };
        let ours = time_launches(env, copies, &mut launch_ours)?;
        // The same launches without programmatic dependent launch (each kernel then starts only
        // after the previous one has ended), where the GPU has it.
        let ours_no_pdl = if env.capability >= 90 {
            let no_pdl = gemm.with(LaunchOptions {
                programmatic_launch: false,
                ..gemm.options()
            });
            Some(time_launches(env, copies, |i| {
                no_pdl.run(&a[i], m, &weights[i], None, &mut c[i])?;
                Ok(())
            })?)
        } else {
            None
        };

        // Where the default launch is atomic: the deterministic mode, timed like `ours`.
        let ours_deterministic = if atomic {
            let t = time_launches(env, copies, |i| {
                deterministic.run(&a[i], m, &weights[i], None, &mut c[i])?;
                Ok(())
            })?;
            println!(
                "    {}x{} M={m}: atomic split-K by default; deterministic {:.2} us, relative error {} {}",
                n,
                k,
                t.median_us,
                rel_err_deterministic.map_or("NaN".to_string(), |e| format!("{e:.1e}")),
                if rel_err_deterministic.is_some_and(|e| e <= tol) {
                    "ok"
                } else {
                    "WRONG"
                }
            );
            Some(t)
        } else {
            None
        };

        let (cublas, rel_err_vs_cublas) = match &env.blas {
            Some(blas) => {
                let mut cc = stream.alloc_zeros::<E>(m * n)?;
                cublas_gemm(blas, &a[0], &w_fp[0], &mut cc, (m, n, k))?;
                let fp: Vec<f64> = stream.clone_dtoh(&cc)?.iter().map(|v| v.to_f64()).collect();
                let err = humming::relative_error(&got_all, &fp);
                let stats = time_launches(env, fp_copies, |i| {
                    let j = i % copies;
                    cublas_gemm(blas, &a[j], &w_fp[i], &mut c[j], (m, n, k))
                })?;
                (Some(stats), finite(err))
            }
            None => (None, None),
        };

        let (a_bytes, c_bytes) = (m * k * 2, m * n * 2);
        let floor_us = (weight_bytes + a_bytes + c_bytes) as f64 / (env.bw_tbs * 1e12) * 1e6;
        let plan = gemm.plan(m, n, k);
        let (tile, splits, stream_k_ctas) = (plan.tile, plan.splits, plan.stream_k);
        let row = Row {
            kernel: kernel.name().to_string(),
            descriptor: spec.to_string(),
            a: spec.a.to_string(),
            bits: spec.b.bits(),
            group: group_of(&spec),
            n,
            k,
            m,
            tile: tile.to_string(),
            splits,
            stream_k_ctas,
            module: module.to_string(),
            weight_bytes,
            a_bytes,
            c_bytes,
            floor_us,
            speedup_vs_cublas: cublas.as_ref().map(|s| s.median_us / ours.median_us),
            floor_pct: 100.0 * floor_us / ours.median_us,
            ours_no_pdl,
            atomic,
            ours_deterministic,
            rel_err_deterministic,
            rel_err: finite(rel_err),
            checked_rows: checked,
            tolerance: tol,
            ok,
            rel_err_vs_cublas,
            ours,
            cublas,
        };
        println!("{}", table_line(&row));
        out.push(row);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// Table, JSON, charts

fn table_header() -> String {
    format!(
        "{:<11} {:>13} {:>5} {:>9} {:>7} {:>9} {:>10} {:>8} {:>9} {:>8} {:>9} {:>5}",
        "kernel",
        "N x K",
        "M",
        "ours us",
        "spread",
        "no-PDL us",
        "cuBLAS us",
        "speedup",
        "floor us",
        "% floor",
        "rel.err",
        "check"
    )
}

fn table_line(r: &Row) -> String {
    let opt = |v: Option<f64>, w: usize, p: usize| match v {
        Some(v) => format!("{v:>w$.p$}"),
        None => format!("{:>w$}", "-"),
    };
    format!(
        "{:<11} {:>13} {:>5} {:>9.2} {:>6.1}% {} {} {} {:>9.2} {:>7.1}% {:>9} {:>5}",
        r.kernel,
        format!("{}x{}", r.n, r.k),
        r.m,
        r.ours.median_us,
        r.ours.spread_pct,
        opt(r.ours_no_pdl.as_ref().map(|s| s.median_us), 9, 2),
        opt(r.cublas.as_ref().map(|s| s.median_us), 10, 2),
        match r.speedup_vs_cublas {
            Some(s) => format!("{s:>7.2}x"),
            None => format!("{:>8}", "-"),
        },
        r.floor_us,
        r.floor_pct,
        r.rel_err.map_or("NaN".to_string(), |e| format!("{e:.1e}")),
        if r.ok { "ok" } else { "WRONG" }
    )
}

fn write_json(path: &Path, value: &impl Serialize) -> Res<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// One line of a chart: label, colour, dashed, points (M, µs).
struct Series {
    label: String,
    color: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// Tick values in `lo..=hi` for a log axis: 1-2-5 per decade, finer when that gives fewer than 4.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| {
        let mut v = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let t = m * decade;
                if (lo..=hi).contains(&t) {
                    v.push(t);
                }
            }
            decade *= 10.0;
        }
        v
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        ticks(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// One SVG with a panel per (title, series), in two columns; x = M (log 2), y = µs (log 10).
fn plot(path: &Path, title: &str, panels: &[(String, Vec<Series>)]) -> Res<()> {
    if panels.is_empty() {
        return Ok(());
    }
    let cols = panels.len().min(2);
    let rows = panels.len().div_ceil(cols);
    let size = (560 * cols as u32, 420 * rows as u32 + 40);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let areas = root.split_evenly((rows, cols));
    for ((name, series), area) in panels.iter().zip(areas.iter()) {
        let all = series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in all {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 || y0 > y1 {
            continue;
        }
        let mut chart = ChartBuilder::on(area)
            .caption(name, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                ((x0 / 1.4).max(0.5)..x1 * 1.4).log_scale().base(2.0),
                (y0 / 1.5..y1 * 1.5)
                    .log_scale()
                    .with_key_points(log_ticks(y0 / 1.5, y1 * 1.5)),
            )?;
        chart
            .configure_mesh()
            .x_desc("M")
            .y_desc("time per launch (us)")
            .light_line_style(WHITE)
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .y_label_formatter(&|y| {
                if (y - y.round()).abs() < 1e-9 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .draw()?;
        for s in series {
            let style = s.color.stroke_width(2);
            if s.dashed {
                chart
                    .draw_series(DashedLineSeries::new(s.points.clone(), 6, 4, style))?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            } else {
                chart
                    .draw_series(LineSeries::new(s.points.clone(), style))?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                chart.draw_series(
                    s.points
                        .iter()
                        .map(|&p| Circle::new(p, 3, s.color.filled())),
                )?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

const OURS: RGBColor = RGBColor(214, 39, 40);
const OURS2: RGBColor = RGBColor(148, 103, 189);
const CUBLAS: RGBColor = RGBColor(31, 119, 180);
const HUMMING: RGBColor = RGBColor(44, 160, 44);
const FLOOR: RGBColor = RGBColor(90, 90, 90);

fn shapes_in(rows: &[&Row]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for r in rows {
        if !v.contains(&(r.n, r.k)) {
            v.push((r.n, r.k));
        }
    }
    v
}

fn plot_kernel(out: &Path, kernel: &str, report: &Report) -> Res<PathBuf> {
    let rows: Vec<&Row> = report.rows.iter().filter(|r| r.kernel == kernel).collect();
    let mut panels = Vec::new();
    for (n, k) in shapes_in(&rows) {
        let case: Vec<&&Row> = rows.iter().filter(|r| (r.n, r.k) == (n, k)).collect();
        let pts = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
            case.iter()
                .filter_map(|r| f(r).map(|y| (r.m as f64, y)))
                .collect()
        };
        let mut series = vec![Series {
            label: format!("ours ({kernel})"),
            color: OURS,
            dashed: false,
            points: pts(&|r| Some(r.ours.median_us)),
        }];
        let cub = pts(&|r| r.cublas.as_ref().map(|s| s.median_us));
        if !cub.is_empty() {
            series.push(Series {
                label: format!("cuBLAS {}", case[0].a),
                color: CUBLAS,
                dashed: false,
                points: cub,
            });
        }
        series.push(Series {
            label: "DRAM floor".into(),
            color: FLOOR,
            dashed: true,
            points: pts(&|r| Some(r.floor_us)),
        });
        panels.push((format!("N x K = {n} x {k}"), series));
    }
    let path = out.join(format!("bench-{kernel}.svg"));
    let title = format!(
        "{kernel} on {} ({} TB/s copy): time per launch against M",
        report.device.name,
        (report.copy_bw_tbs * 100.0).round() / 100.0
    );
    plot(&path, &title, &panels)?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------------
// Merge with the Python reference (humming-kernels)

#[derive(Clone, Debug, Serialize)]
struct MergedRow {
    kernel: String,
    n: usize,
    k: usize,
    m: usize,
    floor_us: f64,
    ours_us: f64,
    /// Ours with programmatic dependent launch off.
    ours_no_pdl_us: Option<f64>,
    cublas_us: Option<f64>,
    humming_us: Option<f64>,
    torch_cublas_us: Option<f64>,
    ours_over_humming: Option<f64>,
    ours_over_floor: f64,
    ok: bool,
}

fn merge(report: &Report, reference: &Path, out: &Path, with_plot: bool) -> Res<()> {
    let text = std::fs::read_to_string(reference)
        .map_err(|e| format!("reading {}: {e}", reference.display()))?;
    let py: serde_json::Value = serde_json::from_str(&text)?;
    let py_bw = py["copy_bw_tbs"].as_f64();
    let py_rows = py["rows"]
        .as_array()
        .ok_or("the reference JSON has no `rows` array")?;
    let num = |v: &serde_json::Value, key: &str| v[key].as_f64();
    let find = |r: &Row| {
        py_rows.iter().find(|p| {
            let bits: Option<u32> = p["w"].as_str().and_then(|w| {
                w.trim_start_matches(|c: char| c.is_alphabetic())
                    .parse()
                    .ok()
            });
            num(p, "n") == Some(r.n as f64)
                && num(p, "k") == Some(r.k as f64)
                && num(p, "m") == Some(r.m as f64)
                && num(p, "g") == Some(f64::from(r.group))
                && bits == Some(r.bits)
        })
    };
    // humming-kernels runs fp16 activations only.
    let merged: Vec<MergedRow> = report
        .rows
        .iter()
        .filter(|r| r.a == "f16")
        .map(|r| {
            let p = find(r);
            let humming_us = p.and_then(|p| num(p, "humming_us"));
            MergedRow {
                kernel: r.kernel.clone(),
                n: r.n,
                k: r.k,
                m: r.m,
                floor_us: r.floor_us,
                ours_us: r.ours.median_us,
                ours_no_pdl_us: r.ours_no_pdl.as_ref().map(|s| s.median_us),
                cublas_us: r.cublas.as_ref().map(|s| s.median_us),
                humming_us,
                torch_cublas_us: p.and_then(|p| num(p, "cublas_us")),
                ours_over_humming: humming_us.map(|h| r.ours.median_us / h),
                ours_over_floor: r.ours.median_us / r.floor_us,
                ok: r.ok,
            }
        })
        .collect();
    let kernels: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for r in &merged {
            if !v.contains(&r.kernel.as_str()) {
                v.push(&r.kernel);
            }
        }
        v
    };

    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    let mut md = String::new();
    writeln!(
        md,
        "# humming (Rust, gemm!) vs humming-kernels (Python) vs cuBLAS\n"
    )?;
    writeln!(
        md,
        "Device: {} (sm {}). Copy bandwidth (bytes read + written): {:.2} TB/s in our run, {} TB/s in the \
         reference's. Times are the median per launch by CUDA-graph replay with weights rotated past \
         the L2 cache, in microseconds. floor = (packed weights + scales + A + C bytes) / our copy \
         bandwidth. cuBLAS is ours (cudarc, cublasGemmEx fp16); \"cuBLAS (torch)\" is the reference \
         run's torch.matmul. Our W4A16 is `b: i4` (symmetric), the same format as humming-kernels' \
         \"uint4\" (q - 8). \"ours\" launches as the runtime does by default: with programmatic dependent launch \
         (PDL) on compute capability 9.0+ for tiles of which at most two CTAs fit per SM (a kernel \
         streams its first weights while the one before it ends), and with the K splits of the staged \
         wgmma tiles (M > 16), and of the 8-row tile (M <= 8) where its launch has more CTAs than \
         SMs, added into C with f16 atomics (`Gemm::set_deterministic`); \
         \"ours, no PDL\" is the same kernel launched like cuBLAS and humming-kernels are, each launch \
         starting after the previous one has ended.\n",
        report.device.name,
        report.device.capability,
        report.copy_bw_tbs,
        f(py_bw, 2)
    )?;
    let multi = kernels.len() > 1;
    writeln!(
        md,
        "| {}N x K | M | floor | ours | ours, no PDL | cuBLAS | humming-kernels | ours / humming | ours / floor | cuBLAS (torch) |",
        if multi { "kernel | " } else { "" }
    )?;
    writeln!(
        md,
        "|{}---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if multi { "---|" } else { "" }
    )?;
    for r in &merged {
        writeln!(
            md,
            "| {}{} x {} | {} | {:.1} | {:.1}{} | {} | {} | {} | {} | {:.2} | {} |",
            if multi {
                format!("{} | ", r.kernel)
            } else {
                String::new()
            },
            r.n,
            r.k,
            r.m,
            r.floor_us,
            r.ours_us,
            if r.ok { "" } else { " (WRONG)" },
            f(r.ours_no_pdl_us, 1),
            f(r.cublas_us, 1),
            f(r.humming_us, 1),
            f(r.ours_over_humming, 2),
            r.ours_over_floor,
            f(r.torch_cublas_us, 1),
        )?;
    }
    for kname in &kernels {
        let ratios: Vec<f64> = merged
            .iter()
            .filter(|r| r.kernel == *kname)
            .filter_map(|r| r.ours_over_humming)
            .collect();
        if let Some((geo, wins)) = geomean_and_wins(&ratios) {
            writeln!(
                md,
                "\n{kname}: geometric mean of ours / humming-kernels = {geo:.3} over {} cases; ours faster in {wins}.",
                ratios.len()
            )?;
            let plain: Vec<f64> = merged
                .iter()
                .filter(|r| r.kernel == *kname)
                .filter_map(|r| Some(r.ours_no_pdl_us? / r.humming_us?))
                .collect();
            if let Some((geo, wins)) = geomean_and_wins(&plain) {
                writeln!(
                    md,
                    "{kname}, without PDL: geometric mean of ours / humming-kernels = {geo:.3} over {} cases; ours faster in {wins}.",
                    plain.len()
                )?;
            }
        }
    }
    let unmatched = merged.iter().filter(|r| r.humming_us.is_none()).count();
    if unmatched > 0 {
        writeln!(
            md,
            "\n{unmatched} of our cases have no humming-kernels row (shape, M, bits or group not in the reference run)."
        )?;
    }
    if merged.is_empty() {
        writeln!(
            md,
            "\nNo f16 kernel in our results: humming-kernels runs fp16 only."
        )?;
    }
    std::fs::create_dir_all(out)?;
    let md_path = out.join("merged.md");
    std::fs::write(&md_path, &md)?;
    write_json(
        &out.join("merged.json"),
        &serde_json::json!({
            "ours_copy_bw_tbs": report.copy_bw_tbs,
            "reference_copy_bw_tbs": py_bw,
            "device": report.device,
            "rows": merged,
        }),
    )?;
    if with_plot && !merged.is_empty() {
        let mut panels = Vec::new();
        let refs: Vec<&Row> = report.rows.iter().filter(|r| r.a == "f16").collect();
        for (n, k) in shapes_in(&refs) {
            let case: Vec<&MergedRow> = merged.iter().filter(|r| (r.n, r.k) == (n, k)).collect();
            let main = kernels[0];
            let pts = |kern: &str, f: &dyn Fn(&MergedRow) -> Option<f64>| -> Vec<(f64, f64)> {
                case.iter()
                    .filter(|r| r.kernel == kern)
                    .filter_map(|r| f(r).map(|y| (r.m as f64, y)))
                    .collect()
            };
            let mut series = Vec::new();
            for (i, kname) in kernels.iter().enumerate() {
                series.push(Series {
                    label: format!("ours ({kname})"),
                    color: if i == 0 { OURS } else { OURS2 },
                    dashed: false,
                    points: pts(kname, &|r| Some(r.ours_us)),
                });
            }
            for (label, color, points) in [
                ("humming-kernels", HUMMING, pts(main, &|r| r.humming_us)),
                ("cuBLAS fp16", CUBLAS, pts(main, &|r| r.cublas_us)),
            ] {
                if !points.is_empty() {
                    series.push(Series {
                        label: label.into(),
                        color,
                        dashed: false,
                        points,
                    });
                }
            }
            series.push(Series {
                label: "DRAM floor".into(),
                color: FLOOR,
                dashed: true,
                points: pts(main, &|r| Some(r.floor_us)),
            });
            panels.push((format!("N x K = {n} x {k}"), series));
        }
        let path = out.join("merged.svg");
        plot(
            &path,
            &format!(
                "W4A16 on {}: ours vs humming-kernels vs cuBLAS",
                report.device.name
            ),
            &panels,
        )?;
        println!("wrote {}", path.display());
    }
    println!("\n{md}");
    println!("wrote {}", md_path.display());
    Ok(())
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
                "{} {n}x{k}: random {t_rand:.2} s, quantize {t_q:.2} s, pack {t_pack:.2} s ({:.1} MiB), reference {t_ref:.2} s ({} values), to f16 {t_fp:.2} s ({} values)",
                kernel.name(),
                (packed.b.len() + 2 * packed.scales.len()) as f64 / (1 << 20) as f64,
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
    let attr = |a| ctx.attribute(a).map(|v| v.max(0) as usize);
    let device = DeviceInfo {
        name: ctx.name()?,
        capability: format!("{major}.{minor}"),
        sms: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        l2_bytes: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
        memory_bytes: ctx.total_mem()?,
    };
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
    let blas = if args.no_cublas {
        None
    } else if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        eprintln!(
            "warning: libcublas could not be loaded (add its folder to LD_LIBRARY_PATH); no cuBLAS times"
        );
        None
    } else {
        Some(CudaBlas::new(stream.clone())?)
    };
    let env = Env {
        args,
        stream: stream.clone(),
        blas,
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
            "floor_us = (weight_bytes + a_bytes + c_bytes) / copy_bw; copy_bw counts bytes read + written, as humming_py_bench.py".into(),
            "w4a16 is `b: i4` (symmetric), the format of humming-kernels' uint4 (q - 8)".into(),
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

/// Geometric mean of time ratios (ours / reference) and how many are below 1 (ours faster); `None`
/// for no ratios.
fn geomean_and_wins(ratios: &[f64]) -> Option<(f64, usize)> {
    if ratios.is_empty() {
        return None;
    }
    let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    Some((geo, ratios.iter().filter(|&&r| r < 1.0).count()))
}
