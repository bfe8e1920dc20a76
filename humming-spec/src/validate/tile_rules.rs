//! The rules of a tile configuration: the `mma.sync` kernel's shapes, the `wgmma` kernel's, and
//! what one SM holds (shared memory, registers, CTAs).

use super::{Errors, TileSpans};
use crate::dtype::DType;
use crate::model::*;

pub(super) fn check_tile(t: &TileConfig, a: DType, sp: &TileSpans, errs: &mut Errors) {
    if t.mma != Mma::Sync {
        // Its own, stricter rules, with messages that name them (check_wgmma_tile).
        return;
    }
    let dims = [
        (t.block_m, t.warp_m, "M"),
        (t.block_n, t.warp_n, "N"),
        (t.block_k, t.warp_k, "K"),
    ];
    for (i, (b, w, name)) in dims.into_iter().enumerate() {
        if b % w != 0 {
            errs.push(
                sp.block[i],
                format!("block {name} ({b}) must be a multiple of warp {name} ({w})"),
            );
            return;
        }
        if !(b / w).is_power_of_two() {
            errs.push(
                sp.block[i],
                format!(
                    "block {name} / warp {name} = {} must be a power of two",
                    b / w
                ),
            );
        }
    }
    for (v, name, span) in [
        (t.block_n, "block N", sp.block[1]),
        (t.block_k, "block K", sp.block[2]),
        (t.warp_n, "warp N", sp.warp[1]),
        (t.warp_k, "warp K", sp.warp[2]),
    ] {
        if !v.is_power_of_two() {
            errs.push(span, format!("{name} ({v}) must be a power of two"));
        }
    }
    if !t.warp_n.is_multiple_of(16) || t.warp_n > 64 {
        errs.push(
            sp.warp[1],
            format!(
                "warp N ({}) must be a multiple of 16 and at most 64",
                t.warp_n
            ),
        );
    }
    let (min_n, min_k) = match a.bits() {
        16 => (32, 32),
        8 => (16, 64),
        _ => (16, 128),
    };
    if t.warp_n < min_n || t.warp_k < min_k {
        let span = if t.warp_n < min_n {
            sp.warp[1]
        } else {
            sp.warp[2]
        };
        errs.push(span, format!("with {}-bit activations the warp tile needs N >= {min_n} and K >= {min_k}; found N = {}, K = {}", a.bits(), t.warp_n, t.warp_k));
    }
    if t.block_m > 256 {
        errs.push(
            sp.block[0],
            format!("block M ({}) must be at most 256", t.block_m),
        );
    }
    if !t.warp_m.is_multiple_of(8) {
        errs.push(
            sp.warp[0],
            format!("warp M ({}) must be a multiple of 8", t.warp_m),
        );
    }
    if (t.block_k as u32) * a.bits() < 512 {
        errs.push(
            sp.block[2],
            format!(
                "block K ({}) x {} bits must be at least 512 bits (64-byte rows of A)",
                t.block_k,
                a.bits()
            ),
        );
    }
    // In u64: `TileConfig::threads` (u32) overflows for absurd tiles such as warp (1, 1, 1).
    let threads = [
        (t.block_m, t.warp_m),
        (t.block_n, t.warp_n),
        (t.block_k, t.warp_k),
    ]
    .iter()
    .map(|&(b, w)| (b / w) as u64)
    .product::<u64>()
        * 32;
    if threads > 1024 {
        errs.push(
            sp.tile,
            format!("this tile needs {threads} threads per CTA; at most 1024"),
        );
    }
    if !(2..=8).contains(&t.stages) {
        errs.push(
            sp.stages,
            format!("stages ({}) must be between 2 and 8", t.stages),
        );
    }
}

/// The most `block_m x warp_n` of a `wgmma` tile: each thread keeps `block_m * warp_n / 32` f32
/// accumulators, at most 128 (the default warp N of `parse_tile` and `check_wgmma_tile` both obey it).
pub(super) const WGMMA_MAX_M_X_WARP_N: u32 = 4096;

