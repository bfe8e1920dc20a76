//! Lossless conversion of GGUF's legacy quantized blocks and K-quants into [`QuantizedWeights`].
//!
//! A GGUF weight tensor lists its dimensions as `[ne0, ne1] = [K, N]` (row length first); its
//! blocks run along each row, so the data is row-major `[N, K]`, exactly the layout of
//! [`QuantizedWeights`] (B is `[N, K]`, scales `[K / 32, N]`). Each 32-weight block becomes one
//! scale group of 32 along K; the block's codes, f16 scale `d` and f16 offset `m` are copied
//! without any arithmetic:
//!
//! | GGML type | ggml formula | descriptor ([`spec_for`]) | stored code |
//! |-----------|--------------|---------------------------|-------------|
//! | Q4_0 | `d * (q - 8)` | `a: f16, b: i4, scale: group(32, f16)` | `q - 8` as an i4 pattern |
//! | Q4_1 | `d * q + m` | `a: f16, b: u4, scale: group(32, f16), zero_point: float` | `q` |
//! | Q5_0 | `d * (q - 16)` | `a: f16, b: i5, scale: group(32, f16)` | `q - 16` as an i5 pattern |
//! | Q5_1 | `d * q + m` | `a: f16, b: u5, scale: group(32, f16), zero_point: float` | `q` |
//! | Q8_0 | `d * q` | `a: f16, b: i8, scale: group(32, f16)` | `q` (an i8 pattern) |
//!
//! So `QuantizedWeights::dequantize` (exact, in f64) rounded to f32 equals ggml's own f32
//! dequantization ([`crate::ggml::ggml_dequantize`]) bit for bit: every product `q * d` is exact in
//! f32, and `q * d + m` is rounded once in both.
//!
//! The K-quants keep their two levels ([`crate::kquant::TwoLevel`]): integer sub-block scales (and
//! mins) under f16 super-block factors `d` (and `dmin`), declared as an integer group scale with a
//! secondary group scale, and a two-level float offset for the mins (`m * -dmin`):
//!
//! | GGML type | ggml formula | descriptor | stored code |
//! |-----------|--------------|------------|-------------|
//! | Q2_K | `d * sc * q - dmin * m` | `a: f16, b: u2, scale: group(16, u4), scale2: group(256, f16), zero_point: float` | `q` |
//! | Q3_K | `d * (sc - 32) * (q - 4)` | `a: f16, b: i3, scale: group(16, i6), scale2: group(256, f16)` | `q - 4` as an i3 pattern |
//! | Q4_K | `d * sc * q - dmin * m` | `a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float` | `q` |
//! | Q5_K | `d * sc * q - dmin * m` | `a: f16, b: u5, scale: group(32, u6), scale2: group(256, f16), zero_point: float` | `q` |
//! | Q6_K | `d * sc * (q - 32)` | `a: f16, b: i6, scale: group(16, i8), scale2: group(256, f16)` | `q - 32` as an i6 pattern |
//!
//! | GGML type | ggml formula | descriptor | stored code |
//! |-----------|--------------|------------|-------------|
//! | IQ4_NL | `d * kvalues[q]` | `a: f16, b: i8, scale: group(32, f16)` | `kvalues[q]`, an i8 |
//! | IQ4_XS | `d * (ls - 32) * kvalues[q]` | `a: f16, b: i8, scale: group(32, i6), scale2: group(256, f16)` | `kvalues[q]`, an i8 |
//!
//! The IQ4 codebooks' 16 levels are int8 values: stored as i8 codes they convert without loss, at 8
//! bits per weight instead of 4 (a 4-bit code-table weight policy would keep 4; not generated yet).
//!
//! Every product `d * sc * q` and `dmin * m` is exact in f64, so `QuantizedWeights::dequantize`
//! is ggml's value before ggml's own f32 roundings (of `d * sc * q - dmin * m`), which round it once.
//!
//! Only `f16` activations are offered: the block scales and offsets are f16 values, which `bf16`
//! (the scale dtype must equal the activation dtype) would round.

