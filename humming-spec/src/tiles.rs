//! The tile catalogue: which tile configurations a kernel is compiled with ([`tiles_of`]) and which
//! one a launch of M rows takes ([`select_launch_tile`]). The two belong together: each default tile
//! exists for the launches the selection rule gives it. The numbers behind each choice are in
//! `perf/HISTORY.md`.

use crate::DType;
use crate::model::*;
use crate::resources::ctas_fit;

/// The default tile configurations, in selection order, for a kernel that declares none.
///
/// - `mma.sync`, "swap AB" (weights as the mma's A operand, group scales on the f32 accumulators):
///   (8, 128, 256) for M <= 8; (16, 128, 256) for M <= 16, compiled twice, for one CTA per SM and
///   for two (`ctas_per_sm = 2`: left out by [`tiles_of`] where two do not fit the smallest SM among
///   the targets).
/// - `mma.sync` (32, 128, 128) and (64, 128, 128): M > 16 where there is no `wgmma`.
/// - `wgmma` (sm_90a), each with a producer warpgroup: (32, 256, 128) and (32, 128, 128) (warps of 32
///   channels: half the K splits where N is small); (64, 128, 128) (two warpgroups along K, one CTA
///   per SM) and (64, 256, 128); (128, 128, 128) (two warpgroups along K, one CTA per SM) and
///   (128, 128, 64) (two CTAs per SM); (256, 128, 64) (warps of 16 channels, two warpgroups along N,
///   one CTA per SM) for M > 128.
pub fn default_tiles(archs: ArchSet) -> Vec<TileConfig> {
    let t = |bm, bn, bk, wm, wn, st, mma| TileConfig {
        block_m: bm,
        block_n: bn,
        block_k: bk,
        warp_m: wm,
        warp_n: wn,
        warp_k: 64,
        stages: st,
        mma,
        ctas_per_sm: 0,
    };
    let mut tiles = vec![
        t(8, 128, 256, 8, 64, 3, Mma::Sync),
        t(16, 128, 256, 16, 64, 3, Mma::Sync),
        TileConfig {
            ctas_per_sm: 2,
            ..t(16, 128, 256, 16, 64, 3, Mma::Sync)
        },
        t(32, 128, 128, 32, 64, 4, Mma::Sync),
        t(64, 128, 128, 32, 64, 4, Mma::Sync),
    ];
    if archs.contains(Arch::Sm90a) {
        tiles.extend([
            t(32, 256, 128, 32, 64, 4, Mma::Wgmma),
            t(32, 128, 128, 32, 32, 4, Mma::Wgmma),
            t(64, 128, 128, 64, 32, 4, Mma::Wgmma),
            t(64, 256, 128, 64, 64, 4, Mma::Wgmma),
            t(128, 128, 128, 128, 32, 4, Mma::Wgmma),
            t(128, 128, 64, 128, 32, 4, Mma::Wgmma),
            t(256, 128, 64, 256, 16, 4, Mma::Wgmma),
        ]);
    }
    tiles
}

/// The default tiles of 8-bit activations, in selection order: their main loop runs on swap-AB warps
/// of 8 or 16 rows, so the tiles of more rows stack such warps along M (each dequantizes its channels'
/// weights, which the CTA reads from DRAM once for all its rows):
///
/// [`default_tiles`]' (8, 128, 256), (16, 128, 256) and its two-CTA twin, then the stacked tiles
/// ([`act8_stacked_tiles`]).
pub fn act8_default_tiles(archs: ArchSet) -> Vec<TileConfig> {
    default_tiles(archs)
        .into_iter()
        .filter(|t| t.mma == Mma::Sync && t.warp_m <= 16)
        .chain(act8_stacked_tiles())
        .collect()
}

/// The tiles of 8-bit activations that stack 16-row swap-AB warps along M: (32, 128, 128) (two warps
/// along M and two along K), (64, 128, 64) (four along M) and (128, 64, 64) (eight along M, one
/// 64-channel warp along N).
fn act8_stacked_tiles() -> [TileConfig; 3] {
    let t = |bm: u16, bn: u16, bk: u16| TileConfig {
        block_m: bm,
        block_n: bn,
        block_k: bk,
        warp_m: 16,
        warp_n: 64,
        warp_k: 64,
        stages: 4,
        mma: Mma::Sync,
        ctas_per_sm: 0,
    };
    [t(32, 128, 128), t(64, 128, 64), t(128, 64, 64)]
}

