//! Benchmark of the `moe_indexed` layout (vLLM `fused_moe`): a W4A16 or (`--format w4a8`) W4A8 FP8
//! expert GEMM on MoE shapes, with
//! the GPU routing helper timed alone and together with the GEMM, against the DRAM floor of the
//! experts each routing touches; side by side with humming-kernels through
//! `scripts/humming-kernels-moe-bench.py` (the same shapes, M and method).
//!
//! Shapes (humming-kernels' names): `qwen3_30b_a3b` (E = 128, top_k = 8; gate_up N x K = 1536 x 2048,
//! down 2048 x 768) and `deepseek_v3` (E = 256, top_k = 8; gate_up 4096 x 7168, down 7168 x 2048).
//! gate_up reads A `[M, K]`, each token's row by its top_k slots; down reads A `[M * top_k, K]`, one
//! row per slot (a launch with top_k = 1 over M * top_k rows). C is `[M * top_k, N]` for both.
//!
//! For every model, projection and M (tokens) it:
//! - quantizes `--distinct` (8) random experts and uploads E experts, expert e a copy of distinct
//!   expert e % 8 (quantizing 256 experts of 4096 x 7168 would take minutes; the kernel reads every
//!   expert's own copy in device memory all the same). All E experts are uploaded in as many copies
//!   as fit in `--rotate-mib` (512) MiB, at least 1, at most `--max-copies` (8), launched in turn:
//!   2 of Qwen3's gate_up, 5 of its down, 1 of DeepSeek's (whose experts dwarf the L2 cache).
//!   `upload_experts` packs the experts on the host one after the other (about 80 s for DeepSeek's
//!   gate_up on one core), so every upload and the references run in threads of their own;
//! - draws `--routings` (8) uniform random routings per M (each token picks top_k distinct experts),
//!   each with its own A, C and `Routing` buffers, shared by both projections of a model;
//! - checks one launch (routing 0, rebuilt by `route_into` right before it; C filled with NaN
//!   first) against the f64 reference (`reference_moe`, on the distinct experts) on every slot of
//!   tokens 0, M / 2 and M - 1, and that no value of C is left NaN (every choice is a valid expert,
//!   so every row must be written);
//! - times by CUDA-graph replay (`examples/common/timing.rs`, as `examples/bench.rs`): a graph of at
//!   least `--reps` (20) launches, a whole number of turns through the weight copies and routings,
//!   replayed `--trials` (15) times; the median per launch of `run_indexed` alone (on routings built
//!   beforehand: what humming-kernels' time is), of `route_into` alone, and of both in one graph;
//! - computes the DRAM floor: (the touched experts' bytes, distinct experts in the routing times
//!   `DeviceWeights::bytes() / E`, averaged over the routings; plus A and C) divided by the
//!   device-to-device copy bandwidth measured in the same run (bytes read + written).
//!
//! Output in `--out` (default `$OUT`, else `./bench-out`): a table and `bench_moe.json` (rewritten after
//! every case). `--from bench_moe.json [--reference humming_moe_bench.json]` measures nothing: it
//! prints that run's table and merges it with the reference into `merged_moe.md` and
//! `merged_moe.json` (no GPU). `--cpu-only` runs the host-side preparation of the shapes
//! (quantization, one expert's packing, the reference) and reports its time.
//!
//! ```text
//! cargo run --release --example bench_moe -- --models qwen3_30b_a3b --ms 1,16,128,1024
//! ```
//!
//! Without a GPU it prints `no GPU: <reason>` and exits 0. A failed check makes the exit status 1.

use clap::Parser;
use cudarc::driver::{CudaSlice, CudaStream};
use humming::cuda::{self, DeviceWeights, Gemm, ModuleSource, Routing};
use humming::half::f16;
use humming::moe::{MoeRows, reference_moe};
use humming::quant::QuantizedWeights;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

humming::gemm! {
    /// The experts' W4A16: symmetric signed 4-bit codes, group 128, f16 scales, which is what
    /// humming-kernels' "uint4" g128 computes (it stores q + 8 and takes s · (q − 8)).
    pub kernel MoeW4A16 { a: f16, b: i4, scale: group(128, f16), layout: moe_indexed }

    /// The same experts under e4m3 activations quantized per token (W4A8 FP8; humming-kernels'
    /// "uint4" g128 with fp8 per-token input).
    pub kernel MoeW4A8 { a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a] }
}

