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
use humming_runtime::cuda::{
    self, DependentTrigger, Gemm, KReduction, LaunchOptions, Reduction, SplitK,
};
use humming_runtime::quant::QuantizedWeights;
use humming_runtime::{Element, spec};
use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::Arc;

mod gpu_common;
use gpu_common::*;

/// Changes some of a `Gemm`'s launch settings.
fn set_options<A: Element, C: Element>(gemm: &mut Gemm<A, C>, f: impl FnOnce(&mut LaunchOptions)) {
    let mut o = gemm.options();
    f(&mut o);
    gemm.set_options(o);
}

/// `n` pinned K splits (at least 1).
fn fixed(n: usize) -> SplitK {
    SplitK::Fixed(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
}

/// The deterministic reduction (the default), or f16 atomics into C where the tile has them.
fn reduction(deterministic: bool) -> Reduction {
    if deterministic {
        Reduction::Deterministic
    } else {
        Reduction::AtomicF16
    }
}

/// The dependent-launch trigger: `None` the runtime's rule, `Some(true)` at the start.
fn trigger(early: Option<bool>) -> DependentTrigger {
    match early {
        None => DependentTrigger::Auto,
        Some(true) => DependentTrigger::AtStart,
        Some(false) => DependentTrigger::AfterMainLoop,
    }
}

#[derive(Clone, Copy, Debug)]
enum Zp {
    Symmetric,
    Integer,
    Float,
}

/// The descriptor of one configuration; `extra` is appended to the fields (e.g. `, tiles: [...]`).
fn spec_for(a: &str, bits: u32, zp: Zp, group: u32, bias: bool, extra: &str) -> spec::KernelSpec {
    let b = match zp {
        Zp::Symmetric if bits > 1 => format!("i{bits}"),
        _ => format!("u{bits}"),
    };
    let z = match zp {
        Zp::Symmetric => "none",
        Zp::Integer => "int",
        Zp::Float => "float",
    };
    let scale = if group == 0 {
        "channel".to_string()
    } else {
        format!("group({group})")
    };
    let fields = format!("a: {a}, b: {b}, scale: {scale}, zero_point: {z}, bias: {bias}{extra}");
    spec::parse_kernel_str(&fields).unwrap_or_else(|e| panic!("{fields}: {e}"))
}

/// Weights with a different magnitude per output channel, like real checkpoints.
fn random_weights(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    let mut w = vec![0f32; n * k];
    for row in w.chunks_mut(k) {
        let mag = 0.01 + 0.1 * (rng.uniform().abs());
        let shift = 0.02 * rng.uniform();
        for v in row {
            *v = mag * rng.uniform() + shift;
        }
    }
    w
}

/// Random weights `[n, k]` (`random_weights`) quantized for `sp`, their f64 dequantization (the
/// reference's B, row-major `[n, k]`) and their upload for `gemm`.
fn random_uploaded<A: Element, C: Element>(
    rng: &mut Rng,
    sp: &spec::KernelSpec,
    gemm: &Gemm<A, C>,
    n: usize,
    k: usize,
) -> (QuantizedWeights, Vec<f64>, cuda::DeviceWeights) {
    let wf = random_weights(rng, n, k);
    let w = QuantizedWeights::quantize(sp, n, k, &wf).expect("quantize");
    let w_ref = w.dequantize();
    let dw = gemm.upload(&w).expect("upload weights");
    (w, w_ref, dw)
}

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

/// Batch invariance: with one tile and the K split fixed (off, or pinned with `set_splits`), a row of C
/// does not depend on the other rows in the batch: each row computed alone (M = 1), within M = 7 and
/// within M = 16 gives the same bits. Also checked against the f64 reference.
#[test]
fn gpu_batch_invariance() {
    let name = "gpu_batch_invariance";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let (n, k) = (576, 4096);
    for tile in [
        "(8, 128, 256), warp = (8, 64, 64), stages = 3",
        "(16, 128, 128), warp = (16, 64, 64), stages = 4",
    ] {
        let fields = format!("a: f16, b: i4, scale: group(128), tiles: [tile(block = {tile})]");
        let sp = spec::parse_kernel_str(&fields).expect("spec");
        let mut gemm = Gemm::<f16, f16>::compile(&stream, "invariance", sp).expect("compile");
        let wf = random_weights(&mut rng, n, k);
        let w = QuantizedWeights::quantize(&sp, n, k, &wf).expect("quantize");
        let dw = gemm.upload(&w).expect("upload weights");
        let a_host: Vec<f16> = (0..16 * k).map(|_| f16::from_f32(rng.uniform())).collect();
        for splits in [Some(1), Some(4)] {
            set_options(&mut gemm, |o| {
                o.split_k = splits.map_or(SplitK::Auto, fixed)
            });
            let run_rows = |rows: usize, first: usize| -> Vec<u16> {
                let a_rows = stream
                    .clone_htod(&a_host[first * k..(first + rows) * k])
                    .expect("upload rows");
                let mut c = stream
                    .clone_htod(&vec![f16::from_bits(POISON); rows * n])
                    .expect("upload C");
                gemm.run(&a_rows, rows, &dw, None, &mut c).expect("launch");
                stream.synchronize().expect("kernel");
                let host: Vec<f16> = stream.clone_dtoh(&c).expect("download C");
                host.iter().map(|v| v.to_bits()).collect()
            };
            let all16 = run_rows(16, 0);
            let all7 = run_rows(7, 3);
            for row in 0..16 {
                let alone = run_rows(1, row);
                assert!(
                    alone == all16[row * n..(row + 1) * n],
                    "{tile} splits {splits:?}: row {row} alone differs from row {row} of M = 16"
                );
                if (3..10).contains(&row) {
                    assert!(
                        alone == all7[(row - 3) * n..(row - 2) * n],
                        "{tile} splits {splits:?}: row {row} alone differs from the same row in M = 7"
                    );
                }
            }
            // The values themselves: row 0 against the f64 reference.
            let a0: Vec<f64> = a_host[..k].iter().map(|v| v.to_f64()).collect();
            let got: Vec<f64> = all16[..n]
                .iter()
                .map(|&b| f16::from_bits(b).to_f64())
                .collect();
            if let Some(col) = got.iter().position(|v| !v.is_finite()) {
                panic!("{tile}: C[0, {col}] not written");
            }
            let want = humming_runtime::reference_gemm(&w, &a0, 1, None).expect("reference");
            let e = humming_runtime::relative_error(&got, &want);
            assert!(
                e <= 1e-2,
                "{tile} splits {splits:?}: relative error {e:.3e}"
            );
        }
        println!(
            "{name}: {tile}: rows identical alone, in M = 7 and in M = 16 (split-K off and 4 splits)"
        );
    }
}

/// K splits summed in a thread-block cluster (for `wgmma` tiles that stage C in shared memory, 2 to 8
/// splits, in deterministic mode or where a launch cannot add with atomics) against the global
/// split-K workspace (`set_cluster_split_k(false)`, and 12 splits, more than a cluster holds): the
/// same A gives bit-identical C, within tolerance of the f64 reference. Tiles of 32 and 64 rows (two
/// warpgroups along K, one CTA per SM); M = 5 and 40 (a second, partial row tile of the 32-row
/// tile); N = 576 (the last tile lies partly past N); group scales, and channel scales applied in
/// the epilogue with a bias.
#[test]
fn gpu_cluster_split_k() {
    let name = "gpu_cluster_split_k";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    if stream.context().compute_capability().ok() != Some((9, 0)) {
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {name} (wgmma needs compute capability 9.0, sm_90a)"
        );
        return;
    }
    let mut rng = Rng::new(seed());
    let (n, k) = (576, 4096);
    let mut cases = 0;
    let mut worst = 0f64;
    for tile in [
        "(32, 256, 128), warp = (32, 64, 64), stages = 4, mma = wgmma",
        "(64, 256, 128), warp = (64, 64, 64), stages = 4, mma = wgmma",
    ] {
        for (zp, g, bias) in [(Zp::Integer, 128, false), (Zp::Symmetric, 0, true)] {
            let extra = format!(", arch: [sm_90a], tiles: [tile(block = {tile})]");
            let sp = spec_for("f16", 4, zp, g, bias, &extra);
            let mut gemm = Gemm::<f16, f16>::compile(&stream, "cluster", sp).expect("compile");
            // Split order in both paths (the default would add the workspace path's splits with
            // atomics instead).
            set_options(&mut gemm, |o| o.reduction = reduction(true));
            let (w, w_ref, dw) = random_uploaded(&mut rng, &sp, &gemm, n, k);
            for m in [5, 40] {
                for splits in [2, 3, 5, 8, 12] {
                    set_options(&mut gemm, |o| o.split_k = fixed(splits));
                    let mut results = Vec::new();
                    for cluster in [true, false] {
                        set_options(&mut gemm, |o| o.cluster_reduction = cluster);
                        // At most 6 output tiles: every cluster of up to 8 CTAs fits at once.
                        assert_eq!(
                            (gemm.plan(m, n, k).reduction == KReduction::Cluster),
                            cluster && splits <= 8,
                            "{tile} M={m} splits={splits}: cluster path"
                        );
                        let label =
                            format!("{tile} {zp:?} g{g} M={m} splits={splits} cluster={cluster}");
                        let mut r = rng.clone();
                        let (e, bits) = run_case(
                            &stream,
                            &gemm,
                            &w,
                            &w_ref,
                            &dw,
                            m,
                            &mut r,
                            &label,
                            CaseOpts::default(),
                        );
                        assert!(e <= 1e-2, "{label}: relative error {e:.3e}");
                        worst = worst.max(e);
                        cases += 1;
                        results.push(bits);
                        if !cluster {
                            rng = r; // fresh inputs for the next case
                        }
                    }
                    assert!(
                        results[0] == results[1],
                        "{tile} {zp:?} g{g} M={m} splits={splits}: cluster and workspace sums differ"
                    );
                }
            }
        }
    }
    println!(
        "{name}: {cases} cases passed (cluster = workspace bit for bit), worst relative error {worst:.3e}"
    );
}

