//! Lossless two-level decode of ggml's K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and 4-bit
//! non-linear quants (IQ4_NL, IQ4_XS): every integer ggml stores, unpacked into plain arrays.
//!
//! Terms, for a weight matrix of N output features by K input features (`[N, K]`, row-major, as
//! GGUF stores it: `ne0 = K`):
//! - **super-block**: `block` (256; IQ4_NL 32) consecutive weights of one row, sharing the f16
//!   factors `d` (and `dmin`). The first level.
//! - **group** (ggml's sub-block): `sub` (16 or 32) consecutive weights of one row inside a
//!   super-block, sharing a small integer **scale** (and, for Q2_K/Q4_K/Q5_K, an integer **min**).
//!   The second level.
//! - **code**: the unsigned integer stored per weight; its **level** is the integer it stands for
//!   ([`Levels`]: `code - bias`, or a table entry for IQ4).
//!
//! Weight `(n, k)` is then, computed in f32 in ggml's order (see [`TwoLevel::value`]):
//! `(d * scale) * level(code) - dmin * min` with the min term only where there are mins.
//!
//! | type | code bits | levels | `sub` | scale as ggml uses it | min | `block` | factors |
//! |------|----|--------|----|-------|-----|----|----|
//! | Q2_K | 2 | code | 16 | 4-bit `0..=15` | 4-bit | 256 | `d`, `dmin` |
//! | Q3_K | 3 | code - 4 | 16 | 6-bit minus 32, `-32..=31` | - | 256 | `d` |
//! | Q4_K | 4 | code | 32 | 6-bit `0..=63` | 6-bit | 256 | `d`, `dmin` |
//! | Q5_K | 5 | code | 32 | 6-bit `0..=63` | 6-bit | 256 | `d`, `dmin` |
//! | Q6_K | 6 | code - 32 | 16 | int8 | - | 256 | `d` |
//! | IQ4_NL | 4 | [`KVALUES_IQ4NL`]`[code]` | 32 | 1 (none stored) | - | 32 | `d` |
//! | IQ4_XS | 4 | [`KVALUES_IQ4NL`]`[code]` | 32 | 6-bit minus 32, `-32..=31` | - | 256 | `d` |
//!
//! Layout choices of [`TwoLevel`]:
//! - codes are `[N, K]` bytes, one per weight, unpacked from ggml's bit planes: any consumer
//!   (a GPU packer, a CPU reference) then reads weight `(n, k)` at `n * K + k` whatever the type.
//! - codes are kept unsigned, as stored, with the offset or table in [`Levels`]: Q3_K's code is
//!   `q2 | hbit << 2`, so its level `code - 4` equals ggml's `q2 - (hbit ? 0 : 4)`.
//! - scales, mins, `d` and `dmin` are `[K / sub, N]` and `[K / block, N]` (group-major, N fastest),
//!   the layout of [`humming_runtime::QuantizedWeights`]' scales, so a later conversion copies
//!   instead of transposing.
//! - scales are `i16` holding the value ggml multiplies by (already minus 32 for Q3_K / IQ4_XS):
//!   one type covers the unsigned 4/6-bit scales, the signed int8 of Q6_K and the biased 6-bit
//!   ones. IQ4_NL has no second level; its scales are all 1 and its super-block is its 32-weight
//!   block, so that it needs no special case.
//! - `d` and `dmin` stay `f16` (the stored bits): nothing is rounded.
//!
//! Where each bit sits in ggml's blocks is derived here per weight position, independently of the
//! loop-by-loop transcription of ggml in [`crate::ggml`], and the tests check the two against each
//! other bit for bit.

use crate::error::{Error, Result};
use crate::ggml::{KVALUES_IQ4NL, QK_K, QK4_NL, check_blocks};
use crate::gguf::{GgmlType, GgufTensor};
use half::f16;

/// The types [`TwoLevel`] decodes.
pub const TWO_LEVEL_SUPPORTED: &str = "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS";

/// What integer a stored code stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Levels {
    /// `level = code - bias` (Q3_K: 4, Q6_K: 32, else 0).
    Offset(i32),
    /// `level = table[code]` (IQ4_NL, IQ4_XS: [`KVALUES_IQ4NL`]).
    Table(&'static [i8; 16]),
}

