//! The kernel's packed weight layout: [`QuantizedWeights::pack`] and its inverse
//! [`PackedWeights::unpack`]. Bit for bit the layout that `cuda/humming/dequant.cuh` documents and
//! `loader.cuh` / `gemm.cuh` read.
//!
//! # Shape rules
//! `N % 64 == 0` and `K % 64 == 0` (whole 64 × 64 units).
//!
//! # B: units of 64 (K) × 64 (N)
//! ```text
//!            N/64 units along N ──────────▶
//!          ┌──────────┬──────────┬─────┐
//!  K/64    │ (ku=0,   │ (ku=0,   │ ... │   byte offset of unit (ku, nu) =
//!  units   │  nu=0)   │  nu=1)   │     │     (ku * N/64 + nu) * 512 * bits
//!  along K ├──────────┼──────────┼─────┤
//!    │     │ (ku=1,   │ (ku=1,   │ ... │   each unit: 128 * bits little-endian u32 words
//!    ▼     │  nu=0)   │  nu=1)   │     │
//!          └──────────┴──────────┴─────┘
//! ```
//! A `bits`-bit *stored* code (the raw code for `uN`; raw code XOR `2^(bits-1)`, i.e. offset binary,
//! for `iN`) is split into bit-plane parts by [`humming_spec::layout::bit_parts`], lowest bits first
//! (`3 = 2+1`, `5 = 4+1`, `6 = 4+2`, `7 = 4+2+1`, others one part). Inside a unit the parts follow one
//! another:
//! ```text
//!  unit words: [ part 0: 128*s0 words ][ part 1: 128*s1 words ][ part 2: 128*s2 words ]
//!               ^ word 0               ^ word 128*s0           ^ word 128*(s0+s1)
//!  part of width s, for slab kk (0..4) and lane (0..32): s consecutive words
//!     word = (kk*32 + lane)*s + q / (16/s)          q = nt*2 + r   (nt 0..8, r 0..2)
//!  inside that word, 16/s slots j = q % (16/s):
//!     bit 31                       16 15                         0
//!     [ h=1 values: slot (16/s-1) .. slot 0 ][ h=0 values: slot (16/s-1) .. slot 0 ]
//!     value of (q, h) at bits  j*s + 16*h  ..  j*s + 16*h + s
//!  the value is (stored_code >> part_offset) & (2^s - 1), part_offset = sum of earlier widths
//!  4-bit floats (e1m2, e2m1, e3m0) instead split each code of slot j: its 3-bit field at
//!  bits 3j + 16*h .. + 3, its sign at bit signs[j] + 16*h
//!  (humming_spec::layout::float4_sign_bits, 12..16)
//! ```
//! Element of `(lane, kk, nt, r, h)` in unit `(ku, nu)`:
//! `n = nu*64 + nt*8 + lane/4`, `k = ku*64 + kk*16 + 2*(lane%4) + 8*r + h`
//! (the `mma.m16n8k16` B fragment of `lane`).
//!
//! # Scales (raw `u16` bits of the scale dtype)
//! If [`humming_spec::layout::scale_on_b`] (group scales, or channel scales with a float offset):
//! `[groups][N]` (channel = 1 row) with the columns of each 64-wide block permuted so that a lane's 8
//! channels `n = nt*8 + lane/4` are contiguous:
//! ```text
//!  dst[g*N + blk*64 + (j%8)*8 + j/8] = src[g*N + blk*64 + j]      j = 0..64
//!  src column j:  0  1 .. 7 | 8  9 .. 15 | ...        dst position: 0  8 .. 56 | 1  9 .. 57 | ...
//! ```
//! Otherwise (channel scales applied in the epilogue) plain `[N]`, unpermuted.
//!
//! # Zero points (raw `u16` bits of the activation dtype, which is the scale dtype)
//! Integer zero point `z` stored as the exact float value `z`; float offset stored as its value; both
//! `[groups][N]` with the same column permutation as the scales. Empty without a zero point.

use crate::error::{Result, invalid};
use crate::quant::{
    QuantizedWeights, ZeroPoints, check_spec, code_value_of, from_bits16, groups_of,
    is_integer_classic, round_to_format, scale_index, scale2_index, to_bits16,
};
use humming_spec::Lowered;
use humming_spec::ScaleGranularity;
use humming_spec::layout::{self, WeightLayout};
use humming_spec::layout::{act8_k_order, bit_parts, glu_source};
use humming_spec::{DType, KernelSpec};

