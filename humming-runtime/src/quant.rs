//! Quantized weights in their plain row-major form, quantization (round-to-nearest) and exact f64
//! dequantization.
//!
//! Conventions (shared with GPTQ/AWQ after unpacking, and with GGUF after block decoding):
//! - B is `[N, K]`: N output channels (rows), K input features (columns), row-major.
//! - `codes[n * K + k]` is the raw `b`-bit pattern of the weight's code: `0..2^b` for `uN`; for `iN` the
//!   two's-complement pattern truncated to `b` bits (so `-1` in `i4` is `0b1111`).
//! - `scales[g * N + n]` for group `g = k / G` (`ceil(K / G)` groups; a last partial group is allowed).
//!   Channel scales are one row: `scales[n]`. Every stored scale is exactly representable in the spec's
//!   scale dtype.
//! - Zero points have the scales' shape: integer codes `0..2^b` (GPTQ/AWQ), or float offsets exactly
//!   representable in the scale dtype (GGUF Q4_1 `m`).
//! - Dequantized value: `s * q` (no zero point; `q` sign-extended for `iN`), `s * (q - z)` (integer
//!   zero point), `s * q + m` (float offset).
//!
//! Supported descriptors (what [`QuantizedWeights::from_parts`] and [`QuantizedWeights::quantize`]
//! accept, the same set the code generator emits): `a` is `f16` or `bf16`; the scale dtype equals `a`;
//! `b` is `u1..=u8` or `i2..=i8`; the scale is per channel or per group (the one group-size rule,
//! [`humming_spec::layout::check_group_size`]: a power of two of at least 16); zero points (integer or
//! float) only with unsigned codes; no secondary scale.

use crate::error::{Result, invalid};
use crate::kernel::Element;
use humming_spec::{DType, KernelSpec, ScaleGranularity, ZeroPoint};

/// Zero points of quantized weights, in the layout of the scales (`[groups, N]`).
#[derive(Clone, Debug, PartialEq)]
pub enum ZeroPoints {
    /// No zero point.
    None,
    /// Integer zero points (codes of the weight's width, `0..2^b`).
    Integer(Vec<u8>),
    /// Float additive offsets, each exactly representable in the scale dtype.
    Float(Vec<f32>),
}

impl ZeroPoints {
    /// The [`ZeroPoint`] kind of the model these values belong to.
    pub fn kind(&self) -> ZeroPoint {
        match self {
            ZeroPoints::None => ZeroPoint::None,
            ZeroPoints::Integer(_) => ZeroPoint::Integer,
            ZeroPoints::Float(_) => ZeroPoint::FloatOffset,
        }
    }
}

/// Quantized weights of one `[N, K]` matrix for one kernel descriptor, in plain row-major form.
///
/// Always valid: it can only be built by [`QuantizedWeights::from_parts`] (which checks every value),
/// [`QuantizedWeights::quantize`] or [`crate::pack::PackedWeights::unpack`].
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedWeights {
    pub(crate) spec: KernelSpec,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) codes: Vec<u8>,
    pub(crate) scales: Vec<f32>,
    pub(crate) zeros: ZeroPoints,
}

impl QuantizedWeights {
    /// The descriptor these weights were made for.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }
    /// Output channels.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Raw codes `[N, K]`.
    pub fn codes(&self) -> &[u8] {
        &self.codes
    }
    /// Scales `[groups, N]`.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }
    /// Zero points.
    pub fn zeros(&self) -> &ZeroPoints {
        &self.zeros
    }
    /// Number of scale rows: `ceil(K / G)` for group scales, 1 for channel scales.
    pub fn groups(&self) -> usize {
        groups_of(&self.spec, self.k)
    }
    /// Weight width in bits (`b` of the spec).
    pub fn bits(&self) -> u32 {
        self.spec.b.bits()
    }

