//! Launch planning, with no GPU: from a kernel's loaded tiles, the device's size, the launch settings
//! and the shape, one [`LaunchPlan`] (tile, K splits, stream-K, reduction, programmatic launch,
//! workspace); and the checks of a launch's arguments ([`check_launch`]). Every function here is pure.

use super::options::{DependentTrigger, LaunchOptions, Reduction, SplitK};
use crate::error::{Result, invalid};
use humming_spec::abi::MAX_CLUSTER_SPLITS;
use humming_spec::tiles::{output_tiles, select_launch_tile, select_persistent};
use humming_spec::{KernelSpec, Mma, TileConfig};

/// What the planner knows of one tile loaded on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileInfo {
    /// The configuration.
    pub tile: TileConfig,
    /// Resident CTAs per multiprocessor (occupancy), at least 1.
    pub ctas_per_sm: usize,
    /// Writes C through shared memory, and can sum its K splits in a cluster
    /// ([`humming_spec::resources::staged_epilogue`]).
    pub staged: bool,
    /// Can add its K splits with atomics ([`humming_spec::resources::atomic_split_k`]).
    pub atomic: bool,
    /// `max_clusters[s]`: clusters of `s` CTAs (2 to [`MAX_CLUSTER_SPLITS`]) of this tile the GPU holds
    /// at once (0 where unknown or not staged).
    pub max_clusters: [usize; MAX_CLUSTER_SPLITS as usize + 1],
}

/// The device facts a plan depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Multiprocessors.
    pub sms: usize,
    /// Compute capability, major * 10 + minor.
    pub capability: u32,
}

/// How a launch sums the K splits of an output tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KReduction {
    /// One split: nothing to sum.
    None,
    /// In split order, by the last split to finish, through the global workspace (deterministic).
    Ordered,
    /// In split order, in a thread-block cluster through distributed shared memory (deterministic,
    /// the same bits as [`KReduction::Ordered`]).
    Cluster,
    /// Added into C with f16 atomics ([`Reduction::AtomicF16`]); the last bits of C may vary.
    Atomic,
}

/// Everything about one launch that is decided before it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// Index of the tile among the loaded ones.
    pub tile_index: usize,
    /// Its configuration.
    pub tile: TileConfig,
    /// K splits (with stream-K, the most CTAs that share an output tile: the workspace's slots).
    pub splits: usize,
    /// Stream-K CTAs, or `None` for a grid of output tiles x splits.
    pub stream_k: Option<usize>,
    /// How the splits are summed.
    pub reduction: KReduction,
    /// Launched with programmatic dependent launch.
    pub programmatic: bool,
    /// The next kernel may start at this one's start (else after its main loop).
    pub early_trigger: bool,
    /// CTAs of the first launch (M beyond 65535 row tiles is launched in chunks).
    pub ctas: usize,
    /// f32 partials of the split-K workspace the launch needs ([`KReduction::Ordered`]).
    pub workspace_floats: usize,
    /// Tickets or lock words (one per output tile, zero between launches) the launch needs.
    pub tickets: usize,
}

/// Plans a launch of `m` rows of `[n, k]` weights on `tiles` (non-empty) of `device`.
pub fn plan_launch(
    tiles: &[TileInfo],
    device: &DeviceInfo,
    options: &LaunchOptions,
    (m, n, k): (usize, usize, usize),
) -> LaunchPlan {
    if tiles.first().is_some_and(|l| l.tile.persistent()) {
        return plan_persistent(tiles, device, options, (m, n, k));
    }
    let tile_index = select_tile(tiles, device, options, (m, n, k));
    let info = &tiles[tile_index];
    let t = info.tile;
    let stream_k = stream_k_ctas(info, device, options, (m, n, k));
    let splits = match stream_k {
        Some(g) => stream_k_splits(&t, m, n, k, g),
        None => splits_for(info, device, options, m, n, k),
    };
    let rows = m.min(65535 * t.block_m as usize);
    let tiles_out = output_tiles(&t, rows, n);
    // Atomics where the tile has them, the launch splits K without stream-K, and (the 8-row
    // mma.sync tile) on compute capability 9.x with more CTAs than SMs.
    let atomic = options.reduction == Reduction::AtomicF16
        && splits > 1
        && stream_k.is_none()
        && info.atomic
        && (t.mma == Mma::Wgmma
            || (device.capability / 10 == 9 && tiles_out.saturating_mul(splits) > device.sms));
    let cluster = !atomic
        && stream_k.is_none()
        && options.cluster_reduction
        && cluster_fits(info, splits, tiles_out);
    let reduction = match () {
        _ if splits <= 1 && stream_k.is_none() => KReduction::None,
        _ if atomic => KReduction::Atomic,
        _ if cluster => KReduction::Cluster,
        _ => KReduction::Ordered,
    };
    let ctas = stream_k.unwrap_or(tiles_out.saturating_mul(splits));
    // Not for tiles of which more than two CTAs fit per SM: the split rule never places more than
    // two, so the next kernel's CTAs would take the free slots and DRAM bandwidth from this one.
    let programmatic =
        options.programmatic_launch && device.capability >= 90 && info.ctas_per_sm <= 2;
    let early_trigger = programmatic
        && match options.dependent_trigger {
            DependentTrigger::Auto => t.block_m <= 16 && info.ctas_per_sm == 2 && ctas > device.sms,
            DependentTrigger::AtStart => true,
            DependentTrigger::AfterMainLoop => false,
        };
    let (workspace_floats, tickets) = match reduction {
        KReduction::None | KReduction::Cluster => (0, 0),
        KReduction::Ordered => workspace_size(&t, rows, n, splits),
        KReduction::Atomic => (0, output_tiles(&t, rows, n)),
    };
    LaunchPlan {
        tile_index,
        tile: t,
        splits,
        stream_k,
        reduction,
        programmatic,
        early_trigger,
        ctas,
        workspace_floats,
        tickets,
    }
}

