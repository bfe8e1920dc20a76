//! Quantization, dequantization and the checks of `QuantizedWeights::from_parts`.

use humming_runtime::quant::{is_representable, round_to_format};
use humming_runtime::spec::{DType, KernelSpec, ScaleGranularity, ZeroPoint, parse_kernel_str};
use humming_runtime::{Error, QuantizedWeights, ZeroPoints};
use proptest::prelude::*;

fn ks(s: &str) -> KernelSpec {
    parse_kernel_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn arg_of<T: std::fmt::Debug>(r: humming_runtime::Result<T>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn group_len(spec: &KernelSpec, k: usize) -> usize {
    match spec.scale.granularity {
        ScaleGranularity::Group { size } => size as usize,
        _ => k,
    }
}

fn representable_in(v: f32, dt: DType) -> bool {
    if dt == DType::F16 {
        half::f16::from_f32(v).to_f32() == v
    } else {
        half::bf16::from_f32(v).to_f32() == v
    }
}

/// Checks the documented properties of `quantize` on `w` (`[n, k]`).
fn check_quantized(spec: &KernelSpec, n: usize, k: usize, w: &[f32]) -> Result<(), TestCaseError> {
    let q = QuantizedWeights::quantize(spec, n, k, w)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let bits = spec.b.bits();
    let dt = spec.scale.dtype;
    let g = group_len(spec, k);
    let groups = k.div_ceil(g);
    prop_assert_eq!(q.groups(), groups);
    prop_assert_eq!(q.codes().len(), n * k);
    prop_assert_eq!(q.scales().len(), groups * n);
    prop_assert!(q.codes().iter().all(|&c| u32::from(c) < 1 << bits));
    for &s in q.scales() {
        prop_assert!(
            s.is_finite() && representable_in(s, dt),
            "scale {s} not in {dt}"
        );
    }
    match (q.zeros(), spec.zero_point) {
        (ZeroPoints::None, ZeroPoint::None) => {}
        (ZeroPoints::Integer(z), ZeroPoint::Integer) => {
            prop_assert_eq!(z.len(), groups * n);
            prop_assert!(z.iter().all(|&z| u32::from(z) < 1 << bits));
        }
        (ZeroPoints::Float(m), ZeroPoint::FloatOffset) => {
            prop_assert_eq!(m.len(), groups * n);
            for &m in m {
                prop_assert!(m.is_finite() && representable_in(m, dt));
            }
        }
        (z, want) => prop_assert!(false, "zero points {z:?} for {want:?}"),
    }
    // The same value passes from_parts (so every invariant holds).
    let again = QuantizedWeights::from_parts(
        spec,
        n,
        k,
        q.codes().to_vec(),
        q.scales().to_vec(),
        q.zeros().clone(),
    );
    prop_assert_eq!(again.as_ref().ok(), Some(&q));

    let deq = q.dequantize();
    let signed = matches!(spec.b, DType::SInt { .. });
    let maxq = f64::from((1u32 << bits) - 1);
    for row in 0..n {
        for col in 0..k {
            let i = row * k + col;
            let si = (col / g) * n + row;
            let s = f64::from(q.scales()[si]);
            let x = f64::from(w[i]);
            let d = deq[i];
            prop_assert!(d.is_finite());
            prop_assert_eq!(d, q.dequantize_value(row, col));
            // The formula, from the code.
            let c = f64::from(q.code_value(row, col));
            let want = match q.zeros() {
                ZeroPoints::None => s * c,
                ZeroPoints::Integer(z) => s * (c - f64::from(z[si])),
                ZeroPoints::Float(m) => s * c + f64::from(m[si]),
                ZeroPoints::FloatTwoLevel { .. } => unreachable!("one-level specs only"),
            };
            prop_assert_eq!(d, want);
            if signed {
                prop_assert!(c >= -(2f64.powi(bits as i32 - 1)) && c < 2f64.powi(bits as i32 - 1));
            } else {
                prop_assert!((0.0..=maxq).contains(&c));
            }
            // In-range values are reproduced within s / 2.
            if s > 0.0 {
                let (raw, lo, hi) = match q.zeros() {
                    ZeroPoints::None if signed => (
                        (x / s).round(),
                        -(2f64.powi(bits as i32 - 1)),
                        2f64.powi(bits as i32 - 1) - 1.0,
                    ),
                    ZeroPoints::None => ((x / s).round(), 0.0, maxq),
                    ZeroPoints::Integer(z) => ((x / s).round() + f64::from(z[si]), 0.0, maxq),
                    ZeroPoints::Float(m) => (((x - f64::from(m[si])) / s).round(), 0.0, maxq),
                    ZeroPoints::FloatTwoLevel { .. } => unreachable!("one-level specs only"),
                };
                if raw >= lo && raw <= hi {
                    prop_assert_eq!(c, raw, "code of {} at ({}, {})", x, row, col);
                    prop_assert!(
                        (x - d).abs() <= s / 2.0 * (1.0 + 1e-12),
                        "{x} -> {d}, s = {s}"
                    );
                }
            }
        }
    }
    Ok(())
}

fn specs() -> Vec<KernelSpec> {
    let mut out = vec![];
    for a in ["f16", "bf16"] {
        for bits in 1..=8 {
            for gran in ["channel", "group(16)", "group(64)"] {
                for (b, zp) in [("i", "none"), ("u", "int"), ("u", "float"), ("u", "none")] {
                    if b == "i" && bits == 1 {
                        continue;
                    }
                    out.push(ks(&format!(
                        "a: {a}, b: {b}{bits}, scale: {gran}, zero_point: {zp}"
                    )));
                }
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn quantize_properties(
        idx in 0usize..1000,
        n in 1usize..5,
        kg in 1usize..4,
        extra in 0usize..20,
        scale in prop_oneof![Just(1.0f32), Just(1e-3f32), Just(300.0f32)],
        seed in proptest::collection::vec(-1.0f32..1.0, 1..64),
    ) {
        let all = specs();
        let spec = all[idx % all.len()];
        let k = kg * 64 + extra; // includes a last partial group
        let w: Vec<f32> = (0..n * k).map(|i| seed[i % seed.len()] * scale * (1.0 + (i % 7) as f32 * 0.1)).collect();
        check_quantized(&spec, n, k, &w)?;
    }
}

#[test]
fn every_spec_quantizes_within_half_a_step() {
    // Deterministic coverage of all formats, including constant and all-zero groups.
    for spec in specs() {
        let (n, k) = (3, 128);
        let mut w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 3.0)
            .collect();
        w[k..2 * k].fill(0.0); // row 1: all zero
        w[2 * k..].fill(-1.7); // row 2: constant
        check_quantized(&spec, n, k, &w).unwrap_or_else(|e| panic!("{spec}: {e}"));
        let q = QuantizedWeights::quantize(&spec, n, k, &w).unwrap();
        let d = q.dequantize();
        assert!(
            d[k..2 * k].iter().all(|&x| x == 0.0),
            "{spec}: all-zero row"
        );
        // A constant row comes back as (nearly) itself, except where the format cannot hold it.
        let constant_ok = match (spec.b, spec.zero_point) {
            (DType::UInt { .. }, ZeroPoint::None) => d[2 * k..].iter().all(|&x| x == 0.0), // negative: clamps to 0
            (DType::UInt { bits: 1 }, ZeroPoint::Integer) => {
                d[2 * k..].iter().all(|&x| (x + 1.7).abs() < 0.01)
            }
            _ => d[2 * k..]
                .iter()
                .all(|&x| (x + 1.7).abs() <= 1.7 * 2f64.powi(-7)),
        };
        assert!(
            constant_ok,
            "{spec}: constant row -> {:?}",
            &d[2 * k..2 * k + 4]
        );
    }
}

#[test]
fn exact_quantizations() {
    // i4 symmetric: values -3.5..=3.5 in steps of 0.5 in every group -> s = 3.5 / 7 = 0.5, codes -7..=7.
    let spec = ks("a: f16, b: i4, scale: group(16)");
    let w: Vec<f32> = (0..64).map(|i| (i % 15) as f32 * 0.5 - 3.5).collect();
    let q = QuantizedWeights::quantize(&spec, 1, 64, &w).unwrap();
    assert_eq!(q.scales(), &[0.5; 4]);
    assert_eq!(q.code_value(0, 0), -7);
    assert_eq!(q.codes()[0], 0b1001);
    assert_eq!(q.code_value(0, 14), 7);
    assert_eq!(q.codes()[14], 0b0111);
    assert_eq!(
        q.dequantize(),
        w.iter().map(|&x| f64::from(x)).collect::<Vec<_>>()
    );
    // A constant negative group uses -7 (never -8): s = 4/7 rounded to f16.
    let q = QuantizedWeights::quantize(&spec, 1, 16, &[-4.0; 16]).unwrap();
    assert_eq!(
        f64::from(q.scales()[0]),
        round_to_format(4.0 / 7.0, DType::F16)
    );
    assert!((0..16).all(|k| q.code_value(0, k) == -7));

    // u4 with an integer zero point (GPTQ): values -2..=13 -> s = 1, z = 2, code = w + 2.
    let spec = ks("a: f16, b: u4, scale: group(16), zero_point: int");
    let w: Vec<f32> = (0..64).map(|i| (i % 16) as f32 - 2.0).collect();
    let q = QuantizedWeights::quantize(&spec, 1, 64, &w).unwrap();
    assert_eq!(q.scales(), &[1.0; 4]);
    assert_eq!(q.zeros(), &ZeroPoints::Integer(vec![2; 4]));
    assert_eq!(&q.codes()[..16], &(0..16).collect::<Vec<u8>>()[..]);
    assert_eq!(
        q.dequantize(),
        w.iter().map(|&x| f64::from(x)).collect::<Vec<_>>()
    );

    // GPTQ keeps 0 in range: all-positive 2..=17 -> lo = 0, s = 17/15 rounded, z = 0.
    let w: Vec<f32> = (0..64).map(|i| (i % 16) as f32 + 2.0).collect();
    let q = QuantizedWeights::quantize(&spec, 1, 64, &w).unwrap();
    assert_eq!(q.zeros(), &ZeroPoints::Integer(vec![0; 4]));
    assert_eq!(
        f64::from(q.scales()[0]),
        round_to_format(17.0 / 15.0, DType::F16)
    );

    // u4 float offset (GGUF Q4_1): 10, 10.5, ..., 17.5 -> m = 10, s = 0.5, codes 0..16.
    let spec = ks("a: bf16, b: u4, scale: channel, zero_point: float");
    let w: Vec<f32> = (0..16).map(|i| 10.0 + i as f32 * 0.5).collect();
    let q = QuantizedWeights::quantize(&spec, 1, 16, &w).unwrap();
    assert_eq!(q.scales(), &[0.5]);
    assert_eq!(q.zeros(), &ZeroPoints::Float(vec![10.0]));
    assert_eq!(q.codes(), &(0..16).collect::<Vec<u8>>()[..]);

    // u2 without zero point: s = max / 3, negatives clamp to 0.
    let spec = ks("a: f16, b: u2, scale: channel");
    let q = QuantizedWeights::quantize(&spec, 1, 4, &[-1.0, 0.0, 1.5, 3.0]).unwrap();
    assert_eq!(q.scales(), &[1.0]);
    assert_eq!(q.codes(), &[0, 0, 2, 3]); // 1.5 rounds half away from zero
    assert_eq!(q.dequantize(), vec![0.0, 0.0, 2.0, 3.0]);

    // Channel scale with a last partial group of a group spec: K = 80 with group(64) -> 2 groups.
    let spec = ks("a: f16, b: u8, scale: group(64)");
    let w: Vec<f32> = (0..80).map(|i| if i < 64 { 255.0 } else { 2.55 }).collect();
    let q = QuantizedWeights::quantize(&spec, 1, 80, &w).unwrap();
    assert_eq!(q.groups(), 2);
    assert_eq!(q.scales()[0], 1.0);
    assert_eq!(f64::from(q.scales()[1]), round_to_format(0.01, DType::F16));
}

#[test]
fn scales_round_to_the_dtype_first() {
    // absmax 1 in i8: s = 1/127, not representable; the stored scale is its f16 / bf16 rounding and
    // the codes are computed against it.
    for (a, dt) in [("f16", DType::F16), ("bf16", DType::BF16)] {
        let spec = ks(&format!("a: {a}, b: i8, scale: channel"));
        let w = [1.0f32, -0.5, 0.25, 0.3];
        let q = QuantizedWeights::quantize(&spec, 1, 4, &w).unwrap();
        let s = round_to_format(1.0 / 127.0, dt);
        assert_eq!(f64::from(q.scales()[0]), s);
        assert_ne!(s, 1.0 / 127.0);
        for (i, &x) in w.iter().enumerate() {
            let want = (f64::from(x) / s).round().clamp(-128.0, 127.0);
            assert_eq!(f64::from(q.code_value(0, i)), want);
        }
    }
}

#[test]
fn round_to_format_is_correctly_rounded() {
    let f16 = DType::F16;
    let bf16 = DType::BF16;
    assert_eq!(round_to_format(1.0, f16), 1.0);
    // Exactly halfway between 1 and 1 + 2^-10: ties to even (1).
    assert_eq!(round_to_format(1.0 + 2f64.powi(-11), f16), 1.0);
    // A hair above the tie: up. (Through f32 this would double-round to the tie and then to 1.)
    assert_eq!(
        round_to_format(1.0 + 2f64.powi(-11) + 2f64.powi(-40), f16),
        1.0 + 2f64.powi(-10)
    );
    assert_eq!(round_to_format(65504.0, f16), 65504.0);
    assert_eq!(round_to_format(65519.0, f16), 65504.0);
    assert_eq!(round_to_format(65520.0, f16), f64::INFINITY);
    assert_eq!(round_to_format(-1e6, f16), f64::NEG_INFINITY);
    // Subnormals: the smallest f16 is 2^-24; half of it ties to 0, a bit more rounds up.
    assert_eq!(round_to_format(2f64.powi(-24), f16), 2f64.powi(-24));
    assert_eq!(round_to_format(2f64.powi(-25), f16), 0.0);
    assert_eq!(round_to_format(2f64.powi(-25) * 1.01, f16), 2f64.powi(-24));
    assert_eq!(round_to_format(3.0 * 2f64.powi(-25), f16), 2f64.powi(-23));
    assert_eq!(round_to_format(1.0 + 2f64.powi(-8), bf16), 1.0);
    assert_eq!(
        round_to_format(1.0 + 3.0 * 2f64.powi(-8), bf16),
        1.0 + 2f64.powi(-6)
    );
    assert_eq!(
        round_to_format(1e38, bf16),
        f64::from(half::bf16::from_f32(1e38).to_f32())
    );
    assert!(
        is_representable(0.5, f16)
            && !is_representable(0.1, f16)
            && !is_representable(f64::NAN, bf16)
    );
    assert!(is_representable(-0.0, f16));
    // Agrees with half's f32 rounding wherever f32 is exact.
    for i in 0..20000u32 {
        let v = f32::from_bits(0x3000_0000 + i * 40503);
        assert_eq!(
            round_to_format(f64::from(v), f16),
            half::f16::from_f32(v).to_f64(),
            "{v}"
        );
        assert_eq!(
            round_to_format(f64::from(v), bf16),
            half::bf16::from_f32(v).to_f64(),
            "{v}"
        );
    }
}

#[test]
fn quantize_from_16_bit_elements() {
    let spec = ks("a: bf16, b: u4, scale: group(32), zero_point: int");
    let w: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
    let h: Vec<half::f16> = w.iter().map(|&x| half::f16::from_f32(x)).collect();
    let b: Vec<half::bf16> = w.iter().map(|&x| half::bf16::from_f32(x)).collect();
    let hf: Vec<f32> = h.iter().map(|x| x.to_f32()).collect();
    let bf: Vec<f32> = b.iter().map(|x| x.to_f32()).collect();
    assert_eq!(
        QuantizedWeights::quantize_f16(&spec, 2, 64, &h).unwrap(),
        QuantizedWeights::quantize(&spec, 2, 64, &hf).unwrap()
    );
    assert_eq!(
        QuantizedWeights::quantize_bf16(&spec, 2, 64, &b).unwrap(),
        QuantizedWeights::quantize(&spec, 2, 64, &bf).unwrap()
    );
    assert_eq!(
        QuantizedWeights::quantize_elements(&spec, 2, 64, &b).unwrap(),
        QuantizedWeights::quantize(&spec, 2, 64, &bf).unwrap()
    );
}

#[test]
fn quantize_errors() {
    let spec = ks("a: f16, b: u4, scale: group(32)");
    assert_eq!(
        arg_of(QuantizedWeights::quantize(&spec, 2, 32, &[0.0; 63])),
        "weights"
    );
    let mut w = vec![0.5f32; 64];
    w[7] = f32::NAN;
    assert_eq!(
        arg_of(QuantizedWeights::quantize(&spec, 2, 32, &w)),
        "weights"
    );
    w[7] = f32::INFINITY;
    assert_eq!(
        arg_of(QuantizedWeights::quantize(&spec, 2, 32, &w)),
        "weights"
    );
    // The scale 1e6 / 15 overflows f16.
    w[7] = 1e6;
    let e = QuantizedWeights::quantize(&spec, 2, 32, &w).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument { arg: "weights", msg } if msg.contains("overflows")),
        "{e}"
    );
    // ... but fits bf16.
    assert!(QuantizedWeights::quantize(&ks("a: bf16, b: u4, scale: group(32)"), 2, 32, &w).is_ok());
    // A float offset that overflows f16.
    let spec_f = ks("a: f16, b: u8, scale: channel, zero_point: float");
    assert_eq!(
        arg_of(QuantizedWeights::quantize(
            &spec_f,
            1,
            2,
            &[-70000.0, -69000.0]
        )),
        "weights"
    );
    assert_eq!(arg_of(QuantizedWeights::quantize(&spec, 0, 32, &[])), "n");
    assert_eq!(arg_of(QuantizedWeights::quantize(&spec, 2, 0, &[])), "k");
    let mut bad = spec;
    bad.a = DType::F32;
    assert_eq!(
        arg_of(QuantizedWeights::quantize(&bad, 2, 32, &[0.0; 64])),
        "spec"
    );
}

#[test]
fn from_parts_errors() {
    let spec = ks("a: f16, b: u4, scale: group(32), zero_point: int");
    let (n, k) = (2, 64);
    let ok = || {
        (
            vec![0u8; n * k],
            vec![1.0f32; 2 * n],
            ZeroPoints::Integer(vec![0; 2 * n]),
        )
    };
    let build = |s: &KernelSpec, n: usize, k: usize, parts: (Vec<u8>, Vec<f32>, ZeroPoints)| {
        QuantizedWeights::from_parts(s, n, k, parts.0, parts.1, parts.2)
    };
    assert!(build(&spec, n, k, ok()).is_ok());

    // spec
    let mut s = spec;
    s.a = DType::E4M3;
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    let mut s = spec;
    s.scale.dtype = DType::BF16;
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    let mut s = spec;
    s.b = DType::E2M1;
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    let mut s = spec;
    s.b = DType::UInt { bits: 9 };
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    let mut s = spec;
    s.b = DType::SInt { bits: 1 };
    s.zero_point = ZeroPoint::None;
    assert_eq!(
        arg_of(build(
            &s,
            n,
            k,
            (vec![0; n * k], vec![1.0; 2 * n], ZeroPoints::None)
        )),
        "spec"
    );
    let mut s = spec;
    s.b = DType::SInt { bits: 4 }; // signed codes with a zero point
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    let mut s = spec;
    s.scale.granularity = ScaleGranularity::Tensor;
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");
    // The one group-size rule (humming_spec::layout::check_group_size): a power of two of at least 16.
    for size in [0, 8, 24, 100] {
        let mut s = spec;
        s.scale.granularity = ScaleGranularity::Group { size };
        assert_eq!(arg_of(build(&s, n, k, ok())), "spec", "group {size}");
    }
    let mut s = spec;
    s.scale2 = Some(s.scale);
    assert_eq!(arg_of(build(&s, n, k, ok())), "spec");

    // dims
    assert_eq!(
        arg_of(build(
            &spec,
            0,
            k,
            (vec![], vec![], ZeroPoints::Integer(vec![]))
        )),
        "n"
    );
    assert_eq!(
        arg_of(build(
            &spec,
            n,
            0,
            (vec![], vec![1.0; n], ZeroPoints::Integer(vec![0; n]))
        )),
        "k"
    );
    assert_eq!(
        arg_of(build(
            &spec,
            usize::MAX,
            2,
            (vec![], vec![], ZeroPoints::Integer(vec![]))
        )),
        "k"
    );

    // codes
    let (mut c, s, z) = ok();
    c.pop();
    assert_eq!(arg_of(build(&spec, n, k, (c, s, z))), "codes");
    let (mut c, s, z) = ok();
    c[77] = 16;
    let e = build(&spec, n, k, (c, s, z)).unwrap_err().to_string();
    assert!(
        e.contains("`codes`") && e.contains("16") && e.contains("n = 1, k = 13"),
        "{e}"
    );

    // scales
    let (c, mut s, z) = ok();
    s.push(1.0);
    assert_eq!(arg_of(build(&spec, n, k, (c, s, z))), "scales");
    for bad in [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.1,
        1e5,
        1.0 + 2f32.powi(-12),
    ] {
        let (c, mut s, z) = ok();
        s[1] = bad;
        assert_eq!(arg_of(build(&spec, n, k, (c, s, z))), "scales", "{bad}");
    }
    // Representable in bf16 but not f16, and the other way round.
    let (c, mut s, z) = ok();
    s[0] = 1e30;
    assert_eq!(arg_of(build(&spec, n, k, (c, s, z))), "scales");
    let spec_b = ks("a: bf16, b: u4, scale: group(32), zero_point: int");
    let (c, mut s, z) = ok();
    s[0] = 1e30f32;
    let s0 = half::bf16::from_f32(s[0]).to_f32();
    s[0] = s0;
    assert!(build(&spec_b, n, k, (c, s, z)).is_ok());
    let (c, mut s, z) = ok();
    s[0] = 1.0 + 2f32.powi(-10); // exact in f16, not in bf16
    assert!(build(&spec, n, k, (c.clone(), s.clone(), z.clone())).is_ok());
    assert_eq!(arg_of(build(&spec_b, n, k, (c, s, z))), "scales");
    // Negative and zero scales are allowed.
    let (c, mut s, z) = ok();
    s[0] = -0.0;
    s[1] = -2.5;
    assert!(build(&spec, n, k, (c, s, z)).is_ok());

    // zeros: kind, length, range
    let (c, s, _) = ok();
    assert_eq!(
        arg_of(build(&spec, n, k, (c.clone(), s.clone(), ZeroPoints::None))),
        "zeros"
    );
    assert_eq!(
        arg_of(build(
            &spec,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Float(vec![0.0; 2 * n]))
        )),
        "zeros"
    );
    assert_eq!(
        arg_of(build(
            &spec,
            n,
            k,
            (
                c.clone(),
                s.clone(),
                ZeroPoints::Integer(vec![0; 2 * n + 1])
            )
        )),
        "zeros"
    );
    assert_eq!(
        arg_of(build(
            &spec,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Integer(vec![16; 2 * n]))
        )),
        "zeros"
    );
    assert!(
        build(
            &spec,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Integer(vec![15; 2 * n]))
        )
        .is_ok()
    );
    let spec_f = ks("a: f16, b: u4, scale: group(32), zero_point: float");
    assert!(
        build(
            &spec_f,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Float(vec![-0.75; 2 * n]))
        )
        .is_ok()
    );
    assert_eq!(
        arg_of(build(
            &spec_f,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Integer(vec![0; 2 * n]))
        )),
        "zeros"
    );
    assert_eq!(
        arg_of(build(
            &spec_f,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Float(vec![0.0; 3]))
        )),
        "zeros"
    );
    for bad in [f32::NAN, f32::NEG_INFINITY, 0.1] {
        let mut m = vec![0.0; 2 * n];
        m[3] = bad;
        assert_eq!(
            arg_of(build(
                &spec_f,
                n,
                k,
                (c.clone(), s.clone(), ZeroPoints::Float(m))
            )),
            "zeros",
            "{bad}"
        );
    }
    let spec_n = ks("a: f16, b: u4, scale: group(32)");
    assert_eq!(
        arg_of(build(
            &spec_n,
            n,
            k,
            (c.clone(), s.clone(), ZeroPoints::Integer(vec![0; 2 * n]))
        )),
        "zeros"
    );
    assert!(build(&spec_n, n, k, (c, s, ZeroPoints::None)).is_ok());

    // Channel scales: one row of N; group scales: ceil(K / G) rows.
    let spec_c = ks("a: f16, b: i3, scale: channel");
    assert!(
        QuantizedWeights::from_parts(&spec_c, 2, 5, vec![7; 10], vec![1.0; 2], ZeroPoints::None)
            .is_ok()
    );
    assert_eq!(
        arg_of(QuantizedWeights::from_parts(
            &spec_c,
            2,
            5,
            vec![8; 10],
            vec![1.0; 2],
            ZeroPoints::None
        )),
        "codes"
    );
    assert_eq!(
        arg_of(QuantizedWeights::from_parts(
            &spec_c,
            2,
            5,
            vec![7; 10],
            vec![1.0; 4],
            ZeroPoints::None
        )),
        "scales"
    );
    let q = QuantizedWeights::from_parts(
        &spec,
        2,
        70,
        vec![0; 140],
        vec![1.0; 6],
        ZeroPoints::Integer(vec![0; 6]),
    )
    .unwrap();
    assert_eq!(q.groups(), 3);
}

