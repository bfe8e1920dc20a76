//! GPU correctness of the generated weight-only kernels against the f64 CPU reference.
//!
//! For every weight width 1..=8 × {symmetric (iN; u1 for 1 bit), integer zero point, float offset} ×
//! {f16, bf16} × {per channel, group 32, 64, 128}, at M ∈ {1, 7, 16, 33, 128, 1000},
//! N ∈ {64, 192, 576, 4096}, K ∈ {576, 1536, 4096}: fresh random inputs per case, C poisoned with NaN
//! and surrounded by guard regions that must stay untouched, every element of C checked as written,
//! relative Frobenius error against the f64 reference at most 1e-2 (f16) / 2e-2 (bf16) on the checked
//! rows (all rows up to M = 16; for larger M the first 4, the last 4 and 4 random rows), and a second
//! launch that must give bit-identical results (where the launches add their K splits into C with
//! atomics, the default on the staged `wgmma` tiles, both are checked against the reference instead).
//!
//! Kernels are built from descriptors at run time and compiled with NVRTC. Without a GPU every test
//! prints that it was skipped, by name, and passes. `HUMMING_GPU_QUICK=1` runs a reduced set (for
//! compute-sanitizer).

use half::{bf16, f16};
use humming_runtime::cuda::{self, Gemm, KReduction, SplitK};
use humming_runtime::quant::QuantizedWeights;
use humming_runtime::{Element, spec};
use std::io::Write;
use std::sync::Arc;

mod gpu_common;
use gpu_common::*;

/// Every (M, N, K) case of one kernel configuration; the kernel is compiled once. Returns the worst
/// relative error and the number of cases.
#[allow(clippy::too_many_arguments)]
fn config_cases<T: Element>(
    stream: &Arc<cudarc::driver::CudaStream>,
    kname: &str,
    sp: spec::KernelSpec,
    tol: f64,
    ms: &[usize],
    ns: &[usize],
    ks: &[usize],
    rng: &mut Rng,
) -> (f64, usize) {
    let gemm = Gemm::<T, T>::compile(stream, kname, sp).unwrap_or_else(|e| panic!("{kname}: {e}"));
    let (mut worst, mut cases) = (0f64, 0usize);
    for &n in ns {
        for &k in ks {
            let (w, w_ref, dw) = random_uploaded(rng, &sp, &gemm, n, k);
            for &m in ms {
                let label = format!("{kname} M={m} N={n} K={k}");
                let (e, _) = run_case(
                    stream,
                    &gemm,
                    &w,
                    &w_ref,
                    &dw,
                    m,
                    rng,
                    &label,
                    CaseOpts::default(),
                );
                assert!(e <= tol, "{label}: relative error {e:.3e} > {tol:.0e}");
                worst = worst.max(e);
                cases += 1;
            }
        }
    }
    (worst, cases)
}

/// Runs every case of one configuration (A/C dtype index 0 = f16, 1 = bf16, with its tolerance) and
/// adds the result to `outcome`. `tiles`: a `, tiles: [...]` field, or empty for the default tiles.
#[allow(clippy::too_many_arguments)]
fn check_config(
    stream: &Arc<cudarc::driver::CudaStream>,
    dtype: usize,
    bits: u32,
    zp: Zp,
    group: u32,
    bias: bool,
    tiles: &str,
    (ms, ns, ks): (&[usize], &[usize], &[usize]),
    rng: &mut Rng,
    outcome: &mut Outcome,
) {
    let a_name = ["f16", "bf16"][dtype];
    let sp = spec_for(a_name, bits, zp, group, bias, tiles);
    let kname = format!("{a_name}_w{bits}_{zp:?}_g{group}{tiles}");
    let (worst, cases) = if dtype == 0 {
        config_cases::<f16>(stream, &kname, sp, 1e-2, ms, ns, ks, rng)
    } else {
        config_cases::<bf16>(stream, &kname, sp, 2e-2, ms, ns, ks, rng)
    };
    outcome.worst = outcome.worst.max(worst);
    outcome.cases += cases;
}