/// Plans a launch on persistent (`wgmma_ss`) tiles, which a kernel loads alone where they load
/// (`Gemm::load`): the tile and K splits of [`select_persistent`] (`SplitK::Fixed` fixes the splits,
/// `SplitK::Off` allows none), summed in split order through the workspace; a grid of at most one CTA
/// per SM; programmatic launch as for the other tiles. `tiles` is not empty.
pub fn plan_persistent(
    tiles: &[TileInfo],
    device: &DeviceInfo,
    options: &LaunchOptions,
    (m, n, k): (usize, usize, usize),
) -> LaunchPlan {
    let steps = k
        .div_ceil(humming_spec::tiles::PERSISTENT_BLOCK_K as usize)
        .max(1);
    let max_splits = match options.split_k {
        SplitK::Off => 1,
        SplitK::Fixed(_) | SplitK::Auto => 16,
    };
    let choice = select_persistent(tiles, |l| l.tile, device.sms, (m, n, k), max_splits).unwrap_or(
        humming_spec::tiles::PersistentChoice {
            index: 0,
            splits: 1,
        },
    );
    let t = tiles[choice.index].tile;
    let splits = match options.split_k {
        SplitK::Fixed(f) => f.get().min(64).min(steps),
        _ => choice.splits,
    };
    let rows = m.min(persistent_rows_per_launch(&t, n, splits));
    let tiles_out = output_tiles(&t, rows, n);
    let programmatic = options.programmatic_launch && device.capability >= 90;
    let ctas = tiles_out.saturating_mul(splits).min(device.sms).max(1);
    ordered_plan(
        choice.index,
        t,
        splits,
        (rows, n),
        ctas,
        programmatic,
        options,
    )
}

/// The plan of a launch whose `splits` K splits (if more than one) are summed in split order through
/// the workspace, with programmatic launch where asked and the next kernel let in at the start only
/// with `DependentTrigger::AtStart` (the MoE and persistent launches).
fn ordered_plan(
    tile_index: usize,
    t: TileConfig,
    splits: usize,
    (rows, n): (usize, usize),
    ctas: usize,
    programmatic: bool,
    options: &LaunchOptions,
) -> LaunchPlan {
    let (workspace_floats, tickets) = if splits > 1 {
        workspace_size(&t, rows, n, splits)
    } else {
        (0, 0)
    };
    LaunchPlan {
        tile_index,
        tile: t,
        splits,
        stream_k: None,
        reduction: if splits > 1 {
            KReduction::Ordered
        } else {
            KReduction::None
        },
        programmatic,
        early_trigger: programmatic && options.dependent_trigger == DependentTrigger::AtStart,
        ctas,
        workspace_floats,
        tickets,
    }
}

/// Rows of one launch of persistent tile `t` on `n` channels with `splits` K splits: the kernel's work
/// units (output tiles x splits) are an int, and row tiles stay within 65535 as for the other tiles;
/// longer M is launched in chunks.
pub fn persistent_rows_per_launch(t: &TileConfig, n: usize, splits: usize) -> usize {
    let per_row_tile = n
        .div_ceil(t.block_n.max(1) as usize)
        .saturating_mul(splits.max(1))
        .max(1);
    ((i32::MAX as usize / per_row_tile).clamp(1, 65535)).saturating_mul(t.block_m as usize)
}