/// The experts' format (`--format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum MoeFormat {
    /// `MoeW4A16`.
    W4a16,
    /// `MoeW4A8`: A quantized to e4m3 per token inside each launch (timed with it).
    W4a8,
}

impl MoeFormat {
    fn spec(self) -> humming::spec::KernelSpec {
        match self {
            MoeFormat::W4a16 => MoeW4A16::DESCRIPTOR,
            MoeFormat::W4a8 => MoeW4A8::DESCRIPTOR,
        }
    }
    /// The name a reference row's format contains.
    fn name(self) -> &'static str {
        match self {
            MoeFormat::W4a16 => "w4a16",
            MoeFormat::W4a8 => "w4a8",
        }
    }
}

mod common;
use common::bench_report::{DeviceInfo, Stats, finite, write_json};
use common::host::{Rng, random_matrix, random_routing, to_elements};
use common::moe_report::{MoeReport, MoeRow, merge_moe, moe_table_header, moe_table_line};
use common::timing::{Res, copy_bandwidth, replay};

/// One projection of a model's experts.
#[derive(Clone, Copy, Debug)]
struct Proj {
    name: &'static str,
    n: usize,
    k: usize,
    /// A has a row per slot (down: the gate_up output), not per token.
    per_slot: bool,
}

impl Proj {
    /// The top_k of the launch: each row of A feeds this many slots.
    fn kernel_top_k(&self, top_k: usize) -> usize {
        if self.per_slot { 1 } else { top_k }
    }
}

#[derive(Debug)]
struct Model {
    name: &'static str,
    experts: usize,
    top_k: usize,
    projs: [Proj; 2],
}

const MODELS: [Model; 2] = [
    Model {
        name: "qwen3_30b_a3b",
        experts: 128,
        top_k: 8,
        projs: [
            Proj {
                name: "gate_up",
                n: 1536,
                k: 2048,
                per_slot: false,
            },
            Proj {
                name: "down",
                n: 2048,
                k: 768,
                per_slot: true,
            },
        ],
    },
    Model {
        name: "deepseek_v3",
        experts: 256,
        top_k: 8,
        projs: [
            Proj {
                name: "gate_up",
                n: 4096,
                k: 7168,
                per_slot: false,
            },
            Proj {
                name: "down",
                n: 7168,
                k: 2048,
                per_slot: true,
            },
        ],
    },
];

#[derive(Parser, Debug)]
#[command(
    about = "Times the moe_indexed W4A16 or W4A8 GEMM and its GPU routing helper on MoE shapes against the DRAM floor of the touched experts (CUDA-graph replay)."
)]
struct Args {
    /// Models, comma separated: qwen3_30b_a3b, deepseek_v3.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "qwen3_30b_a3b,deepseek_v3"
    )]
    models: Vec<String>,
    /// The experts' format.
    #[arg(long, value_enum, default_value = "w4a16")]
    format: MoeFormat,
    /// Values of M (tokens), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128,1024")]
    ms: Vec<usize>,
    /// Folder for bench_moe.json [default: $OUT, else ./bench-out].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Timed graph replays per case (the median is reported).
    #[arg(long, default_value_t = 15)]
    trials: usize,
    /// Launches per graph, at least; rounded up to a whole number of turns through the copies and
    /// routings.
    #[arg(long, default_value_t = 20)]
    reps: usize,
    /// Random routings per M, launched in turn (each with its own A and C).
    #[arg(long, default_value_t = 8)]
    routings: usize,
    /// Distinct random experts quantized; expert e is a copy of distinct expert e % this.
    #[arg(long, default_value_t = 8)]
    distinct: usize,
    /// Copies of all E experts are added while they hold at most this many MiB, up to --max-copies.
    #[arg(long, default_value_t = 512)]
    rotate_mib: usize,
    /// Most copies of all E experts' weights.
    #[arg(long, default_value_t = 8)]
    max_copies: usize,
    /// Size of the device-to-device copy that measures the bandwidth, in GiB.
    #[arg(long, default_value_t = 4)]
    copy_gib: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Seed of the random weights, activations and routings.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// humming_moe_bench.json of scripts/humming-kernels-moe-bench.py to merge with the results.
    #[arg(long)]
    reference: Option<PathBuf>,
    /// Measure nothing: print the table of this bench_moe.json and merge it with --reference if
    /// given (no GPU needed).
    #[arg(long, value_name = "BENCH_MOE_JSON")]
    from: Option<PathBuf>,
    /// Run only the host-side preparation (quantization, one expert's packing, the reference).
    #[arg(long)]
    cpu_only: bool,
    /// Block M of the routings, comma separated, each timed in turn (0: the runtime's choice,
    /// `moe_block_m`); a block M of no tile of the kernel is skipped.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    block_m: Vec<usize>,
}

