//! CUDA code generation: a thin, readable instantiation of the reusable headers in `cuda/humming/`.
//!
//! Each kernel becomes one `.cu` file holding one `extern "C"` entry point per tile configuration,
//! named `humming_<hash>_t<i>` (see [`entry_name`]). Everything the kernel needs to know at compile time
//! (dtypes, weight width, zero point kind, group size, bias, epilogue, tile shape) is a template argument;
//! M, N, K and the pointers are run-time [`GemmParams`](../../humming_runtime) fields.

use crate::dtype::DType;
use crate::model::*;
use std::fmt::Write;

/// Version of the generator; part of every build cache key.
pub const GENERATOR_VERSION: &str = "humming-codegen-3";

/// The reusable CUDA headers, as `(relative path, contents)`. The build helper writes them next to the
/// generated sources; the runtime hands them to NVRTC.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "humming/common.cuh",
        include_str!("../../cuda/humming/common.cuh"),
    ),
    (
        "humming/dequant.cuh",
        include_str!("../../cuda/humming/dequant.cuh"),
    ),
    (
        "humming/mma.cuh",
        include_str!("../../cuda/humming/mma.cuh"),
    ),
    (
        "humming/wgmma.cuh",
        include_str!("../../cuda/humming/wgmma.cuh"),
    ),
    (
        "humming/loader.cuh",
        include_str!("../../cuda/humming/loader.cuh"),
    ),
    (
        "humming/epilogue.cuh",
        include_str!("../../cuda/humming/epilogue.cuh"),
    ),
    (
        "humming/gemm.cuh",
        include_str!("../../cuda/humming/gemm.cuh"),
    ),
];