/// Stream-K launches of the `mma.sync` tiles (`Gemm::set_stream_k`): G CTAs take equal ranges of
/// the output tiles x `block_k` steps, so a CTA may cover a tile's last steps and the next tile's first
/// ones, several whole tiles (G = 2, 3), or one step of a tile shared by up to 16 CTAs (G clamped to
/// the tiles x steps). The default 8-row tile (two CTAs per SM) and the 16-row tile compiled for two CTAs per
/// SM; M with one and two row tiles; N = 576 (the last tile lies partly past N); K = 576 (a partial
/// last step), 2304 and 4096; group scales with integer zero points, channel scales with a bias, a
/// 3-bit float-offset format. Every case against the f64 reference, poisoned C, two launches bit
/// for bit; the same case without stream-K (the same A) is also checked against the reference.
#[test]
fn gpu_stream_k() {
    let name = "gpu_stream_k";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ 0x5EED_57EA);
    let mut cases = 0;
    let mut worst = 0f64;
    let tiles: &[(&str, &[usize])] = &[
        (
            "(8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 2",
            &[1, 5, 13],
        ),
        (
            "(16, 128, 256), warp = (16, 64, 64), stages = 3, ctas_per_sm = 2",
            &[9, 16, 29],
        ),
    ];
    let formats = [
        (4, Zp::Integer, 128, false),
        (4, Zp::Symmetric, 0, true),
        (3, Zp::Float, 64, false),
    ];
    let (ks, ctas_list, formats): (&[usize], &[usize], &[_]) = if quick() {
        (&[576, 4096], &[3, 13, 1000], &formats[..2])
    } else {
        (&[576, 2304, 4096], &[2, 3, 7, 13, 64, 1000], &formats[..])
    };
    for &(tile, ms) in tiles {
        for &(bits, zp, g, bias) in formats {
            let extra = format!(", tiles: [tile(block = {tile})]");
            let sp = spec_for("f16", bits, zp, g, bias, &extra);
            let mut gemm = Gemm::<f16, f16>::compile(&stream, "stream_k", sp).expect("compile");
            for &k in ks {
                let n = 576;
                let (w, w_ref, dw) = random_uploaded(&mut rng, &sp, &gemm, n, k);
                for &m in ms {
                    for &ctas in ctas_list {
                        set_options(&mut gemm, |o| o.stream_k = NonZeroUsize::new(ctas));
                        let g_used = gemm.plan(m, n, k).stream_k;
                        assert!(
                            g_used.is_some_and(|g| g >= 2 && g <= ctas),
                            "{tile} M={m} K={k}: stream-K with {ctas} CTAs not taken ({g_used:?})"
                        );
                        let label =
                            format!("{tile} w{bits} {zp:?} g{g} M={m} K={k} stream-K G={g_used:?}");
                        let mut r = rng.clone();
                        let (e, _) = run_case(
                            &stream,
                            &gemm,
                            &w,
                            &w_ref,
                            &dw,
                            m,
                            &mut r,
                            &label,
                            CaseOpts::default(),
                        );
                        assert!(e <= 1e-2, "{label}: relative error {e:.3e}");
                        set_options(&mut gemm, |o| o.stream_k = None);
                        assert_eq!(gemm.plan(m, n, k).stream_k, None);
                        let (e_off, _) = run_case(
                            &stream,
                            &gemm,
                            &w,
                            &w_ref,
                            &dw,
                            m,
                            &mut rng,
                            &label,
                            CaseOpts::default(),
                        );
                        assert!(
                            e_off <= 1e-2,
                            "{label} (stream-K off): relative error {e_off:.3e}"
                        );
                        worst = worst.max(e);
                        cases += 1;
                    }
                }
            }
        }
    }
    println!("{name}: {cases} stream-K cases passed, worst relative error {worst:.3e}");
}