#[test]
fn signed_codes_sign_extend() {
    let spec = ks("a: f16, b: i3, scale: channel");
    let q =
        QuantizedWeights::from_parts(&spec, 1, 8, (0..8).collect(), vec![0.5], ZeroPoints::None)
            .unwrap();
    let v: Vec<i32> = (0..8).map(|k| q.code_value(0, k)).collect();
    assert_eq!(v, vec![0, 1, 2, 3, -4, -3, -2, -1]);
    assert_eq!(
        q.dequantize(),
        vec![0.0, 0.5, 1.0, 1.5, -2.0, -1.5, -1.0, -0.5]
    );
    let spec_u = ks("a: f16, b: u3, scale: channel, zero_point: int");
    let q = QuantizedWeights::from_parts(
        &spec_u,
        1,
        8,
        (0..8).collect(),
        vec![0.5],
        ZeroPoints::Integer(vec![3]),
    )
    .unwrap();
    assert_eq!(
        q.dequantize(),
        vec![-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0]
    );
    let spec_f = ks("a: f16, b: u3, scale: channel, zero_point: float");
    let q = QuantizedWeights::from_parts(
        &spec_f,
        1,
        8,
        (0..8).collect(),
        vec![0.5],
        ZeroPoints::Float(vec![-0.25]),
    )
    .unwrap();
    assert_eq!(
        q.dequantize(),
        vec![-0.25, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25]
    );
}