/// Rules of a `wgmma` tile: one or two warpgroups (four warps each) along N per 64 of `block_k` (one
/// or two); every warp covers all `block_m` rows and `warp_n` = 64 channels (one packed unit), 32
/// (half a unit) or 16 (a quarter: block M up to 256), so `block_n = 4 * warp_n` or `8 * warp_n` (two warpgroups share each A tile); `block_m` a multiple of 8 with `block_m * warp_n <= 4096`
/// (each thread keeps `block_m * warp_n / 32` f32 accumulators, at most 128); 3 to 6 stages (a stage
/// is refilled two steps after it was read, while the last `wgmma` on it may still run); the
/// declaration's `arch` must include `sm_90a`, the only target with `wgmma`.
pub(super) fn check_wgmma_tile(
    spec: &KernelSpec,
    t: &TileConfig,
    span: &TileSpans,
    errs: &mut Errors,
) {
    let mut ok = true;
    if !spec.archs.contains(Arch::Sm90a) {
        errs.push(
            span.mma,
            "`mma = wgmma` needs `sm_90a` in `arch` (wgmma exists on sm_90a only)",
        );
    }
    if t.warp_m != t.block_m || !matches!(t.warp_n, 16 | 32 | 64) || t.warp_k != 64 {
        let at = if t.warp_m != t.block_m {
            span.warp[0]
        } else if !matches!(t.warp_n, 16 | 32 | 64) {
            span.warp[1]
        } else {
            span.warp[2]
        };
        errs.push(
            at,
            format!(
                "in a wgmma tile every warp covers all block M rows, 64, 32 or 16 channels and 64 of K: warp must be ({}, 64, 32 or 16, 64), found ({}, {}, {})",
                t.block_m, t.warp_m, t.warp_n, t.warp_k
            ),
        );
        return;
    }
    if t.block_n != 4 * t.warp_n && t.block_n != 8 * t.warp_n {
        ok = false;
        errs.push(
            span.block[1],
            format!(
                "a wgmma tile has one or two warpgroups of four warps along N: block N must be {} or {} (4 or 8 x warp N), found {}",
                4 * t.warp_n,
                8 * t.warp_n,
                t.block_n
            ),
        );
    }
    if !matches!(t.block_k, 64 | 128) {
        ok = false;
        errs.push(
            span.block[2],
            format!(
                "a wgmma tile has one warpgroup per 64 of block K, one or two: block K must be 64 or 128, found {}",
                t.block_k
            ),
        );
    }
    if !t.block_m.is_multiple_of(8) || t.block_m as u32 * t.warp_n as u32 > WGMMA_MAX_M_X_WARP_N {
        ok = false;
        errs.push(
            span.block[0],
            format!(
                "a wgmma tile needs block M a multiple of 8 and at most {} with warp N = {} (block M x warp N / 32 f32 accumulators per thread, at most 128); found {}",
                WGMMA_MAX_M_X_WARP_N / t.warp_n as u32,
                t.warp_n,
                t.block_m
            ),
        );
    }
    if !(3..=6).contains(&t.stages) {
        errs.push(
            span.stages,
            format!("a wgmma tile needs 3 to 6 stages; found {}", t.stages),
        );
    }
    // Shared memory only for a tile that passed the rules above (their extents bound the sizes).
    let smem = if ok {
        crate::resources::smem_bytes(spec, t)
    } else {
        0
    };
    check_tile_smem(smem, span, errs);
}