    /// Builds weights from their parts, checking everything.
    ///
    /// - `spec`: a supported descriptor (see the module doc), else an error naming `spec`.
    /// - `n`, `k`: positive; `n * k` must not overflow.
    /// - `codes`: `[N, K]` raw codes, each `< 2^b` (two's-complement patterns for `iN`).
    /// - `scales`: `[groups, N]` (`groups = ceil(K / G)`, 1 for channel scales), finite and exactly
    ///   representable in `spec.scale.dtype`.
    /// - `zeros`: the kind of `spec.zero_point`, in the scales' shape; integer zero points `< 2^b`, float
    ///   offsets finite and exactly representable in the scale dtype.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming `spec`, `n`, `k`, `codes`, `scales` or `zeros`.
    pub fn from_parts(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        codes: Vec<u8>,
        scales: Vec<f32>,
        zeros: ZeroPoints,
    ) -> Result<Self> {
        check_spec(spec)?;
        let nk = check_dims(n, k)?;
        let bits = spec.b.bits();
        let limit = 1u32 << bits;
        if codes.len() != nk {
            return Err(invalid(
                "codes",
                format!(
                    "expected N * K = {n} * {k} = {nk} codes, found {}",
                    codes.len()
                ),
            ));
        }
        if let Some(i) = codes.iter().position(|&c| u32::from(c) >= limit) {
            return Err(invalid(
                "codes",
                format!(
                    "code {} at index {i} (n = {}, k = {}) does not fit in {bits} bits (must be < {limit})",
                    codes[i],
                    i / k,
                    i % k
                ),
            ));
        }
        let rows = groups_of(spec, k);
        let want = rows * n;
        if scales.len() != want {
            return Err(invalid(
                "scales",
                format!(
                    "expected groups * N = {rows} * {n} = {want} scales, found {}",
                    scales.len()
                ),
            ));
        }
        let sd = spec.scale.dtype;
        for (i, &s) in scales.iter().enumerate() {
            if !s.is_finite() {
                return Err(invalid(
                    "scales",
                    format!("scale {s} at index {i} is not finite"),
                ));
            }
            if !is_representable(f64::from(s), sd) {
                return Err(invalid(
                    "scales",
                    format!("scale {s:e} at index {i} is not exactly representable in {sd}"),
                ));
            }
        }
        match (&zeros, spec.zero_point) {
            (ZeroPoints::None, ZeroPoint::None) => {}
            (ZeroPoints::Integer(z), ZeroPoint::Integer) => {
                if z.len() != want {
                    return Err(invalid(
                        "zeros",
                        format!(
                            "expected groups * N = {want} integer zero points, found {}",
                            z.len()
                        ),
                    ));
                }
                if let Some(i) = z.iter().position(|&c| u32::from(c) >= limit) {
                    return Err(invalid(
                        "zeros",
                        format!(
                            "zero point {} at index {i} does not fit in {bits} bits (must be < {limit})",
                            z[i]
                        ),
                    ));
                }
            }
            (ZeroPoints::Float(z), ZeroPoint::FloatOffset) => {
                if z.len() != want {
                    return Err(invalid(
                        "zeros",
                        format!(
                            "expected groups * N = {want} float offsets, found {}",
                            z.len()
                        ),
                    ));
                }
                for (i, &m) in z.iter().enumerate() {
                    if !m.is_finite() {
                        return Err(invalid(
                            "zeros",
                            format!("float offset {m} at index {i} is not finite"),
                        ));
                    }
                    if !is_representable(f64::from(m), sd) {
                        return Err(invalid(
                            "zeros",
                            format!(
                                "float offset {m:e} at index {i} is not exactly representable in {sd}"
                            ),
                        ));
                    }
                }
            }
            (z, want_kind) => {
                return Err(invalid(
                    "zeros",
                    format!(
                        "the spec's zero point is {}, but {} zero points were given",
                        zp_name(want_kind),
                        zp_name(z.kind())
                    ),
                ));
            }
        }
        Ok(QuantizedWeights {
            spec: *spec,
            n,
            k,
            codes,
            scales,
            zeros,
        })
    }

