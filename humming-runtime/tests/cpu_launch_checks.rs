//! Launch argument checks (no GPU needed): every check returns a typed error naming its argument.

use humming_runtime::Error;
use humming_runtime::cuda::plan::{LaunchShape, check_launch};
use humming_runtime::spec::tiles::{
    WaveCandidate, fewest_splits_single_wave, fullest_single_wave, least_wave_work,
    select_launch_tile, select_tile_index, wave_work,
};
use humming_runtime::spec::{KernelSpec, Mma, TileConfig, parse_kernel_str};

fn spec(fields: &str) -> KernelSpec {
    parse_kernel_str(fields).unwrap()
}

fn ok_shape() -> LaunchShape {
    LaunchShape {
        m: 5,
        n: 128,
        k: 256,
        lda: 256,
        ldc: 128,
        a_len: 5 * 256,
        c_len: 5 * 128,
        bias_len: None,
        a_addr: 0x1000,
        c_addr: 0x2000,
    }
}

fn arg_of(r: Result<(), Error>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        other => panic!("expected an InvalidArgument error, got {other:?}"),
    }
}

#[test]
fn valid_launch_passes() {
    let s = spec("a: f16, b: u4, scale: group(128)");
    check_launch("K", &s, &s, &ok_shape()).unwrap();
    // Strided rows: only (m - 1) * lda + K elements are needed.
    let shape = LaunchShape {
        lda: 264,
        a_len: 4 * 264 + 256,
        ldc: 130,
        c_len: 4 * 130 + 128,
        ..ok_shape()
    };
    check_launch("K", &s, &s, &shape).unwrap();
}

#[test]
fn every_check_names_its_argument() {
    let s = spec("a: f16, b: u4, scale: group(128)");
    let biased = spec("a: f16, b: u4, scale: group(128), bias: true");
    let other = spec("a: f16, b: u4, scale: group(64)");
    let base = ok_shape();
    let cases: [(&KernelSpec, &KernelSpec, LaunchShape, &str); 13] = [
        (&s, &other, base, "weights"),
        (&s, &s, LaunchShape { m: 1 << 31, ..base }, "m"),
        (&s, &s, LaunchShape { lda: 255, ..base }, "lda"),
        (
            &s,
            &s,
            LaunchShape {
                lda: 260,
                a_len: 10_000,
                ..base
            },
            "lda",
        ),
        (&s, &s, LaunchShape { ldc: 127, ..base }, "ldc"),
        (
            &s,
            &s,
            LaunchShape {
                ldc: 129,
                c_len: 10_000,
                ..base
            },
            "ldc",
        ),
        (
            &s,
            &s,
            LaunchShape {
                a_len: 5 * 256 - 1,
                ..base
            },
            "a",
        ),
        (
            &s,
            &s,
            LaunchShape {
                c_len: 5 * 128 - 1,
                ..base
            },
            "c",
        ),
        (
            &s,
            &s,
            LaunchShape {
                a_addr: 0x1008,
                ..base
            },
            "a",
        ),
        (
            &s,
            &s,
            LaunchShape {
                c_addr: 0x2002,
                ..base
            },
            "c",
        ),
        (
            &s,
            &s,
            LaunchShape {
                bias_len: Some(128),
                ..base
            },
            "bias",
        ),
        (&biased, &biased, base, "bias"),
        (
            &biased,
            &biased,
            LaunchShape {
                bias_len: Some(127),
                ..base
            },
            "bias",
        ),
    ];
    for (kernel, weights, shape, want) in cases {
        assert_eq!(
            arg_of(check_launch("K", kernel, weights, &shape)),
            want,
            "{shape:?}"
        );
    }
    check_launch(
        "K",
        &biased,
        &biased,
        &LaunchShape {
            bias_len: Some(128),
            ..base
        },
    )
    .unwrap();
}

