//! The resource model of one tile configuration: shared memory, registers, occupancy, and which
//! reduction and epilogue paths the kernel compiled for it has.
//!
//! Validation checks declarations against it, code generation asserts that the CUDA side computes the
//! same numbers (`static_assert` in every generated `.cu`), and the runtime uses it to load and launch
//! tiles. Nothing here is measured: it is arithmetic on the tile and the formats.

use crate::abi::{PRODUCER_REGISTERS, PRODUCER_THREADS, STATIC_SMEM_BYTES, WGMMA_STAGE_ALIGN};
use crate::dtype::DType;
use crate::layout::scale_rows_per_stage;
use crate::model::*;

/// Most dynamic shared memory a tile may need: the 227 KiB a CTA may use on sm_90, less
/// [`STATIC_SMEM_BYTES`].
pub const MAX_TILE_SMEM_BYTES: u32 = 227 * 1024 - STATIC_SMEM_BYTES;

/// Bytes of one pipeline stage (A tile, packed B, scale and zero-point rows); a `wgmma` tile rounds it
/// up to [`WGMMA_STAGE_ALIGN`].
pub fn stage_bytes(spec: &KernelSpec, t: &TileConfig) -> u32 {
    // Saturating: validation may size absurd tiles (extents up to 65535) before rejecting them.
    let (bm, bn, bk) = (t.block_m as u32, t.block_n as u32, t.block_k as u32);
    if t.persistent() {
        // The weight codes' box and the rows' box (persistent.cuh, kStageBytes).
        let b = bn.saturating_mul(bk).saturating_mul(spec.b.bits()) / 8;
        return bm.saturating_mul(bk).saturating_add(b);
    }
    let a = bm
        .saturating_mul(bk)
        .saturating_mul(crate::layout::a_bytes(spec.a));
    let b = bn.saturating_mul(bk).saturating_mul(spec.b.bits()) / 8;
    let rows = scale_rows_per_stage(spec, t);
    let s = rows.saturating_mul(bn).saturating_mul(2);
    let z = if spec.zero_point != ZeroPoint::None {
        s
    } else {
        0
    };
    let bytes = a.saturating_add(b).saturating_add(s).saturating_add(z);
    match t.mma {
        Mma::Sync => bytes,
        Mma::Wgmma | Mma::WgmmaSs => bytes.next_multiple_of(WGMMA_STAGE_ALIGN),
    }
}

/// Dynamic shared memory of a persistent tile (`persistent.cuh`, `kSmemBytes`): the alignment slack,
/// the stages (with block scales, each stage's row and block scales beside; with group scales, one f32
/// per channel), two C boxes of 64 channels x min(64, block M) rows per consumer warpgroup, the
/// mbarriers and the split-K flags (one per tile's warpgroups: one cooperative, two ping-pong).
fn persistent_smem_bytes(spec: &KernelSpec, t: &TileConfig) -> u32 {
    let bm = t.block_m as u32;
    // Warpgroups on one tile (a block scale each): 2 cooperative, 1 ping-pong.
    let slices = (t.block_n / t.warp_n.max(1)) as u32;
    let scales = if crate::layout::act_scale_group(spec) > 0 {
        (4 * (bm + slices)).next_multiple_of(16)
    } else if crate::tiles::persistent_promotes(spec) {
        4 * t.block_n as u32
    } else {
        0
    };
    let c_boxes = t.compute_threads() / 128 * 2 * bm.min(64) * 128;
    (t.stages as u32)
        .saturating_mul(
            stage_bytes(spec, t)
                .saturating_add(scales)
                .saturating_add(16),
        )
        .saturating_add(WGMMA_STAGE_ALIGN + c_boxes + 16)
}

