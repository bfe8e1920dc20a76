//! Quantization of activations (A) into 8-bit (or 4-bit) codes with their scales: the contract of
//! the input-quantization step of W4A8 and W8A8 kernels, and the CPU reference of it.
//!
//! Per scale cell (a token's row, a `1 x G` group of a row along K, or the whole tensor):
//! - dynamic: `amax = max |x|` over the cell, `s = amax / max(code)` (f32 division); static: the
//!   given per-tensor `s`;
//! - `inv = 1 / s` (f32), `0` where `s` is 0 (a row of zeros gets zero codes and scale 0, never NaN);
//! - each code is `x * inv` (one f32 multiply) rounded to nearest even in the code type, saturated at
//!   its largest finite value (e4m3 ±448, e5m2 ±57344, i8 -128..127).
//!
//! A kernel that follows these steps in f32 gets the same codes bit for bit; the GEMM then takes
//! `Σ_k code_a · w` and multiplies by the cell's scale (per token: in the epilogue; per K group: on
//! the partial sums of the group). The reference GEMM of such a kernel is
//! [`reference_gemm`](crate::reference_gemm) of [`QuantizedActivations::dequantize`].

use crate::error::{Result, invalid};
use humming_spec::{DType, KernelSpec};
use std::collections::HashMap;

/// Where one activation scale applies.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ActScale {
    /// One dynamic scale per token (row of A).
    PerToken,
    /// One dynamic scale per `1 x group` cell of a row along K (FP8 block checkpoints use 128); a
    /// last group shorter than `group` where K is not a multiple of it.
    PerGroup(usize),
    /// One static scale for the whole tensor (from calibration): finite and above 0.
    Tensor(f32),
}

impl ActScale {
    /// The dynamic scales a kernel takes: per `1 x g` group where it declares activation groups
    /// ([`humming_spec::layout::act_scale_group`]: block-scaled W8A8 FP8), else per token (a kernel of
    /// row scales also takes a static [`ActScale::Tensor`]).
    pub fn of_kernel(spec: &KernelSpec) -> ActScale {
        match humming_spec::layout::act_scale_group(spec) {
            0 => ActScale::PerToken,
            g => ActScale::PerGroup(g as usize),
        }
    }

    /// Scales per row of `k` columns: the groups of a row, or 1.
    pub fn scales_per_row(self, k: usize) -> usize {
        match self {
            ActScale::PerGroup(g) => k.div_ceil(g.max(1)),
            _ => 1,
        }
    }

    /// Whether a kernel of `spec` takes activations quantized with these scales.
    pub fn fits_kernel(self, spec: &KernelSpec) -> bool {
        match (self, ActScale::of_kernel(spec)) {
            (ActScale::PerGroup(g), ActScale::PerGroup(want)) => g == want,
            (ActScale::PerGroup(_), _) | (_, ActScale::PerGroup(_)) => false,
            _ => true,
        }
    }
}

impl std::fmt::Display for ActScale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActScale::PerGroup(g) => write!(f, "scales per group of {g}"),
            _ => write!(f, "one scale per row"),
        }
    }
}

/// Activations quantized by [`quantize_activations`]: `[m, k]` codes (raw bits of the code type,
/// row-major) and their scales (`[m]` per token, `[m, ceil(k / group)]` per group, `[1]` per
/// tensor).
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedActivations {
    /// The code type: `e4m3`, `e5m2`, or a signed integer of 8 bits or fewer.
    pub dtype: DType,
    /// Rows (tokens).
    pub m: usize,
    /// Columns (K).
    pub k: usize,
    /// Where the scales apply.
    pub granularity: ActScale,
    /// `m * k` codes; integer codes in two's complement of `dtype`'s width.
    pub codes: Vec<u8>,
    /// The scales, f32.
    pub scales: Vec<f32>,
}

/// Whether `dtype` is a code type of activations: `e4m3`, `e5m2`, `iN` with N <= 8.
pub fn is_activation_code(dtype: DType) -> bool {
    dtype == DType::E4M3
        || dtype == DType::E5M2
        || matches!(dtype, DType::SInt { bits } if bits <= 8)
}