use crate::error::{Error, Result};
use crate::ggml::QK;
use crate::gguf::{GgmlType, GgufTensor};
use humming_runtime::{QuantizedWeights, ZeroPoints};
use humming_spec::{DType, KernelSpec, parse_kernel_str};

/// The GGML types [`to_quantized`] converts.
pub const CONVERT_SUPPORTED: &str =
    "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";

/// The descriptor text (fields of a `gemm!` kernel) of the lossless conversion of GGML type `ty`,
/// or `None` if the type is not converted (see the module doc's table).
pub fn spec_text(ty: GgmlType) -> Option<&'static str> {
    Some(match ty {
        GgmlType::Q4_0 => "a: f16, b: i4, scale: group(32, f16)",
        GgmlType::Q4_1 => "a: f16, b: u4, scale: group(32, f16), zero_point: float",
        GgmlType::Q5_0 => "a: f16, b: i5, scale: group(32, f16)",
        GgmlType::Q5_1 => "a: f16, b: u5, scale: group(32, f16), zero_point: float",
        GgmlType::Q8_0 => "a: f16, b: i8, scale: group(32, f16)",
        GgmlType::Q2_K => {
            "a: f16, b: u2, scale: group(16, u4), scale2: group(256, f16), zero_point: float"
        }
        GgmlType::Q3_K => "a: f16, b: i3, scale: group(16, i6), scale2: group(256, f16)",
        GgmlType::Q4_K => {
            "a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float"
        }
        GgmlType::Q5_K => {
            "a: f16, b: u5, scale: group(32, u6), scale2: group(256, f16), zero_point: float"
        }
        GgmlType::Q6_K => "a: f16, b: i6, scale: group(16, i8), scale2: group(256, f16)",
        GgmlType::IQ4_NL => "a: f16, b: i8, scale: group(32, f16)",
        GgmlType::IQ4_XS => "a: f16, b: i8, scale: group(32, i6), scale2: group(256, f16)",
        _ => return None,
    })
}

/// The kernel descriptor of the lossless conversion of GGML type `ty` with activation dtype
/// `activation`. `tensor` only names the tensor in errors.
///
/// # Errors
/// [`Error::UnsupportedActivation`] unless `activation` is `f16` (GGUF scales are f16; `bf16` would
/// round them); [`Error::UnsupportedTensorType`] if `ty` is not one of [`CONVERT_SUPPORTED`].
pub fn spec_for(tensor: &str, ty: GgmlType, activation: DType) -> Result<KernelSpec> {
    if activation != DType::F16 {
        return Err(Error::UnsupportedActivation {
            tensor: tensor.to_owned(),
            dtype: activation,
        });
    }
    let text = spec_text(ty).ok_or_else(|| Error::UnsupportedTensorType {
        tensor: tensor.to_owned(),
        ty,
        supported: CONVERT_SUPPORTED,
    })?;
    parse_kernel_str(text).map_err(|source| Error::Spec {
        spec: text.to_owned(),
        source,
    })
}

/// Checks that the `gemm!` kernel `kernel`, declared as `declared`, runs exactly the weights that
/// [`to_quantized_as`] makes from `ty` tensors (at `declared`'s activation dtype).
///
/// # Errors
/// [`Error::Declaration`] when the descriptors differ; as [`spec_for`] when `ty` or the activation
/// dtype is not converted.
pub fn check_declaration(kernel: &str, ty: GgmlType, declared: &KernelSpec) -> Result<()> {
    let converted = spec_for(kernel, ty, declared.a)?;
    if &converted != declared {
        return Err(Error::Declaration {
            kernel: kernel.to_owned(),
            declared: declared.to_string(),
            ty,
            converted: converted.to_string(),
        });
    }
    Ok(())
}