impl Levels {
    /// The integer that `code` stands for.
    ///
    /// # Panics
    /// For a table, if `code >= 16` (never the case for decoded codes).
    pub fn level(self, code: u8) -> i32 {
        match self {
            Levels::Offset(bias) => i32::from(code) - bias,
            Levels::Table(t) => i32::from(t[usize::from(code)]),
        }
    }
}

/// The static shape of a two-level type (see the module doc's table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TwoLevelLayout {
    /// Bits per code.
    pub bits: u32,
    /// What a code stands for.
    pub levels: Levels,
    /// Weights per group (sub-block) along K.
    pub sub: usize,
    /// Weights per super-block along K (the block of ggml's type).
    pub block: usize,
    /// Whether groups have integer mins under a super-block `dmin`.
    pub has_mins: bool,
}

impl TwoLevelLayout {
    /// The layout of `ty`, `None` if [`TwoLevel`] does not decode it.
    pub fn of(ty: GgmlType) -> Option<TwoLevelLayout> {
        let l = |bits, levels, sub, block, has_mins| {
            Some(TwoLevelLayout {
                bits,
                levels,
                sub,
                block,
                has_mins,
            })
        };
        match ty {
            GgmlType::Q2_K => l(2, Levels::Offset(0), 16, QK_K, true),
            GgmlType::Q3_K => l(3, Levels::Offset(4), 16, QK_K, false),
            GgmlType::Q4_K => l(4, Levels::Offset(0), 32, QK_K, true),
            GgmlType::Q5_K => l(5, Levels::Offset(0), 32, QK_K, true),
            GgmlType::Q6_K => l(6, Levels::Offset(32), 16, QK_K, false),
            GgmlType::IQ4_NL => l(4, Levels::Table(&KVALUES_IQ4NL), 32, QK4_NL, false),
            GgmlType::IQ4_XS => l(4, Levels::Table(&KVALUES_IQ4NL), 32, QK_K, false),
            _ => None,
        }
    }
}

/// A K-quant or IQ4 weight matrix `[N, K]` decoded into its two levels, without loss (see the
/// module doc for the terms and layouts).
#[derive(Clone, Debug, PartialEq)]
pub struct TwoLevel {
    /// The GGML type it was decoded from.
    pub ty: GgmlType,
    /// Output features (rows).
    pub n: usize,
    /// Input features (row length), a multiple of `block`.
    pub k: usize,
    /// Bits per code.
    pub bits: u32,
    /// What a code stands for.
    pub levels: Levels,
    /// Codes `[N, K]`, unsigned, each `< 2^bits`.
    pub codes: Vec<u8>,
    /// Weights per group along K (16 or 32).
    pub sub: usize,
    /// Group scales `[K / sub, N]`, as ggml multiplies by them.
    pub scales: Vec<i16>,
    /// Group mins `[K / sub, N]` (Q2_K, Q4_K, Q5_K), subtracted after scaling by `dmin`.
    pub mins: Option<Vec<u8>>,
    /// Weights per super-block along K (256; IQ4_NL 32).
    pub block: usize,
    /// Super-block factors of the scales `[K / block, N]`.
    pub d: Vec<f16>,
    /// Super-block factors of the mins `[K / block, N]` (Q2_K, Q4_K, Q5_K).
    pub dmin: Option<Vec<f16>>,
}

impl TwoLevel {
    /// Decodes `bytes`, an `[n, k]` matrix of ggml blocks of type `ty` (row-major, each row
    /// `k / block` blocks), into its two levels.
    ///
    /// # Errors
    /// - [`Error::UnsupportedTensorType`] for types other than [`TWO_LEVEL_SUPPORTED`];
    /// - [`Error::Shape`] if `n * k` overflows;
    /// - [`Error::BlockMultiple`] if `k` is not a multiple of the type's block (256; IQ4_NL 32);
    /// - [`Error::ByteCount`] if `bytes` is not exactly `n * k / block` blocks.
    pub fn decode(ty: GgmlType, bytes: &[u8], n: usize, k: usize) -> Result<TwoLevel> {
        Self::decode_named("", ty, bytes, n, k)
    }