/// Plans a MoE launch: the `mma.sync` tile of `block_m` rows, a grid of `grid_rows` rows (all the
/// tiles the routing may fill; those without rows return at once) of which about `expected_tiles`
/// row tiles hold rows, `[n, k]` weights per expert. K splits as [`choose_splits_of`] gives for the
/// expected tiles, summed in split order; no stream-K, clusters or atomics. `None` where the kernel has
/// no such tile.
pub fn plan_moe(
    tiles: &[TileInfo],
    device: &DeviceInfo,
    options: &LaunchOptions,
    block_m: usize,
    (grid_rows, expected_tiles): (usize, usize),
    (n, k): (usize, usize),
) -> Option<LaunchPlan> {
    // Among the tiles of that block M: `wgmma` where the device loaded one; then the most CTAs per
    // SM, or the fewest (the deepest stages) where the launch's CTAs would not fill one wave of the
    // tile of most CTAs per SM.
    let of_block_m = || {
        tiles
            .iter()
            .enumerate()
            .filter(|(_, l)| l.tile.block_m as usize == block_m)
    };
    let slots = of_block_m()
        .map(|(_, l)| l.ctas_per_sm)
        .max()
        .unwrap_or(1)
        .saturating_mul(device.sms);
    let tile_index = of_block_m()
        .max_by_key(|(i, l)| {
            let ctas = l.ctas_per_sm as i64;
            let few = expected_tiles
                .max(1)
                .saturating_mul(n.div_ceil(l.tile.block_n.max(1) as usize))
                < slots;
            (
                l.tile.mma == Mma::Wgmma,
                if few { -ctas } else { ctas },
                std::cmp::Reverse(*i),
            )
        })
        .map(|(i, _)| i)?;
    let info = &tiles[tile_index];
    let t = info.tile;
    let n_tiles = n.div_ceil(t.block_n as usize);
    let splits = match options.split_k {
        SplitK::Off => 1,
        SplitK::Fixed(f) => f
            .get()
            .min(64)
            .min(k.div_ceil(t.block_k.max(1) as usize))
            .max(1),
        SplitK::Auto => choose_splits_of(
            &t,
            expected_tiles.max(1).saturating_mul(n_tiles),
            block_m,
            k,
            device.sms,
            info.ctas_per_sm,
        ),
    };
    let programmatic =
        options.programmatic_launch && device.capability >= 90 && info.ctas_per_sm <= 2;
    let ctas = output_tiles(&t, grid_rows, n).saturating_mul(splits);
    Some(ordered_plan(
        tile_index,
        t,
        splits,
        (grid_rows, n),
        ctas,
        programmatic,
        options,
    ))
}

/// The tile a launch uses ([`select_launch_tile`] with this runtime's split rule).
pub fn select_tile(
    tiles: &[TileInfo],
    device: &DeviceInfo,
    options: &LaunchOptions,
    (m, n, k): (usize, usize, usize),
) -> usize {
    select_launch_tile(
        tiles,
        |l| (l.tile, l.ctas_per_sm),
        device.sms,
        (m, n, k),
        |t| {
            let info = tiles.iter().find(|l| l.tile == *t);
            info.map_or(1, |l| splits_for(l, device, options, m, n, k))
        },
    )
}

fn splits_for(
    info: &TileInfo,
    device: &DeviceInfo,
    options: &LaunchOptions,
    m: usize,
    n: usize,
    k: usize,
) -> usize {
    let t = &info.tile;
    match options.split_k {
        SplitK::Off => 1,
        SplitK::Fixed(f) => f
            .get()
            .min(64)
            .min(k.div_ceil(t.block_k.max(1) as usize))
            .max(1),
        SplitK::Auto => choose_splits(t, m, n, k, device.sms, info.ctas_per_sm),
    }
}

/// Whether the `splits` of each of `tiles` output tiles can be one thread-block cluster: a staged
/// tile of one CTA per SM (the cluster scheduler packs a cluster's CTAs onto fewer SMs where two fit)
/// with 2 to [`MAX_CLUSTER_SPLITS`] splits, whose clusters are all resident at once (a second wave
/// of clusters costs more than the cluster saves).
fn cluster_fits(info: &TileInfo, splits: usize, tiles: usize) -> bool {
    info.staged
        && info.ctas_per_sm == 1
        && (2..=MAX_CLUSTER_SPLITS as usize).contains(&splits)
        && tiles <= info.max_clusters[splits]
}

