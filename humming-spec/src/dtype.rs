//! Element types of the format matrix: activations (A), weights (B), outputs (C) and scales.
//!
//! Names follow the usual conventions: `f16` (IEEE binary16, e5m10), `bf16` (e8m7), `f32`,
//! `uN` / `iN` for unsigned / two's-complement integers of N bits, `eXmY` for a signed
//! minifloat with X exponent and Y mantissa bits (OCP FP8 `e4m3` / `e5m2`, OCP MX FP4 `e2m1`,
//! FP6 `e2m3` / `e3m2`, and `e0mY` sign-magnitude integers), and `ue8m0` for the unsigned
//! exponent-only scale of the OCP Microscaling (MX) spec.

use std::fmt;

/// One element type.
///
/// The value is plain data and can be built in `const` context. Its [`Display`](fmt::Display) form is
/// the canonical spelling, which [`DType::parse`] reads back (`DType::parse(&d.to_string()) == Some(d)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary16 (`f16`, also spelled `e5m10`).
    F16,
    /// bfloat16 (`bf16`, also spelled `e8m7`).
    BF16,
    /// IEEE 754 binary32 (`f32`, also spelled `e8m23`).
    F32,
    /// Unsigned integer code of `bits` bits (1..=8 for weights), e.g. `u4`.
    UInt {
        /// Width in bits.
        bits: u8,
    },
    /// Two's-complement signed integer of `bits` bits, e.g. `i8` (alias `int8`).
    SInt {
        /// Width in bits.
        bits: u8,
    },
    /// Signed minifloat `eXmY` of at most 8 bits: one sign bit, `exp` exponent bits (IEEE-style bias
    /// `2^(exp-1) - 1`, subnormals, no infinities for the OCP FP8/FP4 formats), `man` mantissa bits.
    Float {
        /// Exponent bits.
        exp: u8,
        /// Mantissa bits.
        man: u8,
    },
    /// Unsigned exponent-only scale of the OCP MX spec (`ue8m0`): value `2^(code - 127)`.
    UE8M0,
}

impl DType {
    /// OCP FP8 E4M3.
    pub const E4M3: DType = DType::Float { exp: 4, man: 3 };
    /// OCP FP8 E5M2.
    pub const E5M2: DType = DType::Float { exp: 5, man: 2 };
    /// OCP MX FP4 E2M1.
    pub const E2M1: DType = DType::Float { exp: 2, man: 1 };

    /// Width in bits.
    pub const fn bits(self) -> u32 {
        match self {
            DType::F16 | DType::BF16 => 16,
            DType::F32 => 32,
            DType::UInt { bits } | DType::SInt { bits } => bits as u32,
            DType::Float { exp, man } => 1 + exp as u32 + man as u32,
            DType::UE8M0 => 8,
        }
    }

    /// Exponent bits of a floating type (0 for integers).
    pub const fn exponent_bits(self) -> u32 {
        match self {
            DType::F16 => 5,
            DType::BF16 | DType::F32 | DType::UE8M0 => 8,
            DType::Float { exp, .. } => exp as u32,
            DType::UInt { .. } | DType::SInt { .. } => 0,
        }
    }

    /// Mantissa bits of a floating type (for integers: the magnitude bits).
    pub const fn mantissa_bits(self) -> u32 {
        match self {
            DType::F16 => 10,
            DType::BF16 => 7,
            DType::F32 => 23,
            DType::UE8M0 => 0,
            DType::Float { man, .. } => man as u32,
            DType::UInt { bits } => bits as u32,
            DType::SInt { bits } => bits as u32 - 1,
        }
    }

    /// True for `uN` and `iN`.
    pub const fn is_integer(self) -> bool {
        matches!(self, DType::UInt { .. } | DType::SInt { .. })
    }

    /// True for the floating types, including `ue8m0`.
    pub const fn is_float(self) -> bool {
        !self.is_integer()
    }

    /// True for `f16` and `bf16`.
    pub const fn is_16bit_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// True if the type has a sign (all floats except `ue8m0`, and `iN`).
    pub const fn is_signed(self) -> bool {
        !matches!(self, DType::UInt { .. } | DType::UE8M0)
    }

