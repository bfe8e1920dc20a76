//! Facts of the packed weight layout that the packer (`humming-runtime`) and the kernels share.

use crate::dtype::DType;
use crate::model::*;

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

/// 4-bit float weights (`e1m2`, `e2m1`, `e3m0`) get their own placement inside the one 4-bit part, so
/// that a pair costs fewer bit operations: in each 16-bit half of a word, slot `j` (0..4) keeps its
/// 3-bit exponent-and-mantissa field at bits `3j .. 3j + 3` and its sign at bit `result[j]` (12..16).
/// The kernel shifts the field by `d_j = t - 3j` (`t`: the field's bit in A's dtype, mantissa bits of
/// A minus those of B); slots with `15 - d_j` in 12..16 keep their sign there, so that one shift and
/// one mask move the whole code, and the other slots fill the remaining sign bits in slot order.
/// `None` for every other format (the codes stay whole, in their slots).
pub fn float4_sign_bits(a: DType, b: DType) -> Option<[u32; 4]> {
    if !is_float_weight(b) || b.bits() != 4 {
        return None;
    }
    let t = a.mantissa_bits() as i32 - b.mantissa_bits() as i32;
    let mut bits = [u32::MAX; 4];
    let mut free: Vec<u32> = (12..16).collect();
    for (j, bit) in bits.iter_mut().enumerate() {
        let own = 15 - (t - 3 * j as i32);
        if (12..16).contains(&own) {
            *bit = own as u32;
            free.retain(|&f| f != own as u32);
        }
    }
    for bit in bits.iter_mut().filter(|b| **b == u32::MAX) {
        *bit = free.remove(0);
    }
    Some(bits)
}

/// True for activations the kernel reads as 8-bit codes (`e4m3`, `e5m2`, `i8`) with a scale per row of
/// A, which the runtime makes from 16-bit A by its input quantization.
pub fn is_8bit_activation(a: DType) -> bool {
    !a.is_16bit_float() && a.bits() == 8
}

/// Bytes of one element of A in the kernel: 2 for 16-bit activations, 1 for 8-bit codes.
pub fn a_bytes(a: DType) -> u32 {
    if is_8bit_activation(a) { 1 } else { 2 }
}

/// True for 8-bit float activations with integer weights (W4A8 FP8): their `mma.sync` tiles convert A's
/// codes to C's 16-bit dtype in registers and run the 16-bit main loop and tiles (sm_90 has no FP8
/// `mma.sync`); the other 8-bit forms multiply codes with the 8-bit `mma`.
pub fn act8_on_16bit_mma(spec: &KernelSpec) -> bool {
    is_8bit_activation(spec.a) && spec.a.is_float() && spec.b != spec.a
}

/// K extent of a group of activation scales, 0 for one scale per row of A: under 8-bit activations
/// a block scale's K extent (A quantized per `1 x k` group, as DeepSeek-V3's FP8 checkpoints pair
/// `128 x 128` weight blocks with `1 x 128` activation groups). Each group's partial sums are promoted
/// into the accumulators times both scales.
pub fn act_scale_group(spec: &KernelSpec) -> u32 {
    match spec.scale.granularity {
        // (W8A8 FP8 only: the main loops of the other 8-bit forms have no row scales to promote.)
        ScaleGranularity::Block { k, .. }
            if is_8bit_activation(spec.a) && spec.a.is_float() && spec.b == spec.a =>
        {
            k
        }
        _ => 0,
    }
}

/// The 16-bit dtype of the scale grid on B and of the zero points: A's for 16-bit activations, C's for
/// 8-bit ones (the grid scales the 8-bit mma's partial sums, or, under [`act8_on_16bit_mma`], is the
/// dtype the weights are dequantized to).
pub fn grid_dtype(spec: &KernelSpec) -> DType {
    if spec.a.is_16bit_float() {
        spec.a
    } else {
        spec.c
    }
}

