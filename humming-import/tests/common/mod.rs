//! Test helpers: a minimal GGUF writer and encoders of ggml's legacy blocks (written from the
//! layouts in ggml's `ggml-common.h`, in the encoding direction, independently of the crate's
//! decoders).

#![allow(dead_code)]

use humming_import::{GgmlType, MetaValue};

/// A GGUF file under construction.
pub struct GgufWriter {
    pub version: u32,
    /// Alignment used for padding; written as `general.alignment` (u32) when `write_alignment`.
    pub alignment: u64,
    pub write_alignment: bool,
    pub kvs: Vec<(String, MetaValue)>,
    pub tensors: Vec<(String, u32, Vec<u64>, Vec<u8>)>,
}

impl GgufWriter {
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: 32,
            write_alignment: false,
            kvs: Vec::new(),
            tensors: Vec::new(),
        }
    }
    pub fn kv(&mut self, key: &str, v: MetaValue) -> &mut Self {
        self.kvs.push((key.to_owned(), v));
        self
    }
    /// Adds a tensor with GGUF dims (row length first) and its raw bytes.
    pub fn tensor(&mut self, name: &str, ty: GgmlType, dims: &[u64], data: Vec<u8>) -> &mut Self {
        self.tensors
            .push((name.to_owned(), ty.raw(), dims.to_vec(), data));
        self
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        let n_kv = self.kvs.len() + usize::from(self.write_alignment);
        out.extend_from_slice(&(n_kv as u64).to_le_bytes());
        if self.write_alignment {
            put_str(&mut out, "general.alignment");
            out.extend_from_slice(&4u32.to_le_bytes());
            out.extend_from_slice(&(self.alignment as u32).to_le_bytes());
        }
        for (k, v) in &self.kvs {
            put_str(&mut out, k);
            out.extend_from_slice(&type_of(v).to_le_bytes());
            put_value(&mut out, v);
        }
        let a = self.alignment;
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, ty, dims, data) in &self.tensors {
            put_str(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).next_multiple_of(a);
        }
        let start = (out.len() as u64).next_multiple_of(a);
        out.resize(start as usize, 0);
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize((start + off) as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

pub fn type_of(v: &MetaValue) -> u32 {
    match v {
        MetaValue::U8(_) => 0,
        MetaValue::I8(_) => 1,
        MetaValue::U16(_) => 2,
        MetaValue::I16(_) => 3,
        MetaValue::U32(_) => 4,
        MetaValue::I32(_) => 5,
        MetaValue::F32(_) => 6,
        MetaValue::Bool(_) => 7,
        MetaValue::String(_) => 8,
        MetaValue::Array(_) => 9,
        MetaValue::U64(_) => 10,
        MetaValue::I64(_) => 11,
        MetaValue::F64(_) => 12,
    }
}

pub fn put_value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.push(*x),
        MetaValue::I8(x) => out.push(*x as u8),
        MetaValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(u8::from(*x)),
        MetaValue::String(s) => put_str(out, s),
        MetaValue::Array(a) => {
            let ty = a.first().map(type_of).unwrap_or(0);
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&(a.len() as u64).to_le_bytes());
            for e in a {
                put_value(out, e);
            }
        }
        MetaValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

/// One block of a legacy quantized type: f16 scale bits, f16 offset bits (Q4_1/Q5_1 only) and the
/// 32 raw ggml quants (`0..16` for Q4, `0..32` for Q5, the i8 bit pattern for Q8_0).
#[derive(Clone, Debug)]
pub struct Block {
    pub d: u16,
    pub m: u16,
    pub q: [u8; 32],
}

/// Encodes a block as ggml stores it (`block_q4_0`, `block_q4_1`, `block_q5_0`, `block_q5_1`,
/// `block_q8_0`).
pub fn encode(ty: GgmlType, b: &Block) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&b.d.to_le_bytes());
    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
        out.extend_from_slice(&b.m.to_le_bytes());
    }
    match ty {
        GgmlType::Q8_0 => out.extend_from_slice(&b.q),
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
            if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1) {
                let mut qh = 0u32;
                for (j, &q) in b.q.iter().enumerate() {
                    qh |= u32::from(q >> 4 & 1) << j;
                }
                out.extend_from_slice(&qh.to_le_bytes());
            }
            for j in 0..16 {
                out.push((b.q[j] & 0xF) | ((b.q[j + 16] & 0xF) << 4));
            }
        }
        other => panic!("no encoder for {other}"),
    }
    out
}