/// Weights fit every kernel of their format: other targets and tiles take them, another format,
/// layout or epilogue does not.
#[test]
fn weights_fit_kernels_of_their_format() {
    let w = spec("a: f16, b: u4, scale: group(128)");
    let base = ok_shape();
    for other in [
        "a: f16, b: u4, scale: group(128), arch: [sm_90a]",
        "a: f16, b: u4, scale: group(128), tiles: [tile(block = (16, 128, 128), stages = 4)]",
    ] {
        check_launch("K", &spec(other), &w, &base).unwrap();
    }
    for other in [
        "a: f16, b: u4, scale: group(64)",
        "a: bf16, b: u4, scale: group(128)",
        "a: f16, b: i4, scale: group(128)",
        "a: f16, b: u4, scale: group(128), epilogue: silu_glu",
    ] {
        assert_eq!(
            arg_of(check_launch("K", &spec(other), &w, &base)),
            "weights",
            "{other}"
        );
    }
}

#[test]
fn m_zero_needs_no_buffers() {
    let s = spec("a: bf16, b: i8, scale: channel");
    let shape = LaunchShape {
        m: 0,
        a_len: 0,
        c_len: 0,
        ..ok_shape()
    };
    check_launch("K", &s, &s, &shape).unwrap();
}

/// M = 0 launches nothing, but its arguments are checked like those of any other M.
#[test]
fn m_zero_checks_every_argument() {
    let s = spec("a: f16, b: u4, scale: group(128)");
    let biased = spec("a: f16, b: u4, scale: group(128), bias: true");
    let other = spec("a: f16, b: u4, scale: group(64)");
    let zero = LaunchShape {
        m: 0,
        a_len: 0,
        c_len: 0,
        ..ok_shape()
    };
    let cases: [(&KernelSpec, &KernelSpec, LaunchShape, &str); 7] = [
        (&s, &other, zero, "weights"),
        (&s, &s, LaunchShape { lda: 255, ..zero }, "lda"),
        (&s, &s, LaunchShape { lda: 260, ..zero }, "lda"),
        (&s, &s, LaunchShape { ldc: 127, ..zero }, "ldc"),
        (&biased, &biased, zero, "bias"),
        (
            &s,
            &s,
            LaunchShape {
                bias_len: Some(128),
                ..zero
            },
            "bias",
        ),
        (
            &s,
            &s,
            LaunchShape {
                a_addr: 0x1008,
                ..zero
            },
            "a",
        ),
    ];
    for (kernel, weights, shape, want) in cases {
        assert_eq!(
            arg_of(check_launch("K", kernel, weights, &shape)),
            want,
            "{shape:?}"
        );
    }
    let misaligned_c = LaunchShape {
        c_addr: 0x2002,
        ..zero
    };
    assert_eq!(arg_of(check_launch("K", &s, &s, &misaligned_c)), "c");
}

#[test]
fn overflowing_sizes_are_errors_not_panics() {
    let s = spec("a: f16, b: u4, scale: group(128)");
    let shape = LaunchShape {
        m: i32::MAX as usize,
        lda: i32::MAX as usize - 7,
        k: 256,
        ..ok_shape()
    };
    assert_eq!(arg_of(check_launch("K", &s, &s, &shape)), "a");
}

#[test]
fn tile_selection_by_m() {
    let t = |bm: u16| TileConfig {
        block_m: bm,
        block_n: 128,
        block_k: 64,
        warp_m: bm.min(64),
        warp_n: 64,
        warp_k: 64,
        stages: 4,
        mma: Mma::Sync,
        ctas_per_sm: 0,
    };
    let tiles = [t(16), t(32), t(64)];
    assert_eq!(select_tile_index(&tiles, 1), 0);
    assert_eq!(select_tile_index(&tiles, 16), 0);
    assert_eq!(select_tile_index(&tiles, 17), 1);
    assert_eq!(select_tile_index(&tiles, 33), 2);
    assert_eq!(select_tile_index(&tiles, 5000), 2);
    let unordered = [t(64), t(16), t(16)];
    assert_eq!(select_tile_index(&unordered, 3), 1);
    assert_eq!(select_tile_index(&unordered, 100), 0);
    assert_eq!(select_tile_index(&[], 3), 0);
    // A wgmma tile wins over an mma.sync tile of the same block M, wherever it is in the list.
    let wg = |bm: u16| TileConfig {
        block_n: 256,
        warp_m: bm,
        mma: Mma::Wgmma,
        ..t(bm)
    };
    let mixed = [t(16), t(32), t(64), wg(32), wg(64)];
    assert_eq!(select_tile_index(&mixed, 16), 0);
    assert_eq!(select_tile_index(&mixed, 17), 3);
    assert_eq!(select_tile_index(&mixed, 33), 4);
    assert_eq!(select_tile_index(&mixed, 5000), 4);
    let first = [wg(64), t(64)];
    assert_eq!(select_tile_index(&first, 100), 0);
    // The default tiles on Hopper: a launch starts from the 128-row wgmma tiles up to M = 128, from
    // the 256-row tile (warps of 16 channels) above, also past 256 rows (select_launch_tile may then
    // take a 128-row tile: several_row_blocks_take_the_tile_of_least_work_per_sm).
    let defaults =
        humming_runtime::spec::tiles::tiles_of(&spec("a: f16, b: i4, scale: group(128)"));
    let rows = |m: usize| {
        let t = defaults[select_tile_index(&defaults, m)];
        (t.block_m, t.warp_n, t.mma)
    };
    assert_eq!(rows(128), (128, 32, Mma::Wgmma));
    for m in [129, 200, 256, 384, 5000] {
        assert_eq!(rows(m), (256, 16, Mma::Wgmma), "M = {m}");
    }
}

