//! GGUF legacy blocks: ggml's dequantization against hand formulas, and the lossless conversion
//! to `QuantizedWeights` against ggml's dequantization, bit for bit.

mod common;

use common::{Block, GgufWriter, LEGACY, Rng, encode, expected, extreme_blocks};
use humming_import::{
    Error, GgmlType, GgufFile, MetaValue, ZeroPoints, ggml_dequantize, spec_for, to_quantized,
    to_quantized_as,
};
use humming_spec::{DType, ZeroPoint, parse_kernel_str};

/// Encodes `blocks` as an `[n, k]` tensor (row-major, 32 weights a block).
fn tensor_bytes(ty: GgmlType, blocks: &[Block]) -> Vec<u8> {
    blocks.iter().flat_map(|b| encode(ty, b)).collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Checks `to_quantized(t).dequantize()` rounded to f32 against `ggml_dequantize` for every
/// element, and both against the hand formula.
fn check_tensor(file: &GgufFile, name: &str, blocks: &[Block]) {
    let t = file.tensor(name).unwrap();
    let ty = t.ggml_type();
    let (n, k) = t.info().matrix_nk().unwrap();
    let ggml = ggml_dequantize(ty, t.bytes(), n * k).unwrap();
    let hand: Vec<f32> = blocks
        .iter()
        .flat_map(|b| (0..32).map(move |j| expected(ty, b, j)))
        .collect();
    assert_eq!(
        bits(&ggml),
        bits(&hand),
        "{name}: ggml_dequantize vs the hand formula"
    );
    let w = to_quantized(&t).unwrap();
    assert_eq!((w.n(), w.k()), (n, k));
    assert_eq!(*w.spec(), spec_for(name, ty, DType::F16).unwrap());
    let ours: Vec<f32> = w.dequantize().iter().map(|&v| v as f32).collect();
    for (i, (a, b)) in ours.iter().zip(&ggml).enumerate() {
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "{name} ({ty}) element {i} (n = {}, k = {}): ours {a:e}, ggml {b:e}",
            i / k,
            i % k
        );
    }
    // The parts themselves: scale [g, n] is block (n, g)'s d; codes are the ggml quants, re-centred
    // for the signed types.
    let groups = k / 32;
    for (bi, b) in blocks.iter().enumerate() {
        let (row, g) = (bi / groups, bi % groups);
        assert_eq!(
            w.scales()[g * n + row].to_bits(),
            half::f16::from_bits(b.d).to_f32().to_bits()
        );
        if let ZeroPoints::Float(m) = w.zeros() {
            assert_eq!(
                m[g * n + row].to_bits(),
                half::f16::from_bits(b.m).to_f32().to_bits()
            );
        }
        for j in 0..32 {
            let want = match ty {
                GgmlType::Q4_0 => i32::from(b.q[j]) - 8,
                GgmlType::Q5_0 => i32::from(b.q[j]) - 16,
                GgmlType::Q8_0 => i32::from(b.q[j] as i8),
                _ => i32::from(b.q[j]),
            };
            assert_eq!(
                w.code_value(row, g * 32 + j),
                want,
                "{name} block {bi} code {j}"
            );
        }
    }
}

#[test]
fn descriptors_match_the_table() {
    let cases = [
        (GgmlType::Q4_0, DType::SInt { bits: 4 }, ZeroPoint::None),
        (
            GgmlType::Q4_1,
            DType::UInt { bits: 4 },
            ZeroPoint::FloatOffset,
        ),
        (GgmlType::Q5_0, DType::SInt { bits: 5 }, ZeroPoint::None),
        (
            GgmlType::Q5_1,
            DType::UInt { bits: 5 },
            ZeroPoint::FloatOffset,
        ),
        (GgmlType::Q8_0, DType::SInt { bits: 8 }, ZeroPoint::None),
    ];
    for (ty, b, zp) in cases {
        let s = spec_for("w", ty, DType::F16).unwrap();
        assert_eq!(
            (s.a, s.b, s.zero_point, s.scale.dtype),
            (DType::F16, b, zp, DType::F16),
            "{ty}"
        );
        assert_eq!(
            s.scale.granularity,
            humming_spec::ScaleGranularity::Group { size: 32 }
        );
        assert_eq!(
            s,
            parse_kernel_str(humming_import::convert::spec_text(ty).unwrap()).unwrap()
        );
    }
}

