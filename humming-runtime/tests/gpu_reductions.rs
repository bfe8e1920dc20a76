//! GPU correctness of the K reductions against the f64 CPU reference, with the checks of
//! `gpu_correctness.rs` (`gpu_common::run_case`): batch invariance with one tile and a fixed K split,
//! K splits summed in a thread-block cluster, stream-K, f16 atomics into C (the opt-in reduction) and
//! split partials beyond f16's range.
//!
//! Kernels are built from descriptors at run time and compiled with NVRTC. Without a GPU every test
//! prints that it was skipped, by name, and passes. `HUMMING_GPU_QUICK=1` runs a reduced set (for
//! compute-sanitizer).

use half::f16;
use humming_runtime::cuda::{self, Gemm, KReduction, Reduction, SplitK};
use humming_runtime::quant::QuantizedWeights;
use humming_runtime::spec;
use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::Arc;

mod gpu_common;
use gpu_common::*;

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