/// The weight of quant `q` in a block, computed exactly in f64 from the formulas of ggml's
/// `dequantize_row_*` and rounded once to f32.
pub fn expected(ty: GgmlType, b: &Block, j: usize) -> f32 {
    let d = half::f16::from_bits(b.d).to_f64();
    let m = half::f16::from_bits(b.m).to_f64();
    let q = b.q[j];
    (match ty {
        GgmlType::Q4_0 => d * (f64::from(q) - 8.0),
        GgmlType::Q4_1 | GgmlType::Q5_1 => d * f64::from(q) + m,
        GgmlType::Q5_0 => d * (f64::from(q) - 16.0),
        GgmlType::Q8_0 => d * f64::from(q as i8),
        other => panic!("no formula for {other}"),
    }) as f32
}

/// The largest raw quant of a type (15, 31, or 255 for the i8 patterns of Q8_0).
pub fn max_quant(ty: GgmlType) -> u8 {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q4_1 => 15,
        GgmlType::Q5_0 | GgmlType::Q5_1 => 31,
        _ => 255,
    }
}

pub const LEGACY: [GgmlType; 5] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
];

/// A small deterministic generator (SplitMix64), so the tests need no seed plumbing.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Finite f16 bits, any sign and exponent (subnormals and zeros included).
    pub fn f16_bits(&mut self) -> u16 {
        loop {
            let b = self.next() as u16;
            if b & 0x7C00 != 0x7C00 {
                return b;
            }
        }
    }
    /// A "realistic" f16 scale: magnitude in [2^-12, 2^-2), either sign.
    pub fn f16_scale(&mut self) -> u16 {
        let v = (2f32).powi(-12 + (self.next() % 10) as i32)
            * (1.0 + (self.next() % 1024) as f32 / 1024.0);
        let v = if self.next() & 1 == 1 { -v } else { v };
        half::f16::from_f32(v).to_bits()
    }
    pub fn block(&mut self, ty: GgmlType, wild: bool) -> Block {
        let mut q = [0u8; 32];
        let mask = max_quant(ty);
        for c in &mut q {
            *c = (self.next() as u8) & mask;
        }
        let (d, m) = if wild {
            (self.f16_bits(), self.f16_bits())
        } else {
            (self.f16_scale(), self.f16_scale())
        };
        Block {
            d,
            m: if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                m
            } else {
                0
            },
            q,
        }
    }
}

/// The extreme blocks of a type: scale +0, -0, negative, the largest f16, the smallest
/// subnormal; offsets far larger than the scale (both signs); all-minimum, all-maximum and
/// alternating codes.
pub fn extreme_blocks(ty: GgmlType) -> Vec<Block> {
    let f = |v: f32| half::f16::from_f32(v).to_bits();
    let has_m = matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1);
    let scales = [
        f(0.0),
        0x8000,
        f(-0.125),
        f(-1.5e-3),
        0x7BFF,
        0xFBFF,
        0x0001,
        0x8001,
        f(1.0),
    ];
    let offsets = [f(0.0), f(1000.0), f(-60000.0), f(-3.0e-5), 0x0001, 0xFBFF];
    let top = max_quant(ty);
    let codes: Vec<[u8; 32]> = vec![
        [0; 32],
        [top; 32],
        std::array::from_fn(|j| if j % 2 == 0 { 0 } else { top }),
        std::array::from_fn(|j| (j as u8) & top),
        // Q8_0 patterns of -128 and 127; for the 4/5-bit types these are masked to 0 and the top.
        std::array::from_fn(|j| if j < 16 { 0x80 & top } else { 0x7F & top }),
    ];
    let mut out = Vec::new();
    for &d in &scales {
        for (i, q) in codes.iter().enumerate() {
            let m = if has_m { offsets[i % offsets.len()] } else { 0 };
            out.push(Block { d, m, q: *q });
        }
    }
    if has_m {
        for &m in &offsets {
            out.push(Block {
                d: f(0.0),
                m,
                q: [top; 32],
            });
            out.push(Block {
                d: 0x7BFF,
                m,
                q: [top; 32],
            });
        }
    }
    out
}
