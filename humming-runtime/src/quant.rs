//! Quantized weights in their plain row-major form, quantization (round-to-nearest) and exact f64
//! dequantization.
//!
//! Conventions (shared with GPTQ/AWQ after unpacking, with GGUF after block decoding, and with FP8 / MX
//! / NVFP4 checkpoints):
//! - B is `[N, K]`: N output channels (rows), K input features (columns), row-major.
//! - `codes[n * K + k]` is the raw `b`-bit pattern of the weight's code: `0..2^b` for `uN`; for `iN` the
//!   two's-complement pattern truncated to `b` bits (so `-1` in `i4` is `0b1111`); for `eXmY` the
//!   float's bits (sign, exponent, mantissa; `e0mY`: sign and magnitude). NaN and infinity codes
//!   (e4m3's `S.1111.111`, e5m2's all-ones exponent) are not weights.
//! - Primary scales, [`scale_shape`] `(rows, cols)` row-major: channel `[1, N]`, group `[ceil(K / G), N]`,
//!   block `[ceil(K / bk), ceil(N / bn)]`, tensor `[1, 1]`. Every stored scale is exactly representable
//!   in the spec's scale dtype (for `ue8m0` a power of two `2^-127 ..= 2^127`).
//! - Secondary scales (`scale2`): `[N]` per channel or `[1]` per tensor (f32), or `[ceil(K / G2), N]`
//!   per super-group (the factor of integer sub-group scales, GGUF K-quants' `d`; f16, bf16 or f32);
//!   empty without one.
//! - Zero points have the scales' shape: integer codes `0..2^b` (GPTQ/AWQ), or float offsets exactly
//!   representable in the scale dtype (GGUF Q4_1 `m`).
//! - Dequantized value: `s * s2 * q` (no zero point; `q` the code's value), `s * (q - z)` (integer zero
//!   point), `s * q + m` (float offset).
//!
//! Supported descriptors (what [`QuantizedWeights::from_parts`] and [`QuantizedWeights::quantize`]
//! accept, the same set the code generator emits, [`humming_spec::check_spec`]): `a` is `f16` or `bf16`;
//! `b` is `u1..=u8`, `i2..=i8` or a float `eXmY` that converts exactly to `a`; every scale kind and
//! scale dtype the model admits, with a secondary scale; zero points on unsigned integer codes with
//! scales of A's dtype.

use crate::error::{Result, invalid};
use humming_spec::dtype::CodeValue;
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
    /// Two-level float offsets, for integer sub-group scales under a super-group factor (GGUF K-quants'
    /// mins): the offset of a sub-group is `offsets[i] * factors[j]`, with `offsets` integers of the
    /// scale dtype in the scales' shape and `factors` (ggml's `-dmin`) in the secondary scales' shape.
    FloatTwoLevel {
        /// Integer offsets per sub-group (ggml's `m`).
        offsets: Vec<f32>,
        /// Their factor per super-group and channel (ggml's `-dmin`), exactly representable in the
        /// secondary scale's dtype.
        factors: Vec<f32>,
    },
}