fn matrix_for(bits: u32, dtype: usize) {
    let a_name = ["f16", "bf16"][dtype];
    let name = format!("gpu_matrix_w{bits}_{a_name}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ bits as u64);
    let (ms, ns, ks): (&[usize], &[usize], &[usize]) = if quick() {
        // K = 4096 at M = 1 takes the split-K path (workspace, tickets, last-CTA reduction).
        (&[1, 33], &[192], &[576, 4096])
    } else {
        (
            &[1, 7, 16, 33, 128, 1000],
            &[64, 192, 576, 4096],
            &[576, 1536, 4096],
        )
    };
    let zps: &[Zp] = &[Zp::Symmetric, Zp::Integer, Zp::Float];
    let groups: &[u32] = if quick() {
        &[0, 128]
    } else {
        &[0, 32, 64, 128]
    };
    let mut outcome = Outcome {
        worst: 0.0,
        cases: 0,
    };
    for &zp in zps {
        for &g in groups {
            let bias = g == 0 || g == 64;
            let shapes = (ms, ns, ks);
            check_config(
                &stream,
                dtype,
                bits,
                zp,
                g,
                bias,
                "",
                shapes,
                &mut rng,
                &mut outcome,
            );
        }
    }
    let o = &outcome;
    println!(
        "{name}: {} cases passed, worst relative error {:.3e}",
        o.cases, o.worst
    );
}

#[test]
fn gpu_matrix_w1_f16() {
    matrix_for(1, 0);
}
#[test]
fn gpu_matrix_w1_bf16() {
    matrix_for(1, 1);
}
#[test]
fn gpu_matrix_w2_f16() {
    matrix_for(2, 0);
}
#[test]
fn gpu_matrix_w2_bf16() {
    matrix_for(2, 1);
}
#[test]
fn gpu_matrix_w3_f16() {
    matrix_for(3, 0);
}
#[test]
fn gpu_matrix_w3_bf16() {
    matrix_for(3, 1);
}
#[test]
fn gpu_matrix_w4_f16() {
    matrix_for(4, 0);
}
#[test]
fn gpu_matrix_w4_bf16() {
    matrix_for(4, 1);
}
#[test]
fn gpu_matrix_w5_f16() {
    matrix_for(5, 0);
}
#[test]
fn gpu_matrix_w5_bf16() {
    matrix_for(5, 1);
}
#[test]
fn gpu_matrix_w6_f16() {
    matrix_for(6, 0);
}
#[test]
fn gpu_matrix_w6_bf16() {
    matrix_for(6, 1);
}
#[test]
fn gpu_matrix_w7_f16() {
    matrix_for(7, 0);
}
#[test]
fn gpu_matrix_w7_bf16() {
    matrix_for(7, 1);
}
#[test]
fn gpu_matrix_w8_f16() {
    matrix_for(8, 0);
}
#[test]
fn gpu_matrix_w8_bf16() {
    matrix_for(8, 1);
}

/// The weights of a chain x_{i+1} = x_i * W_i^T of `links` links on `[n, n]` (random, 0.05 * U(-1, 1),
/// W4A16 g128) and one `Gemm` with the default tiles that runs it.
fn chain_weights(
    stream: &Arc<cudarc::driver::CudaStream>,
    rng: &mut Rng,
    name: &str,
    n: usize,
    links: usize,
) -> (
    Gemm<f16, f16>,
    Vec<QuantizedWeights>,
    Vec<cuda::DeviceWeights>,
) {
    let sp = spec::parse_kernel_str("a: f16, b: i4, scale: group(128)").expect("spec");
    let gemm = Gemm::<f16, f16>::compile(stream, name, sp).expect("compile");
    let ws: Vec<QuantizedWeights> = (0..links)
        .map(|_| {
            let wf: Vec<f32> = (0..n * n).map(|_| 0.05 * rng.uniform()).collect();
            QuantizedWeights::quantize(&sp, n, n, &wf).expect("quantize")
        })
        .collect();
    let dws = ws.iter().map(|w| gemm.upload(w).expect("upload")).collect();
    (gemm, ws, dws)
}

/// Launches the chain: link i reads `xs[i]` and writes `xs[i + 1]` (`m` rows each), with no
/// synchronization between links; stops at the first launch error.
fn run_chain(
    gemm: &Gemm<f16, f16>,
    xs: &mut [cudarc::driver::CudaSlice<f16>],
    m: usize,
    dws: &[cuda::DeviceWeights],
) -> humming_runtime::Result<()> {
    for (i, dw) in dws.iter().enumerate() {
        let (done, rest) = xs.split_at_mut(i + 1);
        gemm.run(&done[i], m, dw, None, &mut rest[0])?;
    }
    Ok(())
}

/// `xs` downloaded, as f64.
fn download_f64(
    stream: &Arc<cudarc::driver::CudaStream>,
    xs: &[cudarc::driver::CudaSlice<f16>],
) -> Vec<Vec<f64>> {
    xs.iter()
        .map(|x| {
            let h: Vec<f16> = stream.clone_dtoh(x).expect("download");
            h.iter().map(|v| v.to_f64()).collect()
        })
        .collect()
}

/// Checks every link of a chain as the GPU wrote it (`xs[0]` its input, `xs[i + 1]` link i's output,
/// `m x n` each): every output written and finite, and within 1e-2 (relative) of the f64 reference
/// computed from the previous link's output.
fn check_chain(xs: &[Vec<f64>], ws: &[QuantizedWeights], m: usize, n: usize, label: &str) {
    for (i, w) in ws.iter().enumerate() {
        let got = &xs[i + 1];
        if let Some(at) = got.iter().position(|v| !v.is_finite()) {
            panic!("{label}: link {i}: C[{}, {}] not written", at / n, at % n);
        }
        let want = humming_runtime::reference_gemm(w, &xs[i], m, None).expect("reference");
        let e = humming_runtime::relative_error(got, &want);
        assert!(e <= 1e-2, "{label}: link {i}: relative error {e:.3e}");
    }
}

/// Back-to-back launches that depend on each other, with no synchronization between them: a chain of
/// eight GEMMs x_{i+1} = x_i * W_i^T on one `Gemm` (so consecutive launches share its split-K
/// workspace and tickets), with programmatic dependent launch on (the default on compute capability
/// 9.0+: each kernel starts streaming its weights before the previous one ends and must wait for it
/// before reading A or touching the workspace), on with every kernel letting the next one start at its
/// own start (`set_early_dependent_trigger(Some(true))`), on with the early start and atomic split-K
/// (`set_deterministic(false)`, the default: M = 100's two splits, on sm_90a), and off. Every link is checked against the f64
/// reference computed from the previous link's output as the GPU wrote it; all buffers start poisoned.
#[test]
fn gpu_dependent_launches() {
    let name = "gpu_dependent_launches";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let (n, links) = (1024usize, 8usize);
    let (mut gemm, ws, dws) = chain_weights(&stream, &mut rng, "chain", n, links);
    // The last pass adds the K splits of its M = 100 links with atomics (`set_deterministic(false)`).
    for (pdl, early, deterministic) in [
        (true, None, true),
        (true, Some(true), true),
        (false, None, true),
        (true, Some(true), false),
    ] {
        set_options(&mut gemm, |o| o.programmatic_launch = pdl);
        set_options(&mut gemm, |o| o.dependent_trigger = trigger(early));
        set_options(&mut gemm, |o| o.reduction = reduction(deterministic));
        // (In the atomic pass, M = 100 sums its splits with atomics too instead of in a cluster.)
        set_options(&mut gemm, |o| o.cluster_reduction = deterministic);
        for (m, splits) in [(1, Some(4)), (16, None), (100, Some(2)), (1, Some(1))] {
            set_options(&mut gemm, |o| {
                o.split_k = splits.map_or(SplitK::Auto, fixed)
            });
            gemm.reserve(m, n, n).expect("reserve");
            let x0: Vec<f16> = (0..m * n).map(|_| f16::from_f32(rng.uniform())).collect();
            let mut xs = vec![stream.clone_htod(&x0).expect("upload x0")];
            for _ in 0..links {
                xs.push(
                    stream
                        .clone_htod(&vec![f16::from_bits(POISON); m * n])
                        .expect("upload C"),
                );
            }
            run_chain(&gemm, &mut xs, m, &dws).expect("launch");
            stream.synchronize().expect("kernels");
            check_chain(
                &download_f64(&stream, &xs),
                &ws,
                m,
                n,
                &format!("pdl {pdl} (early {early:?}) M {m} splits {splits:?}"),
            );
        }
    }
    println!(
        "{name}: 8-link chains, M 1 / 16 / 100, split-K 1-4, programmatic launch on (trigger by rule and at kernel start) and off: every link ok"
    );
}

/// Launches replayed from a CUDA graph, as a serving engine replays its decode steps: the captured
/// kernel parameters repeat exactly, so whatever the kernels keep in device memory between launches
/// (the split-K tickets, the atomic split-K lock words) must be back in its starting state after every
/// launch. One `Gemm` (W4A16 g128, default tiles) on 1024 x 1024 weights, a 4-link chain
/// x_{i+1} = x_i * W_i^T captured in one graph (programmatic dependent launch on) for each of M = 1
/// (4 K splits: the 8-row tile's ticket tail), M = 16 (the runtime's splits), M = 100 with 2 splits
/// added into C with atomics (on sm_90a; asserted there) and M = 100 deterministic; each graph is
/// replayed three times, each time with fresh x_0 written into the captured buffer and every x_i
/// (i > 0) poisoned first, and every link of every replay is checked against the f64 reference
/// computed from the previous link's output as the GPU wrote it.
#[test]
fn gpu_graph_replay() {
    let name = "gpu_graph_replay";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    // SAFETY: before any buffer of this test is allocated, and every one of them is used on this one
    // stream only. With cudarc's event tracking on, each launch in the capture would wait on events
    // recorded before it, which invalidates the capture (as in examples/bench.rs).
    unsafe { stream.context().disable_event_tracking() };
    let mut rng = Rng::new(seed() ^ 0x6EA9_4E91);
    let (n, links, replays) = (1024usize, 4usize, 3usize);
    let (mut gemm, ws, dws) = chain_weights(&stream, &mut rng, "graph", n, links);
    let sm90 = stream.context().compute_capability().ok() == Some((9, 0));
    set_options(&mut gemm, |o| o.programmatic_launch = true);
    let mut atomic_cases = 0;
    for (m, splits, deterministic) in [
        (1, Some(4), false),
        (16, None, false),
        (100, Some(2), false),
        (100, Some(2), true),
    ] {
        set_options(&mut gemm, |o| {
            o.split_k = splits.map_or(SplitK::Auto, fixed)
        });
        set_options(&mut gemm, |o| o.reduction = reduction(deterministic));
        gemm.reserve(m, n, n).expect("reserve");
        let atomic = gemm.plan(m, n, n).reduction == KReduction::Atomic;
        if sm90 && m == 100 {
            assert_eq!(atomic, !deterministic, "M {m}: atomic split-K");
        }
        atomic_cases += usize::from(atomic);
        let poison = vec![f16::from_bits(POISON); m * n];
        let mut xs: Vec<_> = (0..=links)
            .map(|_| stream.clone_htod(&poison).expect("allocate x"))
            .collect();
        // One plain run of the chain first (whatever a first launch sets up happens outside the
        // capture; its results are overwritten by the replays).
        run_chain(&gemm, &mut xs, m, &dws).expect("launch");
        stream.synchronize().expect("kernels");
        stream
            .begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
            .expect("begin capture");
        let launched = run_chain(&gemm, &mut xs, m, &dws);
        // (An error stored by cudarc in a drop during the capture would make end_capture return it
        // before ending the capture: take it first, so that the stream always leaves capture mode.)
        let stored = stream.context().check_err();
        let graph = stream.end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0));
        launched.expect("launch in capture");
        stored.expect("no error during the capture");
        let graph = graph.expect("end capture").expect("a graph");
        for replay in 0..replays {
            let label =
                format!("M {m} splits {splits:?} deterministic {deterministic} replay {replay}");
            let x0: Vec<f16> = (0..m * n).map(|_| f16::from_f32(rng.uniform())).collect();
            stream.memcpy_htod(&x0, &mut xs[0]).expect("write x0");
            for x in xs.iter_mut().skip(1) {
                stream.memcpy_htod(&poison, x).expect("poison x");
            }
            graph.launch().expect("replay");
            stream
                .synchronize()
                .unwrap_or_else(|e| panic!("{label}: kernels failed: {e}"));
            check_chain(&download_f64(&stream, &xs), &ws, m, n, &label);
        }
    }
    if sm90 {
        assert!(atomic_cases > 0, "no graph with atomic split-K");
    }
    println!(
        "{name}: 4-link chains in CUDA graphs, M 1 / 16 / 100 (atomic and deterministic split-K), {replays} replays each: every link ok"
    );
}

