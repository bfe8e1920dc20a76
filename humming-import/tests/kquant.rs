//! K-quants and IQ4: ggml's dequantization ([`ggml_dequantize`], a transcription of
//! `ggml-quants.c`) against hand-computed values, and the two-level decode ([`TwoLevel`]) against
//! ggml's dequantization, bit for bit, on random and hand-built blocks.
//!
//! Blocks are built here in the encoding direction, from the layouts of ggml's `ggml-common.h`.

mod common;

use common::{GgufWriter, Rng};
use half::f16;
use humming_import::kquant::TWO_LEVEL_SUPPORTED;
use humming_import::{
    Error, GgmlType, GgufFile, Levels, TwoLevel, TwoLevelLayout, ggml::KVALUES_IQ4NL,
    ggml_dequantize,
};

const TYPES: [GgmlType; 7] = [
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// One block in structured form: `codes` (one per weight, `< 2^bits`), per group the `scale` as
/// ggml multiplies by it and the `min`, and the f16 bits of `d` and `dmin`.
#[derive(Clone, Debug)]
struct Blk {
    codes: Vec<u8>,
    scales: Vec<i16>,
    mins: Vec<u8>,
    d: u16,
    dmin: u16,
}

fn layout(ty: GgmlType) -> TwoLevelLayout {
    TwoLevelLayout::of(ty).unwrap()
}

/// Encodes a block as ggml stores it.
fn encode(ty: GgmlType, b: &Blk) -> Vec<u8> {
    let (_, size) = ty.block_layout().unwrap();
    let mut x = vec![0u8; size];
    let put16 =
        |x: &mut Vec<u8>, at: usize, v: u16| x[at..at + 2].copy_from_slice(&v.to_le_bytes());
    match ty {
        GgmlType::Q2_K => {
            for (s, x) in x[..16].iter_mut().enumerate() {
                *x = (b.scales[s] as u8) | (b.mins[s] << 4);
            }
            for (p, &c) in b.codes.iter().enumerate() {
                // Weights 128h + 32j + l: bits 2j of qs[32h + l].
                let (h, j, l) = (p / 128, (p % 128) / 32, p % 32);
                x[16 + 32 * h + l] |= c << (2 * j);
            }
            put16(&mut x, 80, b.d);
            put16(&mut x, 82, b.dmin);
        }
        GgmlType::Q3_K => {
            for (p, &c) in b.codes.iter().enumerate() {
                let (h, j, l) = (p / 128, (p % 128) / 32, p % 32);
                x[32 + 32 * h + l] |= (c & 3) << (2 * j);
                x[l] |= (c >> 2) << (4 * h + j);
            }
            for s in 0..16 {
                let raw = (b.scales[s] + 32) as u8;
                x[96 + s % 8] |= (raw & 0xF) << (4 * (s / 8));
                x[96 + 8 + s % 4] |= (raw >> 4) << (2 * (s / 4));
            }
            put16(&mut x, 108, b.d);
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            put16(&mut x, 0, b.d);
            put16(&mut x, 2, b.dmin);
            for s in 0..4 {
                let (sc, mn) = (b.scales[s] as u8, b.mins[s]);
                let (sc4, mn4) = (b.scales[s + 4] as u8, b.mins[s + 4]);
                x[4 + s] = sc | ((sc4 >> 4) << 6);
                x[4 + s + 4] = mn | ((mn4 >> 4) << 6);
                x[4 + s + 8] = (sc4 & 0xF) | ((mn4 & 0xF) << 4);
            }
            let qs = if ty == GgmlType::Q5_K { 48 } else { 16 };
            for (p, &c) in b.codes.iter().enumerate() {
                let (chunk, g, l) = (p / 64, p / 32, p % 32);
                x[qs + 32 * chunk + l] |= (c & 0xF) << (4 * (g % 2));
                if ty == GgmlType::Q5_K {
                    x[16 + l] |= (c >> 4) << g;
                }
            }
        }
        GgmlType::Q6_K => {
            for (p, &c) in b.codes.iter().enumerate() {
                let (h, t, l) = (p / 128, (p % 128) / 32, p % 32);
                x[64 * h + 32 * (t % 2) + l] |= (c & 0xF) << (4 * (t / 2));
                x[128 + 32 * h + l] |= (c >> 4) << (2 * t);
            }
            for s in 0..16 {
                x[192 + s] = b.scales[s] as i8 as u8;
            }
            put16(&mut x, 208, b.d);
        }
        GgmlType::IQ4_NL => {
            put16(&mut x, 0, b.d);
            for (p, &c) in b.codes.iter().enumerate() {
                x[2 + p % 16] |= c << (4 * (p / 16));
            }
        }
        GgmlType::IQ4_XS => {
            put16(&mut x, 0, b.d);
            let mut h = 0u16;
            for g in 0..8 {
                let ls = (b.scales[g] + 32) as u8;
                x[4 + g / 2] |= (ls & 0xF) << (4 * (g % 2));
                h |= u16::from(ls >> 4) << (2 * g);
            }
            put16(&mut x, 2, h);
            for (p, &c) in b.codes.iter().enumerate() {
                let (g, r) = (p / 32, p % 32);
                x[8 + 16 * g + r % 16] |= c << (4 * (r / 16));
            }
        }
        other => panic!("no encoder for {other}"),
    }
    x
}

/// The range of a group scale as ggml uses it.
fn scale_range(ty: GgmlType) -> (i16, i16) {
    match ty {
        GgmlType::Q2_K => (0, 15),
        GgmlType::Q4_K | GgmlType::Q5_K => (0, 63),
        GgmlType::Q3_K | GgmlType::IQ4_XS => (-32, 31),
        GgmlType::Q6_K => (-128, 127),
        _ => (1, 1),
    }
}

fn min_max(ty: GgmlType) -> u8 {
    match ty {
        GgmlType::Q2_K => 15,
        GgmlType::Q4_K | GgmlType::Q5_K => 63,
        _ => 0,
    }
}

fn random_blk(ty: GgmlType, rng: &mut Rng, wild: bool) -> Blk {
    let l = layout(ty);
    let groups = l.block / l.sub;
    let (lo, hi) = scale_range(ty);
    let f16v = |rng: &mut Rng| {
        if wild {
            rng.f16_bits()
        } else {
            rng.f16_scale()
        }
    };
    Blk {
        codes: (0..l.block)
            .map(|_| (rng.next() as u8) & ((1 << l.bits) - 1))
            .collect(),
        scales: (0..groups)
            .map(|_| lo + (rng.next() % (hi - lo + 1) as u64) as i16)
            .collect(),
        mins: (0..groups)
            .map(|_| {
                if l.has_mins {
                    (rng.next() % (u64::from(min_max(ty)) + 1)) as u8
                } else {
                    0
                }
            })
            .collect(),
        d: f16v(rng),
        dmin: if l.has_mins { f16v(rng) } else { 0 },
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Builds an `[n, k]` tensor of `blocks` (row-major, `k / block` blocks a row), decodes it and
/// checks: every field of the decode against the blocks, and the decode's values (both
/// `dequantize` and `value`) against ggml's, bit for bit. Returns ggml's values.
fn check(ty: GgmlType, n: usize, k: usize, blocks: &[Blk]) -> Vec<f32> {
    let l = layout(ty);
    let bytes: Vec<u8> = blocks.iter().flat_map(|b| encode(ty, b)).collect();
    let ggml = ggml_dequantize(ty, &bytes, n * k).unwrap();
    let t = TwoLevel::decode(ty, &bytes, n, k).unwrap();
    assert_eq!(
        (t.ty, t.n, t.k, t.bits, t.levels),
        (ty, n, k, l.bits, l.levels)
    );
    assert_eq!((t.sub, t.block), (l.sub, l.block));
    assert_eq!((t.groups(), t.super_blocks()), (k / l.sub, k / l.block));
    assert_eq!(t.mins.is_some(), l.has_mins);
    assert_eq!(t.dmin.is_some(), l.has_mins);
    let per_row = k / l.block;
    let subs = l.block / l.sub;
    for (bi, b) in blocks.iter().enumerate() {
        let (row, sb) = (bi / per_row, bi % per_row);
        assert_eq!(t.d[sb * n + row].to_bits(), b.d, "{ty} block {bi} d");
        if let Some(dm) = &t.dmin {
            assert_eq!(dm[sb * n + row].to_bits(), b.dmin, "{ty} block {bi} dmin");
        }
        for s in 0..subs {
            let g = sb * subs + s;
            assert_eq!(
                t.scales[g * n + row],
                b.scales[s],
                "{ty} block {bi} scale {s}"
            );
            if let Some(m) = &t.mins {
                assert_eq!(m[g * n + row], b.mins[s], "{ty} block {bi} min {s}");
            }
        }
        let codes = &t.codes[row * k + sb * l.block..][..l.block];
        assert_eq!(codes, &b.codes[..], "{ty} block {bi} codes");
    }
    assert_eq!(
        bits(&t.dequantize()),
        bits(&ggml),
        "{ty}: dequantize vs ggml"
    );
    // The lossless conversion into kernel weights: the exact value rounded to f32 is ggml's.
    let finite =
        t.d.iter()
            .chain(t.dmin.iter().flatten())
            .all(|d| d.is_finite());
    match humming_import::from_two_level(&t) {
        Ok(w) => {
            let ours: Vec<f32> = w.dequantize().iter().map(|&v| v as f32).collect();
            assert_eq!(bits(&ours), bits(&ggml), "{ty}: converted weights vs ggml");
        }
        Err(e) => assert!(!finite, "{ty}: conversion failed on finite factors: {e}"),
    }
    for row in 0..n {
        for col in 0..k {
            assert_eq!(
                t.value(row, col).to_bits(),
                ggml[row * k + col].to_bits(),
                "{ty} ({row}, {col})"
            );
        }
    }
    ggml
}

#[test]
fn random_blocks_decode_bit_exact_against_ggml() {
    let mut rng = Rng(0x6b71_7561_6e74);
    for ty in TYPES {
        let l = layout(ty);
        for (wild, n, k) in [
            (false, 3, 2 * l.block),
            (false, 1, 5 * l.block),
            (true, 4, 3 * l.block),
        ] {
            let blocks: Vec<Blk> = (0..n * k / l.block)
                .map(|_| random_blk(ty, &mut rng, wild))
                .collect();
            check(ty, n, k, &blocks);
        }
    }
}

#[test]
fn random_bytes_decode_bit_exact_against_ggml() {
    // Any bytes are a valid block (NaN and infinite d included): the decode must agree with ggml
    // on all of them, and re-encoding the decode must give the bytes back.
    let mut rng = Rng(7);
    for ty in TYPES {
        let (blk, size) = ty.block_layout().unwrap();
        let (n, k) = (3, 2 * blk);
        for _ in 0..20 {
            let bytes: Vec<u8> = (0..n * k / blk * size).map(|_| rng.next() as u8).collect();
            let ggml = ggml_dequantize(ty, &bytes, n * k).unwrap();
            let t = TwoLevel::decode(ty, &bytes, n, k).unwrap();
            assert_eq!(bits(&t.dequantize()), bits(&ggml), "{ty}");
            assert!(t.codes.iter().all(|&c| u32::from(c) < 1 << t.bits), "{ty}");
            let (lo, hi) = scale_range(ty);
            assert!(t.scales.iter().all(|s| (lo..=hi).contains(s)), "{ty}");
            // Lossless: the blocks rebuilt from the decode are the bytes.
            let l = layout(ty);
            let subs = l.block / l.sub;
            let mut again = Vec::new();
            for row in 0..n {
                for sb in 0..k / blk {
                    let g = |s: usize| (sb * subs + s) * n + row;
                    let b = Blk {
                        codes: t.codes[row * k + sb * blk..][..blk].to_vec(),
                        scales: (0..subs).map(|s| t.scales[g(s)]).collect(),
                        mins: (0..subs)
                            .map(|s| t.mins.as_ref().map_or(0, |m| m[g(s)]))
                            .collect(),
                        d: t.d[sb * n + row].to_bits(),
                        dmin: t.dmin.as_ref().map_or(0, |m| m[sb * n + row].to_bits()),
                    };
                    again.extend(encode(ty, &b));
                }
            }
            // None of these layouts has unused bits: every byte round-trips.
            assert_eq!(again, bytes, "{ty}: re-encoded decode");
        }
    }
}

/// A block of `ty` with every group scale `scale`, min `min`, `d = 1`, `dmin = 0.5` and codes
/// `codes(p)`.
fn uniform(ty: GgmlType, scale: i16, min: u8, codes: impl Fn(usize) -> u8) -> Blk {
    let l = layout(ty);
    let groups = l.block / l.sub;
    Blk {
        codes: (0..l.block).map(codes).collect(),
        scales: vec![scale; groups],
        mins: vec![if l.has_mins { min } else { 0 }; groups],
        d: f16::from_f32(1.0).to_bits(),
        dmin: if l.has_mins {
            f16::from_f32(0.5).to_bits()
        } else {
            0
        },
    }
}

/// ggml's formula in exact arithmetic for blocks whose products are all exact in f32.
fn exact(ty: GgmlType, b: &Blk, p: usize) -> f32 {
    let l = layout(ty);
    let g = p / l.sub;
    let d = f16::from_bits(b.d).to_f64();
    let dmin = f16::from_bits(b.dmin).to_f64();
    let level = f64::from(l.levels.level(b.codes[p]));
    (d * f64::from(b.scales[g]) * level - dmin * f64::from(b.mins[g])) as f32
}

#[test]
fn hand_built_blocks_give_known_values() {
    for ty in TYPES {
        let l = layout(ty);
        let max_code = ((1u32 << l.bits) - 1) as u8;
        let (lo, hi) = scale_range(ty);
        let mut cases = vec![
            // Scale 0: every weight is -dmin * min (0 without mins).
            uniform(ty, 0.max(lo), min_max(ty), |_| max_code),
            // Largest codes and scales, largest min.
            uniform(ty, hi, min_max(ty), |_| max_code),
            // Smallest codes and scales.
            uniform(ty, lo, 0, |_| 0),
            // Every code, cycling, and distinct scales per group.
            {
                let mut b = uniform(ty, hi, 1, |p| (p % (usize::from(max_code) + 1)) as u8);
                for (s, v) in b.scales.iter_mut().enumerate() {
                    *v = lo + (s as i16 * 7) % (hi - lo + 1);
                }
                for (s, v) in b.mins.iter_mut().enumerate() {
                    *v = if l.has_mins {
                        (s as u8 * 5) % (min_max(ty) + 1)
                    } else {
                        0
                    };
                }
                b
            },
        ];
        // Negative d (and dmin): the signs flip.
        let mut neg = cases[3].clone();
        neg.d = f16::from_f32(-0.25).to_bits();
        if l.has_mins {
            neg.dmin = f16::from_f32(-2.0).to_bits();
        }
        cases.push(neg);
        // d = -0: products are signed zeros.
        let mut negzero = cases[1].clone();
        negzero.d = 0x8000;
        cases.push(negzero);
        for (ci, b) in cases.iter().enumerate() {
            let y = check(ty, 1, l.block, std::slice::from_ref(b));
            for (p, &v) in y.iter().enumerate() {
                assert_eq!(
                    v.to_bits(),
                    exact(ty, b, p).to_bits(),
                    "{ty} case {ci} weight {p}: ggml {v}, exact {}",
                    exact(ty, b, p)
                );
            }
        }
    }
}

#[test]
fn known_values_per_type() {
    // A few weights spelled out, to pin the formulas (levels, biases, mins) by hand.
    let one = |ty, scale, min, code| {
        let b = uniform(ty, scale, min, |_| code);
        check(ty, 1, layout(ty).block, &[b])[0]
    };
    // Q2_K: d * sc * q - dmin * m = 1 * 15 * 3 - 0.5 * 15.
    assert_eq!(one(GgmlType::Q2_K, 15, 15, 3), 37.5);
    // Q3_K: level = code - 4; code 0 (no high bit) is -4, code 7 is 3; scale 31.
    assert_eq!(one(GgmlType::Q3_K, 31, 0, 0), -124.0);
    assert_eq!(one(GgmlType::Q3_K, -32, 0, 7), -96.0);
    // Q4_K: 63 * 15 - 0.5 * 63.
    assert_eq!(one(GgmlType::Q4_K, 63, 63, 15), 913.5);
    // Q5_K: 63 * 31 - 0.5 * 1.
    assert_eq!(one(GgmlType::Q5_K, 63, 1, 31), 1952.5);
    // Q6_K: level = code - 32; int8 scale -128.
    assert_eq!(one(GgmlType::Q6_K, -128, 0, 0), 4096.0);
    assert_eq!(one(GgmlType::Q6_K, 127, 0, 63), 3937.0);
    // IQ4: the table's ends.
    assert_eq!(one(GgmlType::IQ4_NL, 1, 0, 0), -127.0);
    assert_eq!(one(GgmlType::IQ4_NL, 1, 0, 15), 113.0);
    assert_eq!(one(GgmlType::IQ4_XS, -32, 0, 0), 4064.0);
    assert_eq!(one(GgmlType::IQ4_XS, 31, 0, 15), 3503.0);
    assert_eq!(KVALUES_IQ4NL[8], 1);
    assert_eq!(Levels::Table(&KVALUES_IQ4NL).level(3), -65);
    assert_eq!(Levels::Offset(32).level(0), -32);
}

#[test]
fn bad_inputs_are_typed_errors() {
    for ty in TYPES {
        let (blk, size) = ty.block_layout().unwrap();
        // K not a multiple of the block (e.g. 640 for the 256-weight super-blocks).
        if blk == 256 {
            let e = TwoLevel::decode(ty, &vec![0; 5 * size / 2], 1, 640).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::BlockMultiple {
                        len: 640,
                        block: 256,
                        ..
                    }
                ),
                "{ty}: {e}"
            );
        }
        let e = TwoLevel::decode(ty, &vec![0; size], 2, blk).unwrap_err();
        assert!(
            matches!(e, Error::ByteCount { expected, found, .. } if expected == 2 * size && found == size),
            "{ty}: {e}"
        );
        let e = ggml_dequantize(ty, &vec![0; size + 1], blk).unwrap_err();
        assert!(matches!(e, Error::ByteCount { .. }), "{ty}: {e}");
        let e = ggml_dequantize(ty, &vec![0; size], blk + 16).unwrap_err();
        assert!(matches!(e, Error::BlockMultiple { .. }), "{ty}: {e}");
        let e = TwoLevel::decode(ty, &[], usize::MAX, blk).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{ty}: {e}");
        // Empty matrices decode to nothing.
        let t = TwoLevel::decode(ty, &[], 0, blk).unwrap();
        assert!(t.codes.is_empty() && t.dequantize().is_empty());
    }
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q8_K,
        GgmlType::IQ2_XXS,
        GgmlType::F32,
    ] {
        let e = TwoLevel::decode(ty, &[], 0, 256).unwrap_err();
        assert!(
            matches!(&e, Error::UnsupportedTensorType { ty: t, supported, .. } if *t == ty && *supported == TWO_LEVEL_SUPPORTED),
            "{ty}: {e}"
        );
    }
    // Random lengths and shapes: errors, never panics.
    let mut rng = Rng(99);
    for _ in 0..2000 {
        let ty = TYPES[(rng.next() % 7) as usize];
        let (n, k) = ((rng.next() % 4) as usize, (rng.next() % 600) as usize);
        let bytes: Vec<u8> = (0..rng.next() % 800).map(|_| rng.next() as u8).collect();
        let _ = TwoLevel::decode(ty, &bytes, n, k);
        let _ = ggml_dequantize(ty, &bytes, n * k);
    }
}