/// Default tile configurations when a declaration fixes none, picked at run time by M (the smallest
/// `block_m` that covers M wins, among equals a `wgmma` tile where the GPU has it; the runtime's
/// `select_launch_tile` has the whole rule). The 8- and 16-row
/// tiles run the "swap AB" `mma.sync` path (weights as the mma's A operand, group scales on the f32
/// accumulators; see `gemm.cuh`); of the two 16-row tiles, both of 8 warps (256 deep), the runtime
/// takes the one compiled for one CTA per SM when its launch fits one wave, else the one compiled
/// for two (`ctas_per_sm = 2`, 128 registers; [`tiles_of`] leaves it out where two CTAs' shared
/// memory does not fit the smallest SM among the targets, e.g. 8-bit weights, or Q4_1-style float
/// offsets with sm_80's 164 KiB). When `archs` includes sm_90a, `wgmma` tiles serve M > 16 on
/// Hopper: 32 rows over 256 channels (two warpgroups along K); 64 rows over 128 channels (warps of
/// 32 channels, two warpgroups along K, one CTA per SM) where the launch fits one wave with at most
/// one output tile per SM, else over 256; 128 rows over 128 channels (warps of 32 channels; two
/// warpgroups along K and one CTA per SM under the same condition, else one warpgroup and two CTAs
/// per SM); 256 rows over 128 channels (warps of 16 channels, one CTA per SM) for M > 128, unless
/// a 128-row tile's launch gives the busiest SM less work (e.g. 28672 x 4096, M = 384); every
/// `wgmma` tile here has a producer warpgroup ([`TileConfig::producer_warpgroup`]).
/// The `mma.sync` tiles of 32 and 64 rows serve M > 16 elsewhere.
/// Chosen from sweeps on the H200 (`examples/tune.rs`, PERFORMANCE.md).
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
        // The same 16-row tile compiled for two CTAs per SM (128 registers): taken where its launch
        // fits one wave with more CTAs (K splits) than the first's, or the first's does not fit one
        // wave (the runtime's `fullest_single_wave`).
        TileConfig {
            ctas_per_sm: 2,
            ..t(16, 128, 256, 16, 64, 3, Mma::Sync)
        },
        t(32, 128, 128, 32, 64, 4, Mma::Sync),
        t(64, 128, 128, 32, 64, 4, Mma::Sync),
    ];
    if archs.contains(Arch::Sm90a) {
        tiles.push(t(32, 256, 128, 32, 64, 4, Mma::Wgmma));
        // Warps of 32 channels, two warpgroups along K: 128 channels, half the K splits of the
        // tile above where N is small. Taken where its launch fits one wave with fewer K splits and
        // no fewer CTAs (the runtime's `fewest_splits_single_wave`). H200, W4A16 g128, M = 32 (fourteenth
        // session, `perf/2026-11-30n_h200_tune.log`): 4096 x 4096 9.1 us (4 splits) against
        // 11.5-11.9 (8). Not taken at 8192 x 8192 (19.5 against 18.7, 4 splits each), 4096 x 14336
        // (18.6 against 19.0, 8 each) and 28672 x 4096 (30.9 against 26.8: 224 output tiles).
        tiles.push(t(32, 128, 128, 32, 32, 4, Mma::Wgmma));
        // 128 channels, two warpgroups along K, one CTA per SM with a producer warpgroup (compute
        // warps at 240 registers): taken where the launch fits one wave with at most one output tile
        // per SM (the runtime's `fewest_splits_single_wave`). H200, W4A16 g128, M = 64 (eleventh session,
        // `perf/2026-11-30k_h200_tune.log`): 4096 x 4096 11.0 us, 8192 x 8192 21.9, 4096 x 14336 21.7
        // against 13.4 / 27.9 / 26.7 for the same tile at two CTAs per SM without a producer (the
        // eighth session's default) and 17.1 / 24.8 / 25.9 for (64, 256, 128); 28672 x 4096 (224
        // output tiles) stays on the next tile (31.7 vs 40.0 us).
        tiles.push(t(64, 128, 128, 64, 32, 4, Mma::Wgmma));
        tiles.push(t(64, 256, 128, 64, 64, 4, Mma::Wgmma));
        // Two warpgroups along K (one CTA per SM; compute warps at 240 registers with the producer
        // warpgroup, 200 for W4A16 before it): half the K splits of the next tile at the same
        // parallelism, summed in shared memory and, with 2-8 splits, with f16 atomics into C (in a
        // cluster where the launch is deterministic or cannot use atomics). Taken where its
        // launch fits one wave with at most one output tile per SM (the runtime's
        // `fewest_splits_single_wave`); H200, W4A16 g128, M = 128 / 256: 4096 x 4096
        // 20.2 -> 17.7 / 27.5 -> 21.6 us, 8192 x 8192 41.8 -> 37.7 / 69.3 -> 67.0, 4096 x 14336
        // 41.5 -> 37.7 / 63.7 -> 60.9; 28672 x 4096 (224 tiles, two waves of it) stays on the next
        // tile (61.7 vs 70.2 us at M = 128).
        tiles.push(t(128, 128, 128, 128, 32, 4, Mma::Wgmma));
        tiles.push(t(128, 128, 64, 128, 32, 4, Mma::Wgmma));
        // 256 rows over 128 channels, warps of 16 channels (a quarter of a packed unit; one
        // m64n256k16 per warpgroup and k16 slab, 128 f32 accumulators per thread), two warpgroups
        // along N, one CTA per SM: each dequantized weight feeds twice the rows of the 128-row tiles
        // (153 instructions per stage against 220 for the same tensor work). Serves M > 128. H200,
        // W4A16 g128, M = 256 (sixteenth session, `perf/2026-11-30p_h200_tune.log`): 4096 x 4096
        // 17.5 -> 17.0 us, 8192 x 8192 51.8 -> 49.2, 28672 x 4096 101.0 -> 88.5, 4096 x 14336
        // 47.2 -> 44.0; (256, 64, 128) and (256, 64, 64) at two CTAs per SM were slower. Past 128
        // rows the runtime compares it with the 128-row tiles' pick by the work per SM of their
        // launches (`least_wave_work`).
        tiles.push(t(256, 128, 64, 256, 16, 4, Mma::Wgmma));
    }
    tiles
}

/// The tile configurations a kernel is compiled with: the declared ones, or [`default_tiles`] for its
/// archs.
pub fn tiles_of(spec: &KernelSpec) -> Vec<TileConfig> {
    if spec.tiles.len == 0 {
        // A default tile compiled for several CTAs per SM only where they fit (not for 8-bit
        // weights, whose stages are twice as large).
        default_tiles(spec.archs)
            .into_iter()
            .filter(|t| ctas_fit(spec, t).is_ok())
            .collect()
    } else {
        spec.tiles.as_slice().to_vec()
    }
}