#[test]
fn split_k_balances_the_multiprocessors() {
    use humming_runtime::cuda::plan::choose_splits;
    let t = TileConfig {
        block_m: 16,
        block_n: 128,
        block_k: 128,
        warp_m: 16,
        warp_n: 64,
        warp_k: 64,
        stages: 4,
        mma: Mma::Sync,
        ctas_per_sm: 0,
    };
    // 8192 x 8192 at M = 1: 64 tiles, 132 SMs x 2 (of 3) resident CTAs: 4 splits (256 CTAs); 5 would
    // need a second wave.
    assert_eq!(choose_splits(&t, 1, 8192, 8192, 132, 3), 4);
    // 28672 x 4096: 224 tiles already fill one wave of 2 CTAs per SM.
    assert_eq!(choose_splits(&t, 1, 28672, 4096, 132, 5), 1);
    // A CTA of 8 warps (block K 256): the same slots.
    let wide = TileConfig {
        block_m: 8,
        warp_m: 8,
        block_k: 256,
        stages: 3,
        ..t
    };
    assert_eq!(choose_splits(&wide, 1, 28672, 4096, 132, 3), 1);
    assert_eq!(choose_splits(&wide, 1, 8192, 8192, 132, 3), 4);
    // Enough tiles already: no split.
    assert_eq!(choose_splits(&t, 1, 65536, 4096, 132, 3), 1);
    // Sizes far past anything launchable: no overflow, no split.
    assert_eq!(
        choose_splits(&t, usize::MAX / 2, usize::MAX / 2, 1 << 20, usize::MAX, 2),
        1
    );
    assert_eq!(choose_splits(&t, 4096, 8192, 8192, 132, 3), 1);
    // At least 4 BK steps and 1024 of K per split, never more than 16.
    assert_eq!(choose_splits(&t, 1, 64, 576, 132, 3), 1);
    assert_eq!(choose_splits(&t, 1, 64, 1536, 132, 3), 1);
    assert_eq!(choose_splits(&t, 1, 64, 3072, 132, 3), 3);
    assert_eq!(choose_splits(&t, 1, 64, 4096, 132, 3), 4);
    assert_eq!(choose_splits(&wide, 1, 64, 2048, 132, 3), 2); // 8 steps of 256
    assert_eq!(choose_splits(&t, 1, 128, 1 << 20, 132, 3), 16);
    // wgmma tiles: at most 8 splits (a cluster); 512 of K per split when one CTA fits per SM.
    let wg32 = TileConfig {
        block_m: 32,
        block_n: 256,
        block_k: 128,
        warp_m: 32,
        warp_n: 64,
        warp_k: 64,
        stages: 4,
        mma: Mma::Wgmma,
        ctas_per_sm: 0,
    };
    assert_eq!(choose_splits(&wg32, 32, 4096, 4096, 132, 1), 8); // 16 tiles
    assert_eq!(choose_splits(&wg32, 32, 8192, 8192, 132, 1), 4); // 32 tiles
    assert_eq!(choose_splits(&wg32, 32, 256, 1 << 20, 132, 1), 8);
    let wg128 = TileConfig {
        block_m: 128,
        block_n: 128,
        block_k: 64,
        warp_m: 128,
        warp_n: 32,
        ..wg32
    };
    // The f32 partials stay within a quarter of the weight traffic: splits * M <= K / 64.
    assert_eq!(choose_splits(&t, 16, 4096, 4096, 132, 3), 4);
    assert_eq!(choose_splits(&t, 64, 8192, 4096, 132, 3), 1);
    // wgmma tiles: the same rule without the cap on partials (132 SMs x 2 resident CTAs here).
    assert_eq!(choose_splits(&wg128, 128, 8192, 8192, 132, 2), 4); // 64 tiles x 4 = 256 CTAs of 264 slots
    assert_eq!(choose_splits(&wg128, 256, 8192, 8192, 132, 2), 2); // 128 tiles x 2
    assert_eq!(choose_splits(&wg128, 128, 4096, 14336, 132, 2), 8); // 32 tiles x 8
    assert_eq!(choose_splits(&wg128, 128, 28672, 4096, 132, 2), 1); // 224 tiles: one wave already
    assert_eq!(choose_splits(&wg128, 128, 4096, 4096, 132, 2), 4); // 1024 of K per split
    assert_eq!(choose_splits(&wg128, 128, 128, 2048, 132, 2), 2);
    assert_eq!(choose_splits(&wg128, 128, 128, 512, 132, 2), 1);
    assert_eq!(choose_splits(&wg128, 0, 0, 0, 0, 0), 1);
    // Degenerate inputs do not panic.
    assert_eq!(choose_splits(&t, 0, 0, 0, 0, 0), 1);
}