/// Rules of a persistent (`wgmma_ss`) tile: a kernel the persistent kernel serves
/// ([`crate::tiles::persistent_allowed`]) with `sm_90a` among its targets; block (M, N, 128) with M a
/// wgmma N ([`crate::tiles::PERSISTENT_BLOCK_M`]) and N = 2 x warp N (or = warp N, dense only); warp (block M, 64 or 128, 128):
/// two consumer warpgroups; at most 128 f32 accumulators per thread (64 per set with block scales, which
/// keep two); block scales' N extent a multiple of warp N (one block scale per warpgroup); 2 to 16
/// stages; one CTA per SM; within the shared memory of a CTA.
pub(super) fn check_persistent_tile(
    spec: &KernelSpec,
    t: &TileConfig,
    span: &TileSpans,
    errs: &mut Errors,
) {
    if !spec.archs.contains(Arch::Sm90a) {
        errs.push(
            span.mma,
            "`mma = wgmma_ss` needs `sm_90a` in `arch` (wgmma exists on sm_90a only)",
        );
    }
    if !crate::tiles::persistent_allowed(spec) {
        errs.push(
            span.mma,
            format!(
                "`mma = wgmma_ss` tiles are generated for {}; this kernel (`a: {}, b: {}`) is not one",
                crate::tiles::PERSISTENT_FORMS,
                spec.a,
                spec.b
            ),
        );
        return;
    }
    let bk = crate::tiles::PERSISTENT_BLOCK_K;
    if t.block_k != bk {
        errs.push(
            span.block[2],
            format!("a wgmma_ss tile takes {bk} codes of K per stage (one 128-byte swizzle row): block K must be {bk}, found {}", t.block_k),
        );
        return;
    }
    if t.warp_m != t.block_m || !matches!(t.warp_n, 64 | 128) || t.warp_k != bk {
        let at = if t.warp_m != t.block_m {
            span.warp[0]
        } else if !matches!(t.warp_n, 64 | 128) {
            span.warp[1]
        } else {
            span.warp[2]
        };
        errs.push(
            at,
            format!(
                "a wgmma_ss tile's consumer warpgroups each cover all block M rows and 64 or 128 channels: warp must be ({}, 64 or 128, {bk}), found ({}, {}, {})",
                t.block_m, t.warp_m, t.warp_n, t.warp_k
            ),
        );
        return;
    }
    if t.block_n != 2 * t.warp_n && t.block_n != t.warp_n {
        errs.push(
            span.block[1],
            format!(
                "a wgmma_ss tile's two consumer warpgroups share a tile along N (block N = 2 x warp N = {}) or take turns on tiles of their own (block N = warp N = {}); found block N {}",
                2 * t.warp_n,
                t.warp_n,
                t.block_n
            ),
        );
        return;
    }
    if spec.layout.is_moe() && t.block_n == t.warp_n {
        errs.push(
            span.block[1],
            format!(
                "a `{}` wgmma_ss tile is cooperative: block N = 2 x warp N = {}, found {}",
                spec.layout.name(),
                2 * t.warp_n,
                t.block_n
            ),
        );
        return;
    }
    if !crate::tiles::PERSISTENT_BLOCK_M.contains(&t.block_m) {
        errs.push(
            span.block[0],
            format!(
                "a wgmma_ss tile's block M is the N of its wgmma: one of {:?}, found {}",
                crate::tiles::PERSISTENT_BLOCK_M,
                t.block_m
            ),
        );
        return;
    }
    let promote = crate::tiles::persistent_promotes(spec);
    let accumulators = crate::tiles::persistent_accumulators(t, promote);
    if accumulators > 128 {
        errs.push(
            span.block[0],
            format!(
                "this wgmma_ss tile keeps {accumulators} accumulators per thread (block M x warp N / 128{}); at most 128",
                if promote { ", twice with block or group scales: each stage's sums are promoted" } else { "" }
            ),
        );
    }
    if let ScaleGranularity::Block { n, .. } = spec.scale.granularity
        && n % t.warp_n as u32 != 0
    {
        errs.push(
            span.warp[1],
            format!("a wgmma_ss warpgroup's {} channels take one block scale per stage: the block's N extent ({n}) must be a multiple of warp N", t.warp_n),
        );
    }
    if !(2..=16).contains(&t.stages) {
        errs.push(
            span.stages,
            format!("a wgmma_ss tile needs 2 to 16 stages; found {}", t.stages),
        );
    }
    if t.ctas_per_sm > 1 {
        errs.push(
            span.ctas,
            "a wgmma_ss tile runs one persistent CTA per SM: drop `ctas_per_sm` or set it to 1",
        );
    }
    check_tile_smem(crate::resources::smem_bytes(spec, t), span, errs);
}

/// `ctas_per_sm` (when given, on a tile that passed every other rule): the registers it leaves each
/// thread, `65536 / (threads * ctas_per_sm)` (for a tile with a producer warpgroup, what the
/// warpgroup hands the compute warps: [`crate::resources::consumer_registers`]), must cover the tile's
/// accumulators and working set ([`crate::resources::min_registers`]), and that many CTAs must fit the shared memory of one
/// multiprocessor of every target ([`crate::resources::ctas_fit`]).
pub(super) fn check_tile_occupancy(
    spec: &KernelSpec,
    t: &TileConfig,
    span: &TileSpans,
    errs: &mut Errors,
) {
    if t.ctas_per_sm == 0 {
        return;
    }
    let c = t.ctas_per_sm as u32;
    // With a producer warpgroup the compute warps get the registers it gives back (setmaxnreg).
    let regs = if t.producer_warpgroup() {
        crate::resources::consumer_registers(spec, t)
    } else {
        65536 / (t.threads().max(1) * c)
    };
    let need = crate::resources::min_registers(t);
    if regs < need {
        errs.push(
            span.ctas,
            format!(
                "ctas_per_sm = {c} leaves {regs} registers per thread ({} threads per CTA); this tile needs at least {need}",
                t.threads()
            ),
        );
    }
    if let Err(per_sm) = crate::resources::ctas_fit(spec, t) {
        errs.push(
            span.ctas,
            format!(
                "ctas_per_sm = {c}: {c} CTAs of {} bytes of shared memory (plus {} static and 1 KiB reserved each) exceed the {per_sm} bytes of a multiprocessor of this kernel's targets",
                crate::resources::smem_bytes(spec, t),
                crate::abi::STATIC_SMEM_BYTES
            ),
        );
    }
}

/// A tile's dynamic shared memory (`smem` bytes, from [`crate::resources::smem_bytes`]) must fit one
/// CTA's limit beside the kernel's static shared memory.
pub(super) fn check_tile_smem(smem: u32, span: &TileSpans, errs: &mut Errors) {
    if smem > crate::resources::MAX_TILE_SMEM_BYTES {
        errs.push(
            span.tile,
            format!(
                "this tile needs {smem} bytes of shared memory; at most {} (227 KiB less {} of static shared memory)",
                crate::resources::MAX_TILE_SMEM_BYTES,
                crate::abi::STATIC_SMEM_BYTES
            ),
        );
    }
}
