//! The contract between the runtime and the kernels: the parameter struct every entry point takes, its
//! flag bits and the limits both sides rely on.
//!
//! Each value is written here once. [`header`] generates `humming/abi.cuh` from this module (constants,
//! the `GemmParams` struct, and `static_assert`s of its size, alignment and every field's offset), and
//! the runtime fills [`GemmParams`] for each launch, so the two sides cannot drift apart.

use std::fmt::Write;

/// One field of [`GemmParams`] as the CUDA header declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiField {
    /// Field name (the same on both sides).
    pub name: &'static str,
    /// The CUDA type.
    pub cuda_type: &'static str,
    /// Byte offset in the struct.
    pub offset: usize,
    /// What the field holds (the Rust doc comment).
    pub doc: &'static str,
}

/// One constant of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiConstant {
    /// Its name in the CUDA header.
    pub cuda_name: &'static str,
    /// Its value.
    pub value: i64,
    /// What it means (the Rust doc comment).
    pub doc: &'static str,
}

macro_rules! params_struct {
    ($(#[doc = $sdoc:literal])* pub struct $name:ident {
        $($(#[doc = $doc:literal])* $field:ident: $ty:ty => $cuda:literal,)*
    }) => {
        $(#[doc = $sdoc])*
        #[repr(C, align(64))]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[doc = $doc])* pub $field: $ty,)*
        }
        impl $name {
            /// Every field, in order, with its CUDA type and offset.
            pub const FIELDS: &'static [AbiField] = &[$(AbiField {
                name: stringify!($field),
                cuda_type: $cuda,
                offset: std::mem::offset_of!($name, $field),
                doc: concat!($($doc),*),
            },)*];
        }
    };
}