/// Weights in the kernel's layout (see the module doc), ready to be copied to the device as is.
///
/// The fields are public raw buffers; [`PackedWeights::unpack`] re-checks all of them.
#[derive(Clone, Debug, PartialEq)]
pub struct PackedWeights {
    /// Output channels N (a multiple of 64).
    pub n: usize,
    /// Input features K (a multiple of 64).
    pub k: usize,
    /// Packed codes: `N * K * bits / 8` bytes, `(K/64) * (N/64)` units of `512 * bits` bytes; in the
    /// K-major layout `N * layout::k_major_row_bytes(bits, K)` (see [`WeightLayout::KMajor`]).
    pub b: Vec<u8>,
    /// The scale grid on B, raw bits of A's dtype: `[rows][N]` permuted; empty when the primary scale
    /// is not on B (see the module doc).
    pub scales: Vec<u16>,
    /// Zero-point bits: `[groups][N]` permuted; empty without a zero point.
    pub zeros: Vec<u16>,
    /// The f32 factor per output channel `[N]`, plain order; empty without one.
    pub channel: Vec<f32>,
    /// The layout of `b` and of the scales: [`WeightLayout::Fragments`] as above, or
    /// [`WeightLayout::KMajor`] (see [`QuantizedWeights::pack_for`]).
    pub layout: WeightLayout,
    /// [`WeightLayout::KMajor`] with block scales or group scales: the f32 scales as given,
    /// `[ceil(K / bk), ceil(N / bn)]` or `[ceil(K / g), N]`; empty otherwise.
    pub block_scales: Vec<f32>,
}

/// Position, within the packed `[groups][N]` rows, of column `j`: the permutation of the module doc.
pub fn permuted_column(j: usize) -> usize {
    let (blk, jj) = (j / 64, j % 64);
    blk * 64 + (jj % 8) * 8 + jj / 8
}

/// Bytes of one packed 64 × 64 unit: `512 * bits`.
pub const fn unit_bytes(bits: u32) -> usize {
    512 * bits as usize
}

/// 4-bit codes `[N, K]` (one per byte) in the K-major layout of the persistent kernel: each row's
/// 128-code blocks packed two per byte in [`layout::k_major_4bit_order`] as
/// [`layout::k_major_4bit_code`], the last block filled with zero values.
fn k_major_4bit(spec: &humming_spec::KernelSpec, n: usize, k: usize, codes: &[u8]) -> Vec<u8> {
    let bk = usize::from(humming_spec::tiles::PERSISTENT_BLOCK_K);
    let row_bytes = layout::k_major_row_bytes(4, k);
    // (Signed codes are held in two's complement and packed offset-binary, as the fragments are.)
    let offset = if spec.b.is_signed() { 8 } else { 0 };
    let code = |c: u8| layout::k_major_4bit_code(spec.a, spec.b, c ^ offset);
    let mut out = vec![0u8; n * row_bytes];
    for (row, dst) in out.chunks_exact_mut(row_bytes).enumerate() {
        for kk in 0..row_bytes * 2 {
            let c = if kk < k { codes[row * k + kk] } else { 0 };
            let q = (kk / bk) * bk + layout::k_major_4bit_order(kk % bk);
            dst[q / 2] |= code(c) << (4 * (q % 2));
        }
    }
    out
}

fn check_tiling(n: usize, k: usize) -> Result<()> {
    if !n.is_multiple_of(64) {
        return Err(invalid(
            "n",
            format!("the packed layout needs N % 64 == 0; found N = {n}"),
        ));
    }
    if !k.is_multiple_of(64) {
        return Err(invalid(
            "k",
            format!("the packed layout needs K % 64 == 0; found K = {k}"),
        ));
    }
    Ok(())
}

fn xor_of(spec: &KernelSpec) -> u32 {
    match spec.b {
        DType::SInt { bits } => 1 << (bits - 1),
        _ => 0,
    }
}