/// The name of the entry point of tile configuration `index`.
pub fn entry_name(spec: &KernelSpec, index: usize) -> String {
    format!("humming_{}_t{index}", spec.hash_hex())
}

/// Weight bit-planes: a `b`-bit code is stored as power-of-two-wide parts (`3 = 2 + 1`, `7 = 4 + 2 + 1`),
/// lowest bits first, each part packed in whole 32-bit words. Returns the part widths.
pub fn bit_parts(bits: u32) -> Vec<u32> {
    match bits {
        1 => vec![1],
        2 => vec![2],
        3 => vec![2, 1],
        4 => vec![4],
        5 => vec![4, 1],
        6 => vec![4, 2],
        7 => vec![4, 2, 1],
        8 => vec![8],
        _ => vec![],
    }
}

/// True if the primary scale multiplies the dequantized weights in registers (group scales, and channel
/// scales with a float offset); false if it multiplies C in the epilogue (channel scales otherwise).
pub fn scale_on_b(spec: &KernelSpec) -> bool {
    match spec.scale.granularity {
        ScaleGranularity::Group { .. } => true,
        ScaleGranularity::Channel => spec.zero_point == ZeroPoint::FloatOffset,
        _ => false,
    }
}

/// Rows of scales (and zero points) one pipeline stage of `block_k` holds.
pub fn scale_rows_per_stage(spec: &KernelSpec, t: &TileConfig) -> u32 {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } => (t.block_k as u32 / size).max(1),
        _ => 0,
    }
}

/// Alignment of the stages of a `wgmma` tile, in bytes: the hardware's 128-byte swizzle of the A tile
/// is a function of address bits 4-9, so every A tile starts on a 1024-byte boundary (the CUDA side's
/// `StageLayout::kStageAlign`).
pub const WGMMA_STAGE_ALIGN: u32 = 1024;

/// Static shared memory of every kernel, in bytes, on top of [`smem_bytes`]: the split-K flag and one
/// 8-byte mbarrier per stage, two per stage for `wgmma` tiles, and the atomic split-K's flags (at most
/// 6 stages: 112 bytes; the CUDA side asserts the bound). A CTA's static plus dynamic shared memory must
/// stay within the GPU's per-block limit (227 KiB on the H100/H200).
pub const STATIC_SMEM_BYTES: u32 = 128;

/// Most dynamic shared memory a tile may need: 227 KiB less [`STATIC_SMEM_BYTES`].
pub const MAX_TILE_SMEM_BYTES: u32 = 227 * 1024 - STATIC_SMEM_BYTES;

/// Bytes of one pipeline stage (A tile, packed B, scale and zero-point rows); a `wgmma` tile rounds it
/// up to [`WGMMA_STAGE_ALIGN`].
pub fn stage_bytes(spec: &KernelSpec, t: &TileConfig) -> u32 {
    // Saturating: validation may size absurd tiles (extents up to 65535) before rejecting them.
    let (bm, bn, bk) = (t.block_m as u32, t.block_n as u32, t.block_k as u32);
    let a = bm.saturating_mul(bk).saturating_mul(2);
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
        Mma::Wgmma => bytes.next_multiple_of(WGMMA_STAGE_ALIGN),
    }
}

/// Dynamic shared memory of one tile configuration, in bytes: the pipeline, or the buffer of the
/// reduction across warps along K if larger; a `wgmma` tile adds [`WGMMA_STAGE_ALIGN`] bytes so that its
/// stages can start on that boundary. The generated source asserts that the CUDA side computes the same
/// number.
pub fn smem_bytes(spec: &KernelSpec, t: &TileConfig) -> u32 {
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
        Mma::Wgmma => WGMMA_STAGE_ALIGN,
    };
    pipeline.max(reduce).saturating_add(align)
}

