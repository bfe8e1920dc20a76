//! ggml's own f32 dequantization of its block formats: the independent oracle that the lossless
//! conversion ([`crate::convert`]) and the two-level decode ([`crate::kquant`]) are checked against.
//!
//! Block layouts (ggml's `ggml/src/ggml-common.h`; the f16 fields are IEEE half, little-endian).
//! Legacy blocks hold 32 weights (`QK = 32`):
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
//!
//! K-quants hold super-blocks of 256 weights (`QK_K = 256`) cut into sub-blocks of 16 or 32 with
//! small integer scales (and mins) under f16 super-block factors; IQ4_NL / IQ4_XS index a fixed
//! table of 16 non-uniform levels ([`KVALUES_IQ4NL`]):
//!
//! | type | struct | bytes | fields, in memory order |
//! |------|--------|-------|--------|
//! | Q2_K | `block_q2_K` | 84 | `u8 scales[16]; u8 qs[64]; f16 d; f16 dmin` |
//! | Q3_K | `block_q3_K` | 110 | `u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d` |
//! | Q4_K | `block_q4_K` | 144 | `f16 d; f16 dmin; u8 scales[12]; u8 qs[128]` |
//! | Q5_K | `block_q5_K` | 176 | `f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]` |
//! | Q6_K | `block_q6_K` | 210 | `u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d` |
//! | IQ4_NL | `block_iq4_nl` | 18 | `f16 d; u8 qs[16]` (32 weights) |
//! | IQ4_XS | `block_iq4_xs` | 136 | `f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]` |
//!
//! Their dequantization below is a line-by-line transcription of `dequantize_row_q2_K` ...
//! `dequantize_row_q6_K`, `dequantize_row_iq4_nl` and `dequantize_row_iq4_xs`, loops, pointer
//! walks and f32 operation order included (e.g. Q4_K: `d1 = d * sc; m1 = dmin * m;
//! y = d1 * q - m1`; Q6_K: `y = d * sc * q`, left to right), without fused multiply-adds. Where the
//! bits go is described per weight, independently, in [`crate::kquant`].

use crate::error::{Error, Result};
use crate::gguf::GgmlType;
use half::f16;

/// Weights per block of the legacy quantized types (`QK4_0`, `QK4_1`, `QK5_0`, `QK5_1`, `QK8_0`).
pub const QK: usize = 32;
/// Weights per super-block of the K-quants and IQ4_XS (`QK_K`).
pub const QK_K: usize = 256;
/// Weights per block of IQ4_NL (`QK4_NL`).
pub const QK4_NL: usize = 32;

/// The 16 levels of IQ4_NL and IQ4_XS (`kvalues_iq4nl` in ggml's `ggml-common.h`): a 4-bit code
/// `q` stands for `KVALUES_IQ4NL[q]`.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

/// The types [`ggml_dequantize`] reads.
pub const DEQUANTIZE_SUPPORTED: &str =
    "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

/// Checks that `bytes` holds exactly `n_elements` elements of `ty` (a whole number of blocks) and
/// returns `(elements per block, bytes per block)`. `tensor` names the tensor in the errors.
///
/// # Errors
/// [`Error::UnsupportedTensorType`] if the type's layout is unknown, [`Error::BlockMultiple`] if
/// `n_elements` is not a whole number of blocks, [`Error::ByteCount`] if `bytes` has another
/// length (or the length overflows).
pub(crate) fn check_blocks(
    tensor: &str,
    ty: GgmlType,
    bytes: &[u8],
    n_elements: usize,
    supported: &'static str,
) -> Result<(usize, usize)> {
    let (blk, size) = ty
        .block_layout()
        .ok_or_else(|| Error::UnsupportedTensorType {
            tensor: tensor.to_owned(),
            ty,
            supported,
        })?;
    if !n_elements.is_multiple_of(blk) {
        return Err(Error::BlockMultiple {
            tensor: tensor.to_owned(),
            ty,
            len: n_elements,
            block: blk,
        });
    }
    let expected = (n_elements / blk).saturating_mul(size);
    if expected != bytes.len() {
        return Err(Error::ByteCount {
            tensor: tensor.to_owned(),
            ty,
            n_elements,
            expected,
            found: bytes.len(),
        });
    }
    Ok((blk, size))
}