/// Groups longer than a pipeline stage's block K (256 and 512 against block K 128 and 256): the loader
/// keeps a scale row across stages, and K = 576 ends in a partial group. One test per width (3, 4 and
/// 8: one, two and bf16's f32 dequant path) and zero-point kind, each over both group sizes, f16 and
/// bf16, so that they run in parallel (as one test, 36 kernels compiled one after the other on a cold
/// cache).
fn long_groups_for(bits: u32, zp: Zp) {
    let name = format!("gpu_long_groups_w{bits}_{zp:?}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ (u64::from(bits) << 16) ^ ((zp as u64) << 24));
    let (ms, ns, ks): (&[usize], &[usize], &[usize]) = if quick() {
        (&[1, 16], &[192], &[576])
    } else {
        (&[1, 16, 33, 128], &[192, 576], &[576, 1536, 4096])
    };
    let mut outcome = Outcome {
        worst: 0.0,
        cases: 0,
    };
    for g in [256, 512] {
        for dtype in 0..2 {
            let shapes = (ms, ns, ks);
            check_config(
                &stream,
                dtype,
                bits,
                zp,
                g,
                g == 256,
                "",
                shapes,
                &mut rng,
                &mut outcome,
            );
        }
    }
    assert!(outcome.cases > 0, "{name}: no case ran");
    println!(
        "{name}: {} cases passed, worst relative error {:.3e}",
        outcome.cases, outcome.worst
    );
}

/// One `#[test]` per (width, zero-point kind) of `long_groups_for`.
macro_rules! long_groups_tests {
    ($($name:ident: $bits:expr, $zp:ident;)*) => {
        $(
            #[test]
            fn $name() {
                long_groups_for($bits, Zp::$zp);
            }
        )*
    };
}
long_groups_tests! {
    gpu_long_groups_w3_symmetric: 3, Symmetric;
    gpu_long_groups_w3_integer: 3, Integer;
    gpu_long_groups_w3_float: 3, Float;
    gpu_long_groups_w4_symmetric: 4, Symmetric;
    gpu_long_groups_w4_integer: 4, Integer;
    gpu_long_groups_w4_float: 4, Float;
    gpu_long_groups_w8_symmetric: 8, Symmetric;
    gpu_long_groups_w8_integer: 8, Integer;
    gpu_long_groups_w8_float: 8, Float;
}

/// Every tile kind on its own (one tile per kernel, so M does not pick another): the `mma.sync` tiles
/// of 32 and 64 rows, which the default tiles replace by `wgmma` ones on Hopper, the default 16-row
/// tile compiled for two CTAs per SM (128 registers, which the matrix tests' N never selects), the
/// 8-row tile compiled for three CTAs per SM (80 registers; its shared memory fits sm_90 only), and
/// `wgmma` tiles of 8 to 256 rows, warps of 64, 32 and 16 channels, one and two warpgroups along K, 3 to 6
/// stages, one and two CTAs per SM (the default wgmma tiles among them). N = 192 and 576 leave warps
/// of a wgmma tile past N; K = 576 ends in a partial stage; M not a multiple of the tile. One test per
/// tile, so that they run in parallel; tiles declared for sm_90a alone (`sm90a`: every `wgmma` tile
/// and the three-CTA 8-row tile) are skipped on GPUs other than compute capability 9.0.
fn tile_kind(index: usize, tile: &str, sm90a: bool) {
    let name = format!("gpu_tile_kind_{index}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    if sm90a && stream.context().compute_capability().ok() != Some((9, 0)) {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {name} (declared for sm_90a, which needs compute capability 9.0)"
        );
        return;
    }
    let mut rng = Rng::new(seed() ^ (index as u64) << 8);
    let (ms, ns, ks): (&[usize], &[usize], &[usize]) = if quick() {
        (&[5, 33], &[192], &[576, 4096])
    } else {
        (&[1, 5, 17, 33, 100, 130], &[192, 576, 4096], &[576, 4096])
    };
    // 256-row tiles (warps of 16 channels): also two row blocks, the second partial, in the quick set
    // too (the sanitizers run it).
    let rows256 = tile.starts_with("(256,");
    let ms: &[usize] = match (rows256, quick()) {
        (true, true) => &[5, 300],
        (true, false) => &[1, 17, 130, 300],
        _ => ms,
    };
    let mut outcome = Outcome {
        worst: 0.0,
        cases: 0,
    };
    // (bits, zero point, group, bias): the common W4A16 formats, a two-part width, 8 bits (bf16's f32
    // dequant path), groups shorter than a warp's 64-deep slice.
    let formats = [
        (4, Zp::Integer, 128, false),
        (4, Zp::Symmetric, 0, true),
        (3, Zp::Float, 64, true),
        (8, Zp::Symmetric, 32, false),
        (2, Zp::Integer, 0, false),
    ];
    // Two or three CTAs of the 8-bit format's stages do not fit an SM: `ctas_per_sm` rejects it (a
    // compile error, tests/ui/tile_ctas_per_sm_shared_memory.rs).
    // The quarter-unit path of warps of 16 channels (dequant.cuh, quarter_slab) moves each code width
    // its own way: 1 bit and 7 (4 + 2 + 1) as well there.
    let quarters = [(1, Zp::Symmetric, 128, false), (7, Zp::Integer, 64, true)];
    let extra: &[(u32, Zp, u32, bool)] = if rows256 { &quarters } else { &[] };
    let formats = formats
        .iter()
        .chain(extra)
        .filter(|f| !(tile.contains("ctas_per_sm") && f.0 == 8));
    // A kernel whose only tile is wgmma targets sm_90a alone (a rule of gemm!); three CTAs of the
    // 8-row tile fit sm_90's shared memory, not sm_80's.
    let arch = if sm90a { ", arch: [sm_90a]" } else { "" };
    let tiles = format!("{arch}, tiles: [tile(block = {tile})]");
    for &(bits, zp, g, bias) in formats {
        for dtype in 0..2 {
            check_config(
                &stream,
                dtype,
                bits,
                zp,
                g,
                bias,
                &tiles,
                (ms, ns, ks),
                &mut rng,
                &mut outcome,
            );
        }
    }
    println!(
        "{name} [{tile}]: {} cases passed, worst relative error {:.3e}",
        outcome.cases, outcome.worst
    );
}