/// Converts a GGUF weight tensor (one of [`CONVERT_SUPPORTED`]) to [`QuantizedWeights`] for the
/// `f16` descriptor of [`spec_for`], without loss: `N = ne1`, `K = ne0`, one scale group per block
/// (K-quants: per sub-block, with the super-block factors as secondary scales).
///
/// # Errors
/// As [`to_quantized_as`] with `DType::F16`.
pub fn to_quantized(tensor: &GgufTensor<'_>) -> Result<QuantizedWeights> {
    to_quantized_as(tensor, DType::F16)
}

/// [`to_quantized`] with an explicit activation dtype, which must be `f16`.
///
/// # Errors
/// - [`Error::UnsupportedActivation`] unless `activation` is `f16`;
/// - [`Error::UnsupportedTensorType`] naming the tensor and its type for any type other than
///   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K, IQ4_NL and IQ4_XS (e.g. F32 norm vectors);
/// - [`Error::Shape`] if the tensor is not a matrix (a dimension past the second is not 1);
/// - [`Error::Weights`] if [`QuantizedWeights::from_parts`] rejects the parts (a block scale or
///   offset that is infinite or NaN).
pub fn to_quantized_as(tensor: &GgufTensor<'_>, activation: DType) -> Result<QuantizedWeights> {
    let name = tensor.name();
    let ty = tensor.ggml_type();
    let spec = spec_for(name, ty, activation)?;
    if crate::kquant::TwoLevelLayout::of(ty).is_some() {
        return two_level(&spec, &crate::kquant::TwoLevel::from_tensor(tensor)?, name);
    }
    let (n, k) = tensor.info().matrix_nk().ok_or_else(|| Error::Shape {
        tensor: name.to_owned(),
        msg: format!(
            "dimensions {:?} (row length first) are not a matrix",
            tensor.dims()
        ),
    })?;
    let (blk, size) = ty
        .block_layout()
        .expect("converted types have a known layout");
    debug_assert_eq!(blk, QK);
    let bytes = tensor.bytes();
    // The reader checked that K is a whole number of blocks and that the data is in bounds.
    let blocks_per_row = k / QK;
    if n == 0 || k == 0 || bytes.len() != n * blocks_per_row * size {
        return Err(Error::Shape {
            tensor: name.to_owned(),
            msg: format!(
                "[N, K] = [{n}, {k}] with {} bytes of {ty} blocks is not a non-empty matrix",
                bytes.len()
            ),
        });
    }
    let mut codes = vec![0u8; n * k];
    let mut scales = vec![0f32; blocks_per_row * n];
    let has_offset = matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1);
    let mut offsets = vec![0f32; if has_offset { blocks_per_row * n } else { 0 }];
    let half =
        |x: &[u8], at: usize| half::f16::from_bits(u16::from_le_bytes([x[at], x[at + 1]])).to_f32();
    for (bi, x) in bytes.chunks_exact(size).enumerate() {
        let (row, g) = (bi / blocks_per_row, bi % blocks_per_row);
        let out = &mut codes[row * k + g * QK..row * k + (g + 1) * QK];
        scales[g * n + row] = half(x, 0);
        match ty {
            GgmlType::Q4_0 => {
                // q - 8 as an i4 pattern is q ^ 8.
                nibbles(&x[2..18], out, |q| q ^ 0x8);
            }
            GgmlType::Q4_1 => {
                offsets[g * n + row] = half(x, 2);
                nibbles(&x[4..20], out, |q| q);
            }
            GgmlType::Q5_0 => {
                let qh = u32::from_le_bytes([x[2], x[3], x[4], x[5]]);
                nibbles(&x[6..22], out, |q| q);
                // q - 16 as an i5 pattern is q ^ 16.
                high_bits(qh, out, 0x10);
            }
            GgmlType::Q5_1 => {
                offsets[g * n + row] = half(x, 2);
                let qh = u32::from_le_bytes([x[4], x[5], x[6], x[7]]);
                nibbles(&x[8..24], out, |q| q);
                high_bits(qh, out, 0);
            }
            GgmlType::Q8_0 => out.copy_from_slice(&x[2..2 + QK]),
            _ => unreachable!("spec_for accepted only converted types"),
        }
    }
    let zeros = if has_offset {
        ZeroPoints::Float(offsets)
    } else {
        ZeroPoints::None
    };
    QuantizedWeights::from_parts(&spec, n, k, codes, scales, zeros).map_err(|source| {
        Error::Weights {
            tensor: name.to_owned(),
            source,
        }
    })
}