/// The CTAs of a stream-K launch, or `None` where the launch does not use stream-K
/// ([`LaunchOptions::stream_k`]).
fn stream_k_ctas(
    info: &TileInfo,
    device: &DeviceInfo,
    options: &LaunchOptions,
    (m, n, k): (usize, usize, usize),
) -> Option<usize> {
    let t = &info.tile;
    let g = options.stream_k?.get();
    // Swap-AB mma.sync tiles only (warps of at most 16 rows; the kernel runs others without the
    // segment loop), one launch (rows beyond 65535 row tiles go in chunks), automatic splits.
    if t.mma == Mma::Wgmma
        || t.warp_m > 16
        || m > 65535 * t.block_m as usize
        || options.split_k != SplitK::Auto
    {
        return None;
    }
    let tiles = output_tiles(t, m, n);
    let total = tiles.saturating_mul(k.div_ceil(t.block_k.max(1) as usize));
    if total < 2 {
        return None;
    }
    // At most 64 CTAs per SM: stream-K is for one wave, not for many.
    let g = g.min(device.sms.saturating_mul(64)).clamp(2, total);
    // The kernel's tile index and a CTA's step count are ints, its step arithmetic
    // `(step + 1) * G` an i64.
    (tiles <= i32::MAX as usize
        && total / g < (i32::MAX / 2) as usize
        && total.checked_mul(g + 1).is_some_and(|v| v < 1 << 62))
    .then_some(g)
}

/// f32 partials and tickets the split-K workspace needs for one launch: `splits` partial tiles of
/// `block_m x block_n` per output tile, one ticket per output tile.
pub fn workspace_size(t: &TileConfig, m: usize, n: usize, splits: usize) -> (usize, usize) {
    let tiles = output_tiles(t, m, n);
    (
        splits
            .saturating_mul(tiles)
            .saturating_mul(t.block_m as usize * t.block_n as usize),
        tiles,
    )
}

/// The most CTAs of a stream-K launch of `g` CTAs that share one output tile (so the workspace's split
/// slots): a tile's `steps` steps start in one CTA's range and meet the start of at most
/// `ceil((steps - 1) / w)` more, `w` the fewest steps a CTA has.
pub fn stream_k_splits(t: &TileConfig, m: usize, n: usize, k: usize, g: usize) -> usize {
    let steps = k.div_ceil(t.block_k.max(1) as usize);
    let total = output_tiles(t, m, n).saturating_mul(steps);
    let w = total / g.max(1);
    if w == 0 {
        return steps.max(1);
    }
    1 + steps.saturating_sub(1).div_ceil(w)
}

/// Number of K splits for a launch on `sms` multiprocessors that each hold `ctas_per_sm` CTAs of the
/// tile's kernel at once: the most splits `s` whose CTAs (`tiles * s`) fit one wave of at most two
/// resident CTAs per multiprocessor, within
///
/// - at most 16;
/// - at least 4 `block_k` steps and 1024 of K per split (so that each split's pipeline fills and its
///   stream of weights is long enough to reach full DRAM bandwidth), 512 for `wgmma` tiles of one CTA
///   per multiprocessor (their pipeline fills faster);
/// - for `mma.sync` tiles at most `K / 64 / M` (the f32 partials, 8 bytes per element of C per split,
///   stay within a quarter of the weight traffic at 4 bits); for `wgmma` tiles at most
///   [`MAX_CLUSTER_SPLITS`] (so that the splits can reduce in a cluster).
///
/// 1 when even one split per tile fills the wave, and for empty or degenerate shapes. A second wave of
/// CTAs, or a third resident CTA per multiprocessor, costs more than it gains.
pub fn choose_splits(
    t: &TileConfig,
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    ctas_per_sm: usize,
) -> usize {
    choose_splits_of(t, output_tiles(t, m, n), m, k, sms, ctas_per_sm)
}

/// [`choose_splits`] for `tiles` output tiles of `m` rows each (the MoE layouts: the tiles that hold
/// rows, of block M rows).
pub fn choose_splits_of(
    t: &TileConfig,
    tiles: usize,
    m: usize,
    k: usize,
    sms: usize,
    ctas_per_sm: usize,
) -> usize {
    let steps = k.div_ceil(t.block_k.max(1) as usize);
    if tiles == 0 || steps == 0 {
        return 1;
    }
    let slots = sms.max(1).saturating_mul(ctas_per_sm.clamp(1, 2));
    let min_k = if t.mma == Mma::Wgmma && ctas_per_sm == 1 {
        512
    } else {
        1024
    };
    let mut max_s = 16.min(steps / 4).min(k / min_k);
    if t.mma != Mma::Wgmma {
        max_s = max_s.min(k / 64 / m.max(1));
    } else {
        max_s = max_s.min(MAX_CLUSTER_SPLITS as usize);
    }
    (1..=max_s.max(1))
        .rev()
        .find(|&s| tiles.saturating_mul(s) <= slots)
        .unwrap_or(1)
}