/// Quantizes `a` (`[m, k]` row-major, finite) to `dtype` codes with scales of `granularity` (see the
/// module's rules).
///
/// Errors: a `dtype` that is not an activation code type; `a` of another length than `m * k` or
/// holding NaN or infinity; a group of 0; a static scale that is not finite and above 0.
pub fn quantize_activations(
    a: &[f32],
    m: usize,
    k: usize,
    dtype: DType,
    granularity: ActScale,
) -> Result<QuantizedActivations> {
    if !is_activation_code(dtype) {
        return Err(invalid(
            "dtype",
            format!(
                "activations are quantized to e4m3, e5m2 or a signed integer of 8 bits or fewer; found `{dtype}`"
            ),
        ));
    }
    if m.checked_mul(k) != Some(a.len()) {
        return Err(invalid(
            "a",
            format!("expected m * k = {m} * {k} values, found {}", a.len()),
        ));
    }
    if let Some(i) = a.iter().position(|x| !x.is_finite()) {
        return Err(invalid(
            "a",
            format!(
                "value {} at row {}, column {} is not finite",
                a[i],
                i / k,
                i % k
            ),
        ));
    }
    let group = match granularity {
        ActScale::PerToken => k.max(1),
        ActScale::PerGroup(0) => return Err(invalid("granularity", "a group of 0 columns")),
        ActScale::PerGroup(g) => g,
        ActScale::Tensor(s) if !(s.is_finite() && s > 0.0) => {
            return Err(invalid(
                "granularity",
                format!("a static scale must be finite and above 0; found {s}"),
            ));
        }
        ActScale::Tensor(_) => k.max(1),
    };
    let qmax = dtype.max_finite() as f32;
    let encode = Encoder::new(dtype);
    let groups = k.div_ceil(group);
    let mut codes = vec![0u8; a.len()];
    let mut scales = Vec::with_capacity(m * groups);
    for r in 0..m {
        for g in 0..groups {
            let cols = g * group..((g + 1) * group).min(k);
            let cell = &a[r * k + cols.start..r * k + cols.end];
            let s = match granularity {
                ActScale::Tensor(s) => s,
                _ => cell.iter().fold(0f32, |acc, x| acc.max(x.abs())) / qmax,
            };
            let inv = if s > 0.0 { 1.0 / s } else { 0.0 };
            for (c, &x) in cols.zip(cell) {
                codes[r * k + c] = encode.code(x * inv);
            }
            if !matches!(granularity, ActScale::Tensor(_)) {
                scales.push(s);
            }
        }
    }
    if let ActScale::Tensor(s) = granularity {
        scales.push(s);
    }
    Ok(QuantizedActivations {
        dtype,
        m,
        k,
        granularity,
        codes,
        scales,
    })
}

impl QuantizedActivations {
    /// The scale of element (row `r`, column `c`).
    pub fn scale(&self, r: usize, c: usize) -> f32 {
        match self.granularity {
            ActScale::PerToken => self.scales[r],
            ActScale::PerGroup(g) => {
                self.scales[r * self.granularity.scales_per_row(self.k) + c / g]
            }
            ActScale::Tensor(_) => self.scales[0],
        }
    }

    /// The value of one code of `dtype`, in f64 (exact).
    pub fn code_value(&self, code: u8) -> f64 {
        code_value(self.dtype, code)
    }

    /// `code · scale` of every element in f64, `[m, k]` row-major: what the GEMM multiplies.
    pub fn dequantize(&self) -> Vec<f64> {
        let table: Vec<f64> = (0..=255u8).map(|c| code_value(self.dtype, c)).collect();
        (0..self.m * self.k)
            .map(|i| {
                let (r, c) = (i / self.k.max(1), i % self.k.max(1));
                table[self.codes[i] as usize] * f64::from(self.scale(r, c))
            })
            .collect()
    }
}

/// The value of `code` (the low `dtype.bits()` bits of it) in `dtype`; 0 for a NaN code (never
/// produced by [`quantize_activations`]).
fn code_value(dtype: DType, code: u8) -> f64 {
    let bits = dtype.bits();
    let c = u32::from(code) & ((1u32 << bits) - 1);
    dtype.finite_value(c).unwrap_or(0.0)
}

/// Value -> code of one code type: rounding to nearest even and saturating, by a table of every finite
/// code (`+0` for 0).
struct Encoder {
    dtype: DType,
    codes: HashMap<u64, u8>,
}

impl Encoder {
    fn new(dtype: DType) -> Encoder {
        let mut codes = HashMap::new();
        for c in (0..1u32 << dtype.bits()).rev() {
            if let Some(v) = dtype.finite_value(c) {
                // (Reverse order: the lower code wins a tie of values, +0 over -0.)
                codes.insert((v + 0.0).to_bits(), c as u8);
            }
        }
        Encoder { dtype, codes }
    }

    fn code(&self, x: f32) -> u8 {
        let d = self.dtype;
        let v = f64::from(x).clamp(d.min_finite(), d.max_finite());
        let r = d.round(v).unwrap_or(v) + 0.0;
        self.codes.get(&r.to_bits()).copied().unwrap_or(0)
    }
}