/// A tile's launch: (index, output tiles, CTAs of the launch, CTAs resident at once on the GPU).
fn wave(index: usize, tiles: usize, ctas: usize, slots: usize) -> WaveCandidate {
    WaveCandidate {
        index,
        tiles,
        ctas,
        slots,
    }
}

/// Between wgmma tiles of one block M: among those whose launch (CTAs including K splits) fits one
/// wave of resident CTAs and has at most one output tile per SM, the first, replaced by a later one
/// of fewer K splits and no fewer CTAs; else the last.
#[test]
fn single_wave_choice() {
    let c = wave;
    let pick = |cands: &[WaveCandidate]| fewest_splits_single_wave(cands, 132); // 132 SMs
    assert_eq!(pick(&[c(1, 64, 128, 132), c(2, 64, 256, 396)]), Some(1));
    assert_eq!(pick(&[c(1, 66, 132, 132), c(2, 66, 256, 396)]), Some(1));
    assert_eq!(pick(&[c(1, 224, 224, 132), c(2, 224, 224, 396)]), Some(2));
    assert_eq!(pick(&[c(1, 500, 500, 132), c(2, 800, 800, 396)]), Some(2));
    assert_eq!(pick(&[c(4, 500, 500, 132)]), Some(4));
    // One wave of two CTAs per SM, but more output tiles than SMs: the next candidate.
    assert_eq!(pick(&[c(5, 224, 224, 264), c(6, 112, 112, 132)]), Some(6));
    assert_eq!(pick(&[c(5, 133, 133, 264), c(6, 67, 134, 264)]), Some(6));
    assert_eq!(pick(&[c(5, 132, 264, 264), c(6, 66, 264, 264)]), Some(5));
    // Few enough output tiles, but more CTAs (with their splits) than one wave: the next candidate.
    assert_eq!(pick(&[c(1, 100, 200, 132), c(2, 100, 200, 264)]), Some(2));
    // Both fit: fewer splits wins (4096 x 4096, M = 32: 16 tiles x 8 against 32 x 4), equal ones keep
    // the first.
    assert_eq!(pick(&[c(1, 16, 128, 132), c(2, 32, 128, 264)]), Some(2));
    assert_eq!(pick(&[c(1, 32, 128, 132), c(2, 64, 256, 264)]), Some(1));
    assert_eq!(
        pick(&[c(1, 16, 128, 132), c(2, 32, 128, 264), c(3, 64, 128, 132)]),
        Some(3)
    );
    assert_eq!(pick(&[c(1, 64, 128, 132), c(2, 64, 256, 264)]), Some(1));
    // Fewer splits but fewer CTAs (a two-CTA tile whose splits each need more K): the first.
    assert_eq!(pick(&[c(1, 32, 128, 132), c(2, 32, 64, 264)]), Some(1));
    assert_eq!(pick(&[]), None);
}