#[test]
fn random_blocks_odd_shapes_bit_exact() {
    let mut rng = Rng(7);
    let mut w = GgufWriter::new();
    let mut all = Vec::new();
    for ty in LEGACY {
        for (n, k) in [(3usize, 32usize), (5, 96), (64, 576), (1, 64)] {
            for wild in [false, true] {
                let blocks: Vec<Block> = (0..n * k / 32).map(|_| rng.block(ty, wild)).collect();
                let name = format!("{ty}.{n}x{k}.{}", if wild { "wild" } else { "tame" });
                w.tensor(&name, ty, &[k as u64, n as u64], tensor_bytes(ty, &blocks));
                all.push((name, blocks));
            }
        }
    }
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!(file.tensors().len(), all.len());
    for (name, blocks) in &all {
        check_tensor(&file, name, blocks);
    }
}

#[test]
fn extreme_blocks_bit_exact() {
    let mut w = GgufWriter::new();
    let mut all = Vec::new();
    for ty in LEGACY {
        let mut blocks = extreme_blocks(ty);
        // Three blocks a row, so rows and groups both vary: pad to a multiple of 3.
        while !blocks.len().is_multiple_of(3) {
            blocks.push(blocks[0].clone());
        }
        let name = format!("{ty}.extreme");
        w.tensor(
            &name,
            ty,
            &[96, (blocks.len() / 3) as u64],
            tensor_bytes(ty, &blocks),
        );
        all.push((name, blocks));
    }
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    for (name, blocks) in &all {
        check_tensor(&file, name, blocks);
    }
}

#[test]
fn q5_high_bits_follow_ggml() {
    // Only the fifth bit set, one weight at a time: element j must read bit j of qh.
    for ty in [GgmlType::Q5_0, GgmlType::Q5_1] {
        for j in 0..32 {
            let mut q = [0u8; 32];
            q[j] = 16;
            let b = Block {
                d: half::f16::from_f32(1.0).to_bits(),
                m: 0,
                q,
            };
            let bytes = encode(ty, &b);
            let qh_at = if ty == GgmlType::Q5_0 { 2 } else { 4 };
            let qh = u32::from_le_bytes(bytes[qh_at..qh_at + 4].try_into().unwrap());
            assert_eq!(qh, 1 << j);
            let y = ggml_dequantize(ty, &bytes, 32).unwrap();
            for (i, &v) in y.iter().enumerate() {
                let want = match (ty, i == j) {
                    (GgmlType::Q5_0, true) => 0.0,
                    (GgmlType::Q5_0, false) => -16.0,
                    (_, true) => 16.0,
                    (_, false) => 0.0,
                };
                assert_eq!(v, want, "{ty} bit {j} element {i}");
            }
        }
    }
}

#[test]
fn nibble_order_follows_ggml() {
    // qs[i] = 0xBA: element i is 0xA, element i + 16 is 0xB.
    let mut bytes = half::f16::from_f32(1.0).to_bits().to_le_bytes().to_vec();
    bytes.extend(std::iter::repeat_n(0xBAu8, 16));
    let y = ggml_dequantize(GgmlType::Q4_0, &bytes, 32).unwrap();
    assert!(
        y[..16].iter().all(|&v| v == 2.0) && y[16..].iter().all(|&v| v == 3.0),
        "{y:?}"
    );
}

#[test]
fn plain_types_dequantize() {
    let f = [1.5f32, -0.0, 65504.0, 1e-7, f32::INFINITY];
    let bytes: Vec<u8> = f.iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(
        bits(&ggml_dequantize(GgmlType::F32, &bytes, 5).unwrap()),
        bits(&f)
    );
    let h: Vec<u8> = f
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let want: Vec<f32> = f.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
    assert_eq!(
        bits(&ggml_dequantize(GgmlType::F16, &h, 5).unwrap()),
        bits(&want)
    );
    let bf: Vec<u8> = f
        .iter()
        .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
        .collect();
    let want: Vec<f32> = f
        .iter()
        .map(|&v| half::bf16::from_f32(v).to_f32())
        .collect();
    assert_eq!(
        bits(&ggml_dequantize(GgmlType::BF16, &bf, 5).unwrap()),
        bits(&want)
    );
}

