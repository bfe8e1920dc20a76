//! The CPU reference: the GEMM the kernels compute, in f64, from the plain quantized weights.
//!
//! `C[m][n] = epilogue(Σ_k A[m][k] · W[n][k] + bias[n])` with `A` row-major `[M, K]`, `W` the exact
//! dequantized weights `[N, K]` ([`QuantizedWeights::dequantize`]), `C` row-major `[M, N]`, and the
//! epilogue of the spec (`none`, `relu`, `silu`, `gelu` with the exact erf, `gelu_tanh`; the gated
//! `silu_glu` ones give `[M, N / 2]`).
//!
//! It is the test oracle for the GPU kernels (compare with [`relative_error`]), and the fallback where
//! no GPU exists: [`reference_gemm_elements`] takes and returns the kernel's element types and gives
//! the exactly rounded result (the kernel itself accumulates in f32 and rounds the dequantized weights
//! to the activation dtype, so it differs from the reference by that rounding only). It is a plain
//! triple loop (spread over the available CPU threads): meant for tests and small problems.

use crate::error::{Result, invalid};
use crate::kernel::Element;
use crate::quant::{QuantizedWeights, to_bits16};
use humming_spec::layout::{c_columns, glu_rows};
use humming_spec::{Epilogue, Layout};

/// `erf(x)` in f64, to about 1e-15 relative (a few ulps).
///
/// `|x| < 1.5`: the Maclaurin series `2/√π · Σ (-1)^n x^(2n+1) / (n! (2n+1))`; `1.5 ≤ |x| < 6`:
/// `1 - erfc(|x|)` with erfc from its continued fraction
/// `e^(-x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))` (100 terms, evaluated backwards);
/// `|x| ≥ 6`: `±1` (`1 - erf(6) < 2.2e-17`).
pub fn erf(x: f64) -> f64 {
    let ax = x.abs();
    if x.is_nan() {
        x
    } else if ax >= 6.0 {
        1f64.copysign(x)
    } else if ax < 1.5 {
        let x2 = x * x;
        let (mut power, mut sum) = (x, x);
        let mut n = 0.0;
        loop {
            n += 1.0;
            power *= -x2 / n;
            let term = power / (2.0 * n + 1.0);
            sum += term;
            if term.abs() <= sum.abs() * 1e-17 {
                break;
            }
        }
        std::f64::consts::FRAC_2_SQRT_PI * sum
    } else {
        let mut f = ax;
        for n in (1..=100).rev() {
            f = ax + f64::from(n) * 0.5 / f;
        }
        let erfc = (-ax * ax).exp() * (0.5 * std::f64::consts::FRAC_2_SQRT_PI) / f;
        (1.0 - erfc).copysign(x)
    }
}

/// The epilogue function `e` applied to `x`, in f64:
/// `none` → `x`; `relu` → `max(x, 0)`; `silu` → `x / (1 + e^-x)`; `gelu` → `0.5·x·(1 + erf(x/√2))`;
/// `gelu_tanh` → `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub fn apply_epilogue(e: Epilogue, x: f64) -> f64 {
    match e {
        Epilogue::None => x,
        Epilogue::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        Epilogue::Silu => x / (1.0 + (-x).exp()),
        Epilogue::Gelu => 0.5 * x * (1.0 + erf(x * std::f64::consts::FRAC_1_SQRT_2)),
        Epilogue::GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        // The gated epilogues combine two channels (`reference_gemm`); each channel is left as is.
        Epilogue::SiluGlu | Epilogue::SiluGluInterleaved => x,
    }
}