/// Relative error allowed against the f64 reference (f16 output, as `examples/bench.rs`).
const TOLERANCE: f64 = 1e-2;

// ---------------------------------------------------------------------------------------------------
// Host side: routings, weights, the reference

/// The routings of one M, shared by both projections of a model.
struct Routings {
    m: usize,
    ids: Vec<Vec<i32>>,
    /// Distinct experts per routing, the mean.
    touched: f64,
}

fn routings_for(model_index: usize, model: &Model, args: &Args) -> Vec<Routings> {
    args.ms
        .iter()
        .map(|&m| {
            let ids: Vec<Vec<i32>> = (0..args.routings.max(1))
                .map(|r| {
                    let seed = args.seed ^ ((model_index as u64 + 1) << 56) ^ ((m as u64) << 24);
                    random_routing(
                        &mut Rng::new(seed ^ r as u64),
                        m,
                        model.top_k,
                        model.experts,
                    )
                })
                .collect();
            let distinct = |ids: &[i32]| {
                let mut seen = vec![false; model.experts];
                ids.iter().for_each(|&e| seen[e as usize] = true);
                seen.iter().filter(|&&s| s).count()
            };
            let touched = ids.iter().map(|r| distinct(r) as f64).sum::<f64>() / ids.len() as f64;
            Routings { m, ids, touched }
        })
        .collect()
}