#[test]
fn dequantize_rejects_bad_lengths_and_types() {
    let e = ggml_dequantize(GgmlType::Q4_1, &[0; 20], 31).unwrap_err();
    assert!(
        matches!(
            e,
            Error::BlockMultiple {
                len: 31,
                block: 32,
                ..
            }
        ),
        "{e}"
    );
    let e = ggml_dequantize(GgmlType::Q4_1, &[0; 21], 32).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ByteCount {
                expected: 20,
                found: 21,
                ..
            }
        ),
        "{e}"
    );
    let e = ggml_dequantize(GgmlType::IQ2_XXS, &[0; 66], 256).unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnsupportedTensorType {
                ty: GgmlType::IQ2_XXS,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unsupported_types_and_activations_are_typed_errors() {
    let mut w = GgufWriter::new();
    w.tensor("blk.0.attn_norm.weight", GgmlType::F32, &[64], vec![0; 256]);
    w.tensor(
        "blk.0.ffn_down.weight",
        GgmlType::Q6_K,
        &[256, 2],
        vec![0; 420],
    );
    w.tensor(
        "blk.0.ffn_up.weight",
        GgmlType::Q2_K,
        &[256, 1],
        vec![0; 84],
    );
    w.tensor(
        "blk.0.ffn_gate.weight",
        GgmlType::IQ2_XXS,
        &[256, 1],
        vec![0; 66],
    );
    w.tensor("blk.0.attn_q.weight", GgmlType::Q4_1, &[32, 2], vec![0; 40]);
    w.tensor("cube", GgmlType::Q8_0, &[32, 2, 2], vec![0; 136]);
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    // K-quants convert (two levels; all-zero blocks are zero weights), F32 vectors do not.
    for name in ["blk.0.ffn_down.weight", "blk.0.ffn_up.weight"] {
        let w = to_quantized(&file.tensor(name).unwrap()).unwrap();
        assert!(w.dequantize().iter().all(|&v| v == 0.0), "{name}");
    }
    for (name, ty) in [
        ("blk.0.attn_norm.weight", GgmlType::F32),
        ("blk.0.ffn_gate.weight", GgmlType::IQ2_XXS),
    ] {
        let e = to_quantized(&file.tensor(name).unwrap()).unwrap_err();
        match &e {
            Error::UnsupportedTensorType { tensor, ty: t, .. } => {
                assert_eq!((tensor.as_str(), *t), (name, ty))
            }
            other => panic!("{name}: unexpected error {other}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains(name) && msg.contains(&ty.to_string()) && msg.contains("Q4_1"),
            "{msg}"
        );
    }
    let q = file.tensor("blk.0.attn_q.weight").unwrap();
    let e = to_quantized_as(&q, DType::BF16).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedActivation { tensor, dtype: DType::BF16 } if tensor == "blk.0.attn_q.weight"),
        "{e}"
    );
    assert!(e.to_string().contains("f16"), "{e}");
    let w = to_quantized_as(&q, DType::F16).unwrap();
    assert_eq!((w.n(), w.k()), (2, 32));
    let e = to_quantized(&file.tensor("cube").unwrap()).unwrap_err();
    assert!(
        matches!(&e, Error::Shape { tensor, .. } if tensor == "cube"),
        "{e}"
    );
    // F32 tensors read as floats instead.
    assert_eq!(
        file.tensor_f32("blk.0.attn_norm.weight").unwrap(),
        vec![0.0; 64]
    );
    let e = file.tensor_f32("blk.0.attn_q.weight").unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedTensorType { tensor, .. } if tensor == "blk.0.attn_q.weight"),
        "{e}"
    );
}

#[test]
fn non_finite_block_scales_are_rejected_with_the_tensor_name() {
    let inf = Block {
        d: 0x7C00,
        m: 0,
        q: [1; 32],
    };
    let nan = Block {
        d: 0x3C00,
        m: 0x7E00,
        q: [1; 32],
    };
    let mut w = GgufWriter::new();
    w.tensor(
        "inf_scale",
        GgmlType::Q8_0,
        &[32, 1],
        encode(GgmlType::Q8_0, &inf),
    );
    w.tensor(
        "nan_offset",
        GgmlType::Q4_1,
        &[32, 1],
        encode(GgmlType::Q4_1, &nan),
    );
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    for name in ["inf_scale", "nan_offset"] {
        let e = to_quantized(&file.tensor(name).unwrap()).unwrap_err();
        assert!(
            matches!(&e, Error::Weights { tensor, .. } if tensor == name),
            "{e}"
        );
    }
}

#[test]
fn metadata_does_not_disturb_conversion() {
    // A file with metadata and F32 tensors around the quantized one, at alignment 64, version 2.
    let mut rng = Rng(11);
    let blocks: Vec<Block> = (0..5 * 3)
        .map(|_| rng.block(GgmlType::Q4_1, false))
        .collect();
    let mut w = GgufWriter::new();
    w.version = 2;
    w.alignment = 64;
    w.write_alignment = true;
    w.kv("general.architecture", MetaValue::String("llama".into()));
    w.tensor(
        "norm",
        GgmlType::F32,
        &[3],
        [1f32, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    );
    w.tensor(
        "w",
        GgmlType::Q4_1,
        &[96, 5],
        tensor_bytes(GgmlType::Q4_1, &blocks),
    );
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    assert_eq!((file.version(), file.alignment()), (2, 64));
    check_tensor(&file, "w", &blocks);
}
