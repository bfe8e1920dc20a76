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

use crate::error::{Result, invalid};
use humming_spec::{KernelSpec, ScaleGranularity};

/// Zero points of quantized weights, in the layout of the scales.
#[derive(Clone, Debug, PartialEq)]
pub enum ZeroPoints {
    /// No zero point.
    None,
    /// Integer zero points (codes of the weight's width).
    Integer(Vec<u8>),
    /// Float additive offsets.
    Float(Vec<f32>),
}

/// Quantized weights of one `[N, K]` matrix for one kernel descriptor, in plain row-major form.
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
}

/// Scale rows for K under a spec.
pub fn groups_of(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } => k.div_ceil(size as usize),
        _ => 1,
    }
}

#[allow(dead_code)]
fn _uses() -> Result<()> {
    Err(invalid("x", "y"))
}