/// Dequantizes `n_elements` elements of type `ty` stored in `bytes` to f32, exactly as ggml's
/// `dequantize_row_*` (`ggml-quants.c`) and `ggml_fp16_to_fp32` / `ggml_bf16_to_fp32` do.
///
/// `bytes` holds `n_elements / block` blocks for the quantized types (see the module doc for the
/// layouts; `block` is 32, or 256 for the K-quants and IQ4_XS) or `n_elements` little-endian
/// elements for F32/F16/BF16. For a weight matrix the result is row-major `[N, K]` (GGUF's
/// `ne0 = K` is the fastest dimension); ggml requires every row to be whole blocks, which holds
/// when `K` is a multiple of the block.
///
/// # Errors
/// [`Error::UnsupportedTensorType`] (with an empty tensor name) for types other than those in
/// [`DEQUANTIZE_SUPPORTED`]; [`Error::BlockMultiple`] if `n_elements` is not a whole number of
/// blocks; [`Error::ByteCount`] if `bytes` does not hold exactly that many blocks.
pub fn ggml_dequantize(ty: GgmlType, bytes: &[u8], n_elements: usize) -> Result<Vec<f32>> {
    use GgmlType::*;
    if !matches!(
        ty,
        F32 | F16
            | BF16
            | Q4_0
            | Q4_1
            | Q5_0
            | Q5_1
            | Q8_0
            | Q2_K
            | Q3_K
            | Q4_K
            | Q5_K
            | Q6_K
            | IQ4_NL
            | IQ4_XS
    ) {
        return Err(Error::UnsupportedTensorType {
            tensor: String::new(),
            ty,
            supported: DEQUANTIZE_SUPPORTED,
        });
    }
    let (blk, size) = check_blocks("", ty, bytes, n_elements, DEQUANTIZE_SUPPORTED)?;
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
        GgmlType::Q2_K
        | GgmlType::Q3_K
        | GgmlType::Q4_K
        | GgmlType::Q5_K
        | GgmlType::Q6_K
        | GgmlType::IQ4_NL
        | GgmlType::IQ4_XS => {
            let row = match ty {
                GgmlType::Q2_K => dequantize_q2_k,
                GgmlType::Q3_K => dequantize_q3_k,
                GgmlType::Q4_K => dequantize_q4_k,
                GgmlType::Q5_K => dequantize_q5_k,
                GgmlType::Q6_K => dequantize_q6_k,
                GgmlType::IQ4_NL => dequantize_iq4_nl,
                _ => dequantize_iq4_xs,
            };
            for (y, x) in y.chunks_exact_mut(blk).zip(bytes.chunks_exact(size)) {
                row(x, y);
            }
        }
        _ => unreachable!("checked above"),
    }
    Ok(y)
}

// One block each: `x` is the block's bytes, `y` its `QK_K` (IQ4_NL: `QK4_NL`) outputs. Offsets of
// the fields are those of the module doc's table. The loops keep ggml's index form on purpose
// (`needless_range_loop` allowed), so that they read side by side with `ggml-quants.c`.

/// `get_scale_min_k4`: the 6-bit scale and min `j` (`0..8`) of Q4_K / Q5_K's `scales[12]`.
fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// `dequantize_row_q2_K`, one block.
#[allow(clippy::needless_range_loop)]
fn dequantize_q2_k(x: &[u8], y: &mut [f32]) {
    let scales = &x[0..16];
    let d = f16_at(x, 80);
    let min = f16_at(x, 82);
    let mut q = &x[16..80];
    let mut yi = 0;
    let mut is = 0;
    for _n in (0..QK_K).step_by(128) {
        let mut shift = 0;
        for _j in 0..4 {
            let sc = scales[is];
            is += 1;
            let dl = d * f32::from(sc & 0xF);
            let ml = min * f32::from(sc >> 4);
            for l in 0..16 {
                y[yi] = dl * f32::from(((q[l] >> shift) & 3) as i8) - ml;
                yi += 1;
            }
            let sc = scales[is];
            is += 1;
            let dl = d * f32::from(sc & 0xF);
            let ml = min * f32::from(sc >> 4);
            for l in 0..16 {
                y[yi] = dl * f32::from(((q[l + 16] >> shift) & 3) as i8) - ml;
                yi += 1;
            }
            shift += 2;
        }
        q = &q[32..];
    }
}

/// `dequantize_row_q3_K`, one block, with its `aux` unpacking of the 6-bit scales.
fn dequantize_q3_k(x: &[u8], y: &mut [f32]) {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let hm = &x[0..32];
    let mut q = &x[32..96];
    let s = &x[96..108];
    let d_all = f16_at(x, 108);
    let mut aux = [0u32; 4];
    for (i, a) in aux.iter_mut().take(3).enumerate() {
        *a = u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    }
    let tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4);
    aux[3] = ((aux[1] >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4);
    aux[0] = (aux[0] & KMASK2) | ((tmp & KMASK1) << 4);
    aux[1] = (aux[1] & KMASK2) | (((tmp >> 2) & KMASK1) << 4);
    let mut scales = [0i8; 16];
    for (i, a) in aux.iter().enumerate() {
        for (b, byte) in a.to_le_bytes().iter().enumerate() {
            scales[4 * i + b] = *byte as i8;
        }
    }
    let mut m = 1u8;
    let mut yi = 0;
    let mut is = 0;
    for _n in (0..QK_K).step_by(128) {
        let mut shift = 0;
        for _j in 0..4 {
            let dl = d_all * (i32::from(scales[is]) - 32) as f32;
            is += 1;
            for l in 0..16 {
                let v = i32::from(((q[l] >> shift) & 3) as i8) - if hm[l] & m != 0 { 0 } else { 4 };
                y[yi] = dl * v as f32;
                yi += 1;
            }
            let dl = d_all * (i32::from(scales[is]) - 32) as f32;
            is += 1;
            for l in 0..16 {
                let v = i32::from(((q[l + 16] >> shift) & 3) as i8)
                    - if hm[l + 16] & m != 0 { 0 } else { 4 };
                y[yi] = dl * v as f32;
                yi += 1;
            }
            shift += 2;
            m <<= 1;
        }
        q = &q[32..];
    }
}