/// The default tiles of a MoE layout under 8-bit activations: [`moe_default_tiles`]' swap-AB tiles of 8
/// and 16 rows, then [`act8_default_tiles`]' stacked tiles of 32 and 64 rows (block M of at most 64, as
/// the 16-bit MoE tiles).
pub fn act8_moe_tiles(archs: ArchSet) -> Vec<TileConfig> {
    moe_default_tiles(archs)
        .into_iter()
        .filter(|t| t.mma == Mma::Sync && t.warp_m <= 16)
        .chain(act8_stacked_tiles().into_iter().filter(|t| t.block_m <= 64))
        .collect()
}

/// Whether a kernel of 8-bit activations has `wgmma` tiles (dense): W8A8 FP8 (float weights in A's
/// own code) under channel or tensor scales, whose codes are the wgmma operand as they are; W4A8 FP8
/// (4-bit integer codes under e4m3), whose codes become e4m3 normalized integers; and W8A8 FP8 block
/// scales. The last two promote their partial sums ([`act8_wgmma_promotes`]).
pub fn act8_wgmma_allowed(spec: &KernelSpec) -> bool {
    spec.layout == Layout::Dense
        && ((spec.a.is_float() && spec.b == spec.a && !crate::layout::scale_on_b(spec))
            || act8_wgmma_promotes(spec))
}

/// `wgmma` with promotion: every warpgroup slice (64 deep) is summed in a second accumulator set and
/// promoted into the f32 accumulators under its scales. W4A8 FP8 (channel or tensor scales, or groups
/// of 64 or more: one group per slice), and W8A8 FP8 with block scales (the weight block's and the
/// activation group's, [`crate::layout::act_scale_group`]).
pub fn act8_wgmma_promotes(spec: &KernelSpec) -> bool {
    let w4a8 = spec.a == DType::E4M3
        && matches!(spec.b, DType::UInt { bits: 4 } | DType::SInt { bits: 4 })
        && !matches!(spec.scale.granularity, ScaleGranularity::Group { size } if size < 64);
    let w8a8_block =
        spec.a.is_float() && spec.b == spec.a && crate::layout::act_scale_group(spec) >= 64;
    w4a8 || w8a8_block
}

/// Whether `wgmma` tile `t` fits a kernel of 8-bit activations: with promotion the two accumulator
/// sets, block M / 2 x warp N / 16 floats each per thread, hold at most 64 floats each.
pub fn act8_wgmma_tile_fits(spec: &KernelSpec, t: &TileConfig) -> bool {
    !act8_wgmma_promotes(spec) || (t.block_m as u32 / 2) * (t.warp_n as u32 / 16) <= 64
}

/// The `wgmma` tiles of an [`act8_wgmma_allowed`] kernel (sm_90a): [`default_tiles`]' `wgmma` tiles of
/// 64 rows and more (the 8-bit A tile comes by TMA as the 16-bit one does) that
/// [`act8_wgmma_tile_fits`]; with promotion also (128, 128, 64) in warps of 16 channels.
pub fn act8_wgmma_tiles(spec: &KernelSpec) -> Vec<TileConfig> {
    let mut tiles: Vec<TileConfig> = default_tiles(ArchSet(Arch::Sm90a.bit()))
        .into_iter()
        .filter(|t| t.mma == Mma::Wgmma && t.block_m >= 64 && act8_wgmma_tile_fits(spec, t))
        .collect();
    if act8_wgmma_promotes(spec) {
        // 128 rows in warps of 16 channels (two warpgroups along N, m64n128k32 steps): the two
        // accumulator sets fit, and launches of more than 64 rows keep to wgmma.
        tiles.push(TileConfig {
            block_m: 128,
            block_n: 128,
            block_k: 64,
            warp_m: 128,
            warp_n: 16,
            warp_k: 64,
            stages: 4,
            mma: Mma::Wgmma,
            ctas_per_sm: 0,
        });
    }
    tiles
}

