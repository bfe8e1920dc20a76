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

/// Whether a code of a floating type is an ordinary number, or one of its special codes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CodeValue {
    /// A finite value.
    Finite(f64),
    /// Infinity (e5m2, f16, bf16, f32), with its sign.
    Infinite(f64),
    /// Not a number (e4m3's `S.1111.111`, e5m2's and IEEE types' NaN codes, ue8m0's `0xFF`).
    NaN,
}

impl DType {
    /// Exponent bias of a floating type: `2^(exp-1) - 1` (127 for `ue8m0`); 0 for integers and `e0mY`.
    pub const fn exponent_bias(self) -> i32 {
        match self {
            DType::UE8M0 => 127,
            _ if self.is_integer() => 0,
            _ => {
                let e = self.exponent_bits();
                if e == 0 { 0 } else { (1 << (e - 1)) - 1 }
            }
        }
    }

    /// True for the formats whose all-ones exponent field holds infinities and NaNs (IEEE style:
    /// f16, bf16, f32, OCP e5m2 and the other 5-bit-exponent minifloats, which share binary16's
    /// exponent). OCP e4m3 has only NaN there (`S.1111.111`); the OCP MX formats (e2m1, e2m3, e3m2)
    /// and the other minifloats use every code for a finite value.
    pub const fn has_infinities(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
            || matches!(self, DType::Float { exp: 5, .. })
    }

    /// The value of the raw code `code` (its low [`DType::bits`] bits; higher bits are ignored):
    /// two's complement for `iN`, sign-magnitude for `e0mY`, IEEE-style with subnormals for `eXmY`,
    /// `2^(code - 127)` for `ue8m0`, and the OCP / IEEE special codes where the type has them.
    pub fn decode(self, code: u32) -> CodeValue {
        let bits = self.bits();
        let code = if bits >= 32 {
            code
        } else {
            code & ((1u32 << bits) - 1)
        };
        match self {
            DType::UInt { .. } => CodeValue::Finite(f64::from(code)),
            DType::SInt { bits } => {
                let v = if code >= 1 << (bits - 1) {
                    i64::from(code) - (1i64 << bits)
                } else {
                    i64::from(code)
                };
                CodeValue::Finite(v as f64)
            }
            DType::UE8M0 => {
                if code == 0xFF {
                    CodeValue::NaN
                } else {
                    CodeValue::Finite(2f64.powi(code as i32 - 127))
                }
            }
            DType::F32 => classify(f64::from(f32::from_bits(code))),
            DType::F16 | DType::BF16 | DType::Float { .. } => {
                let (e_bits, m_bits) = (self.exponent_bits(), self.mantissa_bits());
                let sign = if code >> (e_bits + m_bits) & 1 == 1 {
                    -1.0
                } else {
                    1.0
                };
                let e = (code >> m_bits) & ((1u32 << e_bits) - 1);
                let m = code & ((1u32 << m_bits) - 1);
                if e_bits == 0 {
                    return CodeValue::Finite(sign * f64::from(m));
                }
                let all_ones = e == (1u32 << e_bits) - 1;
                if all_ones && self.has_infinities() {
                    return if m == 0 {
                        CodeValue::Infinite(sign * f64::INFINITY)
                    } else {
                        CodeValue::NaN
                    };
                }
                if all_ones && self == DType::E4M3 && m == 7 {
                    return CodeValue::NaN;
                }
                let bias = self.exponent_bias();
                let frac = f64::from(m) / f64::from(1u32 << m_bits);
                let v = if e == 0 {
                    frac * 2f64.powi(1 - bias)
                } else {
                    (1.0 + frac) * 2f64.powi(e as i32 - bias)
                };
                CodeValue::Finite(sign * v)
            }
        }
    }

    /// The value of `code` when it is finite ([`DType::decode`]).
    pub fn finite_value(self, code: u32) -> Option<f64> {
        match self.decode(code) {
            CodeValue::Finite(v) => Some(v),
            _ => None,
        }
    }

    /// The largest finite value of the type (e4m3: 448, e5m2: 57344, e2m1: 6, e0m3: 7, u4: 15,
    /// ue8m0: 2^127).
    pub fn max_finite(self) -> f64 {
        match self {
            DType::UInt { bits } => f64::from((1u32 << bits) - 1),
            DType::SInt { bits } => f64::from((1u32 << (bits - 1)) - 1),
            DType::UE8M0 => 2f64.powi(127),
            _ => {
                let (e, m) = (self.exponent_bits(), self.mantissa_bits());
                if e == 0 {
                    return f64::from((1u32 << m) - 1);
                }
                let top_e = (1i32 << e) - 1 - i32::from(self.has_infinities());
                let top_m = if self == DType::E4M3 {
                    6
                } else {
                    (1u32 << m) - 1
                };
                (1.0 + f64::from(top_m) / f64::from(1u32 << m))
                    * 2f64.powi(top_e - self.exponent_bias())
            }
        }
    }