/// One `#[test]` per tile (`name: index, tile text, declared for sm_90a alone`).
macro_rules! tile_kind_tests {
    ($($name:ident: $index:expr, $tile:expr, $sm90a:expr;)*) => {
        $(
            #[test]
            fn $name() {
                tile_kind($index, $tile, $sm90a);
            }
        )*
    };
}

tile_kind_tests! {
    gpu_tile_kind_0: 0, "(32, 128, 128), warp = (32, 64, 64), stages = 4", false;
    gpu_tile_kind_1: 1, "(64, 128, 128), warp = (32, 64, 64), stages = 4", false;
    gpu_tile_kind_2: 2, "(8, 256, 64), stages = 3, mma = wgmma", true;
    gpu_tile_kind_3: 3, "(24, 256, 128), stages = 4, mma = wgmma", true;
    gpu_tile_kind_4: 4, "(64, 256, 64), stages = 5, mma = wgmma", true;
    gpu_tile_kind_5: 5, "(32, 128, 64), warp = (32, 32, 64), stages = 5, mma = wgmma", true;
    gpu_tile_kind_6: 6, "(72, 128, 128), warp = (72, 32, 64), stages = 3, mma = wgmma", true;
    gpu_tile_kind_7: 7, "(128, 128, 64), warp = (128, 32, 64), stages = 4, mma = wgmma", true;
    gpu_tile_kind_8: 8, "(128, 256, 64), warp = (128, 32, 64), stages = 4, mma = wgmma", true;
    gpu_tile_kind_9: 9, "(64, 512, 64), warp = (64, 64, 64), stages = 3, mma = wgmma", true;
    gpu_tile_kind_10: 10, "(16, 128, 256), warp = (16, 64, 64), stages = 3, ctas_per_sm = 2", false;
    gpu_tile_kind_11: 11, "(128, 128, 128), warp = (128, 32, 64), stages = 4, mma = wgmma", true;
    gpu_tile_kind_12: 12, "(64, 128, 128), warp = (64, 32, 64), stages = 6, mma = wgmma", true;
    gpu_tile_kind_13: 13, "(64, 128, 128), warp = (64, 32, 64), stages = 4, mma = wgmma, ctas_per_sm = 2", true;
    gpu_tile_kind_14: 14, "(64, 256, 128), warp = (64, 64, 64), stages = 4, mma = wgmma", true;
    gpu_tile_kind_15: 15, "(8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 3", true;
    gpu_tile_kind_16: 16, "(256, 128, 64), warp = (256, 16, 64), stages = 4, mma = wgmma", true;
    gpu_tile_kind_17: 17, "(256, 64, 128), warp = (256, 16, 64), stages = 3, mma = wgmma", true;
}