impl ZeroPoints {
    /// The [`ZeroPoint`] kind of the model these values belong to.
    pub fn kind(&self) -> ZeroPoint {
        match self {
            ZeroPoints::None => ZeroPoint::None,
            ZeroPoints::Integer(_) => ZeroPoint::Integer,
            ZeroPoints::Float(_) | ZeroPoints::FloatTwoLevel { .. } => ZeroPoint::FloatOffset,
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
    pub(crate) scale2: Vec<f32>,
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
    /// Primary scales, [`scale_shape`] row-major (`[groups, N]` for group scales).
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }
    /// Secondary scales: `[N]` (per channel), `[1]` (per tensor), `[ceil(K / G2), N]` (per
    /// super-group), or empty.
    pub fn scale2(&self) -> &[f32] {
        &self.scale2
    }
    /// Zero points.
    pub fn zeros(&self) -> &ZeroPoints {
        &self.zeros
    }
    /// Number of scale rows along K: `ceil(K / G)` for group scales (block scales: `ceil(K / bk)`), 1 for
    /// channel and tensor scales.
    pub fn groups(&self) -> usize {
        groups_of(&self.spec, self.k)
    }
    /// Weight width in bits (`b` of the spec).
    pub fn bits(&self) -> u32 {
        self.spec.b.bits()
    }

    /// Builds weights from their parts, checking everything (for specs without a secondary scale; see
    /// [`QuantizedWeights::from_parts_with_scale2`]).
    ///
    /// - `spec`: a supported descriptor (see the module doc), else an error naming `spec`.
    /// - `n`, `k`: positive; `n * k` must not overflow.
    /// - `codes`: `[N, K]` raw codes, each `< 2^b`, none a NaN or infinity code.
    /// - `scales`: [`scale_shape`] `(rows, cols)`, finite and exactly representable in
    ///   `spec.scale.dtype`.
    /// - `zeros`: the kind of `spec.zero_point`, in the scales' shape; integer zero points `< 2^b`, float
    ///   offsets finite and exactly representable in the scale dtype.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming `spec`, `n`, `k`, `codes`, `scales`, `scale2` or `zeros`.
    pub fn from_parts(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        codes: Vec<u8>,
        scales: Vec<f32>,
        zeros: ZeroPoints,
    ) -> Result<Self> {
        Self::from_parts_with_scale2(spec, n, k, codes, scales, Vec::new(), zeros)
    }

    /// [`QuantizedWeights::from_parts`] with secondary scales `scale2`, exactly representable in the
    /// secondary scale's dtype: `[N]` for a per-channel, `[1]` for a per-tensor, `[ceil(K / G2), N]` for
    /// a super-group secondary scale (GGUF K-quants), empty when the spec has none.
    ///
    /// # Errors
    /// As [`QuantizedWeights::from_parts`].
    pub fn from_parts_with_scale2(
        spec: &KernelSpec,
        n: usize,
        k: usize,
        codes: Vec<u8>,
        scales: Vec<f32>,
        scale2: Vec<f32>,
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
        if spec.b.is_float()
            && let Some(i) = codes
                .iter()
                .position(|&c| !matches!(spec.b.decode(u32::from(c)), CodeValue::Finite(_)))
        {
            return Err(invalid(
                "codes",
                format!(
                    "code {:#04x} at index {i} (n = {}, k = {}) is a NaN or infinity code of {}, not a weight",
                    codes[i],
                    i / k,
                    i % k,
                    spec.b
                ),
            ));
        }
        let (rows, cols) = scale_shape(spec, n, k);
        let want_s = rows * cols;
        let sd = spec.scale.dtype;
        let s2d = spec.scale2.map_or(DType::F32, |s| s.dtype);
        let want2 = scale2_len(spec, n, k);
        let shape2 = match spec.scale2.map(|s| s.granularity) {
            None => "the spec has no secondary scale",
            Some(ScaleGranularity::Tensor) => "one per tensor",
            Some(ScaleGranularity::Group { .. }) => "super-groups along K x N",
            _ => "one per output channel",
        };
        check_values(
            "scales",
            "scale",
            &scales,
            want_s,
            scale_shape_name(spec),
            sd,
        )?;
        check_values("scale2", "secondary scale", &scale2, want2, shape2, s2d)?;
        let want = if spec.zero_point == ZeroPoint::None {
            0
        } else {
            want_s
        };
        match (&zeros, spec.zero_point) {
            (ZeroPoints::None, ZeroPoint::None) => {}
            (ZeroPoints::Integer(z), ZeroPoint::Integer) => {
                if z.len() != want {
                    return Err(invalid(
                        "zeros",
                        format!(
                            "expected {want} integer zero points (the scales' shape), found {}",
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
            (ZeroPoints::Float(z), ZeroPoint::FloatOffset) if !sd.is_integer() => {
                check_values("zeros", "float offset", z, want, "the scales' shape", sd)?;
            }
            (ZeroPoints::FloatTwoLevel { offsets, factors }, ZeroPoint::FloatOffset)
                if sd.is_integer() =>
            {
                check_values(
                    "zeros",
                    "integer offset",
                    offsets,
                    want,
                    "the scales' shape",
                    sd,
                )?;
                check_values("zeros", "offset factor", factors, want2, shape2, s2d)?;
            }
            (ZeroPoints::Float(_), ZeroPoint::FloatOffset) if sd.is_integer() => {
                return Err(invalid(
                    "zeros",
                    "integer sub-group scales take two-level offsets (`ZeroPoints::FloatTwoLevel`)",
                ));
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
            scale2,
            zeros,
        })
    }

    /// The signed value of the integer code at `(n, k)`: the raw code for `uN`, sign-extended for `iN`;
    /// for float weights the raw bit pattern (their value is [`QuantizedWeights::weight_value`]).
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

    /// The value of the code at `(n, k)` before scaling: the integer (sign-extended for `iN`), or the
    /// float `eXmY` (`e0mY`: sign-magnitude integer) it encodes.
    ///
    /// # Panics
    /// If `n >= N` or `k >= K` (like slice indexing).
    pub fn weight_value(&self, n: usize, k: usize) -> f64 {
        assert!(
            n < self.n && k < self.k,
            "index ({n}, {k}) out of bounds for [{}, {}]",
            self.n,
            self.k
        );
        code_value_of(self.spec.b, self.codes[n * self.k + k])
    }

    /// The dequantized weight `W[n][k]` (see the module doc for the formula), computed in f64. Exact:
    /// `s * s2 * q` and `s * (q - z)` have at most 24 + 24 + 8 significant bits; `s * q + m` is exact
    /// too unless the offset and `s * q` are more than ~30 binary orders of magnitude apart (possible
    /// only with extreme `bf16` values), where it is correctly rounded.
    ///
    /// # Panics
    /// If `n >= N` or `k >= K` (like slice indexing).
    pub fn dequantize_value(&self, n: usize, k: usize) -> f64 {
        let q = self.weight_value(n, k);
        let si = scale_index(&self.spec, self.n, self.k, n, k);
        let s = f64::from(self.scales[si]);
        let i2 = scale2_index(&self.spec, self.n, n, k);
        let s2 = i2.map_or(1.0, |i| f64::from(self.scale2[i]));
        match &self.zeros {
            ZeroPoints::None => s * s2 * q,
            ZeroPoints::Integer(z) => s * (q - f64::from(z[si])),
            ZeroPoints::Float(m) => s * q + f64::from(m[si]),
            ZeroPoints::FloatTwoLevel { offsets, factors } => {
                let f = i2.map_or(1.0, |i| f64::from(factors[i]));
                s * s2 * q + f64::from(offsets[si]) * f
            }
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
}

/// The value of raw code `c` of weight type `b` (integers sign-extended, floats decoded; a NaN or
/// infinity code, which `from_parts` rejects, gives 0).
pub(crate) fn code_value_of(b: DType, c: u8) -> f64 {
    b.finite_value(u32::from(c)).unwrap_or(0.0)
}

/// Checks a parameter array: `want` values (`shape` says which), each finite and exactly
/// representable in `dtype`; errors name `arg` and call a value `what`.
fn check_values(
    arg: &'static str,
    what: &str,
    vals: &[f32],
    want: usize,
    shape: &str,
    dtype: DType,
) -> Result<()> {
    if vals.len() != want {
        return Err(invalid(
            arg,
            format!(
                "expected {want} values of {what} ({shape}), found {}",
                vals.len()
            ),
        ));
    }
    match vals
        .iter()
        .position(|&v| !is_representable(f64::from(v), dtype))
    {
        Some(i) => Err(invalid(
            arg,
            format!(
                "{what} {:e} at index {i} is not finite or not exactly representable in {dtype}",
                vals[i]
            ),
        )),
        None => Ok(()),
    }
}

/// The shape `(rows along K, columns along N)` of the primary scales of an `[N, K]` weight: channel
/// `(1, N)`, group `(ceil(K / G), N)`, block `(ceil(K / bk), ceil(N / bn))`, tensor `(1, 1)`.
pub fn scale_shape(spec: &KernelSpec, n: usize, k: usize) -> (usize, usize) {
    match spec.scale.granularity {
        ScaleGranularity::Channel => (1, n),
        ScaleGranularity::Group { size } => (k.div_ceil(size as usize), n),
        ScaleGranularity::Block { n: bn, k: bk } => {
            (k.div_ceil(bk as usize), n.div_ceil(bn as usize))
        }
        ScaleGranularity::Tensor => (1, 1),
    }
}

fn scale_shape_name(spec: &KernelSpec) -> &'static str {
    match spec.scale.granularity {
        ScaleGranularity::Channel => "one per output channel",
        ScaleGranularity::Group { .. } => "groups along K x N",
        ScaleGranularity::Block { .. } => "blocks along K x blocks along N",
        ScaleGranularity::Tensor => "one per tensor",
    }
}

/// Index in the primary scales of the scale of weight `(n, k)` of an `[n_total, k_total]` matrix.
pub(crate) fn scale_index(
    spec: &KernelSpec,
    n_total: usize,
    k_total: usize,
    n: usize,
    k: usize,
) -> usize {
    let (_, cols) = scale_shape(spec, n_total, k_total);
    match spec.scale.granularity {
        ScaleGranularity::Channel => n,
        ScaleGranularity::Group { size } => (k / size as usize) * cols + n,
        ScaleGranularity::Block { n: bn, k: bk } => (k / bk as usize) * cols + n / bn as usize,
        ScaleGranularity::Tensor => 0,
    }
}

/// Secondary scales of an `[N, K]` weight: N per channel, 1 per tensor, `ceil(K / G2) * N` per
/// super-group (`[ceil(K / G2), N]`), 0 without.
pub fn scale2_len(spec: &KernelSpec, n: usize, k: usize) -> usize {
    match spec.scale2.map(|s| s.granularity) {
        None => 0,
        Some(ScaleGranularity::Tensor) => 1,
        Some(ScaleGranularity::Group { size }) => k.div_ceil(size as usize) * n,
        Some(_) => n,
    }
}

/// Index in the secondary scales of the one of weight `(n, k)` (`None` without a secondary scale).
pub(crate) fn scale2_index(spec: &KernelSpec, n_total: usize, n: usize, k: usize) -> Option<usize> {
    match spec.scale2.map(|s| s.granularity) {
        None => None,
        Some(ScaleGranularity::Tensor) => Some(0),
        Some(ScaleGranularity::Group { size }) => Some((k / size as usize) * n_total + n),
        Some(_) => Some(n),
    }
}

/// Integer codes under channel or group scales of A's dtype and no secondary scale: the formats whose
/// packing is exact (so `PackedWeights::unpack` inverts it) and that the first quantizer handles.
pub(crate) fn is_integer_classic(spec: &KernelSpec) -> bool {
    spec.b.is_integer()
        && spec.scale.dtype == humming_spec::layout::grid_dtype(spec)
        && matches!(
            spec.scale.granularity,
            ScaleGranularity::Channel | ScaleGranularity::Group { .. }
        )
        && spec.scale2.is_none()
}

/// Scale rows along K under a spec: `ceil(K / G)` for group scales, `ceil(K / bk)` for block scales,
/// 1 otherwise.
pub fn groups_of(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } if size > 0 => k.div_ceil(size as usize),
        ScaleGranularity::Block { k: bk, .. } if bk > 0 => k.div_ceil(bk as usize),
        _ => 1,
    }
}

fn zp_name(z: ZeroPoint) -> &'static str {
    match z {
        ZeroPoint::None => "`none`",
        ZeroPoint::Integer => "`int`",
        ZeroPoint::FloatOffset => "`float`",
    }
}

/// Checks that `spec` is one the CPU weight code supports (see the module doc): every rule of
/// `gemm!` ([`humming_spec::check_spec`]), so that weights are only ever built for kernels that exist.
pub(crate) fn check_spec(spec: &KernelSpec) -> Result<()> {
    humming_spec::check_spec(spec).map_err(|e| invalid("spec", e.to_string()))
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

/// Rounds `v` to the nearest value of `dtype` (`f16`, `bf16` or `f32`; ties to even, overflow to ±∞,
/// NaN stays NaN), returned as f64. Correctly rounded from f64 (no double rounding through f32):
/// [`DType::round`], with overflow as infinity. Other dtypes return `v` unchanged.
pub fn round_to_format(v: f64, dtype: DType) -> f64 {
    if !matches!(dtype, DType::F16 | DType::BF16 | DType::F32) || !v.is_finite() {
        return v;
    }
    dtype.round(v).unwrap_or(f64::INFINITY.copysign(v))
}

/// True if `v` is finite and exactly representable in `dtype` ([`DType::represents`]).
pub fn is_representable(v: f64, dtype: DType) -> bool {
    dtype.represents(v)
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