/// Visits every element of the packed layout: `f(word, bit, width, part_offset, n, k)`.
fn for_each_slot(
    l: &Lowered,
    n: usize,
    k: usize,
    mut f: impl FnMut(usize, u32, u32, u32, usize, usize),
) {
    let bits = l.spec.b.bits();
    // Kernels with 8-bit activations read each slab in another K order (layout::act8_k_order).
    let order = |p: usize| {
        if l.act8 { act8_k_order(p) } else { p }
    };
    let parts = bit_parts(bits);
    let unit_words = 128 * bits as usize;
    let units_n = n / 64;
    for ku in 0..k / 64 {
        for nu in 0..units_n {
            let base = (ku * units_n + nu) * unit_words;
            let mut off = 0u32;
            for &s in &parts {
                let per = 16 / s as usize;
                let part_base = base + 128 * off as usize;
                for kk in 0..4 {
                    for lane in 0..32 {
                        for nt in 0..8 {
                            for r in 0..2 {
                                let q = nt * 2 + r;
                                let word = part_base + (kk * 32 + lane) * s as usize + q / per;
                                for h in 0..2 {
                                    let bit = (q % per) as u32 * s + 16 * h as u32;
                                    let nn = nu * 64 + nt * 8 + lane / 4;
                                    let kx = ku * 64 + kk * 16 + order(2 * (lane % 4) + 8 * r + h);
                                    f(word, bit, s, off, nn, kx);
                                }
                            }
                        }
                    }
                }
                off += s;
            }
        }
    }
}

impl QuantizedWeights {
    /// Packs the weights into the kernel's layout (see [`crate::pack`]).
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming `n` or `k` when N or K is not a multiple of 64, or
    /// `scales` when a channel factor leaves f32's range (scales near f32's largest values).
    pub fn pack(&self) -> Result<PackedWeights> {
        let (n, k) = (self.n, self.k);
        check_tiling(n, k)?;
        let bits = self.bits();
        let l = self.spec.lower();
        let mut words = vec![0u32; n * k * bits as usize / 32];
        let sign_bits = l.float4_sign_bits;
        // Kernel channel c holds declared row src(c) (the gated epilogues' order; else c).
        let src = |c: usize| glu_source(self.spec.epilogue, n, c);
        for_each_slot(&l, n, k, |word, bit, s, off, nn, kx| {
            let stored = stored_code(&self.spec, self.codes[src(nn) * k + kx]);
            words[word] |= match sign_bits {
                // 4-bit floats: the field at 3j, the sign at its own bit (float4_sign_bits).
                Some(signs) => {
                    let (j, half) = ((bit % 16) / 4, bit / 16 * 16);
                    ((stored & 7) << (3 * j + half)) | ((stored >> 3) << (signs[j as usize] + half))
                }
                None => ((stored >> off) & ((1 << s) - 1)) << bit,
            };
        });
        let b = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let dt = l.grid_dtype;
        let permute = |vals: Vec<f64>| -> Vec<u16> {
            let mut out = vec![0u16; vals.len()];
            for i in 0..vals.len() {
                let (g, j) = (i / n, i % n);
                out[g * n + permuted_column(j)] = to_bits16(vals[g * n + src(j)], dt);
            }
            out
        };
        let (grid, zgrid, channel) = self.device_scales(&l)?;
        let channel = (0..channel.len()).map(|c| channel[src(c)]).collect();
        let scales = permute(grid);
        let zeros = match &self.zeros {
            ZeroPoints::None => Vec::new(),
            ZeroPoints::Integer(z) => permute(z.iter().map(|&z| f64::from(z)).collect()),
            ZeroPoints::Float(m) => permute(m.iter().map(|&m| f64::from(m)).collect()),
            ZeroPoints::FloatTwoLevel { .. } => permute(zgrid),
        };
        Ok(PackedWeights {
            n,
            k,
            b,
            scales,
            zeros,
            channel,
            layout: WeightLayout::Fragments,
            block_scales: Vec::new(),
        })
    }