/// Whether a kernel may have persistent (`wgmma_ss`) tiles: dense or `moe_indexed` (A's codes
/// gathered by slot), 8-bit activations (e4m3, e5m2 or
/// i8), no gated epilogue, and either W8A8 (weights in A's own 8-bit code, both operands in shared
/// memory) under channel or tensor scales or, for float codes, block scales of K extent 128 (one
/// promotion per stage) and an N extent a multiple of 64; or W4A8 (`i4` / `u4` weights without zero
/// points, widened in registers under e4m3 or i8) under channel or tensor scales or group scales of 128
/// without a secondary scale.
pub fn persistent_allowed(spec: &KernelSpec) -> bool {
    // Channel and tensor scales reach the epilogue; the promoted ones differ per form.
    let g = spec.scale.granularity;
    let per_channel = matches!(g, ScaleGranularity::Channel | ScaleGranularity::Tensor)
        && !crate::layout::scale_on_b(spec);
    let w8a8 = spec.b == spec.a
        && (per_channel
            || matches!(g, ScaleGranularity::Block { n, k }
                if spec.a.is_float() && k == PERSISTENT_BLOCK_K as u32 && n % 64 == 0));
    let w4a8 = matches!(spec.b, DType::SInt { bits: 4 } | DType::UInt { bits: 4 })
        && (spec.a == DType::SInt { bits: 8 } || spec.a == DType::E4M3)
        && spec.zero_point == ZeroPoint::None
        && (per_channel
            || matches!(g, ScaleGranularity::Group { size }
                if size == u32::from(PERSISTENT_BLOCK_K) && spec.scale2.is_none()));
    matches!(spec.layout, Layout::Dense | Layout::MoeIndexed)
        && crate::layout::is_8bit_activation(spec.a)
        && !spec.epilogue.is_glu()
        && (w8a8 || w4a8)
}

/// What [`persistent_allowed`] admits, in the words of the refusals that name it.
pub const PERSISTENT_FORMS: &str = "dense or `moe_indexed` W8A8 (weights in A's own 8-bit code) under channel or tensor scales, or float codes under block scales of K extent 128 and N extent a multiple of 64; or W4A8 (`i4` / `u4` weights without zero points under `e4m3` or `i8`) under channel, tensor or group(128) scales; without a gated epilogue";

/// Whether a persistent kernel promotes each stage's sums into f32 accumulators through a second
/// accumulator set: block scales (times the rows' group scales) and group scales of 4-bit weights.
pub fn persistent_promotes(spec: &KernelSpec) -> bool {
    crate::layout::act_scale_group(spec) > 0
        || matches!(spec.scale.granularity, ScaleGranularity::Group { .. })
}

/// Codes per stage of a persistent tile: one 128-byte swizzle row.
pub const PERSISTENT_BLOCK_K: u16 = 128;

/// The rows of a persistent tile: the wgmma N of the generated wrappers (`dev/gen-wgmma.py`, `SS_N`).
pub const PERSISTENT_BLOCK_M: [u16; 7] = [8, 16, 32, 64, 128, 192, 256];

/// A persistent tile of `bm` rows and `bn` channels on two cooperative consumer warpgroups.
const fn cooperative_tile(bm: u16, bn: u16, stages: u8) -> TileConfig {
    TileConfig {
        block_m: bm,
        block_n: bn,
        block_k: PERSISTENT_BLOCK_K,
        warp_m: bm,
        warp_n: bn / 2,
        warp_k: PERSISTENT_BLOCK_K,
        stages,
        mma: Mma::WgmmaSs,
        ctas_per_sm: 0,
    }
}

/// The persistent tiles of a [`persistent_allowed`] kernel, in selection order: (16, 128) and (64, 128)
/// for launches of up to 16 and 64 rows (their K splits fill the SMs), (128, 128) and, without
/// promotion, (128, 256) for more (4-bit weights: more stages); two consumer warpgroups of `block_n / 2` channels each, as many
/// stages as fit. Block scales promote each stage's sums through a second accumulator set, which
/// halves the rows x channels a warpgroup may hold.
pub fn persistent_tiles(spec: &KernelSpec) -> Vec<TileConfig> {
    if spec.layout.is_moe() {
        return persistent_moe_tiles(spec);
    }
    let t = cooperative_tile;
    if spec.b.bits() == 4 {
        // (Half the bytes of weights per stage: more stages fit.)
        let mut v = vec![t(16, 128, 8), t(64, 128, 8), t(128, 128, 7)];
        if !persistent_promotes(spec) {
            v.push(t(128, 256, 6));
        }
        v
    } else if persistent_promotes(spec) {
        vec![t(16, 128, 8), t(64, 128, 7), t(128, 128, 5)]
    } else {
        vec![t(16, 128, 8), t(64, 128, 8), t(128, 128, 6), t(128, 256, 4)]
    }
}

