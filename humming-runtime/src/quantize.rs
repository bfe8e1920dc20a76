//! Round-to-nearest quantization of f32 (or f16 / bf16) weights into [`QuantizedWeights`] for a
//! descriptor: the integer quantizer of channel and group scales in A's dtype, the general one (float
//! codes, other scale kinds and dtypes, secondary scales) and the two-level one (GGUF K-quant style).

use crate::error::{Result, invalid};
use crate::kernel::Element;
use crate::quant::{
    QuantizedWeights, ZeroPoints, check_dims, check_spec, groups_of, is_integer_classic,
    round_to_format, scale_index, scale_shape, scale2_len,
};
use humming_spec::{DType, KernelSpec, ScaleGranularity, ZeroPoint};

impl QuantizedWeights {
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
    /// Float weights, and integer weights under other scale kinds or dtypes (block, tensor, a secondary
    /// scale, e4m3 / e5m2 / ue8m0 / f32 scales): per scale cell, `s = absmax / max(b)` rounded to the scale
    /// dtype (`ue8m0`: the next power of two up, as the OCP MX recipe's shared exponent), codes rounded to
    /// nearest even in `b` and saturated at its largest value. A secondary scale absorbs the range the
    /// scale dtype lacks: per channel (or tensor) `s2 = absmax / (max(b) * max(scale dtype))` for e4m3 and
    /// e5m2 scales (NVFP4's recipe), 1 otherwise.
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
        check_weights(n, k, nk, weights)?;
        if spec.scale.dtype.is_integer() {
            return quantize_two_level(spec, n, k, weights);
        }
        // The first quantizer: integer codes under channel or group scales of A's dtype.
        if !is_integer_classic(spec) {
            return quantize_general(spec, n, k, weights);
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
            scale2: Vec::new(),
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
}

fn check_weights(n: usize, k: usize, nk: usize, weights: &[f32]) -> Result<()> {
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
    Ok(())
}

/// Rounds a scale to its dtype, `ue8m0` upwards (so that no code saturates); `None` when out of range.
fn round_scale(v: f64, dtype: DType) -> Option<f64> {
    if dtype == DType::UE8M0 {
        if v <= 0.0 {
            return Some(2f64.powi(-127));
        }
        let e = v.log2().ceil().clamp(-127.0, 127.0);
        return Some(2f64.powi(e as i32));
    }
    dtype.round(v)
}

/// The code of `b` nearest to `v` (ties to even, saturating at the largest finite value; `-0` never
/// chosen for 0).
fn encode_nearest(b: DType, table: &[(f64, u8)], v: f64) -> u8 {
    let v = v.clamp(b.min_finite(), b.max_finite());
    let r = b.round(v).unwrap_or(v);
    table
        .iter()
        .find(|(x, _)| *x == r && !(r == 0.0 && x.is_sign_negative()))
        .or_else(|| table.iter().find(|(x, _)| *x == r))
        .map(|&(_, c)| c)
        .unwrap_or(0)
}

/// The general round-to-nearest quantizer (see [`QuantizedWeights::quantize`]).
fn quantize_general(
    spec: &KernelSpec,
    n: usize,
    k: usize,
    weights: &[f32],
) -> Result<QuantizedWeights> {
    let b = spec.b;
    let sd = spec.scale.dtype;
    let qmax = b.max_finite();
    let table: Vec<(f64, u8)> = (0..1u32 << b.bits())
        .filter_map(|c| b.finite_value(c).map(|v| (v, c as u8)))
        .collect();
    let (rows, cols) = scale_shape(spec, n, k);
    let w = |row: usize, col: usize| f64::from(weights[row * k + col]);
    // Secondary scales first: they absorb the range the scale dtype lacks.
    let n2 = scale2_len(spec, n, k);
    let mut scale2 = vec![1f32; n2];
    if n2 > 0 && matches!(sd, DType::Float { .. }) {
        for (i, s2) in scale2.iter_mut().enumerate() {
            let rows_of: Vec<usize> = if n2 == 1 { (0..n).collect() } else { vec![i] };
            let amax = rows_of
                .iter()
                .flat_map(|&r| (0..k).map(move |c| (r, c)))
                .map(|(r, c)| w(r, c).abs())
                .fold(0.0, f64::max);
            let v = (amax / (qmax * sd.max_finite())) as f32;
            *s2 = if v > 0.0 && v.is_finite() { v } else { 1.0 };
        }
    }
    let s2_of = |row: usize| -> f64 {
        match n2 {
            0 => 1.0,
            1 => f64::from(scale2[0]),
            _ => f64::from(scale2[row]),
        }
    };
    let mut amax = vec![0f64; rows * cols];
    let mut s2max = vec![0f64; rows * cols];
    for row in 0..n {
        for col in 0..k {
            let i = scale_index(spec, n, k, row, col);
            amax[i] = amax[i].max(w(row, col).abs());
            s2max[i] = s2max[i].max(s2_of(row));
        }
    }
    let mut scales = vec![0f32; rows * cols];
    for (i, s) in scales.iter_mut().enumerate() {
        let want = if s2max[i] > 0.0 {
            amax[i] / qmax / s2max[i]
        } else {
            0.0
        };
        let r = round_scale(want, sd).ok_or_else(|| {
            invalid(
                "weights",
                format!("the scale {want:e} of scale cell {i} overflows the scale dtype {sd}"),
            )
        })?;
        *s = r as f32;
    }
    let mut codes = vec![0u8; n * k];
    for row in 0..n {
        for col in 0..k {
            let s = f64::from(scales[scale_index(spec, n, k, row, col)]) * s2_of(row);
            let x = if s == 0.0 { 0.0 } else { w(row, col) / s };
            codes[row * k + col] = encode_nearest(b, &table, x);
        }
    }
    QuantizedWeights::from_parts_with_scale2(spec, n, k, codes, scales, scale2, ZeroPoints::None)
}

/// Columns per scale group: `G`, or `K` for channel scales.
fn group_len(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } if size > 0 => size as usize,
        _ => k.max(1),
    }
}