    /// Decodes a GGUF tensor (see [`TwoLevel::decode`]); the errors name the tensor.
    ///
    /// # Errors
    /// As [`TwoLevel::decode`], and [`Error::Shape`] if the tensor is not a matrix (a dimension
    /// past the second is not 1).
    pub fn from_tensor(tensor: &GgufTensor<'_>) -> Result<TwoLevel> {
        let name = tensor.name();
        let (n, k) = tensor.info().matrix_nk().ok_or_else(|| Error::Shape {
            tensor: name.to_owned(),
            msg: format!(
                "dimensions {:?} (row length first) are not a matrix",
                tensor.dims()
            ),
        })?;
        Self::decode_named(name, tensor.ggml_type(), tensor.bytes(), n, k)
    }

    fn decode_named(
        name: &str,
        ty: GgmlType,
        bytes: &[u8],
        n: usize,
        k: usize,
    ) -> Result<TwoLevel> {
        let layout = TwoLevelLayout::of(ty).ok_or_else(|| Error::UnsupportedTensorType {
            tensor: name.to_owned(),
            ty,
            supported: TWO_LEVEL_SUPPORTED,
        })?;
        let n_elements = n.checked_mul(k).ok_or_else(|| Error::Shape {
            tensor: name.to_owned(),
            msg: format!("[N, K] = [{n}, {k}] has more elements than fit in usize"),
        })?;
        if !k.is_multiple_of(layout.block) {
            return Err(Error::BlockMultiple {
                tensor: name.to_owned(),
                ty,
                len: k,
                block: layout.block,
            });
        }
        let (block, size) = check_blocks(name, ty, bytes, n_elements, TWO_LEVEL_SUPPORTED)?;
        debug_assert_eq!(block, layout.block);
        let (sub, blocks_per_row) = (layout.sub, k / block);
        let subs_per_block = block / sub;
        let mut out = TwoLevel {
            ty,
            n,
            k,
            bits: layout.bits,
            levels: layout.levels,
            codes: vec![0; n_elements],
            sub,
            scales: vec![0; n_elements / sub],
            mins: layout.has_mins.then(|| vec![0; n_elements / sub]),
            block,
            d: vec![f16::ZERO; n_elements / block],
            dmin: layout.has_mins.then(|| vec![f16::ZERO; n_elements / block]),
        };
        let mut sc = [0i16; 16];
        let mut mn = [0u8; 16];
        for (bi, x) in bytes.chunks_exact(size).enumerate() {
            let (row, b) = (bi / blocks_per_row, bi % blocks_per_row);
            let codes = &mut out.codes[row * k + b * block..][..block];
            let (d, dmin) = unpack_block(ty, x, codes, &mut sc, &mut mn);
            out.d[b * n + row] = d;
            if let Some(dm) = &mut out.dmin {
                dm[b * n + row] = dmin;
            }
            for s in 0..subs_per_block {
                let g = b * subs_per_block + s;
                out.scales[g * n + row] = sc[s];
                if let Some(m) = &mut out.mins {
                    m[g * n + row] = mn[s];
                }
            }
        }
        Ok(out)
    }

    /// Groups per row, `K / sub`.
    pub fn groups(&self) -> usize {
        self.k / self.sub
    }

    /// Super-blocks per row, `K / block`.
    pub fn super_blocks(&self) -> usize {
        self.k / self.block
    }

    /// The level of weight `(row, col)`: its code through [`TwoLevel::levels`].
    ///
    /// # Panics
    /// If `row >= n` or `col >= k`.
    pub fn level(&self, row: usize, col: usize) -> i32 {
        assert!(
            row < self.n && col < self.k,
            "({row}, {col}) is outside [{}, {}]",
            self.n,
            self.k
        );
        self.levels.level(self.codes[row * self.k + col])
    }

    /// ggml's f32 value of weight `(row, col)`, bit for bit what `dequantize_row_*` gives:
    /// `dl = f32(d) * f32(scale)`, then `dl * f32(level)`, minus `f32(dmin) * f32(min)` for the
    /// types with mins (no fused multiply-add).
    ///
    /// # Panics
    /// If `row >= n` or `col >= k`.
    pub fn value(&self, row: usize, col: usize) -> f32 {
        let q = self.level(row, col) as f32;
        let (g, b) = (
            (col / self.sub) * self.n + row,
            (col / self.block) * self.n + row,
        );
        let dl = self.d[b].to_f32() * f32::from(self.scales[g]);
        match (&self.mins, &self.dmin) {
            (Some(m), Some(dm)) => dl * q - dm[b].to_f32() * f32::from(m[g]),
            _ => dl * q,
        }
    }