#[test]
fn float_weights_reject_special_codes_and_unrepresentable_scales() {
    let e4 = ks("a: f16, b: e4m3, scale: group(32, ue8m0)");
    let good = |codes: Vec<u8>, scales: Vec<f32>| {
        QuantizedWeights::from_parts(&e4, 1, 32, codes, scales, ZeroPoints::None)
    };
    let mut codes = vec![0x38u8; 32]; // 1.0
    assert!(good(codes.clone(), vec![0.25]).is_ok());
    codes[5] = 0x7F; // e4m3's NaN
    assert_eq!(arg_of(good(codes, vec![0.25])), "codes");
    assert_eq!(arg_of(good(vec![0x38; 32], vec![0.3])), "scales"); // not a power of two
    let e5 = ks("a: f16, b: e5m2, scale: channel(f16)");
    let inf = QuantizedWeights::from_parts(&e5, 1, 32, vec![0x7C; 32], vec![1.0], ZeroPoints::None);
    assert_eq!(arg_of(inf), "codes");
    let nv = ks("a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)");
    let missing =
        QuantizedWeights::from_parts(&nv, 1, 32, vec![2; 32], vec![1.0; 2], ZeroPoints::None);
    assert_eq!(arg_of(missing), "scale2");
    let w = QuantizedWeights::from_parts_with_scale2(
        &nv,
        1,
        32,
        vec![0xF; 32],
        vec![0.5; 2],
        vec![0.25],
        ZeroPoints::None,
    )
    .unwrap();
    assert_eq!(w.dequantize_value(0, 3), -6.0 * 0.5 * 0.25);
    assert_eq!(w.weight_value(0, 3), -6.0);
}