/// Q4_K / Q5_K: `d * sc` and `dmin * m` of sub-block `is` (6-bit scale and min), in f32 as ggml.
fn scale_min_factors(d: f32, min: f32, is: usize, scales: &[u8]) -> (f32, f32) {
    let (sc, m) = get_scale_min_k4(is, scales);
    (d * f32::from(sc), min * f32::from(m))
}

/// `dequantize_row_q4_K`, one block.
#[allow(clippy::needless_range_loop)]
fn dequantize_q4_k(x: &[u8], y: &mut [f32]) {
    let d = f16_at(x, 0);
    let min = f16_at(x, 2);
    let scales = &x[4..16];
    let mut q = &x[16..144];
    let mut yi = 0;
    let mut is = 0;
    for _j in (0..QK_K).step_by(64) {
        let (d1, m1) = scale_min_factors(d, min, is, scales);
        let (d2, m2) = scale_min_factors(d, min, is + 1, scales);
        for l in 0..32 {
            y[yi] = d1 * f32::from(q[l] & 0xF) - m1;
            yi += 1;
        }
        for l in 0..32 {
            y[yi] = d2 * f32::from(q[l] >> 4) - m2;
            yi += 1;
        }
        q = &q[32..];
        is += 2;
    }
}

/// `dequantize_row_q5_K`, one block.
fn dequantize_q5_k(x: &[u8], y: &mut [f32]) {
    let d = f16_at(x, 0);
    let min = f16_at(x, 2);
    let scales = &x[4..16];
    let qh = &x[16..48];
    let mut ql = &x[48..176];
    let (mut u1, mut u2) = (1u8, 2u8);
    let mut yi = 0;
    let mut is = 0;
    for _j in (0..QK_K).step_by(64) {
        let (d1, m1) = scale_min_factors(d, min, is, scales);
        let (d2, m2) = scale_min_factors(d, min, is + 1, scales);
        for l in 0..32 {
            let v = i32::from(ql[l] & 0xF) + if qh[l] & u1 != 0 { 16 } else { 0 };
            y[yi] = d1 * v as f32 - m1;
            yi += 1;
        }
        for l in 0..32 {
            let v = i32::from(ql[l] >> 4) + if qh[l] & u2 != 0 { 16 } else { 0 };
            y[yi] = d2 * v as f32 - m2;
            yi += 1;
        }
        ql = &ql[32..];
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
    }
}

/// `dequantize_row_q6_K`, one block.
fn dequantize_q6_k(x: &[u8], y: &mut [f32]) {
    let d = f16_at(x, 208);
    let mut ql = &x[0..128];
    let mut qh = &x[128..192];
    let mut sc = &x[192..208];
    let mut y = y;
    for _n in (0..QK_K).step_by(128) {
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            y[l] = d * f32::from(sc[is] as i8) * f32::from(q1);
            y[l + 32] = d * f32::from(sc[is + 2] as i8) * f32::from(q2);
            y[l + 64] = d * f32::from(sc[is + 4] as i8) * f32::from(q3);
            y[l + 96] = d * f32::from(sc[is + 6] as i8) * f32::from(q4);
        }
        y = &mut y[128..];
        ql = &ql[64..];
        qh = &qh[32..];
        sc = &sc[8..];
    }
}

/// `dequantize_row_iq4_nl`, one block of 32.
fn dequantize_iq4_nl(x: &[u8], y: &mut [f32]) {
    let d = f16_at(x, 0);
    let qs = &x[2..18];
    for j in 0..QK4_NL / 2 {
        y[j] = d * f32::from(KVALUES_IQ4NL[usize::from(qs[j] & 0xF)]);
        y[j + QK4_NL / 2] = d * f32::from(KVALUES_IQ4NL[usize::from(qs[j] >> 4)]);
    }
}

/// `dequantize_row_iq4_xs`, one block.
fn dequantize_iq4_xs(x: &[u8], y: &mut [f32]) {
    let d = f16_at(x, 0);
    let scales_h = u16::from_le_bytes([x[2], x[3]]);
    let scales_l = &x[4..8];
    let mut qs = &x[8..136];
    let mut y = y;
    for ib in 0..QK_K / 32 {
        let ls = i32::from((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF)
            | (i32::from((scales_h >> (2 * ib)) & 3) << 4);
        let dl = d * (ls - 32) as f32;
        for j in 0..16 {
            y[j] = dl * f32::from(KVALUES_IQ4NL[usize::from(qs[j] & 0xF)]);
            y[j + 16] = dl * f32::from(KVALUES_IQ4NL[usize::from(qs[j] >> 4)]);
        }
        y = &mut y[32..];
        qs = &qs[16..];
    }
}