/// The sizes, strides and addresses of one launch, as checked by [`check_launch`].
#[derive(Clone, Copy, Debug)]
pub struct LaunchShape {
    /// Rows of A and C.
    pub m: usize,
    /// Output channels (columns of C), from the weights.
    pub n: usize,
    /// Input features, from the weights.
    pub k: usize,
    /// Row stride of A in elements.
    pub lda: usize,
    /// Row stride of C in elements.
    pub ldc: usize,
    /// Elements in the A buffer.
    pub a_len: usize,
    /// Elements in the C buffer.
    pub c_len: usize,
    /// Elements in the bias buffer, if one is passed.
    pub bias_len: Option<usize>,
    /// Device address of A.
    pub a_addr: u64,
    /// Device address of C.
    pub c_addr: u64,
}

/// Checks one launch of kernel `name` (descriptor `kernel`) with weights packed for `weights`.
///
/// Every failure is an [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the argument:
/// `weights` (packed for another descriptor), `m` (at least 2^31), `lda` (below K, not a multiple of
/// 8), `ldc` (below N, odd), `a` / `c` (buffer too short for `m` rows, misaligned: A 16 bytes, C 4
/// bytes), `bias` (missing, unexpected, or not N elements). `m == 0` is checked like any other M
/// (its buffers may be empty).
pub fn check_launch(
    name: &str,
    kernel: &KernelSpec,
    weights: &KernelSpec,
    s: &LaunchShape,
) -> Result<()> {
    let LaunchShape {
        m, n, k, lda, ldc, ..
    } = *s;
    if !kernel.takes_weights_of(weights) {
        return Err(invalid(
            "weights",
            format!("weights were packed for `{weights}`, not for kernel {name} (`{kernel}`)"),
        ));
    }
    if m > i32::MAX as usize {
        return Err(invalid("m", format!("m = {m} exceeds 2^31 - 1")));
    }
    if lda < k || lda % 8 != 0 || lda > i32::MAX as usize {
        return Err(invalid(
            "lda",
            format!("lda = {lda} must be >= K = {k}, a multiple of 8 and below 2^31"),
        ));
    }
    // Columns of C: N, or N / 2 with a gated epilogue.
    let nc = humming_spec::layout::c_columns(kernel.epilogue, n);
    if ldc < nc || ldc % 2 != 0 || ldc > i32::MAX as usize {
        return Err(invalid(
            "ldc",
            format!("ldc = {ldc} must be >= the {nc} columns of C, even and below 2^31"),
        ));
    }
    // Rows 0..m: (m - 1) * stride + width elements (none for m = 0).
    let need = |stride: usize, width: usize| match m {
        0 => Some(0),
        _ => (m - 1)
            .checked_mul(stride)
            .and_then(|x| x.checked_add(width)),
    };
    let need_a = need(lda, k);
    if need_a.is_none_or(|need| s.a_len < need) {
        return Err(invalid(
            "a",
            format!(
                "A holds {} elements; m = {m}, lda = {lda}, K = {k} need {need_a:?}",
                s.a_len
            ),
        ));
    }
    let need_c = need(ldc, nc);
    if need_c.is_none_or(|need| s.c_len < need) {
        return Err(invalid(
            "c",
            format!(
                "C holds {} elements; m = {m}, ldc = {ldc}, {nc} columns need {need_c:?}",
                s.c_len
            ),
        ));
    }
    match (kernel.bias, s.bias_len) {
        (true, None) => {
            return Err(invalid(
                "bias",
                format!("kernel {name} declares `bias: true`; pass a bias of N = {n} elements"),
            ));
        }
        (false, Some(_)) => {
            return Err(invalid(
                "bias",
                format!("kernel {name} declares no bias; pass None"),
            ));
        }
        (true, Some(len)) if len != n => {
            return Err(invalid(
                "bias",
                format!("bias holds {len} elements; N = {n}"),
            ));
        }
        _ => {}
    }
    if !s.a_addr.is_multiple_of(16) {
        return Err(invalid(
            "a",
            format!(
                "A must start 16-byte aligned (device address {:#x})",
                s.a_addr
            ),
        ));
    }
    if !s.c_addr.is_multiple_of(4) {
        return Err(invalid(
            "c",
            format!(
                "C must start 4-byte aligned (device address {:#x})",
                s.c_addr
            ),
        ));
    }
    Ok(())
}