/// The persistent tiles of a `moe_indexed` kernel: one per block M of 16 to 128 (the routing's blocks;
/// the runtime's block-M rule picks one per launch), two cooperative warpgroups on 128 channels, or
/// for 4-bit weights at 32 and 64 rows on 256 (more weight blocks per stage under one wait and one
/// promotion), and as many stages as fit (a MoE launch at decode sizes streams weights).
pub fn persistent_moe_tiles(spec: &KernelSpec) -> Vec<TileConfig> {
    let t = cooperative_tile;
    if spec.b.bits() == 4 {
        vec![t(16, 128, 12), t(32, 256, 9), t(64, 256, 7), t(128, 128, 7)]
    } else {
        vec![t(16, 128, 10), t(32, 128, 8), t(64, 128, 7), t(128, 128, 5)]
    }
}

/// f32 accumulators per consumer thread of persistent tile `t`: warp N / 64 weight blocks x block M / 8
/// row chunks x 4, and twice that with promotion (`promote`).
pub const fn persistent_accumulators(t: &TileConfig, promote: bool) -> u32 {
    let one = (t.warp_n as u32 / 64) * (t.block_m as u32 / 8) * 4;
    if promote { 2 * one } else { one }
}

/// A persistent launch: the tile (an index into the caller's list) and the K splits of each output
/// tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistentChoice {
    /// Index of the tile in the caller's list.
    pub index: usize,
    /// K splits per output tile (1: none).
    pub splits: usize,
}

/// The tile and K splits of a persistent launch of `m` rows of `[n, k]` weights among `tiles` (`of`
/// gives each one's configuration) on `sms` multiprocessors: the smallest `block_m` that covers `m`
/// (else the largest); among those the widest `block_n` whose output tiles fill 90% of the SMs, else
/// the narrowest; then, where the output tiles fill fewer than 90% of the SMs, as many K splits as
/// bring them to about one per SM (at most `max_splits` and 16, each split at least 4 stages of K).
/// `None` for an empty list. Pure: no GPU needed.
pub fn select_persistent<L>(
    tiles: &[L],
    of: impl Fn(&L) -> TileConfig,
    sms: usize,
    (m, n, k): (usize, usize, usize),
    max_splits: usize,
) -> Option<PersistentChoice> {
    let bm = tiles
        .iter()
        .map(|l| of(l).block_m as usize)
        .filter(|&b| b >= m)
        .min()
        .or_else(|| tiles.iter().map(|l| of(l).block_m as usize).max())?;
    let fill = sms.saturating_mul(9).div_ceil(10).max(1);
    let count = |t: &TileConfig| output_tiles(t, m.max(1), n);
    let of_bm = || {
        tiles
            .iter()
            .map(&of)
            .enumerate()
            .filter(move |(_, t)| t.block_m as usize == bm)
    };
    let (index, t) = of_bm()
        .filter(|(_, t)| count(t) >= fill)
        .max_by_key(|(i, t)| (t.block_n, std::cmp::Reverse(*i)))
        .or_else(|| of_bm().min_by_key(|(i, t)| (t.block_n, *i)))?;
    let out = count(&t).max(1);
    let steps = k.div_ceil(PERSISTENT_BLOCK_K as usize);
    let splits = if out >= fill {
        1
    } else {
        (sms / out).min(steps / 4).min(16).min(max_splits).max(1)
    };
    Some(PersistentChoice { index, splits })
}