/// Two-level quantization (GGUF K-quant style): per sub-group a float scale (and, with a float offset,
/// `m = -min`, the range always including 0), then per super-group and channel the factors
/// `d = max / max(scale dtype)` (and `dmin` likewise) that turn them into integers of the scale dtype,
/// then the codes against the integer-rounded scales.
fn quantize_two_level(
    spec: &KernelSpec,
    n: usize,
    k: usize,
    weights: &[f32],
) -> Result<QuantizedWeights> {
    let (b, sd) = (spec.b, spec.scale.dtype);
    let s2d = spec.scale2.map_or(DType::F32, |s| s.dtype);
    let g = spec.group_size().unwrap_or(k as u32) as usize;
    let g2 = match spec.scale2.map(|s| s.granularity) {
        Some(ScaleGranularity::Group { size }) => size as usize,
        _ => k,
    };
    let offset = spec.zero_point == ZeroPoint::FloatOffset;
    let (qmin, qmax) = (b.min_finite(), b.max_finite());
    let (rows, rows2) = (k.div_ceil(g), k.div_ceil(g2));
    let w = |row: usize, col: usize| f64::from(weights[row * k + col]);
    // Float sub-group scales and offsets.
    let mut fs = vec![0f64; rows * n];
    let mut fm = vec![0f64; rows * n];
    for row in 0..n {
        for r in 0..rows {
            let ks = r * g..((r + 1) * g).min(k);
            let (lo, hi) = ks.clone().fold((0f64, 0f64), |(lo, hi), c| {
                (lo.min(w(row, c)), hi.max(w(row, c)))
            });
            if offset {
                fs[r * n + row] = (hi - lo) / (qmax - qmin);
                fm[r * n + row] = -lo;
            } else {
                fs[r * n + row] = lo.abs().max(hi.abs()) / qmax.max(-qmin);
            }
        }
    }
    let round2 = |v: f64| -> Result<f64> {
        s2d.round(v).filter(|r| r.is_finite()).ok_or_else(|| {
            invalid(
                "weights",
                format!("a super-group factor {v:e} overflows {s2d}"),
            )
        })
    };
    let mut scales = vec![0f32; rows * n];
    let mut offsets = vec![0f32; if offset { rows * n } else { 0 }];
    let mut scale2 = vec![0f32; rows2 * n];
    let mut factors = vec![0f32; if offset { rows2 * n } else { 0 }];
    let per = g2 / g;
    for row in 0..n {
        for r2 in 0..rows2 {
            let subs = r2 * per..((r2 + 1) * per).min(rows);
            let smax = subs.clone().map(|r| fs[r * n + row]).fold(0.0, f64::max);
            let d = round2(smax / sd.max_finite())?;
            scale2[r2 * n + row] = d as f32;
            let mmax = subs.clone().map(|r| fm[r * n + row]).fold(0.0, f64::max);
            let dmin = if offset {
                round2(mmax / sd.max_finite())?
            } else {
                0.0
            };
            if offset {
                factors[r2 * n + row] = -dmin as f32;
            }
            for r in subs {
                let sc = if d > 0.0 {
                    (fs[r * n + row] / d)
                        .round()
                        .clamp(sd.min_finite(), sd.max_finite())
                } else {
                    0.0
                };
                scales[r * n + row] = sc as f32;
                if offset {
                    let m = if dmin > 0.0 {
                        (fm[r * n + row] / dmin).round().clamp(0.0, sd.max_finite())
                    } else {
                        0.0
                    };
                    offsets[r * n + row] = m as f32;
                }
            }
        }
    }
    let mut codes = vec![0u8; n * k];
    let mask = (1u32 << b.bits()) - 1;
    for row in 0..n {
        for col in 0..k {
            let (r, r2) = (col / g, col / g2);
            let s = f64::from(scales[r * n + row]) * f64::from(scale2[r2 * n + row]);
            let z = if offset {
                f64::from(offsets[r * n + row]) * f64::from(factors[r2 * n + row])
            } else {
                0.0
            };
            let q = if s == 0.0 {
                0.0
            } else {
                ((w(row, col) - z) / s).round().clamp(qmin, qmax)
            };
            codes[row * k + col] = ((q as i32) as u32 & mask) as u8;
        }
    }
    let zeros = if offset {
        ZeroPoints::FloatTwoLevel { offsets, factors }
    } else {
        ZeroPoints::None
    };
    QuantizedWeights::from_parts_with_scale2(spec, n, k, codes, scales, scale2, zeros)
}