/// The K index that position `p` (0..16) of a packed k16 slab holds, for kernels with 8-bit
/// activations. The packed layout's fragment of a lane (pair `q = 2 nt + r`, value `h`) is that of
/// `mma.m16n8k16`, at `p = 2 (lane % 4) + 8 r + h`; with 8-bit activations the four values of one
/// channel in a lane's word become the four bytes of the `mma.m16n8k32` operand at `k = 4 (lane % 4) +
/// r + 2 h`, which is where ldmatrix puts the activations. A permutation inside each k16 slab, so every
/// group of 16 or more keeps its columns.
pub fn act8_k_order(p: usize) -> usize {
    let (l, r, h) = ((p % 8) / 2, p / 8, p % 2);
    4 * l + r + 2 * h
}

/// Bytes of one row of K-major weights ([`WeightLayout::KMajor`]) of `bits`-bit codes and K = `k`: K
/// bytes for 8-bit codes, 64 per 128-code block (the last one padded) for 4-bit codes.
pub const fn k_major_row_bytes(bits: u32, k: usize) -> usize {
    if bits == 4 { k.div_ceil(128) * 64 } else { k }
}

/// K-major 4-bit weights (the persistent kernel's, [`WeightLayout::KMajor`]): the nibble that holds code
/// `p` (0..128) of a row's 128-code block. Lane `l % 4` of a warp reads the row's 16 bytes at `16 (l %
/// 4)`; their word `j` holds k32 step `j`, its low nibbles the codes `4 (l % 4) + i` and its high ones
/// `16 + 4 (l % 4) + i` (byte `i`), the register fragment of `wgmma`'s A operand.
pub const fn k_major_4bit_order(p: usize) -> usize {
    let (j, r) = (p / 32, p % 32);
    let (high, t, i) = (r / 16, (r % 16) / 4, r % 4);
    2 * (16 * t + 4 * j + i) + high
}

/// The nibble a K-major 4-bit weight code `c` (offset-binary `v + 8` for signed codes, as the fragments
/// take them: the held two's complement code XOR 8) is
/// packed as under activations `a`: signed codes under e4m3 as `v`, or `8 + (-v - 1)` for `v < 0`, so
/// that the kernel widens them into e4m3's sign and magnitude by a mask and an add; every other code as
/// it is (`cuda/humming/persistent.cuh`, `widen`).
pub const fn k_major_4bit_code(a: DType, b: DType, c: u8) -> u8 {
    if matches!(b, DType::SInt { .. }) && a.is_float() {
        if c >= 8 { c - 8 } else { 15 - c }
    } else {
        c
    }
}

/// The packed layout of B that a tile reads (`humming-runtime`'s `pack` writes each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightLayout {
    /// 64 x 64 units in the order of the mma fragments (`cuda/humming/dequant.cuh`), with the scale
    /// grid on B in a 16-bit dtype: the `mma.sync` and `wgmma` tiles.
    Fragments,
    /// K-major, as the persistent kernel's TMA boxes read them (`cuda/humming/persistent.cuh`): 8-bit
    /// codes as stored, `[N, K]` row-major, one byte each; 4-bit codes `[N, ceil(K / 128) * 64]` bytes,
    /// each row's 128-code blocks in [`k_major_4bit_order`] as [`k_major_4bit_code`], zero codes past
    /// K. Block and group scales stay f32, `[ceil(K / bk), ceil(N / bn)]` and `[ceil(K / g), N]` as
    /// given; channel and tensor scales go into the f32 channel factor. The `wgmma_ss` tiles
    /// ([`Mma::WgmmaSs`]).
    KMajor,
}

impl WeightLayout {
    /// The layout tile `t` reads.
    pub const fn of_tile(t: &TileConfig) -> WeightLayout {
        if t.persistent() {
            WeightLayout::KMajor
        } else {
            WeightLayout::Fragments
        }
    }

    /// Its name, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            WeightLayout::Fragments => "fragment",
            WeightLayout::KMajor => "K-major",
        }
    }
}