/// `--distinct` random experts of `proj`, quantized in parallel.
fn quantize_distinct(args: &Args, seed: u64, proj: Proj) -> Res<Vec<QuantizedWeights>> {
    let spec = args.format.spec();
    let (n, k) = (proj.n, proj.k);
    let parts: Vec<humming::Result<QuantizedWeights>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.distinct.max(1))
            .map(|d| {
                s.spawn(move || {
                    let w = random_matrix(n, k, seed ^ ((d as u64 + 1) << 32), true);
                    QuantizedWeights::quantize(&spec, n, k, &w)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a quantization thread panicked"))
            .collect()
    });
    Ok(parts.into_iter().collect::<humming::Result<_>>()?)
}

/// The slots of C checked for M tokens: every choice of tokens 0, M / 2 and M - 1.
fn check_slots(m: usize, top_k: usize) -> Vec<usize> {
    let mut tokens = vec![0, m / 2, m.saturating_sub(1)];
    tokens.dedup();
    tokens
        .into_iter()
        .flat_map(|t| t * top_k..(t + 1) * top_k)
        .collect()
}

/// The f64 reference of one M's checked slots (routing 0), `[slots, N]`.
struct Check {
    slots: Vec<usize>,
    want: Vec<f64>,
}

/// The reference of every M's checked slots in one `reference_moe` call (each distinct expert is
/// dequantized once): a launch of top_k 1 over the checked slots' rows of A, each slot's expert
/// mapped to the distinct expert it is a copy of.
fn reference_checks(
    model: &Model,
    proj: Proj,
    distinct: &[QuantizedWeights],
    a_host: &[f16],
    routings: &[Routings],
) -> humming::Result<Vec<Check>> {
    let (top_k, k, n) = (model.top_k, proj.k, proj.n);
    let ktop = proj.kernel_top_k(top_k);
    let mut a = Vec::new();
    let mut bases = Vec::new();
    let mut slots_of = Vec::new();
    for r in routings {
        let slots = check_slots(r.m, top_k);
        for &s in &slots {
            let row = s / ktop;
            a.extend(a_host[row * k..(row + 1) * k].iter().map(|v| v.to_f64()));
            bases.push(r.ids[0][s] % distinct.len() as i32);
        }
        slots_of.push(slots);
    }
    let spec = distinct[0].spec();
    if humming::spec::layout::is_8bit_activation(spec.a) {
        // As the launch does: each row of A quantized per token (or per activation group).
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        a = humming::act_quant::quantize_activations(
            &a32,
            bases.len(),
            k,
            spec.a,
            humming::act_quant::ActScale::of_kernel(spec),
        )?
        .dequantize();
    }
    let rows = MoeRows::Indexed {
        topk_ids: &bases,
        top_k: 1,
        weights: None,
    };
    let reference = reference_moe(distinct, &a, bases.len(), &rows, None)?;
    let mut at = 0;
    Ok(slots_of
        .into_iter()
        .map(|slots| {
            let want = reference.c[at * n..(at + slots.len()) * n].to_vec();
            at += slots.len();
            Check { slots, want }
        })
        .collect())
}

/// Bytes of one expert on the GPU, as `DeviceWeights::bytes` counts them.
fn expert_bytes(q: &QuantizedWeights) -> Res<usize> {
    let p = q.pack()?;
    Ok(p.b.len() + 2 * (p.scales.len() + p.zeros.len()) + 4 * p.channel.len())
}

/// Copies of all experts (`bytes` each) to rotate through: as many as hold at most `--rotate-mib`,
/// 1 to `--max-copies` (humming-kernels-moe-bench.py takes the same).
fn copies_for(bytes: usize, args: &Args) -> usize {
    ((args.rotate_mib << 20) / bytes.max(1)).clamp(1, args.max_copies.max(1))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn out_dir(args: &Args) -> PathBuf {
    args.out
        .clone()
        .or_else(|| std::env::var_os("OUT").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("bench-out"))
}

fn seed_of(args: &Args, model_index: usize, proj_index: usize) -> u64 {
    args.seed ^ ((model_index as u64 * 2 + proj_index as u64 + 1) << 40)
}

/// A for the largest M (a launch of M tokens reads its first rows), as f16.
fn activations(args: &Args, model: &Model, proj: Proj, seed: u64) -> Vec<f16> {
    let max_m = args.ms.iter().copied().max().unwrap_or(1);
    let rows = max_m * model.top_k / proj.kernel_top_k(model.top_k);
    to_elements(&random_matrix(rows, proj.k, seed ^ (1 << 20), false))
}

// ---------------------------------------------------------------------------------------------------
// GPU side

struct Env<'a> {
    args: &'a Args,
    stream: Arc<CudaStream>,
    gemm: Gemm<f16, f16>,
    bw_tbs: f64,
}

/// One projection ready to launch: its weights on the GPU and what the checks compare with.
struct Prepared {
    proj: Proj,
    a_host: Vec<f16>,
    checks: Vec<Check>,
    /// Copies of all E experts.
    weights: Vec<DeviceWeights>,
}

/// Quantizes, computes the references and uploads the weight copies of both projections of a
/// model, the references and the uploads (packing is on the host, one thread per upload) in
/// parallel.
fn prepare(
    env: &Env,
    model_index: usize,
    model: &Model,
    routings: &[Routings],
) -> Res<Vec<Prepared>> {
    let args = env.args;
    let mut host = Vec::new();
    for (pi, &proj) in model.projs.iter().enumerate() {
        let t0 = Instant::now();
        let seed = seed_of(args, model_index, pi);
        let distinct = quantize_distinct(args, seed, proj)?;
        let a_host = activations(args, model, proj, seed);
        let copies = copies_for(model.experts * expert_bytes(&distinct[0])?, args);
        // Expert e is a copy of distinct expert e % D.
        let experts: Vec<QuantizedWeights> = (0..model.experts)
            .map(|e| distinct[e % distinct.len()].clone())
            .collect();
        println!(
            "{} {} {}x{}: {} distinct experts quantized in {:.1} s",
            model.name,
            proj.name,
            proj.n,
            proj.k,
            distinct.len(),
            t0.elapsed().as_secs_f64()
        );
        host.push((proj, distinct, a_host, experts, copies));
    }
    let t0 = Instant::now();
    let gemm = &env.gemm;
    let joined = std::thread::scope(|s| {
        let jobs: Vec<_> = host
            .iter()
            .map(|(proj, distinct, a_host, experts, copies)| {
                let checks =
                    s.spawn(move || reference_checks(model, *proj, distinct, a_host, routings));
                let uploads: Vec<_> = (0..*copies)
                    .map(|_| s.spawn(move || gemm.upload_experts(experts)))
                    .collect();
                (checks, uploads)
            })
            .collect();
        jobs.into_iter()
            .map(|(checks, uploads)| {
                let checks = checks.join().expect("a reference thread panicked");
                let uploads: humming::Result<Vec<DeviceWeights>> = uploads
                    .into_iter()
                    .map(|h| h.join().expect("an upload thread panicked"))
                    .collect();
                (checks, uploads)
            })
            .collect::<Vec<_>>()
    });
    env.stream.synchronize()?;
    let mut out = Vec::new();
    for ((proj, _, a_host, _, copies), (checks, weights)) in host.into_iter().zip(joined) {
        let weights = weights?;
        println!(
            "{} {}: {copies} copies of {} experts, {:.0} MiB each",
            model.name,
            proj.name,
            model.experts,
            weights[0].bytes() as f64 / (1 << 20) as f64,
        );
        out.push(Prepared {
            proj,
            a_host,
            checks: checks?,
            weights,
        });
    }
    println!(
        "{}: weights packed and uploaded, checked slots' reference computed, in {:.1} s",
        model.name,
        t0.elapsed().as_secs_f64()
    );
    Ok(out)
}

/// `--trials` replays of a graph of `launch(i)` over `copies` rotations.
fn time(env: &Env, copies: usize, launch: impl FnMut(usize) -> Res<()>) -> Res<Stats> {
    let args = env.args;
    let trials = replay(&env.stream, args.reps, copies, args.trials, launch)?;
    Ok(Stats::new(trials, copies))
}

/// Checks and times one M of one projection.
fn bench_m(
    env: &Env,
    model: &Model,
    prep: &Prepared,
    r: &Routings,
    check: &Check,
    block_m: usize,
) -> Res<MoeRow> {
    let (stream, gemm) = (&env.stream, &env.gemm);
    let proj = prep.proj;
    let (n, k, m, experts) = (proj.n, proj.k, r.m, model.experts);
    let ktop = proj.kernel_top_k(model.top_k);
    let slots = m * model.top_k;
    let a_rows = slots / ktop;
    let count = r.ids.len();
    let topk: Vec<CudaSlice<i32>> = r
        .ids
        .iter()
        .map(|ids| stream.clone_htod(ids))
        .collect::<Result<_, _>>()?;
    let a: Vec<CudaSlice<f16>> = (0..count)
        .map(|_| stream.clone_htod(&prep.a_host[..a_rows * k]))
        .collect::<Result<_, _>>()?;
    let mut c: Vec<CudaSlice<f16>> = (0..count)
        .map(|_| stream.alloc_zeros::<f16>(slots * n))
        .collect::<Result<_, _>>()?;
    let mut routing: Vec<Routing> = topk
        .iter()
        .map(|t| match block_m {
            0 => gemm.route(t, a_rows, ktop, experts),
            b => gemm.route_with_block_m(t, a_rows, ktop, experts, b),
        })
        .collect::<humming::Result<_>>()?;
    let weights = &prep.weights;
    let copies = weights.len();

    // One launch on routing 0 with C full of NaN: the checked slots against the reference, and
    // every value of C written. Its routing is rebuilt right before it from another routing's
    // buffers, as in the timed route + GEMM graph: a GEMM that read the routing before the helper
    // had written it would fail here.
    stream.memcpy_htod(&vec![f16::NAN; slots * n], &mut c[0])?;
    gemm.route_into(&topk[1 % count], &mut routing[0])?;
    gemm.route_into(&topk[0], &mut routing[0])?;
    gemm.run_indexed(&a[0], &routing[0], &weights[0], None, None, &mut c[0])?;
    let all = stream.clone_dtoh(&c[0])?;
    let nonfinite = all.iter().filter(|v| !v.to_f64().is_finite()).count();
    let got: Vec<f64> = check
        .slots
        .iter()
        .flat_map(|&s| all[s * n..(s + 1) * n].iter().map(|v| v.to_f64()))
        .collect();
    let err = finite(humming::relative_error(&got, &check.want));
    let ok = err.is_some_and(|e| e <= TOLERANCE) && nonfinite == 0;

    // A turn pairs every weight copy with every routing.
    let turn = copies / gcd(copies, count) * count;
    let ours = time(env, turn, |i| {
        let j = i % count;
        Ok(gemm.run_indexed(
            &a[j],
            &routing[j],
            &weights[i % copies],
            None,
            None,
            &mut c[j],
        )?)
    })?;
    let route = time(env, count, |i| {
        Ok(gemm.route_into(&topk[i], &mut routing[i])?)
    })?;
    let total = time(env, turn, |i| {
        let j = i % count;
        gemm.route_into(&topk[j], &mut routing[j])?;
        gemm.run_indexed(
            &a[j],
            &routing[j],
            &weights[i % copies],
            None,
            None,
            &mut c[j],
        )?;
        Ok(())
    })?;

    let per_expert = weights[0].bytes() / experts;
    let weight_bytes = r.touched * per_expert as f64;
    let (a_bytes, c_bytes) = (a_rows * k * 2, slots * n * 2);
    let floor_us = (weight_bytes + (a_bytes + c_bytes) as f64) / (env.bw_tbs * 1e12) * 1e6;
    Ok(MoeRow {
        model: model.name.to_string(),
        proj: proj.name.to_string(),
        experts,
        top_k: model.top_k,
        kernel_top_k: ktop,
        n,
        k,
        m,
        a_rows,
        block_m: routing[0].block_m(),
        ours_us: ours.median_us,
        route_us: route.median_us,
        total_us: total.median_us,
        floor_us,
        experts_touched: r.touched,
        weight_bytes,
        weight_bytes_per_expert: per_expert,
        a_bytes,
        c_bytes,
        err,
        checked_slots: check.slots.len(),
        nonfinite,
        tolerance: TOLERANCE,
        ok,
        weight_copies: copies,
        routings: count,
        module: match gemm.module_source() {
            ModuleSource::Fatbin => "fatbin",
            ModuleSource::Nvrtc => "nvrtc",
        }
        .to_string(),
        ours,
        route,
        total,
    })
}

// ---------------------------------------------------------------------------------------------------
// Main

fn models(args: &Args) -> Res<Vec<(usize, &'static Model)>> {
    args.models
        .iter()
        .map(|name| {
            MODELS
                .iter()
                .enumerate()
                .find(|(_, m)| m.name == name.trim())
                .ok_or_else(|| {
                    let known: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
                    format!(
                        "--models: unknown model `{name}`; known: {}",
                        known.join(", ")
                    )
                    .into()
                })
        })
        .collect()
}

fn cpu_only(args: &Args) -> Res<()> {
    for (mi, model) in models(args)? {
        let routings = routings_for(mi, model, args);
        for (pi, &proj) in model.projs.iter().enumerate() {
            let seed = seed_of(args, mi, pi);
            let t = Instant::now();
            let distinct = quantize_distinct(args, seed, proj)?;
            let t_quant = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let bytes = expert_bytes(&distinct[0])?;
            let t_pack = t.elapsed().as_secs_f64();
            let copies = copies_for(model.experts * bytes, args);
            let a_host = activations(args, model, proj, seed);
            let t = Instant::now();
            let checks = reference_checks(model, proj, &distinct, &a_host, &routings)?;
            let t_ref = t.elapsed().as_secs_f64();
            println!(
                "{} {} {}x{}: quantize {} experts {t_quant:.2} s; pack one expert {t_pack:.3} s ({:.2} MiB), so {copies} copies of {} experts about {:.1} s of packing on one core per copy; reference of {} slots {t_ref:.2} s",
                model.name,
                proj.name,
                proj.n,
                proj.k,
                distinct.len(),
                bytes as f64 / (1 << 20) as f64,
                model.experts,
                t_pack * model.experts as f64,
                checks.iter().map(|c| c.slots.len()).sum::<usize>(),
            );
        }
        for r in &routings {
            println!(
                "  M = {}: {} routings, {:.1} experts touched on average",
                r.m,
                r.ids.len(),
                r.touched
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
        let report: MoeReport = serde_json::from_str(&text)?;
        std::fs::create_dir_all(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
        return finish(args, &report, &out);
    }
    if args.ms.contains(&0) || args.routings == 0 || args.distinct == 0 {
        return Err("--ms, --routings and --distinct must be positive".into());
    }
    let chosen = models(args)?;
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
    let bw_tbs = copy_bandwidth(&stream, copy_bytes)? / 1e12;
    println!(
        "copy bandwidth {bw_tbs:.2} TB/s (read + write, {} GiB device-to-device copy)",
        args.copy_gib.max(1)
    );
    let env = Env {
        args,
        stream: stream.clone(),
        gemm: match args.format {
            MoeFormat::W4a16 => Gemm::<f16, f16>::load::<MoeW4A16>(&stream)?,
            MoeFormat::W4a8 => Gemm::<f16, f16>::load::<MoeW4A8>(&stream)?,
        },
        bw_tbs,
    };
    let mut report = MoeReport {
        tool: "humming examples/bench_moe.rs".into(),
        descriptor: args.format.spec().to_string(),
        format: args.format.name().into(),
        device,
        copy_bw_tbs: bw_tbs,
        copy_bytes,
        trials: args.trials,
        min_launches: args.reps,
        routings: args.routings,
        distinct_experts: args.distinct,
        rotate_mib: args.rotate_mib,
        max_copies: args.max_copies,
        notes: vec![
            "ours_us: run_indexed alone on routings built beforehand; route_us: route_into alone; total_us: both in one graph; medians per launch over `trials` CUDA-graph replays".into(),
            "floor_us = (weight_bytes + a_bytes + c_bytes) / copy_bw; weight_bytes = experts_touched (mean over the routings) x DeviceWeights::bytes() / E; copy_bw counts bytes read + written".into(),
            "expert e's weights are a copy of distinct random expert e % distinct_experts; every expert has its own copy on the GPU".into(),
            "gate_up: A [M, K], launch top_k = top_k; down: A [M * top_k, K], launch top_k = 1; C [M * top_k, N]".into(),
        ],
        rows: Vec::new(),
    };
    let json_path = out.join("bench_moe.json");
    let mut failed = 0;
    for (mi, model) in chosen {
        let routings = routings_for(mi, model, args);
        let prepared = match prepare(&env, mi, model, &routings) {
            Ok(p) => p,
            Err(e) => {
                // Go on with the other models: device time is scarce.
                eprintln!("error: {}: {e}", model.name);
                failed += 1;
                continue;
            }
        };
        println!("\n{}", moe_table_header());
        for prep in &prepared {
            for (r, check) in routings.iter().zip(&prep.checks) {
                for &bm in &args.block_m {
                    if bm != 0
                        && !env
                            .gemm
                            .tiles()
                            .iter()
                            .any(|t| t.tile.block_m as usize == bm)
                    {
                        continue;
                    }
                    match bench_m(&env, model, prep, r, check, bm) {
                        Ok(row) => {
                            println!("{}", moe_table_line(&row));
                            report.rows.push(row);
                        }
                        Err(e) => {
                            eprintln!("error: {} {} M={}: {e}", model.name, prep.proj.name, r.m);
                            failed += 1;
                        }
                    }
                    write_json(&json_path, &report)?;
                }
            }
        }
    }
    println!("wrote {}", json_path.display());
    let code = finish(args, &report, &out)?;
    if failed > 0 {
        eprintln!("{failed} case(s) stopped with an error");
        return Ok(ExitCode::FAILURE);
    }
    Ok(code)
}

/// The summary table, the merge with --reference, and the exit status.
fn finish(args: &Args, report: &MoeReport, out: &Path) -> Res<ExitCode> {
    println!("\n{}", moe_table_header());
    for r in &report.rows {
        println!("{}", moe_table_line(r));
    }
    println!(
        "\nspread = (max - min) / median of the GEMM over {} trials; % floor = 100 * floor / ours (GEMM alone)",
        report.trials
    );
    if let Some(reference) = &args.reference {
        merge_moe(report, reference, out)?;
    }
    let wrong = report.rows.iter().filter(|r| !r.ok).count();
    if wrong > 0 {
        eprintln!(
            "{wrong} case(s) failed the check (relative error above tolerance, NaN, or rows of C not written)"
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
            eprintln!("bench_moe: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routings_pick_distinct_experts_per_token() {
        let (tokens, top_k, experts) = (300, 8, 16);
        let ids = random_routing(&mut Rng::new(7), tokens, top_k, experts);
        assert_eq!(ids.len(), tokens * top_k);
        let mut counts = vec![0usize; experts];
        for choice in ids.chunks(top_k) {
            let mut seen = choice.to_vec();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), top_k);
            choice.iter().for_each(|&e| counts[e as usize] += 1);
        }
        // Uniform: 150 choices per expert on average.
        assert!(
            counts.iter().all(|&c| (100..200).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn checked_slots_are_every_choice_of_three_tokens() {
        assert_eq!(check_slots(1, 8), (0..8).collect::<Vec<_>>());
        let s = check_slots(16, 2);
        assert_eq!(s, vec![0, 1, 16, 17, 30, 31]);
    }
}