    /// Round-to-nearest quantization of `weights` (`[N, K]` row-major, finite) for `spec`.
    ///
    /// Per scale group (channel scales: the whole row of K), with `b` bits and `maxq = 2^b - 1`:
    /// - `iN`, no zero point (symmetric): `s = absmax / (2^(b-1) - 1)`, `q = clamp(round(w / s), -2^(b-1),
    ///   2^(b-1) - 1)`.
    /// - `uN`, integer zero point (GPTQ-style asymmetric; the range always includes 0 as in GPTQ):
    ///   `lo = min(min, 0)`, `hi = max(max, 0)`, `s = (hi - lo) / maxq`, `z = clamp(round(-lo / s), 0,
    ///   maxq)`, `q = clamp(round(w / s) + z, 0, maxq)`.
    /// - `uN`, no zero point: `s = max(max, 0) / maxq`, `q = clamp(round(w / s), 0, maxq)` (negative
    ///   weights become 0).
    /// - `uN`, float offset (GGUF Q4_1-style): `m = min` (rounded to the scale dtype first),
    ///   `s = (max - m) / maxq`, `q = clamp(round((w - m) / s), 0, maxq)`.
    ///
    /// Scales and offsets are rounded (to nearest even) to the scale dtype *before* the codes are
    /// computed, so every weight whose unclamped code is in range is reproduced within `s / 2`. A scale
    /// that rounds to 0 (all-zero or all-tiny groups) gives code 0 (zero point 0) and never NaN.
    ///
    /// # Errors
    /// Invalid `spec`, `n` or `k` (as in [`QuantizedWeights::from_parts`]); `weights` of the wrong length
    /// or holding NaN/infinity; `weights` whose scale or offset overflows the scale dtype.
    pub fn quantize(spec: &KernelSpec, n: usize, k: usize, weights: &[f32]) -> Result<Self> {
        check_spec(spec)?;
        let nk = check_dims(n, k)?;
        if weights.len() != nk {
            return Err(invalid(
                "weights",
                format!(
                    "expected N * K = {n} * {k} = {nk} weights, found {}",
                    weights.len()
                ),
            ));
        }
        if let Some(i) = weights.iter().position(|w| !w.is_finite()) {
            return Err(invalid(
                "weights",
                format!(
                    "weight {} at index {i} (n = {}, k = {}) is not finite",
                    weights[i],
                    i / k,
                    i % k
                ),
            ));
        }
        let rows = groups_of(spec, k);
        let g = group_len(spec, k);
        let bits = spec.b.bits();
        let maxq = f64::from((1u32 << bits) - 1);
        let sd = spec.scale.dtype;
        let signed = matches!(spec.b, DType::SInt { .. });
        let mask = (1u32 << bits) - 1;
        let mut codes = vec![0u8; nk];
        let mut scales = vec![0f32; rows * n];
        let mut zi = vec![
            0u8;
            if spec.zero_point == ZeroPoint::Integer {
                rows * n
            } else {
                0
            }
        ];
        let mut zf = vec![
            0f32;
            if spec.zero_point == ZeroPoint::FloatOffset {
                rows * n
            } else {
                0
            }
        ];
        let round_checked = |v: f64, what: &str, row: usize, grp: usize| -> Result<f64> {
            let r = round_to_format(v, sd);
            if r.is_finite() {
                Ok(r)
            } else {
                Err(invalid(
                    "weights",
                    format!(
                        "the {what} {v:e} of row {row}, group {grp} overflows the scale dtype {sd}"
                    ),
                ))
            }
        };
        for row in 0..n {
            for grp in 0..rows {
                let k0 = grp * g;
                let k1 = (k0 + g).min(k);
                let ws = &weights[row * k + k0..row * k + k1];
                let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
                for &w in ws {
                    lo = lo.min(f64::from(w));
                    hi = hi.max(f64::from(w));
                }
                let out = &mut codes[row * k + k0..row * k + k1];
                let si = grp * n + row;
                if signed {
                    let qmax = f64::from((1u32 << (bits - 1)) - 1);
                    let qmin = -qmax - 1.0;
                    let s = round_checked(lo.abs().max(hi.abs()) / qmax, "scale", row, grp)?;
                    for (c, &w) in out.iter_mut().zip(ws) {
                        let q = if s == 0.0 {
                            0.0
                        } else {
                            (f64::from(w) / s).round().clamp(qmin, qmax)
                        };
                        *c = ((q as i32) as u32 & mask) as u8;
                    }
                    scales[si] = s as f32;
                } else {
                    match spec.zero_point {
                        ZeroPoint::None => {
                            let s = round_checked(hi.max(0.0) / maxq, "scale", row, grp)?;
                            for (c, &w) in out.iter_mut().zip(ws) {
                                let q = if s == 0.0 {
                                    0.0
                                } else {
                                    (f64::from(w) / s).round().clamp(0.0, maxq)
                                };
                                *c = q as u8;
                            }
                            scales[si] = s as f32;
                        }
                        ZeroPoint::Integer => {
                            let (lo, hi) = (lo.min(0.0), hi.max(0.0));
                            let s = round_checked((hi - lo) / maxq, "scale", row, grp)?;
                            let z = if s == 0.0 {
                                0.0
                            } else {
                                (-lo / s).round().clamp(0.0, maxq)
                            };
                            for (c, &w) in out.iter_mut().zip(ws) {
                                let q = if s == 0.0 {
                                    0.0
                                } else {
                                    ((f64::from(w) / s).round() + z).clamp(0.0, maxq)
                                };
                                *c = q as u8;
                            }
                            scales[si] = s as f32;
                            zi[si] = z as u8;
                        }
                        ZeroPoint::FloatOffset => {
                            let m = round_checked(lo, "offset", row, grp)?;
                            let s = round_checked(((hi - m) / maxq).max(0.0), "scale", row, grp)?;
                            for (c, &w) in out.iter_mut().zip(ws) {
                                let q = if s == 0.0 {
                                    0.0
                                } else {
                                    ((f64::from(w) - m) / s).round().clamp(0.0, maxq)
                                };
                                *c = q as u8;
                            }
                            scales[si] = s as f32;
                            zf[si] = m as f32;
                        }
                    }
                }
            }
        }
        let zeros = match spec.zero_point {
            ZeroPoint::None => ZeroPoints::None,
            ZeroPoint::Integer => ZeroPoints::Integer(zi),
            ZeroPoint::FloatOffset => ZeroPoints::Float(zf),
        };
        Ok(QuantizedWeights {
            spec: *spec,
            n,
            k,
            codes,
            scales,
            zeros,
        })
    }