/// Between mma.sync tiles of one block M: among those whose launch fits one wave with at most one
/// output tile per SM, the one of most CTAs (the first of equals), else the last.
#[test]
fn fullest_single_wave_choice() {
    let c = wave;
    let pick = |cands: &[WaveCandidate]| fullest_single_wave(cands, 132);
    // 8192 x 8192, M = 16: one CTA per SM with 2 splits, or two with 4.
    assert_eq!(pick(&[c(1, 64, 128, 132), c(2, 64, 256, 264)]), Some(2));
    // 4096 x 4096: both 128 CTAs: the first.
    assert_eq!(pick(&[c(1, 32, 128, 132), c(2, 32, 128, 264)]), Some(1));
    // More CTAs, but past one wave of it: not taken.
    assert_eq!(pick(&[c(1, 64, 128, 132), c(2, 64, 300, 264)]), Some(1));
    assert_eq!(pick(&[c(1, 64, 128, 132), c(2, 140, 280, 396)]), Some(1));
    // 28672 x 4096: 224 output tiles fit neither (more than one per SM): the last.
    assert_eq!(pick(&[c(1, 224, 224, 132), c(2, 224, 224, 264)]), Some(2));
    assert_eq!(
        pick(&[c(3, 224, 224, 264), c(1, 64, 100, 132), c(2, 64, 90, 264)]),
        Some(1)
    );
    assert_eq!(pick(&[c(4, 500, 500, 132)]), Some(4));
    assert_eq!(pick(&[]), None);
}

/// The kernel's stream-K schedule (`cuda/humming/gemm.cuh`, `Gemm::run`), replayed on the host: every
/// step of every tile is walked by exactly one CTA, the CTAs meeting in a tile are numbered 0, 1, ...
/// in K order, and no tile has more of them than `stream_k_splits` (the workspace's split slots).
#[test]
fn stream_k_schedule_covers_every_step_once() {
    use humming_runtime::cuda::plan::stream_k_splits;
    let t = TileConfig {
        block_m: 8,
        block_n: 128,
        block_k: 256,
        warp_m: 8,
        warp_n: 64,
        warp_k: 64,
        stages: 3,
        mma: Mma::Sync,
        ctas_per_sm: 2,
    };
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for case in 0..400 {
        let m = 1 + next(40) as usize;
        let n = 128 * (1 + next(12) as usize) - if case % 3 == 0 { 64 } else { 0 };
        let k = 64 * (1 + next(80) as usize);
        let steps = k.div_ceil(256) as i64;
        let tiles = (n.div_ceil(128) * m.div_ceil(8)) as i64;
        let total = tiles * steps;
        if total < 2 {
            continue;
        }
        let g = 2 + next(total as u64 - 1) as i64; // 2..=total
        let bound = stream_k_splits(&t, m, n, k, g as usize) as i64;
        let owner = |x: i64| ((x + 1) * g - 1) / total;
        let mut seen = vec![0u32; total as usize];
        let mut splits_of = vec![(i64::MAX, -1i64); tiles as usize];
        for cta in 0..g {
            let (mut b, e) = (total * cta / g, total * (cta + 1) / g);
            assert!(e > b, "case {case}: CTA {cta} of {g} has no step");
            while b < e {
                let tile = b / steps;
                let t0 = tile * steps;
                let end = e.min(t0 + steps);
                let first = owner(t0);
                let split = cta - first;
                let splits = owner(t0 + steps - 1) - first + 1;
                assert!(
                    (0..splits).contains(&split) && splits <= bound,
                    "case {case}: M={m} N={n} K={k} G={g}: split {split} of {splits}, bound {bound}"
                );
                let s = &mut splits_of[tile as usize];
                *s = (s.0.min(split), s.1.max(split));
                assert!(owner(b) == cta && owner(end - 1) == cta);
                for x in b..end {
                    seen[x as usize] += 1;
                }
                b = end;
            }
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "case {case}: a step walked {seen:?}"
        );
        assert!(splits_of.iter().all(|&(lo, _)| lo == 0));
    }
}