    /// The smallest finite value: `-2^(bits-1)` for `iN`, 0 for `uN` and `ue8m0`, `-max` for floats.
    pub fn min_finite(self) -> f64 {
        match self {
            DType::SInt { bits } => -f64::from(1u32 << (bits - 1)),
            DType::UInt { .. } | DType::UE8M0 => 0.0,
            _ => -self.max_finite(),
        }
    }

    /// Rounds `v` to the nearest finite value of the type, ties to even (for `ue8m0`: the nearest power
    /// of two by exponent, ties up). Returns `None` when `v` is not finite, or is beyond the largest
    /// finite value after rounding, or is negative for an unsigned type.
    pub fn round(self, v: f64) -> Option<f64> {
        if !v.is_finite() {
            return None;
        }
        let r = match self {
            DType::UInt { .. } | DType::SInt { .. } => v.round_ties_even(),
            DType::UE8M0 => {
                if v <= 0.0 {
                    return None;
                }
                let e = v.log2().round().clamp(-127.0, 127.0);
                2f64.powi(e as i32)
            }
            _ => {
                let (e, m) = (self.exponent_bits(), self.mantissa_bits());
                if e == 0 {
                    v.round_ties_even()
                } else {
                    // The binade from the bits (a log2 can land on the wrong side of a power of
                    // two); f64 subnormals are far below every type's smallest subnormal.
                    let biased = ((v.to_bits() >> 52) & 0x7FF) as i32;
                    let emin = 1 - self.exponent_bias();
                    let ev = if biased == 0 {
                        emin
                    } else {
                        (biased - 1023).max(emin)
                    };
                    let quantum = 2f64.powi(ev - m as i32);
                    (v / quantum).round_ties_even() * quantum
                }
            }
        };
        (r >= self.min_finite() && r <= self.max_finite()).then_some(r)
    }

    /// True if `v` is a finite value of the type.
    pub fn represents(self, v: f64) -> bool {
        self.round(v) == Some(v)
    }
}

fn classify(v: f64) -> CodeValue {
    if v.is_nan() {
        CodeValue::NaN
    } else if v.is_infinite() {
        CodeValue::Infinite(v)
    } else {
        CodeValue::Finite(v)
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

    #[test]
    fn minifloat_edges() {
        use CodeValue::*;
        assert_eq!(DType::E4M3.decode(0x7F), NaN);
        assert_eq!(DType::E4M3.decode(0x7E), Finite(448.0));
        assert_eq!(DType::E4M3.decode(0x01), Finite(2f64.powi(-9)));
        assert_eq!(DType::E4M3.decode(0x80), Finite(-0.0));
        assert_eq!(DType::E5M2.decode(0x7C), Infinite(f64::INFINITY));
        assert_eq!(DType::E5M2.decode(0x7B), Finite(57344.0));
        assert_eq!(DType::E5M2.decode(0x01), Finite(2f64.powi(-16)));
        assert_eq!(DType::E2M1.decode(0x7), Finite(6.0));
        assert_eq!(DType::E2M1.decode(0x1), Finite(0.5));
        assert_eq!(DType::E2M1.decode(0xF), Finite(-6.0));
        let e2m3 = DType::Float { exp: 2, man: 3 };
        let e3m2 = DType::Float { exp: 3, man: 2 };
        assert_eq!(e2m3.max_finite(), 7.5);
        assert_eq!(e3m2.max_finite(), 28.0);
        assert_eq!(DType::Float { exp: 0, man: 3 }.decode(0xF), Finite(-7.0));
        assert_eq!(DType::UE8M0.decode(0), Finite(2f64.powi(-127)));
        assert_eq!(DType::UE8M0.decode(254), Finite(2f64.powi(127)));
        assert_eq!(DType::UE8M0.decode(255), NaN);
        assert_eq!(DType::E4M3.max_finite(), 448.0);
        assert_eq!(DType::E5M2.max_finite(), 57344.0);
        assert_eq!(DType::F16.max_finite(), 65504.0);
        assert_eq!(DType::F16.decode(0x7C00), Infinite(f64::INFINITY));
        assert_eq!(DType::BF16.decode(0x3F80), Finite(1.0));
    }

    #[test]
    fn rounding_matches_decoding() {
        for d in [
            DType::E4M3,
            DType::E5M2,
            DType::E2M1,
            DType::Float { exp: 2, man: 3 },
            DType::Float { exp: 3, man: 2 },
            DType::Float { exp: 0, man: 3 },
        ] {
            for code in 0..1u32 << d.bits() {
                if let CodeValue::Finite(v) = d.decode(code) {
                    assert_eq!(d.round(v), Some(v), "{d} {code:#x}");
                    assert!(d.represents(v));
                }
            }
            assert_eq!(d.round(d.max_finite() * 1.5), None, "{d}");
        }
        assert_eq!(DType::E4M3.round(0.3), Some(0.3125));
        assert_eq!(DType::E2M1.round(2.5), Some(2.0));
        assert_eq!(DType::E2M1.round(5.0), Some(4.0));
        assert_eq!(DType::UE8M0.round(3.0), Some(4.0));
        assert!(!DType::UE8M0.represents(3.0));
        assert!(DType::UE8M0.represents(2f64.powi(-127)));
        assert!(DType::F16.represents(65504.0) && !DType::F16.represents(65505.0));
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