/// [`to_quantized`] of a decoded K-quant or IQ4 matrix: the same lossless conversion, for
/// [`crate::kquant::TwoLevel`] values built from bytes outside a GGUF file.
///
/// # Errors
/// [`Error::Weights`] if a super-block factor is infinite or NaN.
pub fn from_two_level(t: &crate::kquant::TwoLevel) -> Result<QuantizedWeights> {
    let spec = spec_for("", t.ty, DType::F16)?;
    two_level(&spec, t, "")
}

/// The K-quant and IQ4 conversion: codes as the pattern of their level (`code - bias`, or the IQ4
/// codebook's int8), integer scales, `d` as the secondary group scale (IQ4_NL: as the group scale),
/// mins with `-dmin` as two-level offsets; nothing rounded.
fn two_level(
    spec: &KernelSpec,
    t: &crate::kquant::TwoLevel,
    name: &str,
) -> Result<QuantizedWeights> {
    let bits = spec.b.bits();
    let mask = (1i32 << bits) - 1;
    // The stored code: the pattern of the level (code - bias, or the codebook's int8) in b's bits.
    let codes = t
        .codes
        .iter()
        .map(|&c| (t.levels.level(c) & mask) as u8)
        .collect();
    let (scales, scale2) = if t.ty == GgmlType::IQ4_NL {
        // One level: the block's d is the group scale.
        (t.d.iter().map(|d| d.to_f32()).collect(), Vec::new())
    } else {
        (
            t.scales.iter().map(|&s| f32::from(s)).collect(),
            t.d.iter().map(|d| d.to_f32()).collect(),
        )
    };
    let zeros = match (&t.mins, &t.dmin) {
        (Some(m), Some(dmin)) => ZeroPoints::FloatTwoLevel {
            offsets: m.iter().map(|&m| f32::from(m)).collect(),
            factors: dmin.iter().map(|d| -d.to_f32()).collect(),
        },
        _ => ZeroPoints::None,
    };
    QuantizedWeights::from_parts_with_scale2(spec, t.n, t.k, codes, scales, scale2, zeros).map_err(
        |source| Error::Weights {
            tensor: name.to_owned(),
            source,
        },
    )
}

/// Writes the 32 4-bit codes of a block (`qs[j] & 15` for `j < 16`, `qs[j - 16] >> 4` after),
/// mapped through `f`.
fn nibbles(qs: &[u8], out: &mut [u8], f: impl Fn(u8) -> u8) {
    for j in 0..QK / 2 {
        out[j] = f(qs[j] & 0x0F);
        out[j + QK / 2] = f(qs[j] >> 4);
    }
}

/// Adds the fifth bit of each code: bit `j` of `qh` for weight `j`, then flips it with `flip`
/// (`0x10` turns `q` into the i5 pattern of `q - 16`).
fn high_bits(qh: u32, out: &mut [u8], flip: u8) {
    for (j, c) in out.iter_mut().enumerate() {
        *c |= (((qh >> j) & 1) as u8) << 4;
        *c ^= flip;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_checked_against_the_conversion() {
        let q41 = parse_kernel_str(spec_text(GgmlType::Q4_1).unwrap()).unwrap();
        check_declaration("GgufQ41", GgmlType::Q4_1, &q41).unwrap();
        let e = check_declaration("GgufQ41", GgmlType::Q8_0, &q41).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Declaration {
                    ty: GgmlType::Q8_0,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("fix its gemm! declaration"), "{e}");
        let bf16 = "a: bf16, b: u4, scale: group(32, bf16), zero_point: float";
        let e = check_declaration("k", GgmlType::Q4_1, &parse_kernel_str(bf16).unwrap());
        assert!(matches!(e, Err(Error::UnsupportedActivation { .. })));
    }
}