    /// Parses a spelling: `f16`, `bf16`, `f32`, `uN` / `uintN`, `iN` / `intN`, `eXmY`, `ue8m0`.
    ///
    /// Integer widths are not range-checked here (`u12` parses; validation rejects it with a span),
    /// so that an error can name the allowed range. Returns `None` for anything else, never panics.
    pub fn parse(s: &str) -> Option<DType> {
        match s {
            "f16" | "fp16" | "half" => return Some(DType::F16),
            "bf16" => return Some(DType::BF16),
            "f32" | "fp32" => return Some(DType::F32),
            "ue8m0" | "e8m0" => return Some(DType::UE8M0),
            _ => {}
        }
        let int = |rest: &str| -> Option<u8> {
            if rest.is_empty() || rest.len() > 3 || !rest.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            rest.parse::<u16>().ok().and_then(|v| u8::try_from(v).ok())
        };
        if let Some(rest) = s.strip_prefix("uint").or_else(|| s.strip_prefix('u')) {
            return int(rest).map(|bits| DType::UInt { bits });
        }
        if let Some(rest) = s.strip_prefix("int").or_else(|| s.strip_prefix('i')) {
            return int(rest).map(|bits| DType::SInt { bits });
        }
        if let Some(rest) = s.strip_prefix('e') {
            let (e, m) = rest.split_once('m')?;
            let (exp, man) = (int(e)?, int(m)?);
            return match (exp, man) {
                (5, 10) => Some(DType::F16),
                (8, 7) => Some(DType::BF16),
                (8, 23) => Some(DType::F32),
                _ if 1 + exp as u32 + man as u32 <= 8 && man + exp > 0 => {
                    Some(DType::Float { exp, man })
                }
                _ => None,
            };
        }
        None
    }

    /// Stable numeric id used in generated code and metadata:
    /// `kind * 10^7 + signed * 10^6 + bits * 10^4 + exp * 100 + man` (kind 1 = integer, 2 = float).
    pub const fn id(self) -> u32 {
        let kind = if self.is_integer() { 1 } else { 2 };
        let signed = if self.is_signed() { 1 } else { 0 };
        let (e, m) = if self.is_integer() {
            (0, 0)
        } else {
            (self.exponent_bits(), self.mantissa_bits())
        };
        kind * 10_000_000 + signed * 1_000_000 + self.bits() * 10_000 + e * 100 + m
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DType::F16 => f.write_str("f16"),
            DType::BF16 => f.write_str("bf16"),
            DType::F32 => f.write_str("f32"),
            DType::UInt { bits } => write!(f, "u{bits}"),
            DType::SInt { bits } => write!(f, "i{bits}"),
            DType::Float { exp, man } => write!(f, "e{exp}m{man}"),
            DType::UE8M0 => f.write_str("ue8m0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_canonicalize() {
        assert_eq!(DType::parse("e5m10"), Some(DType::F16));
        assert_eq!(DType::parse("e8m7"), Some(DType::BF16));
        assert_eq!(DType::parse("int8"), Some(DType::SInt { bits: 8 }));
        assert_eq!(DType::parse("uint4"), Some(DType::UInt { bits: 4 }));
        assert_eq!(DType::parse("e8m0"), Some(DType::UE8M0));
        assert_eq!(DType::parse("e4m3"), Some(DType::E4M3));
        assert_eq!(DType::parse("e0m3"), Some(DType::Float { exp: 0, man: 3 }));
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "", "u", "i", "e4", "e9m9", "e4m4", "x8", "u1000", "e0m0", "u-1", "f8", "emm",
        ] {
            assert_eq!(DType::parse(s), None, "{s}");
        }
    }

    #[test]
    fn ids_are_distinct() {
        let all = [
            DType::F16,
            DType::BF16,
            DType::F32,
            DType::UInt { bits: 4 },
            DType::SInt { bits: 4 },
            DType::E4M3,
            DType::E5M2,
            DType::E2M1,
            DType::UE8M0,
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a.id(), b.id(), "{a} {b}");
            }
        }
        assert_eq!(DType::F16.id(), 21_160_510);
    }

    proptest::proptest! {
        #[test]
        fn display_parse_round_trip(kind in 0u8..7, bits in 1u8..=8, exp in 0u8..=7, man in 0u8..=7) {
            let d = match kind {
                0 => DType::F16,
                1 => DType::BF16,
                2 => DType::F32,
                3 => DType::UInt { bits },
                4 => DType::SInt { bits },
                5 => DType::UE8M0,
                _ => {
                    if exp + man == 0 || 1 + exp + man > 8 { DType::E4M3 } else { DType::Float { exp, man } }
                }
            };
            proptest::prop_assert_eq!(DType::parse(&d.to_string()), Some(d));
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,12}") {
            let _ = DType::parse(&s);
        }
    }
}