#[test]
fn several_row_blocks_take_the_tile_of_least_work_per_sm() {
    let t = |bm: u16, bk: u16| TileConfig {
        block_m: bm,
        block_n: 128,
        block_k: bk,
        warp_m: bm,
        warp_n: if bm == 256 { 16 } else { 32 },
        warp_k: 64,
        stages: 4,
        mma: Mma::Wgmma,
        ctas_per_sm: 0,
    };
    let (big, half) = (t(256, 64), t(128, 64));
    let c = |index, tiles, splits, slots| WaveCandidate {
        index,
        tiles,
        ctas: tiles * splits,
        slots,
    };
    // 28672 x 4096, M = 384 on 132 SMs: 448 CTAs of one per SM (4 waves) against 672 of two per SM
    // (3 waves): 4 x 256 x 128 x 4096 against 3 x 2 x 128 x 128 x 4096 multiply-adds per SM.
    let a = c(7, 448, 1, 132);
    let b = c(3, 672, 1, 264);
    assert_eq!(wave_work(&a, &big, 4096, 132), 4 * 256 * 128 * 4096);
    assert_eq!(wave_work(&b, &half, 4096, 132), 3 * 2 * 128 * 128 * 4096);
    assert_eq!(least_wave_work(&[(a, big), (b, half)], 4096, 132), Some(3));
    // M = 512: 4 waves each, equal work: the first (the larger tile).
    let b = c(3, 896, 1, 264);
    assert_eq!(least_wave_work(&[(a, big), (b, half)], 4096, 132), Some(7));
    // K splits shorten each CTA's K: 4096 x 4096, M = 384, 2 splits of the 256-row tile (128 CTAs)
    // against 96 unsplit CTAs of (128, 128, 128): equal work.
    let a = c(7, 64, 2, 132);
    let b = c(4, 96, 1, 132);
    assert_eq!(
        wave_work(&a, &big, 4096, 132),
        wave_work(&b, &t(128, 128), 4096, 132)
    );
    assert_eq!(least_wave_work(&[], 4096, 132), None);
    // The whole choice on the default tiles, as a launch on 132 SMs makes it (split-K on, automatic
    // splits, CTAs per SM from the code generator's launch bounds): the launches measured on an H200.
    let s = spec("a: f16, b: i4, scale: group(128)");
    let tiles: Vec<(TileConfig, usize)> = humming_runtime::spec::tiles::tiles_of(&s)
        .into_iter()
        .map(|t| {
            let per_sm = humming_runtime::spec::resources::min_blocks_per_sm(&s, &t) as usize;
            (t, per_sm)
        })
        .collect();
    let launch = |m: usize, n: usize, k: usize| {
        let i = select_launch_tile(
            &tiles,
            |x| *x,
            132,
            (m, n, k),
            |t| {
                let per_sm = tiles.iter().find(|x| x.0 == *t).map_or(1, |x| x.1);
                humming_runtime::cuda::plan::choose_splits(t, m, n, k, 132, per_sm)
            },
        );
        let t = tiles[i].0;
        (t.block_m, t.block_k)
    };
    for (n, k) in [(4096, 4096), (8192, 8192), (28672, 4096), (4096, 14336)] {
        for m in [160, 192, 256, 512] {
            assert_eq!(launch(m, n, k), (256, 64), "{n} x {k}, M = {m}");
        }
        assert_eq!(launch(128, n, k).0, 128, "{n} x {k}, M = 128");
    }
    // 28672 x 4096, M = 384 and 640: the two-CTA (128, 128, 64) tile (193.2 -> 153.8, 290.3 -> 276.8 us).
    assert_eq!(launch(384, 28672, 4096), (128, 64));
    assert_eq!(launch(640, 28672, 4096), (128, 64));
    assert_eq!(launch(384, 8192, 8192), (256, 64));
    // An empty list, and a list whose largest tile is mma.sync: the rules of select_tile_index.
    let none: [(TileConfig, usize); 0] = [];
    assert_eq!(
        select_launch_tile(&none, |x| *x, 132, (5, 64, 64), |_| 1),
        0
    );
    let sync: Vec<(TileConfig, usize)> = tiles
        .iter()
        .copied()
        .filter(|x| x.0.mma == Mma::Sync)
        .collect();
    let i = select_launch_tile(&sync, |x| *x, 132, (1000, 4096, 4096), |_| 1);
    assert_eq!(sync[i].0.block_m, 64);
    // No CTAs or no slots: no work, no division by zero.
    assert_eq!(wave_work(&c(0, 0, 1, 132), &big, 4096, 132), 0);
    assert_eq!(wave_work(&c(0, 5, 1, 0), &big, 4096, 0), 0);
}