#[test]
fn quantize_float_and_block_formats() {
    let n = 128;
    let k = 256;
    let w: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i / k) as f32 / 16.0))
        .collect();
    for fields in [
        "a: f16, b: e4m3, scale: channel(f16)",
        "a: bf16, b: e2m1, scale: group(32, ue8m0)",
        "a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)",
        "a: bf16, b: e4m3, scale: block(128, 128, f32)",
        "a: f16, b: i8, scale: tensor(f32)",
        "a: f16, b: e3m2, scale: group(32, e5m2), scale2: channel(f32)",
    ] {
        let spec = ks(fields);
        let q =
            QuantizedWeights::quantize(&spec, n, k, &w).unwrap_or_else(|e| panic!("{fields}: {e}"));
        let d = q.dequantize();
        let (mut num, mut den) = (0f64, 0f64);
        for (a, b) in d.iter().zip(&w) {
            num += (a - f64::from(*b)).powi(2);
            den += f64::from(*b).powi(2);
        }
        let rel = (num / den).sqrt();
        // e2m1 keeps one mantissa bit; the others two or more.
        assert!(rel < 0.12, "{fields}: relative error {rel:.3e}");
    }
}

#[test]
fn two_level_k_quant_weights() {
    let q4k = ks("a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float");
    let (n, k) = (2, 256);
    let codes: Vec<u8> = (0..n * k).map(|i| (i % 16) as u8).collect();
    let scales: Vec<f32> = (0..8 * n).map(|i| (i % 64) as f32).collect();
    let d = vec![0.5f32, 0.25];
    let zeros = ZeroPoints::FloatTwoLevel {
        offsets: (0..8 * n).map(|i| (63 - i % 64) as f32).collect(),
        factors: vec![-0.125, -0.0625],
    };
    let w = QuantizedWeights::from_parts_with_scale2(
        &q4k,
        n,
        k,
        codes.clone(),
        scales.clone(),
        d.clone(),
        zeros,
    )
    .unwrap();
    // Row 1, k = 40: group 1 (scale index 1 * 2 + 1 = 3), super-group 0.
    let want = 0.25 * 3.0 * f64::from(codes[256 + 40]) + 60.0 * -0.0625;
    assert_eq!(w.dequantize_value(1, 40), want);
    // One-level offsets with integer scales, and offsets outside u6, are refused.
    let bad = QuantizedWeights::from_parts_with_scale2(
        &q4k,
        n,
        k,
        codes.clone(),
        scales.clone(),
        d.clone(),
        ZeroPoints::Float(vec![0.0; 16]),
    );
    assert_eq!(arg_of(bad), "zeros");
    let bad = QuantizedWeights::from_parts_with_scale2(
        &q4k,
        n,
        k,
        codes.clone(),
        scales,
        d,
        ZeroPoints::FloatTwoLevel {
            offsets: vec![64.0; 16],
            factors: vec![-1.0; 2],
        },
    );
    assert_eq!(arg_of(bad), "zeros");
    // Quantization into the two levels.
    let x: Vec<f32> = (0..n * k)
        .map(|i| ((i * 31 % 97) as f32 / 48.0 - 0.9) * 0.01)
        .collect();
    for fields in [
        "a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float",
        "a: f16, b: i6, scale: group(16, i8), scale2: group(256, f16)",
        "a: bf16, b: i3, scale: group(16, i6), scale2: group(256, f16)",
    ] {
        let spec = ks(fields);
        let q =
            QuantizedWeights::quantize(&spec, n, k, &x).unwrap_or_else(|e| panic!("{fields}: {e}"));
        let err = q
            .dequantize()
            .iter()
            .zip(&x)
            .map(|(a, b)| (a - f64::from(*b)).abs())
            .fold(0.0, f64::max);
        assert!(err < 0.004, "{fields}: max error {err:e}");
    }
}