/// The default tiles of a MoE layout, in selection order. A MoE launch has few rows per expert and
/// a short K per tile, so its tiles run two to four CTAs per SM, which hide each other's pipeline
/// fill, barriers and epilogue:
///
/// - `mma.sync`: [`default_tiles`]' (8, 128, 256) of one CTA per SM, for launches of few CTAs;
///   (8, 128, 128) for four CTAs per SM and (16, 128, 128) for three; [`default_tiles`]'
///   (32, 128, 128) and (64, 128, 128) where there is no `wgmma`.
/// - `wgmma` (sm_90a) (32, 256, 64) for three CTAs per SM and (64, 256, 64) for two: 256 channels,
///   so that the rows of A are read by half as many CTAs. They gather the rows of A with cp.async
///   (no TMA box holds them), so they have no producer warpgroup.
pub fn moe_default_tiles(archs: ArchSet) -> Vec<TileConfig> {
    // The one-CTA mma.sync tiles of the dense defaults: the 8-row one, and those of 32 rows and more.
    let dense: Vec<TileConfig> = default_tiles(archs)
        .into_iter()
        .filter(|t| t.mma == Mma::Sync && t.ctas_per_sm == 0 && t.block_m != 16)
        .collect();
    let t = |bm: u16, bn: u16, bk: u16, wn: u16, st: u8, mma: Mma, c: u8| TileConfig {
        block_m: bm,
        block_n: bn,
        block_k: bk,
        warp_m: bm,
        warp_n: wn,
        warp_k: 64,
        stages: st,
        mma,
        ctas_per_sm: c,
    };
    let mut tiles = vec![dense[0]];
    tiles.extend([
        t(8, 128, 128, 64, 3, Mma::Sync, 4),
        t(16, 128, 128, 64, 4, Mma::Sync, 3),
    ]);
    tiles.extend_from_slice(&dense[1..]);
    if archs.contains(Arch::Sm90a) {
        tiles.extend([
            t(32, 256, 64, 64, 5, Mma::Wgmma, 3),
            t(64, 256, 64, 64, 5, Mma::Wgmma, 2),
        ]);
    }
    tiles
}

/// Whether a kernel may have `wgmma` tiles: not with a gated epilogue, which pairs channels c and
/// c + 8 of one thread's accumulators, which the `wgmma` tiles' staged epilogue does not hold
/// together. (A MoE layout's `wgmma` tiles have no producer warpgroup: [`moe_default_tiles`].)
pub fn wgmma_allowed(spec: &KernelSpec) -> bool {
    !spec.epilogue.is_glu()
}

/// The tile configurations a kernel is compiled with: the declared ones, or [`default_tiles`] for its
/// archs ([`moe_default_tiles`] for a MoE layout; their `mma.sync` tiles for W4A8 FP8,
/// [`crate::layout::act8_on_16bit_mma`]; [`act8_default_tiles`] or [`act8_moe_tiles`] for the other
/// 8-bit activations; on sm_90a [`act8_wgmma_tiles`], or for W8A8 FP8 block scales and W4A8 group
/// scales [`persistent_tiles`]) (a default tile compiled for several CTAs per SM only where they fit,
/// [`ctas_fit`]).
pub fn tiles_of(spec: &KernelSpec) -> Vec<TileConfig> {
    if spec.tiles.len == 0 {
        let tiles = if spec.layout.is_moe() {
            moe_default_tiles(spec.archs)
        } else {
            default_tiles(spec.archs)
        };
        let act8 = crate::layout::is_8bit_activation(spec.a);
        let mut tiles = if crate::layout::act8_on_16bit_mma(spec) {
            // The 16-bit mma.sync tiles (A converted in registers).
            tiles.into_iter().filter(|t| t.mma == Mma::Sync).collect()
        } else if act8 && spec.layout.is_moe() {
            act8_moe_tiles(spec.archs)
        } else if act8 {
            act8_default_tiles(spec.archs)
        } else {
            tiles
        };
        if act8 && spec.archs.contains(Arch::Sm90a) {
            // Promoted forms (block scales, W4A8 group scales) run on the persistent kernel (faster
            // from M = 16 up as measured), which then serves every launch on sm_90a (its own weight
            // layout), so its tiles replace the register-operand wgmma tiles there.
            if persistent_allowed(spec) && persistent_promotes(spec) {
                tiles.extend(persistent_tiles(spec));
            } else if act8_wgmma_allowed(spec) {
                tiles.extend(act8_wgmma_tiles(spec));
            }
        }
        tiles
            .into_iter()
            .filter(|t| t.mma == Mma::Sync || wgmma_allowed(spec))
            .filter(|t| ctas_fit(spec, t).is_ok())
            .collect()
    } else {
        spec.tiles.as_slice().to_vec()
    }
}