/// The loaded tiles of a kernel as the planner sees them on an H200-like device (occupancy from the
/// register and shared-memory model, every cluster size resident).
fn tile_infos(s: &KernelSpec) -> Vec<humming_runtime::cuda::TileInfo> {
    use humming_runtime::spec::resources::{atomic_split_k, min_blocks_per_sm, staged_epilogue};
    humming_runtime::spec::tiles::tiles_of(s)
        .into_iter()
        .map(|t| humming_runtime::cuda::TileInfo {
            tile: t,
            ctas_per_sm: min_blocks_per_sm(s, &t) as usize,
            staged: staged_epilogue(s, &t),
            atomic: atomic_split_k(s, &t),
            max_clusters: [132; 9],
        })
        .collect()
}

/// One LaunchPlan per launch: tile, splits, how they are summed and the buffers that takes.
#[test]
fn launch_plans() {
    use humming_runtime::cuda::plan::{DeviceInfo, plan_launch};
    use humming_runtime::cuda::{DependentTrigger, KReduction, LaunchOptions, Reduction, SplitK};
    use std::num::NonZeroUsize;
    let s = spec("a: f16, b: i4, scale: group(128)");
    let tiles = tile_infos(&s);
    let h200 = DeviceInfo {
        sms: 132,
        capability: 90,
    };
    let auto = LaunchOptions::default();
    let plan = |o: &LaunchOptions, m, n, k| plan_launch(&tiles, &h200, o, (m, n, k));

    // M = 1, 8192 x 8192: the 8-row tile, 64 output tiles x 4 splits = 256 CTAs, summed in split order
    // through the partials of every split (the default).
    let p = plan(&auto, 1, 8192, 8192);
    assert_eq!((p.tile.block_m, p.splits, p.ctas), (8, 4, 256));
    assert_eq!(p.reduction, KReduction::Ordered);
    assert_eq!((p.workspace_floats, p.tickets), (4 * 64 * 8 * 128, 64));
    assert!(p.programmatic && p.stream_k.is_none());
    // f16 atomics where asked for: more CTAs than SMs on compute capability 9.x; lock words only.
    let f16 = LaunchOptions {
        reduction: Reduction::AtomicF16,
        ..auto
    };
    let p = plan(&f16, 1, 8192, 8192);
    assert_eq!(p.reduction, KReduction::Atomic);
    assert_eq!((p.workspace_floats, p.tickets), (0, 64));
    // 4096 x 4096: 32 tiles x 4 splits, one wave of single CTAs: ordered even with f16 atomics asked.
    let p = plan(&f16, 1, 4096, 4096);
    assert_eq!((p.splits, p.reduction), (4, KReduction::Ordered));
    // Not on compute capability 8.x (where the 8-row tile's atomics were not measured).
    let a100 = DeviceInfo {
        sms: 108,
        capability: 80,
    };
    let p = plan_launch(&tiles, &a100, &f16, (1, 8192, 8192));
    assert_ne!(p.reduction, KReduction::Atomic);
    assert!(!p.programmatic);
    // No split: nothing to sum, no buffers.
    let off = LaunchOptions {
        split_k: SplitK::Off,
        ..auto
    };
    let p = plan(&off, 1, 8192, 8192);
    assert_eq!((p.splits, p.reduction, p.tickets), (1, KReduction::None, 0));
    // Pinned splits, clamped to the K steps (4096 / 256 = 16).
    let fixed = |n| LaunchOptions {
        split_k: SplitK::Fixed(NonZeroUsize::new(n).unwrap()),
        ..auto
    };
    assert_eq!(plan(&fixed(3), 1, 576, 4096).splits, 3);
    assert_eq!(plan(&fixed(40), 1, 576, 4096).splits, 16);
    // Stream-K on the 8-row tile: ordered in K order, at least two CTAs.
    let sk = LaunchOptions {
        stream_k: NonZeroUsize::new(100),
        ..auto
    };
    let p = plan(&sk, 1, 8192, 8192);
    assert_eq!(p.stream_k, Some(100));
    assert_eq!(p.reduction, KReduction::Ordered);
    assert_eq!(p.ctas, 100);
    // M = 64 on a wgmma tile with K splits: a cluster where every cluster fits; f16 atomics if asked.
    let p = plan(&auto, 64, 8192, 8192);
    assert_eq!(p.tile.mma, Mma::Wgmma);
    assert!(p.splits > 1);
    assert!(matches!(
        p.reduction,
        KReduction::Cluster | KReduction::Ordered
    ));
    assert_eq!(plan(&f16, 64, 8192, 8192).reduction, KReduction::Atomic);
    // bf16 C, a bias and a fused epilogue keep the ordered reduction even with f16 atomics asked.
    for other in [
        "a: bf16, b: i4, scale: group(128)",
        "a: f16, b: i4, scale: group(128), bias: true",
        "a: f16, b: i4, scale: group(128), epilogue: gelu",
    ] {
        let t = tile_infos(&spec(other));
        let p = plan_launch(&t, &h200, &f16, (1, 8192, 8192));
        assert_eq!(p.reduction, KReduction::Ordered, "{other}");
    }
    // The dependent trigger: at the start for the two-CTA 16-row tile of a launch of more CTAs than
    // SMs, after the main loop otherwise, as asked when pinned, never without programmatic launch.
    let p = plan(&auto, 16, 8192, 8192);
    assert_eq!((p.tile.block_m, p.tile.ctas_per_sm), (16, 2));
    assert!(p.early_trigger);
    assert!(!plan(&auto, 1, 4096, 4096).early_trigger);
    let late = LaunchOptions {
        dependent_trigger: DependentTrigger::AfterMainLoop,
        ..auto
    };
    assert!(!plan(&late, 16, 8192, 8192).early_trigger);
    let no_pdl = LaunchOptions {
        programmatic_launch: false,
        dependent_trigger: DependentTrigger::AtStart,
        ..auto
    };
    let p = plan(&no_pdl, 16, 8192, 8192);
    assert!(!p.programmatic && !p.early_trigger);
}