/// Dynamic shared memory of one tile configuration, in bytes: the pipeline, or the buffer of the
/// reduction across warps along K if larger; a `wgmma` tile adds [`WGMMA_STAGE_ALIGN`] bytes so that its
/// stages can start on that boundary.
pub fn smem_bytes(spec: &KernelSpec, t: &TileConfig) -> u32 {
    if t.persistent() {
        return persistent_smem_bytes(spec, t);
    }
    let (bm, bn) = (t.block_m as u32, t.block_n as u32);
    let pipeline = (t.stages as u32).saturating_mul(stage_bytes(spec, t));
    let warps_k = (t.block_k / t.warp_k.max(1)) as u32;
    let reduce = warps_k
        .saturating_sub(1)
        .saturating_mul(bm)
        .saturating_mul(bn)
        .saturating_mul(4);
    let align = match t.mma {
        Mma::Sync => 0,
        Mma::Wgmma | Mma::WgmmaSs => WGMMA_STAGE_ALIGN,
    };
    pipeline.max(reduce).saturating_add(align)
}

/// Shared memory of one multiprocessor, in bytes (CUDA Programming Guide, "Compute Capabilities").
pub const fn smem_per_sm(arch: Arch) -> u32 {
    match arch {
        Arch::Sm75 => 64 * 1024,
        Arch::Sm80 => 164 * 1024,
        Arch::Sm86 | Arch::Sm89 => 100 * 1024,
        Arch::Sm90 | Arch::Sm90a | Arch::Sm100a => 228 * 1024,
        Arch::Sm120a => 128 * 1024,
    }
}

/// Whether `t.ctas_per_sm` CTAs of the tile (dynamic shared memory, [`STATIC_SMEM_BYTES`] and the
/// 1 KiB the hardware reserves per CTA) fit one multiprocessor of every target of `spec` (for a
/// `wgmma` tile, of sm_90a, its only target); `Err` carries the smallest multiprocessor's bytes.
/// Always `Ok` without `ctas_per_sm`.
pub fn ctas_fit(spec: &KernelSpec, t: &TileConfig) -> Result<(), u32> {
    if t.ctas_per_sm == 0 {
        return Ok(());
    }
    let per_sm = if t.mma != Mma::Sync {
        smem_per_sm(Arch::Sm90a)
    } else {
        spec.archs
            .iter()
            .map(smem_per_sm)
            .min()
            .unwrap_or(smem_per_sm(Arch::Sm90a))
    };
    let per_cta = smem_bytes(spec, t) as u64 + STATIC_SMEM_BYTES as u64 + 1024;
    if t.ctas_per_sm as u64 * per_cta > per_sm as u64 {
        Err(per_sm)
    } else {
        Ok(())
    }
}

/// Whether a tile's f32 output tile, `block_m x (block_n + 4)` floats, fits its [`smem_bytes`] (the
/// CUDA side's `kTileFits`).
pub fn f32_tile_fits(spec: &KernelSpec, t: &TileConfig) -> bool {
    t.block_m as u32 * (t.block_n as u32 + 4) * 4 <= smem_bytes(spec, t)
}

/// Whether a tile writes C through shared memory (the CUDA side's `kStaged`): `wgmma` tiles whose f32
/// output tile fits ([`f32_tile_fits`]). Such a tile's K splits (at most
/// [`crate::abi::MAX_CLUSTER_SPLITS`]) can also reduce in a thread-block cluster through distributed
/// shared memory.
pub fn staged_epilogue(spec: &KernelSpec, t: &TileConfig) -> bool {
    t.mma == Mma::Wgmma && f32_tile_fits(spec, t)
}

/// Whether a tile's kernel can add its K splits with atomics (the CUDA side's `kAtomicC`, honoured when
/// the runtime sets [`crate::abi::FLAG_ATOMIC_C`]): a tile with the [`staged_epilogue`], or the 8-row
/// `mma.sync` tile whose f32 tile fits (the same epilogue stages it), in a kernel with f16 C, no bias
/// and no epilogue. (The splits add f32 partials and the last runs the epilogue, so bf16 C, a bias or
/// an activation would work too; they keep the ordered reduction because the atomic tail's code
/// lengthens their 8-row main loops, a trade not measured yet.) Not the 16-row tiles: the atomics'
/// code made ptxas spill in their main loop.
pub fn atomic_split_k(spec: &KernelSpec, t: &TileConfig) -> bool {
    let staged_8_rows = t.mma == Mma::Sync && t.block_m == 8 && f32_tile_fits(spec, t);
    (staged_epilogue(spec, t) || staged_8_rows)
        && spec.c == DType::F16
        && !spec.bias
        && spec.epilogue == Epilogue::None
        && spec.layout == Layout::Dense
}

