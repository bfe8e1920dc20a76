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