/// Persistent (`wgmma_ss`) tiles: the tile and splits of `select_persistent`, summed in split order
/// through the workspace, at most one CTA per SM.
#[test]
fn persistent_launch_plans() {
    use humming_runtime::cuda::plan::{DeviceInfo, plan_launch};
    use humming_runtime::cuda::{KReduction, LaunchOptions, SplitK};
    use std::num::NonZeroUsize;
    let s = spec(
        "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 256, 128), stages = 4, mma = wgmma_ss)]",
    );
    let tiles = tile_infos(&s);
    let h200 = DeviceInfo {
        sms: 132,
        capability: 90,
    };
    let auto = LaunchOptions::default();
    let plan = |o: &LaunchOptions, m, n, k| plan_launch(&tiles, &h200, o, (m, n, k));
    // M = 1, 8192 x 8192: 64 output tiles x 2 splits, ordered.
    let p = plan(&auto, 1, 8192, 8192);
    assert_eq!((p.tile.block_m, p.splits, p.ctas), (16, 2, 128));
    assert_eq!(p.reduction, KReduction::Ordered);
    assert_eq!((p.workspace_floats, p.tickets), (2 * 64 * 16 * 128, 64));
    // M = 4096: 32 x 32 tiles of 128 x 256, no split, one CTA per SM.
    let p = plan(&auto, 4096, 8192, 8192);
    assert_eq!(
        (p.tile.block_m, p.tile.block_n, p.splits, p.ctas),
        (128, 256, 1, 132)
    );
    assert_eq!(
        (p.reduction, p.workspace_floats, p.tickets),
        (KReduction::None, 0, 0)
    );
    // Splits off, or fixed (clamped to the K steps: 512 / 128 = 4).
    let off = LaunchOptions {
        split_k: SplitK::Off,
        ..auto
    };
    assert_eq!(plan(&off, 1, 8192, 8192).splits, 1);
    let fixed = LaunchOptions {
        split_k: SplitK::Fixed(NonZeroUsize::new(9).unwrap()),
        ..auto
    };
    let p = plan(&fixed, 1, 256, 512);
    assert_eq!((p.splits, p.ctas, p.reduction), (4, 8, KReduction::Ordered));
}