/// Output tiles of a launch of `m` rows and `n` channels (row tiles capped at 65535, a launch's
/// grid.y limit: longer M is launched in chunks).
pub fn output_tiles(t: &TileConfig, m: usize, n: usize) -> usize {
    n.div_ceil(t.block_n.max(1) as usize)
        .saturating_mul(m.div_ceil(t.block_m.max(1) as usize).min(65535))
}

/// One tile's launch, a candidate of the selection rules below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaveCandidate {
    /// Index of the tile in the caller's list (the tiles loaded on a device may be fewer than the
    /// kernel's entry points, e.g. no `wgmma` tile off Hopper).
    pub index: usize,
    /// Output tiles of the launch (row tiles x column tiles).
    pub tiles: usize,
    /// CTAs of the launch: output tiles x K splits.
    pub ctas: usize,
    /// CTAs of this tile the GPU holds at once (SMs x CTAs per SM).
    pub slots: usize,
}

/// The multiply-adds the busiest SM runs in a launch of tile `t` (`c`: its output tiles, CTAs and
/// resident CTAs, `sms` multiprocessors, K of `k`): whole waves of `c.slots` CTAs, each CTA
/// `block_m x block_n x` its K steps, `c.slots / sms` CTAs sharing an SM. A model of the time of tiles
/// of like efficiency per multiply-add; 0 for a launch of no CTAs.
pub fn wave_work(c: &WaveCandidate, t: &TileConfig, k: usize, sms: usize) -> u128 {
    if c.ctas == 0 || c.tiles == 0 || c.slots == 0 || sms == 0 {
        return 0;
    }
    let splits = (c.ctas / c.tiles).max(1);
    let bk = t.block_k.max(1) as usize;
    let k_per_cta = k.div_ceil(bk).div_ceil(splits) as u128 * bk as u128;
    let waves = c.ctas.div_ceil(c.slots) as u128;
    let per_sm = (c.slots / sms).max(1) as u128;
    waves
        .saturating_mul(per_sm)
        .saturating_mul(t.block_m as u128 * t.block_n as u128)
        .saturating_mul(k_per_cta)
}

/// Of `candidates` (each a launch and its tile), the index of the one of least [`wave_work`], the
/// first of equals; `None` for an empty list. Chooses between the pick among the `wgmma` tiles of 256
/// rows and that among the tiles of half their `block_m`.
pub fn least_wave_work(
    candidates: &[(WaveCandidate, TileConfig)],
    k: usize,
    sms: usize,
) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, (c, t))| (wave_work(c, t, k, sms), *i))
        .map(|(_, (c, _))| c.index)
}

/// Among `candidates` whose CTAs fit one wave and whose output tiles are at most one per SM (`sms`),
/// the index of the first, replaced by a later one of fewer K splits (CTAs per output tile) and at
/// least as many CTAs; where none fits, the last; `None` for an empty list. Chooses between `wgmma`
/// tiles of one `block_m`.
pub fn fewest_splits_single_wave(candidates: &[WaveCandidate], sms: usize) -> Option<usize> {
    fewest_splits_single_wave_in(candidates.iter().copied(), sms)
}

/// Among `candidates` whose CTAs fit one wave and whose output tiles are at most one per SM (`sms`),
/// the index of the one of most CTAs (the first of equals), else of the last; `None` for an empty
/// list. Chooses between `mma.sync` tiles of one `block_m` (the 16-row tile at one or two CTAs per
/// SM).
pub fn fullest_single_wave(candidates: &[WaveCandidate], sms: usize) -> Option<usize> {
    fullest_single_wave_in(candidates.iter().copied(), sms)
}

fn fullest_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
) -> Option<usize> {
    best_single_wave_in(candidates, sms, |c, best| c.ctas > best.ctas)
}

fn fewest_splits_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
) -> Option<usize> {
    // Fewer splits (c.ctas / c.tiles < b.ctas / b.tiles, compared without division) and no fewer
    // CTAs.
    best_single_wave_in(candidates, sms, |c, b| {
        c.ctas >= b.ctas
            && (c.ctas as u128) * (b.tiles as u128) < (b.ctas as u128) * (c.tiles as u128)
    })
}