    /// [`QuantizedWeights::quantize`] of 16-bit float weights (`half::f16` or `half::bf16`, `[N, K]`),
    /// converted exactly to f32 first.
    ///
    /// # Errors
    /// As [`QuantizedWeights::quantize`].
    pub fn quantize_elements<E: Element>(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        weights: &[E],
    ) -> Result<Self> {
        let w: Vec<f32> = weights.iter().map(|&e| e.to_f64() as f32).collect();
        Self::quantize(spec, n, k, &w)
    }

    /// [`QuantizedWeights::quantize`] of `half::f16` weights `[N, K]`.
    ///
    /// # Errors
    /// As [`QuantizedWeights::quantize`].
    pub fn quantize_f16(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        weights: &[half::f16],
    ) -> Result<Self> {
        Self::quantize_elements(spec, n, k, weights)
    }

    /// [`QuantizedWeights::quantize`] of `half::bf16` weights `[N, K]`.
    ///
    /// # Errors
    /// As [`QuantizedWeights::quantize`].
    pub fn quantize_bf16(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        weights: &[half::bf16],
    ) -> Result<Self> {
        Self::quantize_elements(spec, n, k, weights)
    }

    /// The signed value of the code at `(n, k)`: the raw code for `uN`, sign-extended for `iN`.
    ///
    /// # Panics
    /// If `n >= N` or `k >= K` (like slice indexing).
    pub fn code_value(&self, n: usize, k: usize) -> i32 {
        assert!(
            n < self.n && k < self.k,
            "index ({n}, {k}) out of bounds for [{}, {}]",
            self.n,
            self.k
        );
        let c = i32::from(self.codes[n * self.k + k]);
        match self.spec.b {
            DType::SInt { bits } if c >= 1 << (bits - 1) => c - (1 << bits),
            _ => c,
        }
    }

    /// The dequantized weight `W[n][k]` (see the module doc for the formula), computed in f64. Exact:
    /// `s * (q - z)` has at most 8 + 11 significant bits; `s * q + m` is exact too unless the offset and
    /// `s * q` are more than ~30 binary orders of magnitude apart (possible only with extreme `bf16`
    /// values), where it is correctly rounded.
    ///
    /// # Panics
    /// If `n >= N` or `k >= K` (like slice indexing).
    pub fn dequantize_value(&self, n: usize, k: usize) -> f64 {
        let q = f64::from(self.code_value(n, k));
        let si = self.group_of(k) * self.n + n;
        let s = f64::from(self.scales[si]);
        match &self.zeros {
            ZeroPoints::None => s * q,
            ZeroPoints::Integer(z) => s * (q - f64::from(z[si])),
            ZeroPoints::Float(m) => s * q + f64::from(m[si]),
        }
    }

    /// The exact dequantized matrix `W`, `[N, K]` row-major.
    pub fn dequantize(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.n * self.k);
        for n in 0..self.n {
            for k in 0..self.k {
                out.push(self.dequantize_value(n, k));
            }
        }
        out
    }

    /// The scale group (row of `scales`) of column `k`.
    pub(crate) fn group_of(&self, k: usize) -> usize {
        k / group_len(&self.spec, self.k)
    }
}

/// Scale rows for K under a spec: `ceil(K / G)` for group scales, 1 otherwise.
pub fn groups_of(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } if size > 0 => k.div_ceil(size as usize),
        _ => 1,
    }
}

/// Columns per scale group: `G`, or `K` for channel scales.
fn group_len(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } if size > 0 => size as usize,
        _ => k.max(1),
    }
}

fn zp_name(z: ZeroPoint) -> &'static str {
    match z {
        ZeroPoint::None => "`none`",
        ZeroPoint::Integer => "`int`",
        ZeroPoint::FloatOffset => "`float`",
    }
}