    /// Packs the weights into `layout`: [`QuantizedWeights::pack`] for [`WeightLayout::Fragments`];
    /// for [`WeightLayout::KMajor`] (the persistent kernel's) 8-bit codes as they are, `[N, K]` one
    /// byte each, 4-bit codes in that layout's own order (`layout::k_major_4bit_order`), block and
    /// group scales as given in `block_scales` (exact f32) with a channel factor of the secondary scale
    /// (1 without one), channel and tensor scales in the channel factor. N and K multiples of 64 as
    /// for the fragments (the loads stay 16-byte aligned).
    ///
    /// # Errors
    /// As [`QuantizedWeights::pack`]; `spec` when the K-major layout is asked of weights no persistent
    /// tile reads ([`humming_spec::tiles::persistent_allowed`]).
    pub fn pack_for(&self, layout: WeightLayout) -> Result<PackedWeights> {
        if layout == WeightLayout::Fragments {
            return self.pack();
        }
        let spec = &self.spec;
        if !humming_spec::tiles::persistent_allowed(spec) {
            return Err(invalid(
                "spec",
                format!(
                    "the K-major layout holds the weights of {}; `{spec}` is not",
                    humming_spec::tiles::PERSISTENT_FORMS
                ),
            ));
        }
        let (n, k) = (self.n, self.k);
        check_tiling(n, k)?;
        // Block scales, and group scales of 4-bit weights, stay f32 for the kernel's promotion.
        let promoted = humming_spec::tiles::persistent_promotes(spec);
        let channel = if promoted {
            // Only a secondary scale remains for the epilogue.
            let mut ch = vec![1f32; n];
            for (col, c) in ch.iter_mut().enumerate() {
                if let Some(i) = scale2_index(spec, n, col, 0) {
                    *c = self.scale2[i];
                }
            }
            ch
        } else {
            self.device_scales(&self.spec.lower())?.2
        };
        Ok(PackedWeights {
            n,
            k,
            b: if spec.b.bits() == 4 {
                k_major_4bit(spec, n, k, &self.codes)
            } else {
                self.codes.clone()
            },
            scales: Vec::new(),
            zeros: Vec::new(),
            channel,
            layout,
            block_scales: if promoted {
                self.scales.clone()
            } else {
                Vec::new()
            },
        })
    }