/// Shared memory of one multiprocessor, in bytes (CUDA Programming Guide, "Compute Capabilities"):
/// 64 KiB on sm_75, 164 KiB on sm_80, 100 KiB on sm_86 and sm_89, 228 KiB on sm_90 and sm_100,
/// 128 KiB on sm_120.
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
    let per_sm = if t.mma == Mma::Wgmma {
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

/// Most K splits of one output tile that reduce through distributed shared memory: the portable
/// thread-block cluster size of sm_90.
pub const MAX_CLUSTER_SPLITS: u32 = 8;

/// Whether a tile's f32 output tile, `block_m x (block_n + 4)` floats, fits its [`smem_bytes`] (the
/// CUDA side's `Gemm::kTileFits`): the staged epilogue's condition.
fn f32_tile_fits(spec: &KernelSpec, t: &TileConfig) -> bool {
    t.block_m as u32 * (t.block_n as u32 + 4) * 4 <= smem_bytes(spec, t)
}

/// Whether a tile writes C through shared memory (the CUDA side's `Gemm::kStaged`): `wgmma` tiles whose
/// f32 output tile fits ([`f32_tile_fits`]). Such a tile's K splits (at
/// most [`MAX_CLUSTER_SPLITS`]) can be launched as one thread-block cluster per output tile and summed
/// through distributed shared memory instead of the global split-K workspace (the runtime sets the
/// `GemmParams` flag `kFlagClusterSplitK` with the cluster launch attribute).
pub fn staged_epilogue(spec: &KernelSpec, t: &TileConfig) -> bool {
    t.mma == Mma::Wgmma && f32_tile_fits(spec, t)
}

/// Whether a tile's kernel can add its K splits into C with f16 atomics (the CUDA side's
/// `Gemm::kAtomicC`, honoured when the runtime sets the `GemmParams` flag `kFlagAtomicC`): a tile
/// with the [`staged_epilogue`], or the 8-row `mma.sync` tile (block M = 8) whose f32 tile fits
/// ([`f32_tile_fits`]; the same epilogue stages it), which adds the tile with 16-byte vector atomics
/// `red.add.noftz.v4.f16x2` from shared memory, in a kernel with f16 C, no bias and no epilogue, so
/// that C is linear in each split's partial. The runtime uses the 8-row tile's atomics only on
/// compute capability 9.x (where they were measured) and where its launch has more CTAs than SMs: on
/// the H200 (W4A16 g128, M = 1, seventeenth session) they gained at 8192 x 8192 and 4096 x 14336
/// (256 CTAs: 11.8 -> 11.2, 10.7 -> 10.2 us) but lost at 4096 x 4096 (128 CTAs: 5.7 -> 6.8), where
/// the deterministic tail's one wave of single CTAs is short. Not the 16-row tiles: atomics from
/// their registers made ptxas spill in the main loop (and through the staged epilogue the two-CTA
/// 16-row tile's loop went from 344 to 401 instructions per stage, with a spill).
pub fn atomic_split_k(spec: &KernelSpec, t: &TileConfig) -> bool {
    let staged_8_rows = t.mma == Mma::Sync && t.block_m == 8 && f32_tile_fits(spec, t);
    (staged_epilogue(spec, t) || staged_8_rows)
        && spec.c == DType::F16
        && !spec.bias
        && spec.epilogue == Epilogue::None
}

fn cuda_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "humming::f16",
        DType::BF16 => "humming::bf16",
        _ => "void",
    }
}

fn zp_kind(z: ZeroPoint) -> &'static str {
    match z {
        ZeroPoint::None => "humming::ZeroPointKind::kNone",
        ZeroPoint::Integer => "humming::ZeroPointKind::kInteger",
        ZeroPoint::FloatOffset => "humming::ZeroPointKind::kFloatOffset",
    }
}

fn epilogue_kind(e: Epilogue) -> &'static str {
    match e {
        Epilogue::None => "humming::EpilogueKind::kNone",
        Epilogue::Relu => "humming::EpilogueKind::kRelu",
        Epilogue::Silu => "humming::EpilogueKind::kSilu",
        Epilogue::Gelu => "humming::EpilogueKind::kGelu",
        Epilogue::GeluTanh => "humming::EpilogueKind::kGeluTanh",
    }
}