/// Checks that `spec` is one the CPU weight code supports (see the module doc).
pub(crate) fn check_spec(spec: &KernelSpec) -> Result<()> {
    if !spec.a.is_16bit_float() {
        return Err(invalid(
            "spec",
            format!(
                "activation dtype `{}` is not supported; expected f16 or bf16",
                spec.a
            ),
        ));
    }
    if spec.scale.dtype != spec.a {
        return Err(invalid(
            "spec",
            format!(
                "scale dtype `{}` is not supported; it must equal the activation dtype `{}`",
                spec.scale.dtype, spec.a
            ),
        ));
    }
    match spec.b {
        DType::UInt { bits: 1..=8 } | DType::SInt { bits: 2..=8 } => {}
        b => {
            return Err(invalid(
                "spec",
                format!("weight dtype `{b}` is not supported; expected u1..=u8 or i2..=i8"),
            ));
        }
    }
    match spec.scale.granularity {
        ScaleGranularity::Channel => {}
        ScaleGranularity::Group { size } => {
            humming_spec::layout::check_group_size(size, spec.a)
                .map_err(|e| invalid("spec", e.to_string()))?;
        }
        g => {
            return Err(invalid(
                "spec",
                format!("scale granularity {g:?} is not supported; expected channel or group(G)"),
            ));
        }
    }
    if spec.zero_point != ZeroPoint::None && !matches!(spec.b, DType::UInt { .. }) {
        return Err(invalid(
            "spec",
            format!("a zero point needs unsigned codes; found `{}`", spec.b),
        ));
    }
    if spec.scale2.is_some() {
        return Err(invalid("spec", "secondary scales are not supported"));
    }
    Ok(())
}

pub(crate) fn check_dims(n: usize, k: usize) -> Result<usize> {
    if n == 0 {
        return Err(invalid(
            "n",
            "N (output channels) must be positive, found 0",
        ));
    }
    if k == 0 {
        return Err(invalid("k", "K (input features) must be positive, found 0"));
    }
    n.checked_mul(k)
        .ok_or_else(|| invalid("k", format!("N * K = {n} * {k} overflows usize")))
}

/// Significand bits (without the implicit bit), exponent of the smallest normal, largest finite value.
fn format_of(dtype: DType) -> Option<(i32, i32, f64)> {
    match dtype {
        DType::F16 => Some((10, -14, 65504.0)),
        DType::BF16 => Some((7, -126, f64::from(f32::from_bits(0x7F7F_0000)))),
        DType::F32 => Some((23, -126, f64::from(f32::MAX))),
        _ => None,
    }
}

/// Rounds `v` to the nearest value of `dtype` (`f16`, `bf16` or `f32`; ties to even, overflow to ±∞,
/// NaN stays NaN), returned as f64. Correctly rounded from f64 (no double rounding through f32).
/// Other dtypes return `v` unchanged.
pub fn round_to_format(v: f64, dtype: DType) -> f64 {
    let Some((man, emin, max)) = format_of(dtype) else {
        return v;
    };
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    let biased = ((v.to_bits() >> 52) & 0x7FF) as i32;
    if biased == 0 {
        // f64 subnormal: far below half the smallest subnormal of any of these formats.
        return 0.0 * v.signum();
    }
    let e = (biased - 1023).max(emin);
    let quantum = 2f64.powi(e - man);
    let r = (v / quantum).round_ties_even() * quantum;
    if r.abs() > max {
        f64::INFINITY.copysign(v)
    } else {
        r
    }
}

/// True if `v` is finite and exactly representable in `dtype` (`f16`, `bf16` or `f32`).
pub fn is_representable(v: f64, dtype: DType) -> bool {
    v.is_finite() && format_of(dtype).is_some() && round_to_format(v, dtype) == v
}

/// Raw bits of `v` in a 16-bit float dtype, rounding to nearest even (`dtype` is `f16`, else `bf16`).
pub(crate) fn to_bits16(v: f64, dtype: DType) -> u16 {
    if v.is_nan() {
        return if dtype == DType::F16 { 0x7E00 } else { 0x7FC0 };
    }
    // Exact after rounding, so the f32 step and half's conversion add no error.
    let r = round_to_format(
        v,
        if dtype == DType::F16 {
            DType::F16
        } else {
            DType::BF16
        },
    ) as f32;
    if dtype == DType::F16 {
        half::f16::from_f32(r).to_bits()
    } else {
        half::bf16::from_f32(r).to_bits()
    }
}

/// The value of raw 16-bit float bits (`dtype` is `f16`, else `bf16`).
pub(crate) fn from_bits16(bits: u16, dtype: DType) -> f64 {
    if dtype == DType::F16 {
        half::f16::from_bits(bits).to_f64()
    } else {
        half::bf16::from_bits(bits).to_f64()
    }
}