    /// Every weight's value ([`TwoLevel::value`]), row-major `[N, K]`.
    pub fn dequantize(&self) -> Vec<f32> {
        let mut y = vec![0f32; self.codes.len()];
        let mut dl = vec![0f32; self.groups()];
        let mut ml = vec![0f32; self.groups()];
        for (row, y) in y.chunks_exact_mut(self.k.max(1)).enumerate() {
            for (g, (dl, ml)) in dl.iter_mut().zip(&mut ml).enumerate() {
                let (gi, bi) = (g * self.n + row, (g * self.sub / self.block) * self.n + row);
                *dl = self.d[bi].to_f32() * f32::from(self.scales[gi]);
                if let (Some(m), Some(dm)) = (&self.mins, &self.dmin) {
                    *ml = dm[bi].to_f32() * f32::from(m[gi]);
                }
            }
            let codes = &self.codes[row * self.k..][..self.k];
            for (col, (y, &c)) in y.iter_mut().zip(codes).enumerate() {
                let q = self.levels.level(c) as f32;
                let g = col / self.sub;
                *y = if self.mins.is_some() {
                    dl[g] * q - ml[g]
                } else {
                    dl[g] * q
                };
            }
        }
        y
    }
}

fn f16_at(x: &[u8], at: usize) -> f16 {
    f16::from_bits(u16::from_le_bytes([x[at], x[at + 1]]))
}

/// The 6-bit scale and min of group `s` (`0..8`) in the 12 packed bytes of Q4_K / Q5_K: groups
/// 0..4 keep them in the low 6 bits of bytes `s` and `s + 4`; groups 4..8 keep their low 4 bits
/// in the nibbles of byte `s + 4` and their top 2 bits in the top bits of bytes `s - 4` (scale)
/// and `s` (min).
fn k4_scale_min(p: &[u8], s: usize) -> (u8, u8) {
    if s < 4 {
        (p[s] & 0x3F, p[s + 4] & 0x3F)
    } else {
        (
            (p[s + 4] & 0x0F) | ((p[s - 4] >> 6) << 4),
            (p[s + 4] >> 4) | ((p[s] >> 6) << 4),
        )
    }
}