/// The `minBlocksPerMultiprocessor` hint of a tile's `__launch_bounds__`: the CTAs that fit the
/// shared memory of one SM (228 KiB on sm_90, 1 KiB reserved per CTA), limited so that each thread may
/// still use the registers its accumulators need (`mma.sync`: 96 for warp tiles of 8 rows, else 160;
/// `wgmma`: block_m * warp_n / 32 + 72), or the tile's explicit `ctas_per_sm`. The hint only bounds
/// register allocation; without it ptxas 13.0 was seen to cap a 128-thread tile at 80 registers and
/// spill. (228 KiB is sm_90's; on smaller multiprocessors fewer CTAs may end up resident.)
pub fn min_blocks_per_sm(spec: &KernelSpec, t: &TileConfig) -> u32 {
    if t.ctas_per_sm != 0 {
        return t.ctas_per_sm as u32; // validated against min_registers and shared memory
    }
    let by_smem = (228 * 1024) / (smem_bytes(spec, t) + 1024).max(1);
    // Accumulators grow with the warp's rows: 8 rows fit in 96 registers, more need 160.
    let regs = match t.mma {
        Mma::Sync if t.warp_m <= 8 => 96,
        Mma::Sync => 160,
        // block_m * warp_n / 32 f32 accumulators, the dequantized weights of two k16 steps in flight.
        Mma::Wgmma => t.block_m as u32 * t.warp_n as u32 / 32 + 72,
    };
    // A producer warpgroup keeps PRODUCER_REGISTERS per thread and hands the rest to the compute warps.
    let per_cta = if t.producer_warpgroup() {
        t.compute_threads() * regs + TileConfig::PRODUCER_THREADS * PRODUCER_REGISTERS
    } else {
        t.threads() * regs
    };
    let by_regs = 65536 / per_cta.max(1);
    by_smem.min(by_regs).max(1)
}

/// Registers per thread a [`TileConfig::producer_warpgroup`] keeps after `setmaxnreg.dec` (its one
/// working thread walks the stage ring; `Tile::kProducerRegs` in common.cuh).
pub const PRODUCER_REGISTERS: u32 = 24;

/// The register budget of the compute warps of a tile with a producer warpgroup (0 without one): the
/// CTA is launched with `65536 / (threads * CTAs per SM)` registers per thread (rounded down to 8, the
/// allocation unit), the producer warpgroup gives all but [`PRODUCER_REGISTERS`] back
/// (`setmaxnreg.dec`) and the compute warps take the rest (`setmaxnreg.inc`, rounded down to 8, at
/// most 240). E.g. (128, 128, 128) with 8 compute warps, one CTA per SM: 384 threads launched at 168,
/// compute warps at 240; (128, 128, 64) with 4, two CTAs per SM: launched at 128, compute warps at
/// 232. (ptxas 13.0 compiles such a kernel for the smaller of the launch bound and this budget, so
/// the registers `setmaxnreg.dec` frees are exactly those `setmaxnreg.inc` asks for.)
pub fn consumer_registers(spec: &KernelSpec, t: &TileConfig) -> u32 {
    if !t.producer_warpgroup() {
        return 0;
    }
    let launch = (65536 / (t.threads() * min_blocks_per_sm(spec, t))).min(255) / 8 * 8;
    let pool = t.threads() * launch - TileConfig::PRODUCER_THREADS * PRODUCER_REGISTERS;
    (pool / t.compute_threads()).min(240) / 8 * 8
}

/// The fewest registers per thread a tile may be compiled for with an explicit `ctas_per_sm`:
/// `mma.sync` warp tiles of 8 rows 80 (ptxas 13.0 fits the (8, 128, 256) tile of 8 warps and 3
/// stages, three CTAs per SM, in 79-80 registers without spills for W4A16 g128, u4 with integer zero
/// points, u3 with float offsets and u2 per channel; bf16 u4 g128 spills 20 bytes), of 16 rows 128
/// (ptxas 13.0 fits the (16, 128, 256) tile in 128: four loop-invariant words spilled, 4 local loads
/// in a 393-instruction main-loop iteration), larger 160; `wgmma` tiles their accumulators
/// (`block_m * warp_n / 32`) plus 64 (measured on the (64, 128, 128) tile of warps of 32 channels
/// with `ctas_per_sm = 2`, the default until the eleventh session: no spills at 128 for W4A16 g128
/// and at 123 for u4 with integer zero points; a tile at the bound may spill a little, e.g.
/// (32, 256, 128) with two CTAs per SM, 16 bytes for bf16 u3 g64 with float offsets). A floor, not a guarantee: spills only cost time.
pub fn min_registers(t: &TileConfig) -> u32 {
    match t.mma {
        Mma::Sync if t.warp_m <= 8 => 80,
        Mma::Sync if t.warp_m <= 16 => 128,
        Mma::Sync => 160,
        Mma::Wgmma => t.block_m as u32 * t.warp_n as u32 / 32 + 64,
    }
}

