//! ggml's own f32 dequantization of its legacy block formats: the independent oracle that the
//! lossless conversion ([`crate::convert`]) is checked against.
//!
//! Block layouts (ggml's `ggml/src/ggml-common.h`; all blocks hold 32 weights, `QK = 32`, and the
//! f16 fields are IEEE half, little-endian):
//!
//! | type | struct | bytes | fields |
//! |------|--------|-------|--------|
//! | Q4_0 | `block_q4_0` | 18 | `f16 d; u8 qs[16]` |
//! | Q4_1 | `block_q4_1` | 20 | `f16 d; f16 m; u8 qs[16]` |
//! | Q5_0 | `block_q5_0` | 22 | `f16 d; u8 qh[4]; u8 qs[16]` |
//! | Q5_1 | `block_q5_1` | 24 | `f16 d; f16 m; u8 qh[4]; u8 qs[16]` |
//! | Q8_0 | `block_q8_0` | 34 | `f16 d; i8 qs[32]` |
//!
//! Weight `j` of a block (`j < 16`) takes the low nibble of `qs[j]`, weight `j + 16` the high
//! nibble of `qs[j]`. For the 5-bit types `qh` is read as a little-endian `u32`, and bit `j` of it
//! is the fifth (high) bit of weight `j`, for all `j` in `0..32`.
//!
//! The formulas are those of `dequantize_row_q4_0`, `..._q4_1`, `..._q5_0`, `..._q5_1` and
//! `..._q8_0` in ggml's `ggml/src/ggml-quants.c`, computed in f32 as ggml does:
//! `y = (q - 8) * d` (Q4_0), `y = q * d + m` (Q4_1), `y = (q - 16) * d` (Q5_0), `y = q * d + m`
//! (Q5_1), `y = q * d` (Q8_0), with `d` and `m` converted from f16 to f32.

use crate::error::{Error, Result};
use crate::gguf::GgmlType;
use half::f16;

/// Weights per block of the legacy quantized types (`QK4_0`, `QK4_1`, `QK5_0`, `QK5_1`, `QK8_0`).
pub const QK: usize = 32;

/// The types [`ggml_dequantize`] reads.
pub const DEQUANTIZE_SUPPORTED: &str = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0";

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Dequantizes `n_elements` elements of type `ty` stored in `bytes` to f32, exactly as ggml's
/// `dequantize_row_*` (`ggml-quants.c`) and `ggml_fp16_to_fp32` / `ggml_bf16_to_fp32` do.
///
/// `bytes` holds `n_elements / 32` blocks for the quantized types (see the module doc for the
/// layouts) or `n_elements` little-endian elements for F32/F16/BF16. For a weight matrix the result
/// is row-major `[N, K]` (GGUF's `ne0 = K` is the fastest dimension).
///
/// # Errors
/// [`Error::UnsupportedTensorType`] (with an empty tensor name) for types other than
/// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0; [`Error::Shape`] if `n_elements` is not a whole
/// number of blocks or `bytes` does not hold exactly that many.
pub fn ggml_dequantize(ty: GgmlType, bytes: &[u8], n_elements: usize) -> Result<Vec<f32>> {
    let (blk, size) = match ty {
        GgmlType::F32
        | GgmlType::F16
        | GgmlType::BF16
        | GgmlType::Q4_0
        | GgmlType::Q4_1
        | GgmlType::Q5_0
        | GgmlType::Q5_1
        | GgmlType::Q8_0 => ty.block_layout().expect("known type"),
        _ => {
            return Err(Error::UnsupportedTensorType {
                tensor: String::new(),
                ty,
                supported: DEQUANTIZE_SUPPORTED,
            });
        }
    };
    if !n_elements.is_multiple_of(blk) || bytes.len() != n_elements / blk * size {
        return Err(Error::Shape {
            tensor: String::new(),
            msg: format!(
                "{n_elements} elements of {ty} need a multiple of {blk} elements and {} bytes, found {} bytes",
                n_elements / blk * size,
                bytes.len()
            ),
        });
    }
    let mut y = vec![0f32; n_elements];
    match ty {
        GgmlType::F32 => {
            for (o, c) in y.iter_mut().zip(bytes.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in y.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (o, c) in y.iter_mut().zip(bytes.chunks_exact(2)) {
                *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
            }
        }
        GgmlType::Q4_0 => {
            for (y, x) in y.chunks_exact_mut(QK).zip(bytes.chunks_exact(size)) {
                let d = f16_at(x, 0);
                let qs = &x[2..18];
                for j in 0..QK / 2 {
                    let x0 = i32::from(qs[j] & 0x0F) - 8;
                    let x1 = i32::from(qs[j] >> 4) - 8;
                    y[j] = x0 as f32 * d;
                    y[j + QK / 2] = x1 as f32 * d;
                }
            }
        }
        GgmlType::Q4_1 => {
            for (y, x) in y.chunks_exact_mut(QK).zip(bytes.chunks_exact(size)) {
                let d = f16_at(x, 0);
                let m = f16_at(x, 2);
                let qs = &x[4..20];
                for j in 0..QK / 2 {
                    let x0 = i32::from(qs[j] & 0x0F);
                    let x1 = i32::from(qs[j] >> 4);
                    y[j] = x0 as f32 * d + m;
                    y[j + QK / 2] = x1 as f32 * d + m;
                }
            }
        }
        GgmlType::Q5_0 => {
            for (y, x) in y.chunks_exact_mut(QK).zip(bytes.chunks_exact(size)) {
                let d = f16_at(x, 0);
                let qh = u32::from_le_bytes([x[2], x[3], x[4], x[5]]);
                let qs = &x[6..22];
                for j in 0..QK / 2 {
                    let xh_0 = (((qh >> j) << 4) & 0x10) as u8;
                    let xh_1 = ((qh >> (j + 12)) & 0x10) as u8;
                    let x0 = i32::from((qs[j] & 0x0F) | xh_0) - 16;
                    let x1 = i32::from((qs[j] >> 4) | xh_1) - 16;
                    y[j] = x0 as f32 * d;
                    y[j + QK / 2] = x1 as f32 * d;
                }
            }
        }
        GgmlType::Q5_1 => {
            for (y, x) in y.chunks_exact_mut(QK).zip(bytes.chunks_exact(size)) {
                let d = f16_at(x, 0);
                let m = f16_at(x, 2);
                let qh = u32::from_le_bytes([x[4], x[5], x[6], x[7]]);
                let qs = &x[8..24];
                for j in 0..QK / 2 {
                    let xh_0 = (((qh >> j) << 4) & 0x10) as u8;
                    let xh_1 = ((qh >> (j + 12)) & 0x10) as u8;
                    let x0 = i32::from((qs[j] & 0x0F) | xh_0);
                    let x1 = i32::from((qs[j] >> 4) | xh_1);
                    y[j] = x0 as f32 * d + m;
                    y[j + QK / 2] = x1 as f32 * d + m;
                }
            }
        }
        GgmlType::Q8_0 => {
            for (y, x) in y.chunks_exact_mut(QK).zip(bytes.chunks_exact(size)) {
                let d = f16_at(x, 0);
                for j in 0..QK {
                    y[j] = f32::from(x[2 + j] as i8) * d;
                }
            }
        }
        _ => unreachable!("checked above"),
    }
    Ok(y)
}