/// Unpacks one block of `ty`: its codes into `codes` (`block` of them), its group scales and
/// mins into `sc` / `mn` (`block / sub` of each), and returns `(d, dmin)` (`dmin` zero when the
/// type has none). Field offsets as in [`crate::ggml`]'s table.
fn unpack_block(
    ty: GgmlType,
    x: &[u8],
    codes: &mut [u8],
    sc: &mut [i16; 16],
    mn: &mut [u8; 16],
) -> (f16, f16) {
    match ty {
        GgmlType::Q2_K => {
            // scales[16] | qs[64] | d | dmin. Weight p: half h = p / 128 uses qs[32h..32h + 32];
            // within it, the 32-weight quarter j takes bits 2j..2j+2 of qs[32h + p % 32].
            let qs = &x[16..80];
            for (p, c) in codes.iter_mut().enumerate() {
                let (h, j, l) = (p / 128, (p % 128) / 32, p % 32);
                *c = (qs[32 * h + l] >> (2 * j)) & 3;
            }
            for s in 0..16 {
                sc[s] = i16::from(x[s] & 0x0F);
                mn[s] = x[s] >> 4;
            }
            (f16_at(x, 80), f16_at(x, 82))
        }
        GgmlType::Q3_K => {
            // hmask[32] | qs[64] | scales[12] | d. The low two bits as Q2_K; the third bit of
            // weight p is bit 4h + j of hmask[p % 32]. Scale s: its low 4 bits are nibble s / 8 of
            // byte s % 8, its top 2 bits are bits 2(s / 4).. of byte 8 + s % 4.
            let (hm, qs, s12) = (&x[0..32], &x[32..96], &x[96..108]);
            for (p, c) in codes.iter_mut().enumerate() {
                let (h, j, l) = (p / 128, (p % 128) / 32, p % 32);
                let low = (qs[32 * h + l] >> (2 * j)) & 3;
                let high = (hm[l] >> (4 * h + j)) & 1;
                *c = low | (high << 2);
            }
            for (s, sc) in sc.iter_mut().enumerate() {
                let low = (s12[s % 8] >> (4 * (s / 8))) & 0x0F;
                let high = (s12[8 + s % 4] >> (2 * (s / 4))) & 3;
                *sc = i16::from(low | (high << 4)) - 32;
            }
            (f16_at(x, 108), f16::ZERO)
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            // d | dmin | scales[12] | (Q5_K: qh[32]) | qs[128]. Weight p: chunk c = p / 64 uses
            // qs[32c..32c + 32], low nibbles for its first 32 weights (group 2c), high nibbles for
            // the next 32 (group 2c + 1). Q5_K's fifth bit of weight p is bit p / 32 (its group)
            // of qh[p % 32].
            let five = ty == GgmlType::Q5_K;
            let qs = if five { &x[48..176] } else { &x[16..144] };
            for (p, c) in codes.iter_mut().enumerate() {
                let (chunk, g, l) = (p / 64, p / 32, p % 32);
                let nib = (qs[32 * chunk + l] >> (4 * (g % 2))) & 0x0F;
                *c = if five {
                    nib | (((x[16 + l] >> g) & 1) << 4)
                } else {
                    nib
                };
            }
            for s in 0..8 {
                let (scale, min) = k4_scale_min(&x[4..16], s);
                sc[s] = i16::from(scale);
                mn[s] = min;
            }
            (f16_at(x, 0), f16_at(x, 2))
        }
        GgmlType::Q6_K => {
            // ql[128] | qh[64] | scales[16] (i8) | d. Weight p: half h = p / 128, quarter
            // t = (p % 128) / 32, l = p % 32. Low 4 bits: nibble t / 2 of ql[64h + 32(t % 2) + l];
            // top 2 bits: bits 2t..2t+2 of qh[32h + l].
            let (ql, qh) = (&x[0..128], &x[128..192]);
            for (p, c) in codes.iter_mut().enumerate() {
                let (h, t, l) = (p / 128, (p % 128) / 32, p % 32);
                let low = (ql[64 * h + 32 * (t % 2) + l] >> (4 * (t / 2))) & 0x0F;
                let high = (qh[32 * h + l] >> (2 * t)) & 3;
                *c = low | (high << 4);
            }
            for s in 0..16 {
                sc[s] = i16::from(x[192 + s] as i8);
            }
            (f16_at(x, 208), f16::ZERO)
        }
        GgmlType::IQ4_NL => {
            // d | qs[16]: weight p is nibble p / 16 of qs[p % 16].
            for (p, c) in codes.iter_mut().enumerate() {
                *c = (x[2 + p % 16] >> (4 * (p / 16))) & 0x0F;
            }
            sc[0] = 1;
            (f16_at(x, 0), f16::ZERO)
        }
        GgmlType::IQ4_XS => {
            // d | scales_h (u16) | scales_l[4] | qs[128]. Weight p of group g = p / 32 is nibble
            // (p % 32) / 16 of qs[16g + p % 16]. Scale g: low 4 bits nibble g % 2 of scales_l[g / 2],
            // top 2 bits bits 2g..2g+2 of scales_h; minus 32.
            let scales_h = u16::from_le_bytes([x[2], x[3]]);
            for (p, c) in codes.iter_mut().enumerate() {
                let (g, r) = (p / 32, p % 32);
                *c = (x[8 + 16 * g + r % 16] >> (4 * (r / 16))) & 0x0F;
            }
            for (g, sc) in sc.iter_mut().take(8).enumerate() {
                let low = (x[4 + g / 2] >> (4 * (g % 2))) & 0x0F;
                let high = ((scales_h >> (2 * g)) & 3) as u8;
                *sc = i16::from(low | (high << 4)) - 32;
            }
            (f16_at(x, 0), f16::ZERO)
        }
        _ => unreachable!("TwoLevelLayout::of accepted only two-level types"),
    }
}