/// Split-K by f16 atomic additions into C (`Reduction::AtomicF16`, opt-in). The 8-row `mma.sync`
/// tile adds with atomics only on compute capability 9.x and where its launch has more CTAs than SMs:
/// with 2, 3, 5 and 8 splits, M = 1, 5, 8 and 13 (two row tiles), N = 576 (the last tile half past N),
/// K = 2304 and 4096, group scales with and without integer zero points, channel scales, a 3-bit
/// float-offset format and a bias (at most 80 CTAs: on the H200 ordered), two launches match the f64
/// reference (`run_case`); at N = 8192 with 2 / 3 / 5 splits (128 / 192 / 320 CTAs) the launches of
/// more CTAs than SMs go through `check_atomic_case`, the others through `run_case`. On sm_90a, four
/// staged wgmma tiles ((32, 256, 128) at M = 29, (128, 128, 128) at M = 128, (128, 128, 64) at
/// M = 200 at one and at two CTAs per SM: two row tiles, the second partial), cluster sums off, go
/// through `check_atomic_case`, and the same with a bias (ordered) through `run_case`.
#[test]
fn gpu_atomic_split_k() {
    let name = "gpu_atomic_split_k";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ 0xA701_C0DE);
    let (mut cases, mut worst) = (0, 0f64);
    let cap = stream.context().compute_capability().unwrap_or((0, 0));
    let sms = stream
        .context()
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .expect("SM count") as usize;
    // The runtime's rule for the 8-row tile (humming-runtime `Gemm::split_mode`).
    let atomic_8_rows = |ctas: usize| cap.0 == 9 && ctas > sms;
    let formats = [
        (4, Zp::Symmetric, 128, false),
        (4, Zp::Integer, 128, false),
        (4, Zp::Symmetric, 0, false),
        (3, Zp::Float, 64, false),
        (4, Zp::Integer, 128, true),
    ];
    let (splits_list, ms): (&[usize], &[usize]) = if quick() {
        (&[3, 8], &[1, 13])
    } else {
        (&[2, 3, 5, 8], &[1, 5, 8, 13])
    };
    let extra =
        ", tiles: [tile(block = (8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 2)]";
    // (formats, N, Ks, Ms, splits). N = 576: 5 output tiles (the last half past N), at most 80 CTAs
    // (deterministic on the H200). N = 8192: 64 output tiles with 2 / 3 / 5 splits, so that the
    // launch has fewer or more CTAs than the GPU's SMs (132 on the H200), also more than two per SM
    // (more than one wave of resident CTAs). The late zeroing path (a split that ends before split 0
    // has claimed C) is check_atomic_case's run without the start claim.
    type Plan<'a> = (
        &'a [(u32, Zp, u32, bool)],
        usize,
        &'a [usize],
        &'a [usize],
        &'a [usize],
    );
    let plans: [Plan; 2] = [
        (&formats, 576, &[2304, 4096], ms, splits_list),
        (
            &formats[..1],
            8192,
            &[2560],
            if quick() { &[1] } else { &[1, 8] },
            &[2, 3, 5],
        ),
    ];
    for (formats, n, ks, ms, splits_list) in plans {
        for &(bits, zp, g, bias) in formats {
            let sp = spec_for("f16", bits, zp, g, bias, extra);
            let mut gemm = Gemm::<f16, f16>::compile(&stream, "atomic_c", sp).expect("compile");
            assert_eq!(
                gemm.options().reduction,
                Reduction::Deterministic,
                "the deterministic reduction is the default"
            );
            set_options(&mut gemm, |o| o.reduction = Reduction::AtomicF16);
            for &k in ks {
                let (w, w_ref, dw) = random_uploaded(&mut rng, &sp, &gemm, n, k);
                for &m in ms {
                    for &splits in splits_list {
                        set_options(&mut gemm, |o| o.split_k = fixed(splits));
                        let label = format!(
                            "8-row tile w{bits} {zp:?} g{g} bias {bias} M={m} N={n} K={k} splits={splits}"
                        );
                        let ctas = n.div_ceil(128) * m.div_ceil(8) * splits;
                        let atomic = atomic_8_rows(ctas) && !bias;
                        assert_eq!(
                            (gemm.plan(m, n, k).reduction == KReduction::Atomic),
                            atomic,
                            "{label}: {ctas} CTAs"
                        );
                        let e = if atomic {
                            check_atomic_case(
                                &stream, &mut gemm, &w, &w_ref, &dw, m, splits, &mut rng, &label,
                            )
                        } else {
                            let opts = CaseOpts::default();
                            run_case(&stream, &gemm, &w, &w_ref, &dw, m, &mut rng, &label, opts).0
                        };
                        assert!(e <= 1e-2, "{label}: relative error {e:.3e}");
                        worst = worst.max(e);
                        cases += 1;
                    }
                }
                set_options(&mut gemm, |o| o.split_k = SplitK::Auto);
            }
        }
    }
    // Staged wgmma tiles (sm_90a): the 16-byte vector atomics of the staged epilogue, cluster sums off.
    if cap == (9, 0) {
        for (tile, m) in [
            (
                "(32, 256, 128), warp = (32, 64, 64), stages = 4, mma = wgmma",
                29,
            ),
            (
                "(128, 128, 128), warp = (128, 32, 64), stages = 4, mma = wgmma",
                128,
            ),
            (
                "(128, 128, 64), warp = (128, 32, 64), stages = 4, mma = wgmma",
                200,
            ),
            // Two CTAs per SM: no producer warpgroup (CTA barriers, thread 0 refills the stages).
            (
                "(128, 128, 64), warp = (128, 32, 64), stages = 4, mma = wgmma, ctas_per_sm = 2",
                200,
            ),
        ] {
            let extra = format!(", arch: [sm_90a], tiles: [tile(block = {tile})]");
            let sp = spec_for("f16", 4, Zp::Integer, 128, false, &extra);
            let mut gemm =
                Gemm::<f16, f16>::compile(&stream, "atomic_c_wgmma", sp).expect("compile");
            set_options(&mut gemm, |o| {
                o.cluster_reduction = false;
                o.reduction = Reduction::AtomicF16;
            });
            // A bias keeps the ordered reduction.
            let sp_bias = spec_for("f16", 4, Zp::Integer, 128, true, &extra);
            let mut gemm_bias = Gemm::<f16, f16>::compile(&stream, "atomic_c_wgmma_bias", sp_bias)
                .expect("compile");
            set_options(&mut gemm_bias, |o| {
                o.cluster_reduction = false;
                o.reduction = Reduction::AtomicF16;
            });
            let (n, k) = (576, 4096);
            let (w, w_ref, dw) = random_uploaded(&mut rng, &sp, &gemm, n, k);
            let (w_bias, w_bias_ref, dw_bias) =
                random_uploaded(&mut rng, &sp_bias, &gemm_bias, n, k);
            for &splits in splits_list {
                set_options(&mut gemm, |o| o.split_k = fixed(splits));
                set_options(&mut gemm_bias, |o| o.split_k = fixed(splits));
                let label = format!("{tile} M={m} K={k} splits={splits} bias");
                assert_eq!(
                    gemm_bias.plan(m, n, k).reduction,
                    KReduction::Ordered,
                    "{label}"
                );
                let (e, _) = run_case(
                    &stream,
                    &gemm_bias,
                    &w_bias,
                    &w_bias_ref,
                    &dw_bias,
                    m,
                    &mut rng,
                    &label,
                    CaseOpts::default(),
                );
                assert!(e <= 1e-2, "{label}: relative error {e:.3e}");
                let label = format!("{tile} M={m} K={k} splits={splits} atomic");
                let e = check_atomic_case(
                    &stream, &mut gemm, &w, &w_ref, &dw, m, splits, &mut rng, &label,
                );
                worst = worst.max(e);
                cases += 2;
            }
        }
    }
    println!("{name}: {cases} cases passed, worst relative error {worst:.3e}");
}