// How scales reach the kernel. Whatever the declared scale kinds and dtypes, the device sees at most
// two arrays: a grid of 16-bit scales in A's dtype that multiplies the dequantized weights (group and
// block scales, or channel scales with a float offset), and one f32 factor per output channel that
// multiplies C in the epilogue (channel and tensor scales, secondary scales, and the power of two that
// keeps the grid in range). The packer (`humming-runtime`) converts on the host with these rules.

/// True if a grid of 16-bit scales multiplies the dequantized weights in registers: group and block
/// scales, and channel scales with a float offset. Otherwise the primary scale is part of the f32
/// channel factor ([`channel_factor`]).
pub fn scale_on_b(spec: &KernelSpec) -> bool {
    match spec.scale.granularity {
        ScaleGranularity::Group { .. } | ScaleGranularity::Block { .. } => true,
        ScaleGranularity::Channel => spec.zero_point == ZeroPoint::FloatOffset,
        ScaleGranularity::Tensor => false,
    }
}

/// K extent of one row of the grid on B: the group size, or a block scale's K extent (the block's N
/// extent becomes repeated columns); 0 for channel scales on B.
pub fn b_scale_group(spec: &KernelSpec) -> u32 {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } => size,
        ScaleGranularity::Block { k, .. } => k,
        _ => 0,
    }
}

/// True if the grid on B may be divided, per output channel, by a power of two `2^E` that joins the
/// channel factor: for scales that are not A's 16-bit dtype (e4m3, e5m2, ue8m0, f32, integer
/// sub-group scales: their range exceeds A's, or they are formed by a product), and for float weights
/// (whose exponent offset [`carried_shift`] the grid carries). The packer keeps `E = 0` unless a scale
/// times the carried shift or times the largest weight would leave A's range, or the smallest scale
/// would fall below A's normal range.
pub fn normalized_scales(spec: &KernelSpec) -> bool {
    scale_on_b(spec) && (spec.scale.dtype != grid_dtype(spec) || is_float_weight(spec.b))
}

/// True if an f32 factor per output channel multiplies C in the epilogue.
pub fn channel_factor(spec: &KernelSpec) -> bool {
    !scale_on_b(spec) || spec.scale2.is_some() || normalized_scales(spec)
}

/// True for `eXmY` weights with at least one exponent bit, which the kernel turns into A's dtype by
/// moving their bit fields (the `e0mY` sign-magnitude integers are dequantized as integers).
pub fn is_float_weight(b: DType) -> bool {
    matches!(b, DType::Float { exp, .. } if exp > 0)
}

/// For float weights dequantized to a 16-bit dtype ([`grid_dtype`]: A's, or C's under W4A8 FP8):
/// `bias(that) - bias(B)`, the power of two by which B's bits moved into its layout
/// undershoot the weight (`w * 2^-shift`); 0 otherwise.
pub fn float_shift(spec: &KernelSpec) -> i32 {
    if is_float_weight(spec.b) && (spec.a.is_16bit_float() || act8_on_16bit_mma(spec)) {
        grid_dtype(spec).exponent_bias() - spec.b.exponent_bias()
    } else {
        0
    }
}

/// The part of [`float_shift`] that the kernel does not undo in registers, and that the scales carry
/// instead (the grid on B, or else the channel factor, is multiplied by `2^carried_shift`): all of it
/// under f16, none under bf16 (where `w * 2^-shift` can fall below f32's normal range in the mma, so
/// the kernel multiplies it back first).
pub fn carried_shift(spec: &KernelSpec) -> i32 {
    if grid_dtype(spec) == DType::BF16 {
        0
    } else {
        float_shift(spec)
    }
}

/// Rows of scales (and zero points) one pipeline stage of `block_k` holds.
pub fn scale_rows_per_stage(spec: &KernelSpec, t: &TileConfig) -> u32 {
    match b_scale_group(spec) {
        0 => 0,
        size => (t.block_k as u32 / size).max(1),
    }
}

/// Why a group size is not allowed ([`check_group_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupSizeError {
    /// Not a power of two.
    #[error("group size {size} is not a power of two; use e.g. 32, 64 or 128")]
    NotPowerOfTwo {
        /// The size.
        size: u32,
    },
    /// Shorter than one mma K step of the activations.
    #[error(
        "group size {size} is below the minimum {min} for {a_bits}-bit activations (one MMA K step)"
    )]
    TooSmall {
        /// The size.
        size: u32,
        /// The smallest allowed.
        min: u32,
        /// Bits of A's dtype.
        a_bits: u32,
    },
}