/// Generates the `.cu` source of a kernel whose spec passed validation.
pub fn generate_cuda(spec: &KernelSpec) -> String {
    let mut s = String::new();
    let group = spec.group_size().unwrap_or(0);
    let _ = writeln!(
        s,
        "// Generated by humming ({GENERATOR_VERSION}). Do not edit: change the gemm! declaration."
    );
    let _ = writeln!(s, "// descriptor: {}", spec.canonical());
    let _ = writeln!(s, "// sha256:     {}", hex(&spec.hash()));
    let _ = writeln!(s, "#include \"humming/gemm.cuh\"");
    let _ = writeln!(s);
    let _ = writeln!(s, "namespace {{");
    let _ = writeln!(s, "using Quant = humming::QuantConfig<");
    let _ = writeln!(
        s,
        "    {},  // A, C and scale element type",
        cuda_dtype(spec.a)
    );
    let _ = writeln!(s, "    {},  // weight bits", spec.b.bits());
    let _ = writeln!(
        s,
        "    {},  // signed weights (stored offset-binary)",
        spec.b.is_signed()
    );
    let _ = writeln!(s, "    {},", zp_kind(spec.zero_point));
    let _ = writeln!(s, "    {group},  // group size along K (0: per channel)");
    let _ = writeln!(
        s,
        "    {},  // scale applied to B in registers (else to C in the epilogue)",
        scale_on_b(spec)
    );
    let _ = writeln!(s, "    {},  // bias", spec.bias);
    let _ = writeln!(s, "    {}>;", epilogue_kind(spec.epilogue));
    let _ = writeln!(s, "}}  // namespace");
    for (i, t) in tiles_of(spec).iter().enumerate() {
        let tile = format!(
            "humming::Tile<{}, {}, {}, {}, {}, {}, {}, {}, {}>",
            t.block_m,
            t.block_n,
            t.block_k,
            t.warp_m,
            t.warp_n,
            t.warp_k,
            t.stages,
            t.mma == Mma::Wgmma,
            consumer_registers(spec, t)
        );
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "// tile {i}: {t}, {} threads, {} bytes of shared memory",
            t.threads(),
            smem_bytes(spec, t)
        );
        let _ = writeln!(
            s,
            "static_assert(humming::Gemm<Quant, {tile}>::kSmemBytes == {}u, \"shared memory size disagrees with the Rust model\");",
            smem_bytes(spec, t)
        );
        let _ = writeln!(
            s,
            "static_assert(humming::Gemm<Quant, {tile}>::kStaged == {}, \"staged epilogue disagrees with the Rust model\");",
            staged_epilogue(spec, t)
        );
        let _ = writeln!(
            s,
            "static_assert(humming::Gemm<Quant, {tile}>::kAtomicC == {}, \"atomic split-K disagrees with the Rust model\");",
            atomic_split_k(spec, t)
        );
        // The runtime launches t.threads(); a kernel expecting another count would hang on its
        // mbarriers or in setmaxnreg.
        let _ = writeln!(
            s,
            "static_assert(humming::Gemm<Quant, {tile}>::kLaunchThreads == {} && {tile}::kProducerRegs == {PRODUCER_REGISTERS}, \"threads or producer registers disagree with the Rust model\");",
            t.threads()
        );
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void __launch_bounds__({}, {})",
            t.threads(),
            min_blocks_per_sm(spec, t)
        );
        let _ = writeln!(
            s,
            "{}(const __grid_constant__ humming::GemmParams params) {{",
            entry_name(spec, i)
        );
        let _ = writeln!(s, "  humming::Gemm<Quant, {tile}>::run(params);");
        let _ = writeln!(s, "}}");
    }
    s
}