/// The `minBlocksPerMultiprocessor` hint of a tile's `__launch_bounds__`: the CTAs that fit the
/// shared memory of one SM (228 KiB on sm_90, 1 KiB reserved per CTA), limited so that each thread may
/// still use the registers its accumulators need (`mma.sync`: 96 for warp tiles of 8 rows, else 160;
/// `wgmma`: block_m * warp_n / 32 + 72), or the tile's explicit `ctas_per_sm`. The hint only bounds
/// register allocation: without it ptxas may cap a small CTA's threads at too few registers and spill.
pub fn min_blocks_per_sm(spec: &KernelSpec, t: &TileConfig) -> u32 {
    if t.ctas_per_sm != 0 {
        return t.ctas_per_sm as u32; // validated against min_registers and shared memory
    }
    if t.persistent() {
        return 1; // one CTA per SM, 384 threads
    }
    let by_smem = (228 * 1024) / (smem_bytes(spec, t) + 1024).max(1);
    let regs = match t.mma {
        Mma::Sync if t.warp_m <= 8 => 96,
        Mma::Sync => 160,
        // block_m * warp_n / 32 f32 accumulators, the dequantized weights of two k16 steps in flight.
        Mma::Wgmma => t.block_m as u32 * t.warp_n as u32 / 32 + 72,
        Mma::WgmmaSs => 168,
    };
    // A producer warpgroup keeps PRODUCER_REGISTERS per thread and hands the rest to the compute warps.
    let per_cta = if t.producer_warpgroup() {
        t.compute_threads() * regs + PRODUCER_THREADS * PRODUCER_REGISTERS
    } else {
        t.threads() * regs
    };
    let by_regs = 65536 / per_cta.max(1);
    by_smem.min(by_regs).max(1)
}

/// The register budget of the compute warps of a tile with a producer warpgroup (0 without one): the
/// CTA is launched with `65536 / (threads * CTAs per SM)` registers per thread (rounded down to 8, the
/// allocation unit), the producer warpgroup gives all but [`PRODUCER_REGISTERS`] back
/// (`setmaxnreg.dec`) and the compute warps take the rest (`setmaxnreg.inc`, rounded down to 8, at
/// most 240). E.g. (128, 128, 128) with 8 compute warps, one CTA per SM: 384 threads launched at 168,
/// compute warps at 240. (ptxas compiles such a kernel for the smaller of the launch bound and this
/// budget, so the registers `setmaxnreg.dec` frees are exactly those `setmaxnreg.inc` asks for.)
pub fn consumer_registers(spec: &KernelSpec, t: &TileConfig) -> u32 {
    if !t.producer_warpgroup() {
        return 0;
    }
    if t.persistent() {
        let consumers = t.compute_threads() / 128;
        return (65536 / 128 - crate::abi::PERSISTENT_PRODUCER_REGISTERS) / consumers.max(1) / 8
            * 8;
    }
    let launch = (65536 / (t.threads() * min_blocks_per_sm(spec, t))).min(255) / 8 * 8;
    let pool = t.threads() * launch - PRODUCER_THREADS * PRODUCER_REGISTERS;
    (pool / t.compute_threads()).min(240) / 8 * 8
}

/// The fewest registers per thread a tile may be compiled for with an explicit `ctas_per_sm`:
/// `mma.sync` warp tiles of 8 rows 80, of 16 rows 128, larger 160; `wgmma` tiles their accumulators
/// (`block_m * warp_n / 32`) plus 64. A floor below which ptxas spills in the main loop, not a
/// guarantee against spills: a tile at the bound may spill a little (spills only cost time).
pub fn min_registers(t: &TileConfig) -> u32 {
    match t.mma {
        Mma::Sync if t.warp_m <= 8 => 80,
        Mma::Sync if t.warp_m <= 16 => 128,
        Mma::Sync => 160,
        Mma::Wgmma => t.block_m as u32 * t.warp_n as u32 / 32 + 64,
        Mma::WgmmaSs => crate::tiles::persistent_accumulators(t, false) + 64,
    }
}