/// The rule shared by [`fewest_splits_single_wave`] and [`fullest_single_wave`]: among the candidates
/// that fit one wave with at most one output tile per SM, a later one replaces the best so far where
/// `better(later, best)`; else the last candidate.
fn best_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
    better: impl Fn(&WaveCandidate, &WaveCandidate) -> bool,
) -> Option<usize> {
    let mut last = None;
    let mut best: Option<WaveCandidate> = None;
    for c in candidates {
        if c.ctas <= c.slots && c.tiles <= sms && best.is_none_or(|b| better(&c, &b)) {
            best = Some(c);
        }
        last = Some(c.index);
    }
    best.map(|b| b.index).or(last)
}

/// Index of the tile a launch of `m` rows of `[n, k]` weights uses, among `tiles` (`of` gives each
/// one's configuration and resident CTAs per SM) on `sms` multiprocessors, with `splits(t)` K splits
/// for a launch of tile `t`:
///
/// 1. the tiles of [`select_tile_index`]'s `block_m` and kind;
/// 2. among several, for `wgmma` tiles [`fewest_splits_single_wave`], for `mma.sync` tiles
///    [`fullest_single_wave`];
/// 3. where that is a `wgmma` tile of 256 rows or more and `wgmma` tiles of half its `block_m` exist,
///    their pick (by the same rule) replaces it if its launch gives the busiest SM fewer multiply-adds
///    ([`least_wave_work`]; the larger tile on equal work).
///
/// 0 for an empty list. Pure: no GPU needed.
pub fn select_launch_tile<L>(
    tiles: &[L],
    of: impl Fn(&L) -> (TileConfig, usize),
    sms: usize,
    (m, n, k): (usize, usize, usize),
    splits: impl Fn(&TileConfig) -> usize,
) -> usize {
    let candidate = |index: usize| {
        let (t, per_sm) = of(&tiles[index]);
        let count = output_tiles(&t, m, n);
        (
            WaveCandidate {
                index,
                tiles: count,
                ctas: count.saturating_mul(splits(&t)),
                slots: sms.saturating_mul(per_sm),
            },
            t,
        )
    };
    // The pick among the tiles of the block M and kind of tile `first`.
    let among = |first: usize| {
        let Some((f, _)) = tiles.get(first).map(&of) else {
            return first;
        };
        let wgmma = f.mma == Mma::Wgmma;
        let group = (0..tiles.len())
            .filter(|&i| {
                let t = of(&tiles[i]).0;
                t.block_m == f.block_m && (t.mma == Mma::Wgmma) == wgmma
            })
            .map(|i| candidate(i).0);
        if wgmma {
            fewest_splits_single_wave_in(group, sms).unwrap_or(first)
        } else {
            fullest_single_wave_in(group, sms).unwrap_or(first)
        }
    };
    let first = select_tile_index_in(tiles.iter().map(|l| of(l).0), m);
    let pick = among(first);
    let Some((f, _)) = tiles.get(first).map(&of) else {
        return pick;
    };
    if f.mma != Mma::Wgmma || f.block_m < 256 {
        return pick;
    }
    let Some(h) = tiles.iter().position(|l| {
        let t = of(l).0;
        t.block_m == f.block_m / 2 && t.mma == Mma::Wgmma
    }) else {
        return pick;
    };
    let alt = among(h);
    least_wave_work(&[candidate(pick), candidate(alt)], k, sms).unwrap_or(pick)
}

/// Index of the tile whose `block_m` and kind a launch of `m` rows starts from: the smallest
/// `block_m` that covers `m`, else the largest `block_m`; among equal `block_m` a [`Mma::Wgmma`] tile
/// (the list holds only tiles the GPU can run), then the first. 0 for an empty list.
pub fn select_tile_index(tiles: &[TileConfig], m: usize) -> usize {
    select_tile_index_in(tiles.iter().copied(), m)
}

fn select_tile_index_in(tiles: impl Iterator<Item = TileConfig> + Clone, m: usize) -> usize {
    let plain = |t: &TileConfig| t.mma != Mma::Wgmma;
    let covering = tiles
        .clone()
        .enumerate()
        .filter(|(_, t)| t.block_m as usize >= m)
        .min_by_key(|(i, t)| (t.block_m, plain(t), *i));
    let largest = tiles.enumerate().max_by_key(|(i, t)| {
        (
            t.block_m,
            std::cmp::Reverse(plain(t)),
            std::cmp::Reverse(*i),
        )
    });
    covering.or(largest).map_or(0, |(i, _)| i)
}