#[test]
fn gguf_tensors_decode_and_errors_name_them() {
    let mut rng = Rng(3);
    let mut w = GgufWriter::new();
    let mut want = Vec::new();
    for (i, ty) in TYPES.into_iter().enumerate() {
        let l = layout(ty);
        let (n, k) = (2, 2 * l.block);
        let blocks: Vec<Blk> = (0..n * k / l.block)
            .map(|_| random_blk(ty, &mut rng, false))
            .collect();
        let bytes: Vec<u8> = blocks.iter().flat_map(|b| encode(ty, b)).collect();
        let name = format!("blk.{i}.ffn_down.weight");
        w.tensor(&name, ty, &[k as u64, n as u64], bytes.clone());
        want.push((name, ty, n, k, bytes));
    }
    w.tensor("cube", GgmlType::Q4_K, &[256, 1, 2], vec![0; 288]);
    w.tensor("legacy", GgmlType::Q4_0, &[32, 1], vec![0; 18]);
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    for (name, ty, n, k, bytes) in want {
        let t = TwoLevel::from_tensor(&file.tensor(&name).unwrap()).unwrap();
        assert_eq!(t, TwoLevel::decode(ty, &bytes, n, k).unwrap(), "{name}");
    }
    let e = TwoLevel::from_tensor(&file.tensor("cube").unwrap()).unwrap_err();
    assert!(
        matches!(&e, Error::Shape { tensor, .. } if tensor == "cube"),
        "{e}"
    );
    let e = TwoLevel::from_tensor(&file.tensor("legacy").unwrap()).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedTensorType { tensor, ty: GgmlType::Q4_0, .. } if tensor == "legacy"),
        "{e}"
    );
    assert!(e.to_string().contains("Q4_K"), "{e}");
}