/// The default reduction never turns a representable result into inf: K halves that cancel, each
/// split's partial 100352 (beyond f16's 65504) and the sum 6.125. W4A16 g128 with every weight
/// 7 x 0.875 = 6.125 and A = +8 over the first half of K, -8 over the second (one element -7 per
/// row, so that the result is one weight; every partial sum an integer, exact in f32), two K splits
/// (one per half): the 8-row tile at N = 16384 (256 CTAs) and the (32, 256, 128) wgmma tile on sm_90a.
/// The default launch gives every element exactly; `Reduction::AtomicF16`, where its f16 atomics
/// apply (compute capability 9.0), gives no finite element: why it is not the default.
#[test]
fn gpu_split_k_partials_beyond_f16() {
    let name = "gpu_split_k_partials_beyond_f16";
    let Some(stream) = gpu_or_skip(name) else {
        return;
    };
    let sm90 = stream.context().compute_capability().ok() == Some((9, 0));
    let k = 4096;
    let mut cases = vec![(
        "(8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 2",
        5,
        16384,
        "",
    )];
    if sm90 {
        cases.push((
            "(32, 256, 128), warp = (32, 64, 64), stages = 4, mma = wgmma",
            29,
            576,
            ", arch: [sm_90a]",
        ));
    }
    for (tile, m, n, arch) in cases {
        let fields =
            format!("a: f16, b: i4, scale: group(128){arch}, tiles: [tile(block = {tile})]");
        let sp = spec::parse_kernel_str(&fields).expect("spec");
        let mut gemm = Gemm::<f16, f16>::compile(&stream, "cancel", sp).expect("compile");
        let groups = k / 128;
        let w = QuantizedWeights::from_parts(
            &sp,
            n,
            k,
            vec![7; n * k],
            vec![0.875; groups * n],
            humming_runtime::ZeroPoints::None,
        )
        .expect("weights");
        let dw = gemm.upload(&w).expect("upload weights");
        let a_host: Vec<f16> = (0..m * k)
            .map(|i| {
                let (row, col) = (i / k, i % k);
                let v = match col {
                    c if c < k / 2 => 8.0,
                    c if c == k / 2 + row => -7.0,
                    _ => -8.0,
                };
                f16::from_f32(v)
            })
            .collect();
        let a_ref: Vec<f64> = a_host.iter().map(|v| v.to_f64()).collect();
        let want = humming_runtime::reference_gemm(&w, &a_ref, m, None).expect("reference");
        let a = stream.clone_htod(&a_host).expect("upload A");
        for reduction in [Reduction::default(), Reduction::AtomicF16] {
            set_options(&mut gemm, |o| {
                o.split_k = fixed(2);
                o.reduction = reduction;
            });
            let plan = gemm.plan(m, n, k);
            let label = format!("{tile} M={m} N={n} {reduction:?} ({plan:?})");
            assert_eq!(plan.splits, 2, "{label}");
            let f16_atomics = plan.reduction == KReduction::Atomic;
            assert_eq!(
                f16_atomics,
                sm90 && reduction == Reduction::AtomicF16,
                "{label}"
            );
            let mut c = stream
                .clone_htod(&vec![f16::from_bits(POISON); m * n])
                .expect("upload C");
            gemm.run(&a, m, &dw, None, &mut c)
                .unwrap_or_else(|e| panic!("{label}: launch: {e}"));
            let got: Vec<f64> = stream
                .clone_dtoh(&c)
                .expect("download C")
                .iter()
                .map(|v| v.to_f64())
                .collect();
            for (i, (&g, &r)) in got.iter().zip(&want).enumerate() {
                let ok = if f16_atomics {
                    !g.is_finite()
                } else {
                    r == 6.125 && g == r
                };
                assert!(ok, "{label}: C[{}, {}] = {g}, reference {r}", i / n, i % n);
            }
        }
    }
    println!("{name}: passed");
}