    /// The scale arrays the kernel reads (see [`humming_spec::layout`]): the grid on B `[rows][N]`, the
    /// grid of two-level offsets `[rows][N]` (K-quants' mins; empty otherwise), both unpermuted values
    /// before rounding to A's dtype, and the f32 channel factors `[N]`. Two-level scales and offsets
    /// enter the grids as their products `s * s2` and `m * f` (each rounded once to A's dtype, the value
    /// a product in registers would give).
    fn device_scales(&self, l: &Lowered) -> Result<(Vec<f64>, Vec<f64>, Vec<f32>)> {
        let spec = &self.spec;
        let (n, k) = (self.n, self.k);
        let pow2 = |e: i32| 2f64.powi(e);
        let carried = pow2(l.carried_shift);
        let group_s2 = matches!(
            spec.scale2.map(|s| s.granularity),
            Some(ScaleGranularity::Group { .. })
        );
        let mut ch = vec![1f64; n];
        let mut grid = Vec::new();
        let mut zgrid = Vec::new();
        if l.scale_on_b {
            let g = l.b_scale_group as usize;
            let rows = if g == 0 { 1 } else { k.div_ceil(g) };
            let two_level = match &self.zeros {
                ZeroPoints::FloatTwoLevel { offsets, factors } => Some((offsets, factors)),
                _ => None,
            };
            // A cell whose codes are all zero contributes nothing whatever its scale: it neither
            // sets the channel's power of two nor keeps its scale (0 in the grid).
            let normalized = l.normalized_scales;
            let extent = if g == 0 { k } else { g };
            grid = vec![0f64; rows * n];
            zgrid = vec![0f64; if two_level.is_some() { rows * n } else { 0 }];
            for r in 0..rows {
                for col in 0..n {
                    let (si, i2) = (
                        scale_index(spec, n, k, col, r * g),
                        scale2_index(spec, n, col, r * g),
                    );
                    let s2 = match i2 {
                        Some(i) if group_s2 => f64::from(self.scale2[i]),
                        _ => 1.0,
                    };
                    let kk = r * extent..((r + 1) * extent).min(k);
                    let live = !normalized
                        || self.codes[col * k + kk.start..col * k + kk.end]
                            .iter()
                            .any(|&c| code_value_of(spec.b, c) != 0.0);
                    grid[r * n + col] = if live {
                        f64::from(self.scales[si]) * s2
                    } else {
                        0.0
                    };
                    if let Some((offsets, factors)) = two_level {
                        let f = i2.map_or(1.0, |i| f64::from(factors[i]));
                        zgrid[r * n + col] = f64::from(offsets[si]) * f;
                    }
                }
            }
            if normalized {
                let gd = l.grid_dtype;
                let (a_max, a_min_normal) = (gd.max_finite(), pow2(1 - gd.exponent_bias()));
                let q_max = spec.b.max_finite().max(-spec.b.min_finite()).max(1.0);
                for (col, c) in ch.iter_mut().enumerate() {
                    let mags = (0..rows).flat_map(|r| {
                        [
                            grid[r * n + col].abs(),
                            zgrid.get(r * n + col).map_or(0.0, |z| z.abs()),
                        ]
                    });
                    let (lo, hi) = mags
                        .filter(|&v| v > 0.0)
                        .fold((f64::INFINITY, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
                    // The grid keeps the scales as they are (E = 0) unless a scale times the carried
                    // shift, or a scale times the largest weight, would leave A's range (then E > 0),
                    // or the smallest scale would fall below A's normal range (then E < 0, as far as
                    // the largest allows); 2^E joins the channel factor.
                    let e = if hi == 0.0 {
                        0
                    } else {
                        let need = (hi * carried).max(hi * q_max) / (a_max / 2.0);
                        let e_lo = need.log2().ceil() as i32;
                        let e_hi = (lo * carried / a_min_normal).log2().floor() as i32;
                        if e_lo > 0 {
                            e_lo
                        } else if e_hi < 0 {
                            e_hi.max(e_lo)
                        } else {
                            0
                        }
                    }
                    .clamp(-126, 127);
                    let down = pow2(-e);
                    for r in 0..rows {
                        grid[r * n + col] *= down;
                        if let Some(z) = zgrid.get_mut(r * n + col) {
                            *z *= down;
                        }
                    }
                    *c = pow2(e);
                }
            }
            for (i, v) in grid.iter_mut().enumerate() {
                *v *= carried;
                if !round_to_format(*v, l.grid_dtype).is_finite() {
                    return Err(invalid(
                        "scales",
                        format!(
                            "scale row {} of channel {} is beyond {}'s range once the channel's power of two is factored out",
                            i / n,
                            i % n,
                            l.grid_dtype
                        ),
                    ));
                }
            }
        } else {
            for (col, c) in ch.iter_mut().enumerate() {
                *c = f64::from(self.scales[scale_index(spec, n, k, col, 0)]) * carried;
            }
        }
        if !l.channel_factor {
            return Ok((grid, zgrid, Vec::new()));
        }
        if !group_s2 {
            for (col, c) in ch.iter_mut().enumerate() {
                *c *= scale2_index(spec, n, col, 0).map_or(1.0, |i| f64::from(self.scale2[i]));
            }
        }
        let mut channel = Vec::with_capacity(n);
        for (col, &c) in ch.iter().enumerate() {
            let f = c as f32;
            if !f.is_finite() {
                return Err(invalid(
                    "scales",
                    format!("the f32 factor of channel {col} ({c:e}) is beyond f32's range"),
                ));
            }
            channel.push(f);
        }
        Ok((grid, zgrid, channel))
    }
}

/// The code as the kernel stores it: offset binary (`value + 2^(b-1)`) for signed integers and the
/// `e0mY` sign-magnitude integers, the raw code otherwise.
fn stored_code(spec: &KernelSpec, c: u8) -> u32 {
    match spec.b {
        DType::SInt { bits } => u32::from(c) ^ (1 << (bits - 1)),
        DType::Float { exp: 0, .. } => {
            let bits = spec.b.bits();
            (code_value_of(spec.b, c) as i32 + (1 << (bits - 1))) as u32
        }
        _ => u32::from(c),
    }
}

impl PackedWeights {
    /// Unpacks into plain weights for `spec` (the inverse of [`QuantizedWeights::pack`]), checking
    /// every buffer.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming `spec` (unsupported), `n`/`k` (not multiples of 64, or
    /// zero), `b`/`scales`/`zeros` (wrong length), `scales` (NaN/infinite bits) or `zeros` (an integer
    /// zero point that is not an integer in `0..2^b`, or a non-finite offset).
    pub fn unpack(&self, spec: &KernelSpec) -> Result<QuantizedWeights> {
        check_spec(spec)?;
        if self.layout != WeightLayout::Fragments {
            return Err(invalid(
                "layout",
                "unpacking is defined for the fragment layout; the K-major one holds the codes and scales as given",
            ));
        }
        if !is_integer_classic(spec) {
            return Err(invalid(
                "spec",
                format!(
                    "unpacking is defined for integer weights with channel or group scales of A's dtype; `{spec}` packs its scales with rounding or factoring"
                ),
            ));
        }
        let (n, k) = (self.n, self.k);
        crate::quant::check_dims(n, k)?;
        check_tiling(n, k)?;
        let bits = spec.b.bits();
        let nk = n
            .checked_mul(k)
            .ok_or_else(|| invalid("k", format!("N * K = {n} * {k} overflows usize")))?;
        let want_b = nk / 8 * bits as usize;
        if self.b.len() != want_b {
            return Err(invalid(
                "b",
                format!(
                    "expected N * K * bits / 8 = {want_b} bytes for {n} x {k} {}, found {}",
                    spec.b,
                    self.b.len()
                ),
            ));
        }
        let words: Vec<u32> = self
            .b
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let mut codes = vec![0u8; nk];
        let src = |c: usize| glu_source(spec.epilogue, n, c);
        let l = spec.lower();
        for_each_slot(&l, n, k, |word, bit, s, off, nn, kx| {
            let v = (words[word] >> bit) & ((1 << s) - 1);
            codes[src(nn) * k + kx] |= (v << off) as u8;
        });
        let xor = xor_of(spec) as u8;
        if xor != 0 {
            codes.iter_mut().for_each(|c| *c ^= xor);
        }
        let rows = groups_of(spec, k);
        let (dt, on_b) = (l.grid_dtype, l.scale_on_b);
        let (want_s, got_s) = if on_b {
            (rows * n, self.scales.len())
        } else {
            (n, self.channel.len())
        };
        if got_s != want_s {
            return Err(invalid(
                "scales",
                format!(
                    "expected {want_s} scales ({}), found {got_s}",
                    if on_b {
                        "groups * N on B"
                    } else {
                        "N channel factors"
                    },
                ),
            ));
        }
        let unpermute = |bits16: &[u16]| -> Vec<f64> {
            let mut out = vec![0f64; bits16.len()];
            for i in 0..bits16.len() {
                let (g, j) = (i / n, i % n);
                out[g * n + src(j)] = from_bits16(bits16[g * n + permuted_column(j)], dt);
            }
            out
        };
        let scales: Vec<f64> = if on_b {
            unpermute(&self.scales)
        } else {
            let mut s = vec![0f64; self.channel.len()];
            for (c, &f) in self.channel.iter().enumerate() {
                s[src(c)] = f64::from(f);
            }
            s
        };
        if let Some(i) = scales.iter().position(|s| !s.is_finite()) {
            return Err(invalid(
                "scales",
                format!(
                    "scale {} (for packed index group {}, column {}) is not finite",
                    scales[i],
                    i / n,
                    i % n
                ),
            ));
        }
        let want_z = if spec.zero_point == humming_spec::ZeroPoint::None {
            0
        } else {
            rows * n
        };
        if self.zeros.len() != want_z {
            return Err(invalid(
                "zeros",
                format!("expected {want_z} zero points, found {}", self.zeros.len()),
            ));
        }
        let zeros = match spec.zero_point {
            humming_spec::ZeroPoint::None => ZeroPoints::None,
            humming_spec::ZeroPoint::Integer => {
                let limit = f64::from(1u32 << bits);
                let vals = unpermute(&self.zeros);
                let mut z = Vec::with_capacity(vals.len());
                for (i, &v) in vals.iter().enumerate() {
                    if !(v >= 0.0 && v < limit && v.fract() == 0.0) {
                        return Err(invalid(
                            "zeros",
                            format!(
                                "integer zero point {v} (group {}, column {}) is not an integer in 0..{limit}",
                                i / n,
                                i % n
                            ),
                        ));
                    }
                    z.push(v as u8);
                }
                ZeroPoints::Integer(z)
            }
            humming_spec::ZeroPoint::FloatOffset => {
                let vals = unpermute(&self.zeros);
                if let Some(i) = vals.iter().position(|m| !m.is_finite()) {
                    return Err(invalid(
                        "zeros",
                        format!(
                            "float offset {} (group {}, column {}) is not finite",
                            vals[i],
                            i / n,
                            i % n
                        ),
                    ));
                }
                ZeroPoints::Float(vals.iter().map(|&m| m as f32).collect())
            }
        };
        QuantizedWeights::from_parts(
            spec,
            n,
            k,
            codes,
            scales.iter().map(|&s| s as f32).collect(),
            zeros,
        )
    }
}