macro_rules! constants {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty = $value:expr => $cuda:literal;)*) => {
        $($(#[doc = $doc])* pub const $name: $ty = $value;)*
        /// Every constant of the contract, in declaration order.
        pub const CONSTANTS: &[AbiConstant] = &[$(AbiConstant {
            cuda_name: $cuda,
            value: $name as i64,
            doc: concat!($($doc),*),
        },)*];
    };
}

params_struct! {
    /// The argument of every generated entry point, passed by value as a `__grid_constant__`
    /// parameter (so that the TMA unit reads `a_map` in place). 64-byte aligned: it starts with a
    /// tensor map.
    pub struct GemmParams {
        /// `wgmma` tiles on sm_90a: A as a `CUtensorMap` (2-D, 16-bit elements, dims {K, M}, row
        /// stride lda * 2 bytes, box {64, block M}, 128-byte swizzle, zero fill outside); zero for
        /// other tiles.
        a_map: [u64; 16] => "TmaMap",
        /// Persistent (`wgmma_ss`) tiles: the K-major weight codes as a `CUtensorMap` (2-D, bytes,
        /// dims {K, N}, row stride K, box {128, block N}, 128-byte swizzle); zero for other tiles.
        b_map: [u64; 16] => "TmaMap",
        /// Persistent tiles with `FLAG_TMA_STORE_C`: C as a `CUtensorMap` (2-D, 16-bit elements, dims
        /// {N, M}, row stride ldc * 2 bytes, box {64, min(64, block M)}, 128-byte swizzle); zero otherwise.
        c_map: [u64; 16] => "TmaMap",
        /// A `[M, lda]`, row-major, 16-byte aligned, lda a multiple of 8.
        a: u64 => "const void*",
        /// The packed weights (dequant.cuh describes the layout).
        b: u64 => "const void*",
        /// The 16-bit scale grid on B in A's dtype, `[ceil(K / G), N]` (group and block scales) or `[N]`
        /// (channel scales with a float offset), permuted per 64 channels; null without one.
        scales: u64 => "const void*",
        /// Integer zero points (as exact values of A's dtype) or float offsets, laid out as the
        /// scales; null without a zero point.
        zeros: u64 => "const void*",
        /// The f32 factor per output channel `[N]` (channel and tensor scales, secondary scales,
        /// the power of two of normalized scale grids), plain order; null without one.
        channel: u64 => "const float*",
        /// Bias `[N]` in C's dtype, or null.
        bias: u64 => "const void*",
        /// C `[M, ldc]`, row-major.
        c: u64 => "void*",
        /// f32 partial tiles of the K splits, `[splits][tiles][BM * BN]`; unused without splits or
        /// with `FLAG_ATOMIC_C`.
        workspace: u64 => "float*",
        /// One word per output tile (a split-K ticket or an atomic split-K lock word), zero before the
        /// launch; the kernel leaves them zero.
        locks: u64 => "int*",
        /// Rows of A and C.
        m: i32 => "int",
        /// Output channels.
        n: i32 => "int",
        /// Input features.
        k: i32 => "int",
        /// Row stride of A, in elements.
        lda: i32 => "int",
        /// Row stride of C, in elements.
        ldc: i32 => "int",
        /// K splits (gridDim.z); with stream-K at least the most CTAs that share a tile.
        splits: i32 => "int",
        /// `FLAG_*` bits.
        flags: i32 => "int",
        /// Experts of a mixture-of-experts launch (1 for dense).
        experts: i32 => "int",
        /// MoE rows: `moe_indexed`: the sorted slot ids `[slots]` (slot id `i` reads row `i / top_k`
        /// of A and writes row `i` of C; ids of `m * top_k` or more are padding);
        /// `moe_grouped_contiguous`: the first row of each expert `[E + 1]`; `moe_grouped_masked`: the
        /// rows of each expert `[E]`. Null for dense.
        route: u64 => "const int*",
        /// `moe_indexed`: the expert of each block of block-M slots (negative or `E` and beyond: the
        /// block is skipped); null otherwise.
        expert_ids: u64 => "const int*",
        /// `moe_indexed`: the slots in use, a device scalar (blocks from there on are skipped); null
        /// otherwise.
        route_slots: u64 => "const int*",
        /// An f32 factor per row of C (the router's top-k weights of a MoE down projection, by slot
        /// id), applied after the activation; null for none.
        row_weights: u64 => "const float*",
        /// Bytes of packed B per expert.
        b_expert: i64 => "long long",
        /// Elements of the scale grid (and of the zero points) per expert; persistent tiles: of the
        /// f32 block or group scales.
        s_expert: i64 => "long long",
        /// `moe_indexed`: slots per token of A (`top_k`); 1 otherwise.
        top_k: i32 => "int",
        /// `moe_grouped_masked`: the rows of A and C reserved per expert (`max_m`); 0 otherwise.
        expert_rows: i32 => "int",
        /// 8-bit activations: the f32 scales of A, row `i` at `a_scales[i * a_scale_stride]` (stride 1
        /// per token), and with activation groups its group `g` at `a_scales[i * a_scale_stride + g]`
        /// (stride: the groups of a row); null for 16-bit activations.
        a_scales: u64 => "const float*",
        /// Elements between the scales of consecutive rows of A (see `a_scales`).
        a_scale_stride: i32 => "int",
        /// Persistent tiles: row tiles per band of the tile raster (`PersistentTiles` in
        /// `scheduler.cuh`); 0 for other tiles.
        raster: i32 => "int",
        /// Persistent `moe_indexed` tiles: the rows of A's codes, gathered by slot (row `i` holds
        /// the codes of slot `route[i]`; the routing's capacity); 0 otherwise.
        a_rows: i32 => "int",
    }
}

params_struct! {
    /// The argument of an 8-bit-activation kernel's input quantization (`humming_<hash>_quant`, one
    /// CTA of `ACT_QUANT_THREADS` per row, and with group scales `gridDim.y` CTAs per row, a warp per
    /// group): 16-bit A to codes and f32 scales by the rules of `humming_runtime::act_quant`.
    pub struct ActQuantParams {
        /// A `[m, lda]` in C's 16-bit dtype, 16-byte aligned rows.
        a: u64 => "const void*",
        /// Out: the codes `[m, ldq]` (one byte each).
        codes: u64 => "void*",
        /// Out: the scales, `[m]` per token (with a static scale: that scale in every row), or
        /// `[m, ceil(k / group)]` per group.
        scales: u64 => "float*",
        /// Rows.
        m: i32 => "int",
        /// Columns (a multiple of 8).
        k: i32 => "int",
        /// Row stride of A, in elements (a multiple of 8).
        lda: i32 => "int",
        /// Row stride of the codes, in bytes (a multiple of 8).
        ldq: i32 => "int",
        /// 0: one scale per row; else the columns of a scale's group along K (a multiple of 64).
        group: i32 => "int",
        /// The bits of a static f32 scale (finite, above 0), or 0 for dynamic scales.
        static_scale: u32 => "float",
        /// Gathered by slot (`gridDim.x` rows of codes; null: row `i` of A into row `i`): row `i`
        /// of the codes is row `rows[i] / top_k` of A, or zero codes with scale 0 where `rows[i]` is
        /// outside `0..m * top_k` (padding).
        rows: u64 => "const int*",
        /// The rows in use, a device scalar (rows from there on are left as they are), or null for
        /// all `gridDim.x`.
        rows_used: u64 => "const int*",
        /// Gathered: slots per row of A.
        top_k: i32 => "int",
        /// 1: each row of A holds `[gate | up]`, `2 k` values; the row quantized is
        /// `silu(gate) * up` (`k` values, in f32 from A's 16-bit values). 0: the row as it is.
        glu: i32 => "int",
    }
}

params_struct! {
    /// The argument of a MoE kernel's routing helper (`humming_<hash>_route`, one CTA): the
    /// `moe_indexed` layout from the router's choices, as vLLM's `moe_align_block_size` builds it.
    pub struct RouteParams {
        /// The router's choices `[ids]` (`[M, top_k]`, row-major); an id outside `0..experts` (-1 for
        /// a token routed to another rank) takes no slot.
        topk_ids: u64 => "const int*",
        /// Out: the slot ids `[capacity]`, each expert's choices in flat order, padded to a multiple
        /// of `block_m` with `ids`.
        sorted_ids: u64 => "int*",
        /// Out: the expert of each block of `block_m` slots `[capacity / block_m]` (-1 past the used
        /// ones).
        expert_ids: u64 => "int*",
        /// Out: the slots in use (a multiple of `block_m`), one int.
        slots_used: u64 => "int*",
        /// Choices: `M * top_k`.
        ids: i32 => "int",
        /// Experts (at most `MAX_ROUTE_EXPERTS`).
        experts: i32 => "int",
        /// Slots per block (the GEMM tile's block M).
        block_m: i32 => "int",
        /// Slots of `sorted_ids` (a multiple of `block_m`, at least `ids + min(experts, ids) * (block_m - 1)`).
        capacity: i32 => "int",
    }
}

params_struct! {
    /// The argument of a MoE kernel's combine helper (`humming_<hash>_combine`): `out[t, :] =
    /// Σ_j w[t, j] · y[t * top_k + j, :]` over the valid choices `j` of token `t`, in `j` order, in f32.
    pub struct CombineParams {
        /// The indexed GEMM's output `[M * top_k, n]` in C's dtype.
        y: u64 => "const void*",
        /// The router's choices `[M, top_k]` (rows of invalid ids are left out).
        topk_ids: u64 => "const int*",
        /// The router's weights `[M, top_k]` in f32, or null for 1.
        weights: u64 => "const float*",
        /// Out: `[M, n]` in C's dtype.
        out: u64 => "void*",
        /// Tokens M.
        tokens: i32 => "int",
        /// Choices per token.
        top_k: i32 => "int",
        /// Columns (a multiple of 8).
        n: i32 => "int",
        /// Experts: ids outside `0..experts` are left out.
        experts: i32 => "int",
    }
}

constants! {
    /// Flag: let the next kernel of the stream launch at the start of this one instead of after its
    /// main loop (programmatic dependent launch).
    FLAG_EARLY_TRIGGER: i32 = 1 => "kFlagEarlyTrigger";
    /// Flag: the K splits of each output tile are one thread-block cluster (1 x 1 x splits, at most
    /// `MAX_CLUSTER_SPLITS`) and reduce through distributed shared memory.
    FLAG_CLUSTER_SPLIT_K: i32 = 2 => "kFlagClusterSplitK";
    /// Flag: stream-K; a 1-D grid of G CTAs takes equal ranges of the launch's tiles x K steps.
    FLAG_STREAM_K: i32 = 4 => "kFlagStreamK";
    /// Flag: the K splits of each output tile are added into C with f16 atomics, once the tile's C is
    /// zeroed (a lock word per tile in `locks`; not with stream-K or a cluster).
    FLAG_ATOMIC_C: i32 = 8 => "kFlagAtomicC";
    /// Flag, with `FLAG_ATOMIC_C`: split 0 does not claim the zeroing of C at its start, so the first
    /// split to end claims it: the path a launch takes when split 0's CTA starts late (for tests).
    FLAG_ATOMIC_NO_START_CLAIM: i32 = 16 => "kFlagAtomicNoStartClaim";
    /// Flag, persistent tiles: C is written by TMA stores through `c_map` (else by plain stores, where C's
    /// row stride or address does not allow a tensor map).
    FLAG_TMA_STORE_C: i32 = 32 => "kFlagTmaStoreC";
    /// Flag, persistent `moe_indexed` tiles: row `i` of the gathered rows is written to row `i` of C
    /// (`a_rows` rows; padding rows as zeros), not to its slot's row (a MoE layer's gate-up, whose
    /// output the down projection reads in the same order).
    FLAG_GATHERED_C: i32 = 64 => "kFlagGatheredC";
    /// Most K splits of one output tile that reduce in a thread-block cluster (the portable cluster
    /// size of sm_90).
    MAX_CLUSTER_SPLITS: u32 = 8 => "kMaxClusterSplits";
    /// Threads of a producer warpgroup.
    PRODUCER_THREADS: u32 = 128 => "kProducerThreads";
    /// Registers per thread a producer warpgroup keeps after `setmaxnreg.dec`.
    PRODUCER_REGISTERS: u32 = 24 => "kProducerRegs";
    /// Registers per thread the producer warpgroup of a persistent (`wgmma_ss`) tile keeps after
    /// `setmaxnreg.dec` (one of its warps stages block scales); the two consumer warpgroups take the
    /// rest of the SM's 65536.
    PERSISTENT_PRODUCER_REGISTERS: u32 = 40 => "kPersistentProducerRegs";
    /// Alignment of the stages of a `wgmma` tile, in bytes: the 128-byte swizzle of the A tile is a
    /// function of address bits 4-9, so every A tile starts on this boundary.
    WGMMA_STAGE_ALIGN: u32 = 1024 => "kStageAlign";
    /// Static shared memory of every kernel, in bytes, beside its dynamic shared memory: the stages'
    /// mbarriers and the split-K ticket's flag.
    STATIC_SMEM_BYTES: u32 = 128 => "kStaticSmemBytes";
    /// Most experts of the routing helper (one thread per expert; [`route_smem_bytes`] of shared
    /// memory).
    MAX_ROUTE_EXPERTS: u32 = 1024 => "kMaxRouteExperts";
    /// Threads of the routing helper's one CTA.
    ROUTE_THREADS: u32 = 1024 => "kRouteThreads";
    /// Threads of the input quantization's CTA (one row of A each).
    ACT_QUANT_THREADS: u32 = 256 => "kActQuantThreads";
    /// Bits of A in one mma K step: a scale group spans a whole number of steps, so a group size is a
    /// multiple of `MMA_K_BITS / bits(A)` (16 for 16-bit activations).
    MMA_K_BITS: u32 = 256 => "kMmaKBits";
}

/// Dynamic shared memory of the routing helper for `experts` experts: a count per warp and expert,
/// and each expert's first slot (ints).
pub const fn route_smem_bytes(experts: u32) -> u32 {
    (ROUTE_THREADS / 32 + 1) * experts * 4
}

/// The most stages a tile may have: each takes 16 bytes of the static shared memory (two mbarriers).
pub const MAX_STAGES: u32 = (STATIC_SMEM_BYTES - 16) / 16;

const _: () = assert!(std::mem::size_of::<GemmParams>() == 576);
const _: () = assert!(std::mem::align_of::<GemmParams>() == 64);

/// The text of `humming/abi.cuh`: the constants and the parameter struct of this module, with
/// `static_assert`s that the CUDA compiler lays the struct out as Rust does.
pub fn header() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// humming: the runtime/kernel contract. Generated from humming_spec::abi; do not edit."
    );
    let _ = writeln!(s, "#pragma once\n\nnamespace humming {{\n");
    for c in CONSTANTS {
        let _ = writeln!(s, "// {}", c.doc.trim());
        let _ = writeln!(s, "constexpr int {} = {};", c.cuda_name, c.value);
    }
    let _ = writeln!(s, "constexpr int kMaxStages = {MAX_STAGES};\n");
    let _ = writeln!(
        s,
        "struct alignas(64) TmaMap {{\n  unsigned long long w[16];\n}};"
    );
    let structs: [(&str, &[AbiField], usize, usize); 4] = [
        (
            "GemmParams",
            GemmParams::FIELDS,
            std::mem::size_of::<GemmParams>(),
            std::mem::align_of::<GemmParams>(),
        ),
        (
            "RouteParams",
            RouteParams::FIELDS,
            std::mem::size_of::<RouteParams>(),
            std::mem::align_of::<RouteParams>(),
        ),
        (
            "CombineParams",
            CombineParams::FIELDS,
            std::mem::size_of::<CombineParams>(),
            std::mem::align_of::<CombineParams>(),
        ),
        (
            "ActQuantParams",
            ActQuantParams::FIELDS,
            std::mem::size_of::<ActQuantParams>(),
            std::mem::align_of::<ActQuantParams>(),
        ),
    ];
    for (name, fields, size, align) in structs {
        let _ = writeln!(s, "struct alignas({align}) {name} {{");
        for f in fields {
            let _ = writeln!(s, "  {} {};  // {}", f.cuda_type, f.name, f.doc.trim());
        }
        let _ = writeln!(s, "}};");
        let _ = writeln!(
            s,
            "static_assert(sizeof({name}) == {size} && alignof({name}) == {align}, \"{name}: size or alignment differs from humming_spec::abi\");"
        );
        // NVRTC has no offsetof; NVCC checks every offset when the build script compiles the kernels.
        let _ = writeln!(s, "#if !defined(__CUDACC_RTC__)");
        for f in fields {
            let _ = writeln!(
                s,
                "static_assert(__builtin_offsetof({name}, {0}) == {1}, \"{name}::{0}: offset differs from humming_spec::abi\");",
                f.name, f.offset
            );
        }
        let _ = writeln!(s, "#endif");
    }
    let _ = writeln!(s, "\n}}  // namespace humming");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_contiguous_and_documented() {
        let f = GemmParams::FIELDS;
        // Three tensor maps of 128 bytes first (A, B, C).
        assert_eq!(
            (f[0].name, f[1].name, f[2].name),
            ("a_map", "b_map", "c_map")
        );
        assert_eq!((f[1].offset, f[3].offset), (128, 384));
        let flags = f.iter().find(|f| f.name == "flags").unwrap();
        assert_eq!(flags.offset, 384 + 9 * 8 + 6 * 4);
        assert_eq!(
            f.last().unwrap().offset,
            384 + 9 * 8 + 8 * 4 + 6 * 8 + 8 + 8 + 4 + 4
        );
        assert!(f.iter().all(|f| !f.doc.is_empty()));
    }

    #[test]
    fn header_declares_every_constant_and_field() {
        let h = header();
        for c in CONSTANTS {
            assert!(
                h.contains(&format!("constexpr int {} = {};", c.cuda_name, c.value)),
                "{}",
                c.cuda_name
            );
        }
        for f in GemmParams::FIELDS {
            assert!(h.contains(&format!("  {} {};", f.cuda_type, f.name)));
            assert!(h.contains(&format!(
                "__builtin_offsetof(GemmParams, {}) == {}",
                f.name, f.offset
            )));
        }
    }
}