/// The smallest group size (and block-scale K extent) for activations `a`: one mma K step,
/// [`crate::abi::MMA_K_BITS`] bits of A.
pub fn min_group_size(a: DType) -> u32 {
    crate::abi::MMA_K_BITS / a.bits().max(1)
}

/// The one rule for group sizes along K: a power of two of at least [`min_group_size`] (16 for
/// 16-bit activations). The last group of a K that is not a multiple may be partial.
pub fn check_group_size(size: u32, a: DType) -> Result<(), GroupSizeError> {
    let min = min_group_size(a);
    if !size.is_power_of_two() {
        Err(GroupSizeError::NotPowerOfTwo { size })
    } else if size < min {
        Err(GroupSizeError::TooSmall {
            size,
            min,
            a_bits: a.bits(),
        })
    } else {
        Ok(())
    }
}

/// The row of the declared `[N, K]` weights that kernel channel `c` holds. With a gated epilogue the
/// packer reorders the channels so that each run of 16 holds 8 gates and then their 8 up projections
/// (one thread's accumulators hold channels `c` and `c + 8`), and C's column of gate channel `c` is
/// `(c / 16) · 8 + c % 8`; otherwise the order is kept.
pub fn glu_source(epilogue: Epilogue, n: usize, c: usize) -> usize {
    if !epilogue.is_glu() {
        return c;
    }
    let (gate, up) = glu_rows(epilogue, n, (c / 16) * 8 + c % 8);
    if c % 16 >= 8 { up } else { gate }
}

/// The rows of the declared `[N, K]` weights that output column `j` of a gated epilogue combines:
/// `(gate, up)`, `(j, N / 2 + j)` for `silu_glu` (halves) and `(2j, 2j + 1)` for
/// `silu_glu_interleaved`; `(j, j)` for the other epilogues.
pub fn glu_rows(epilogue: Epilogue, n: usize, j: usize) -> (usize, usize) {
    match epilogue {
        Epilogue::SiluGlu => (j, n / 2 + j),
        Epilogue::SiluGluInterleaved => (2 * j, 2 * j + 1),
        _ => (j, j),
    }
}

/// Columns of C: N, or N / 2 with a gated epilogue.
pub fn c_columns(epilogue: Epilogue, n: usize) -> usize {
    if epilogue.is_glu() { n / 2 } else { n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glu_source_is_a_permutation_pairing_each_gate_with_its_up_row() {
        for e in [Epilogue::SiluGlu, Epilogue::SiluGluInterleaved] {
            for n in [64, 128, 1536] {
                let mut seen = vec![false; n];
                for c in 0..n {
                    let r = glu_source(e, n, c);
                    assert!(!seen[r], "{e:?} n={n}: row {r} twice");
                    seen[r] = true;
                    if c % 16 < 8 {
                        let (gate, up) = (r, glu_source(e, n, c + 8));
                        let j = (c / 16) * 8 + c % 8;
                        match e {
                            Epilogue::SiluGlu => assert_eq!((gate, up), (j, n / 2 + j)),
                            _ => assert_eq!((gate, up), (2 * j, 2 * j + 1)),
                        }
                    }
                }
            }
        }
        assert_eq!(glu_source(Epilogue::Silu, 64, 17), 17);
    }

    #[test]
    fn act8_k_order_is_a_permutation_of_each_slab() {
        let mut seen = [false; 16];
        for p in 0..16 {
            seen[act8_k_order(p)] = true;
        }
        assert!(seen.iter().all(|&s| s));
        // Lane 1's word of channel nt: positions 2, 10, 3, 11 (r, h) = (0,0), (1,0), (0,1), (1,1).
        assert_eq!([2, 10, 3, 11].map(act8_k_order), [4, 5, 6, 7]);
    }
}
