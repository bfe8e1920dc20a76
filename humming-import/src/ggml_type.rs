//! The ggml tensor types (`enum ggml_type`): their numbers in a GGUF file, names and block layouts.

use std::fmt;

/// A ggml tensor type (`enum ggml_type` in ggml's `ggml.h`), as stored in a GGUF tensor info.
///
/// Types this crate does not know (added to ggml later, or removed ones such as Q4_2) are kept as
/// [`GgmlType::Other`] with their raw number; their byte size is unknown, so their bytes cannot be
/// read, but they are listed.
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float (0).
    F32,
    /// IEEE half (1).
    F16,
    /// 4-bit, blocks of 32: f16 scale `d`, `w = d * (q - 8)` (2).
    Q4_0,
    /// 4-bit, blocks of 32: f16 scale `d` and offset `m`, `w = d * q + m` (3).
    Q4_1,
    /// 5-bit, blocks of 32: f16 scale `d`, `w = d * (q - 16)` (6).
    Q5_0,
    /// 5-bit, blocks of 32: f16 scale `d` and offset `m`, `w = d * q + m` (7).
    Q5_1,
    /// 8-bit, blocks of 32: f16 scale `d`, `w = d * q` (8).
    Q8_0,
    /// 8-bit, blocks of 32, with the block sum (9; used for activations).
    Q8_1,
    /// k-quant, 2-bit super-blocks of 256 (10).
    Q2_K,
    /// k-quant, 3-bit (11).
    Q3_K,
    /// k-quant, 4-bit (12).
    Q4_K,
    /// k-quant, 5-bit (13).
    Q5_K,
    /// k-quant, 6-bit (14).
    Q6_K,
    /// k-quant, 8-bit (15; used for activations).
    Q8_K,
    /// i-quant (16).
    IQ2_XXS,
    /// i-quant (17).
    IQ2_XS,
    /// i-quant (18).
    IQ3_XXS,
    /// i-quant (19).
    IQ1_S,
    /// i-quant, non-linear 4-bit, blocks of 32 (20).
    IQ4_NL,
    /// i-quant (21).
    IQ3_S,
    /// i-quant (22).
    IQ2_S,
    /// i-quant (23).
    IQ4_XS,
    /// 8-bit integer (24).
    I8,
    /// 16-bit integer (25).
    I16,
    /// 32-bit integer (26).
    I32,
    /// 64-bit integer (27).
    I64,
    /// 64-bit float (28).
    F64,
    /// i-quant (29).
    IQ1_M,
    /// bfloat16 (30).
    BF16,
    /// ternary, super-blocks of 256 (34).
    TQ1_0,
    /// ternary, super-blocks of 256 (35).
    TQ2_0,
    /// MXFP4, blocks of 32 with an e8m0 scale (39).
    MXFP4,
    /// A type number this crate does not know.
    Other(u32),
}

impl GgmlType {
    /// The type of a raw `ggml_type` number.
    pub fn from_raw(raw: u32) -> GgmlType {
        use GgmlType::*;
        match raw {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            16 => IQ2_XXS,
            17 => IQ2_XS,
            18 => IQ3_XXS,
            19 => IQ1_S,
            20 => IQ4_NL,
            21 => IQ3_S,
            22 => IQ2_S,
            23 => IQ4_XS,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            29 => IQ1_M,
            30 => BF16,
            34 => TQ1_0,
            35 => TQ2_0,
            39 => MXFP4,
            other => Other(other),
        }
    }

    /// The raw `ggml_type` number.
    pub fn raw(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            IQ2_XXS => 16,
            IQ2_XS => 17,
            IQ3_XXS => 18,
            IQ1_S => 19,
            IQ4_NL => 20,
            IQ3_S => 21,
            IQ2_S => 22,
            IQ4_XS => 23,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            IQ1_M => 29,
            BF16 => 30,
            TQ1_0 => 34,
            TQ2_0 => 35,
            MXFP4 => 39,
            Other(raw) => raw,
        }
    }

    /// `(elements per block, bytes per block)`, as in ggml's `type_traits` (`blck_size`,
    /// `type_size`); `None` for [`GgmlType::Other`]. Plain types have blocks of one element.
    pub fn block_layout(self) -> Option<(usize, usize)> {
        use GgmlType::*;
        Some(match self {
            F32 => (1, 4),
            F16 => (1, 2),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            Q2_K => (256, 84),
            Q3_K => (256, 110),
            Q4_K => (256, 144),
            Q5_K => (256, 176),
            Q6_K => (256, 210),
            Q8_K => (256, 292),
            IQ2_XXS => (256, 66),
            IQ2_XS => (256, 74),
            IQ3_XXS => (256, 98),
            IQ1_S => (256, 50),
            IQ4_NL => (32, 18),
            IQ3_S => (256, 110),
            IQ2_S => (256, 82),
            IQ4_XS => (256, 136),
            I8 => (1, 1),
            I16 => (1, 2),
            I32 => (1, 4),
            I64 => (1, 8),
            F64 => (1, 8),
            IQ1_M => (256, 56),
            BF16 => (1, 2),
            TQ1_0 => (256, 54),
            TQ2_0 => (256, 66),
            MXFP4 => (32, 17),
            Other(_) => return None,
        })
    }

    /// Bytes of `n_elements` elements, `None` if the type is unknown, `n_elements` is not a whole
    /// number of blocks, or the size overflows.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let (blk, size) = self.block_layout()?;
        let (blk, size) = (blk as u64, size as u64);
        if !n_elements.is_multiple_of(blk) {
            return None;
        }
        (n_elements / blk).checked_mul(size)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgmlType::Other(raw) => write!(f, "unknown ggml type {raw}"),
            other => write!(f, "{other:?}"),
        }
    }
}