/// The reference GEMM in f64: `C[m][n] = epilogue(Σ_k a[m*K + k] · W[n][k] + bias[n])`.
///
/// - `w`: the weights (`[N, K]`, with their spec: its epilogue is applied).
/// - `a`: `[M, K]` row-major.
/// - `m`: rows of A and C (may be 0).
/// - `bias`: `[N]`, given exactly when `w.spec().bias` is true.
///
/// Returns C, `[M, N]` row-major (`[M, N / 2]` with a gated epilogue: `silu(P[m][gate_j]) · P[m][up_j]`,
/// [`humming_spec::layout::glu_rows`]).
///
/// # Errors
/// [`crate::Error::InvalidArgument`] naming `m` (`M * K` overflows), `a` (length not `M * K`), `bias`
/// (given without `bias: true` in the spec, missing with it, or length not `N`), or `spec` (a layout
/// other than `dense`).
pub fn reference_gemm(
    w: &QuantizedWeights,
    a: &[f64],
    m: usize,
    bias: Option<&[f64]>,
) -> Result<Vec<f64>> {
    let spec = w.spec();
    let (n, k) = (w.n(), w.k());
    if spec.layout != Layout::Dense {
        return Err(invalid(
            "spec",
            format!(
                "the reference computes the `dense` layout only; found `{}`",
                spec.layout.name()
            ),
        ));
    }
    let mk = m
        .checked_mul(k)
        .ok_or_else(|| invalid("m", format!("M * K = {m} * {k} overflows usize")))?;
    if a.len() != mk {
        return Err(invalid(
            "a",
            format!(
                "expected M * K = {m} * {k} = {mk} elements, found {}",
                a.len()
            ),
        ));
    }
    m.checked_mul(n)
        .ok_or_else(|| invalid("m", format!("M * N = {m} * {n} overflows usize")))?;
    match (bias, spec.bias) {
        (Some(b), true) if b.len() != n => {
            return Err(invalid(
                "bias",
                format!("expected N = {n} elements, found {}", b.len()),
            ));
        }
        (Some(_), false) => {
            return Err(invalid(
                "bias",
                "a bias was given, but the spec has no bias (`bias: true`)",
            ));
        }
        (None, true) => {
            return Err(invalid(
                "bias",
                "the spec has `bias: true`, but no bias was given",
            ));
        }
        _ => {}
    }
    let wd = w.dequantize();
    let epi = spec.epilogue;
    let nc = c_columns(epi, n);
    let mut c = vec![0f64; m * nc];
    let row = |i: usize, out: &mut [f64]| {
        let ar = &a[i * k..(i + 1) * k];
        let dot = |j: usize| {
            let wr = &wd[j * k..(j + 1) * k];
            let mut acc = 0f64;
            for (x, y) in ar.iter().zip(wr) {
                acc += x * y;
            }
            acc + bias.map_or(0.0, |b| b[j])
        };
        for (j, o) in out.iter_mut().enumerate() {
            *o = if epi.is_glu() {
                let (gate, up) = glu_rows(epi, n, j);
                let g = dot(gate);
                g / (1.0 + (-g).exp()) * dot(up)
            } else {
                apply_epilogue(epi, dot(j))
            };
        }
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .min(m.max(1));
    let work = m.saturating_mul(n).saturating_mul(k);
    if threads <= 1 || work < (1 << 22) {
        for (i, out) in c.chunks_mut(nc.max(1)).enumerate().take(m) {
            row(i, out);
        }
    } else {
        let rows_per = m.div_ceil(threads);
        std::thread::scope(|sc| {
            for (t, chunk) in c.chunks_mut(rows_per * nc).enumerate() {
                let row = &row;
                sc.spawn(move || {
                    for (r, out) in chunk.chunks_mut(nc).enumerate() {
                        row(t * rows_per + r, out);
                    }
                });
            }
        });
    }
    Ok(c)
}

/// Converts elements (`half::f16` / `half::bf16`) to f64, exactly.
pub fn to_f64<E: Element>(values: &[E]) -> Vec<f64> {
    values.iter().map(|&v| v.to_f64()).collect()
}

/// Rounds one f64 to the element type `C`, to nearest even, directly from f64 (no double rounding
/// through f32); overflow gives ±∞, NaN gives NaN.
pub fn round_value<C: Element>(v: f64) -> C {
    C::from_bits(to_bits16(v, C::DTYPE))
}

/// Rounds f64 values to the element type `C` (see [`round_value`]).
pub fn round_to<C: Element>(values: &[f64]) -> Vec<C> {
    values.iter().map(|&v| round_value::<C>(v)).collect()
}

/// [`reference_gemm`] on the kernel's element types: A `[M, K]` of type `A` (the spec's `a`; for 8-bit
/// activations C's dtype, quantized per token or per activation group as a launch does), bias `[N]`
/// of type `C` (the spec's `c`, as the kernel takes it), and C `[M, N]` rounded from the exact f64
/// result to `C`. This is the CPU fallback of a launch.
///
/// # Errors
/// As [`reference_gemm`], plus `a` when `A` is not the spec's activation dtype and `c` when `C` is not
/// the spec's output dtype.
pub fn reference_gemm_elements<A: Element, C: Element>(
    w: &QuantizedWeights,
    a: &[A],
    m: usize,
    bias: Option<&[C]>,
) -> Result<Vec<C>> {
    let spec = w.spec();
    let act8 = humming_spec::layout::is_8bit_activation(spec.a);
    let a_in = if act8 { spec.c } else { spec.a };
    if A::DTYPE != a_in {
        return Err(invalid(
            "a",
            format!(
                "element type {} does not match the dtype of the spec's A, {a_in}",
                A::DTYPE,
            ),
        ));
    }
    if C::DTYPE != spec.c {
        return Err(invalid(
            "c",
            format!(
                "element type {} does not match the spec's output dtype {}",
                C::DTYPE,
                spec.c
            ),
        ));
    }
    let b = bias.map(to_f64);
    let a64 = if act8 {
        // As a launch does: quantized per token (or per activation group) first.
        let a32: Vec<f32> = a.iter().map(|x| x.to_f64() as f32).collect();
        let k = w.k();
        crate::act_quant::quantize_activations(
            &a32,
            m,
            k,
            spec.a,
            crate::act_quant::ActScale::of_kernel(spec),
        )?
        .dequantize()
    } else {
        to_f64(a)
    };
    let out = reference_gemm(w, &a64, m, b.as_deref())?;
    Ok(round_to(&out))
}

/// Relative error `‖got − want‖₂ / ‖want‖₂` (Frobenius norms over all elements).
///
/// Returns `0` when both are all zeros, `+∞` when `want` is all zeros and `got` is not, and `+∞` when the
/// lengths differ; NaN anywhere gives NaN.
pub fn relative_error(got: &[f64], want: &[f64]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let mut num = 0f64;
    let mut den = 0f64;
    for (g, w) in got.iter().zip(want) {
        num += (g - w) * (g - w);
        den += w * w;
    }
    if num.is_nan() || den.is_nan() {
        return f64::NAN;
    }
    if den == 0.0 {
        return if num == 0.0 { 0.0 } else { f64::INFINITY };
    }
    (num / den).sqrt()
}