/// One atomic split-K case of `gemm` (its launch of `m` rows in `splits` K splits must add them with
/// f16 atomics): every row of two launches against the reference (the second finds the lock words the
/// first brought back to 0: a word left at 2 or more would make nobody zero C, which keeps the poison,
/// one left at 1 would hang the launch), C 4 bytes past a 16-byte boundary (f16x2 atomics), and the
/// deterministic launch of the same inputs, whose bits must differ somewhere. Returns the atomic
/// launch's error.
#[allow(clippy::too_many_arguments)]
fn check_atomic_case(
    stream: &Arc<cudarc::driver::CudaStream>,
    gemm: &mut Gemm<f16, f16>,
    w: &QuantizedWeights,
    w_ref: &[f64],
    dw: &cuda::DeviceWeights,
    m: usize,
    splits: usize,
    rng: &mut Rng,
    label: &str,
) -> f64 {
    let (n, k) = (w.n(), w.k());
    let plan = gemm.plan(m, n, k);
    assert_eq!(plan.reduction, KReduction::Atomic, "{label}: not atomic");
    assert_eq!(plan.splits, splits, "{label}: splits");
    let every = CaseOpts {
        all_rows: true,
        ..CaseOpts::default()
    };
    let a_seed = rng.clone(); // the same A in every run of the case
    let run = |gemm: &Gemm<f16, f16>, opts: CaseOpts, label: &str| {
        let mut r = a_seed.clone();
        run_case(stream, gemm, w, w_ref, dw, m, &mut r, label, opts)
    };
    let (e, bits) = run(gemm, every, label);
    assert!(e <= 1e-2, "{label}: relative error {e:.3e}");
    let odd = CaseOpts {
        c_offset: 2,
        ..every
    };
    let (e_odd, _) = run(gemm, odd, label);
    assert!(
        e_odd <= 1e-2,
        "{label} (C at +4 bytes): relative error {e_odd:.3e}"
    );
    set_options(gemm, |o| o.reduction = reduction(true));
    assert_ne!(
        gemm.plan(m, n, k).reduction,
        KReduction::Atomic,
        "{label}: deterministic"
    );
    let (e_det, bits_det) = run(gemm, every, label);
    set_options(gemm, |o| o.reduction = reduction(false));
    assert!(
        e_det <= 1e-2,
        "{label} (deterministic): relative error {e_det:.3e}"
    );
    // Two f16 roundings per split: among thousands of outputs some differ from the f32 sums of the
    // ordered path (proof that the atomics ran).
    assert_ne!(
        bits, bits_det,
        "{label}: atomic and deterministic launches gave the same bits"
    );
    *rng = Rng::new(rng.next_u64()); // fresh inputs for the next case
    e
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
