//! Packed kernel layout: round trips for every supported format, an independent check of the bit
//! positions from the layout formula, the scale/zero-point permutation, and pack/unpack errors.

use humming_runtime::pack::{PackedWeights, permuted_column, unit_bytes};
use humming_runtime::spec::{DType, KernelSpec, parse_kernel_str};
use humming_runtime::{Error, QuantizedWeights, ZeroPoints};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scheme {
    Symmetric,
    IntZero,
    FloatOffset,
    NoZero,
}

const SCHEMES: [Scheme; 4] = [
    Scheme::Symmetric,
    Scheme::IntZero,
    Scheme::FloatOffset,
    Scheme::NoZero,
];
const GRANS: [&str; 5] = [
    "channel",
    "group(16)",
    "group(32)",
    "group(64)",
    "group(128)",
];

fn spec_of(a: &str, bits: u32, scheme: Scheme, gran: &str) -> KernelSpec {
    let (b, zp) = match scheme {
        Scheme::Symmetric => (format!("i{bits}"), "none"),
        Scheme::IntZero => (format!("u{bits}"), "int"),
        Scheme::FloatOffset => (format!("u{bits}"), "float"),
        Scheme::NoZero => (format!("u{bits}"), "none"),
    };
    let s = format!("a: {a}, b: {b}, scale: {gran}, zero_point: {zp}");
    parse_kernel_str(&s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn ks(s: &str) -> KernelSpec {
    parse_kernel_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Rounds to a value of the 16-bit dtype (the test's own rounding, through `half`).
fn in_dtype(v: f32, dt: DType) -> f32 {
    if dt == DType::F16 {
        half::f16::from_f32(v).to_f32()
    } else {
        half::bf16::from_f32(v).to_f32()
    }
}

fn bits16(v: f32, dt: DType) -> u16 {
    if dt == DType::F16 {
        half::f16::from_f32(v).to_bits()
    } else {
        half::bf16::from_f32(v).to_bits()
    }
}

/// Random valid weights for `spec` with the given dims, from raw random material.
fn weights_from(spec: &KernelSpec, n: usize, k: usize, raw: &[u32]) -> QuantizedWeights {
    let bits = spec.b.bits();
    let mut it = raw.iter().cycle().copied();
    let codes: Vec<u8> = (0..n * k)
        .map(|_| (it.next().unwrap() & ((1 << bits) - 1)) as u8)
        .collect();
    let groups = match spec.scale.granularity {
        humming_runtime::spec::ScaleGranularity::Group { size } => k.div_ceil(size as usize),
        _ => 1,
    };
    let dt = spec.scale.dtype;
    let val = |it: &mut dyn Iterator<Item = u32>| {
        let r = it.next().unwrap();
        let mag = (r % 10_000) as f32 / 997.0 + 0.001;
        in_dtype(if r & 0x8000_0000 != 0 { -mag } else { mag }, dt)
    };
    let scales: Vec<f32> = (0..groups * n).map(|_| val(&mut it)).collect();
    let zeros = match spec.zero_point {
        humming_runtime::spec::ZeroPoint::None => ZeroPoints::None,
        humming_runtime::spec::ZeroPoint::Integer => ZeroPoints::Integer(
            (0..groups * n)
                .map(|_| (it.next().unwrap() >> 7 & ((1 << bits) - 1)) as u8)
                .collect(),
        ),
        humming_runtime::spec::ZeroPoint::FloatOffset => {
            ZeroPoints::Float((0..groups * n).map(|_| val(&mut it)).collect())
        }
    };
    QuantizedWeights::from_parts(spec, n, k, codes, scales, zeros).expect("valid parts")
}

#[test]
fn round_trip_every_format() {
    let mut combos = 0;
    for a in ["f16", "bf16"] {
        for bits in 1..=8u32 {
            for scheme in SCHEMES {
                if scheme == Scheme::Symmetric && bits == 1 {
                    continue; // i1 is not a valid weight type
                }
                for gran in GRANS {
                    let spec = spec_of(a, bits, scheme, gran);
                    combos += 1;
                    let mut runner = TestRunner::new(Config {
                        cases: 2,
                        failure_persistence: None,
                        ..Config::default()
                    });
                    let strat = (
                        1usize..=4,
                        1usize..=4,
                        proptest::collection::vec(any::<u32>(), 64..256),
                    );
                    runner
                        .run(&strat, |(nb, kb, raw)| {
                            let (n, k) = (nb * 64, kb * 64);
                            let w = weights_from(&spec, n, k, &raw);
                            let p = w.pack().expect("pack");
                            prop_assert_eq!(p.n, n);
                            prop_assert_eq!(p.k, k);
                            prop_assert_eq!(p.b.len(), n * k * bits as usize / 8);
                            prop_assert_eq!(p.b.len(), (n / 64) * (k / 64) * unit_bytes(bits));
                            let back = p.unpack(&spec).expect("unpack");
                            prop_assert_eq!(&back, &w, "{}", spec);
                            prop_assert_eq!(back.pack().expect("repack"), p);
                            Ok(())
                        })
                        .unwrap_or_else(|e| panic!("{spec}: {e}"));
                }
            }
        }
    }
    assert_eq!(combos, 2 * (8 * 4 - 1) * 5);
}

/// The layout of `dequant.cuh`, written out independently: for element (n, k) of a `bits`-bit matrix
/// with `n_total` columns, the (byte-address-free) list of (word, bit, width, part offset).
fn formula_positions(bits: u32, n_total: usize, n: usize, k: usize) -> Vec<(usize, u32, u32, u32)> {
    let widths: Vec<u32> = match bits {
        3 => vec![2, 1],
        5 => vec![4, 1],
        6 => vec![4, 2],
        7 => vec![4, 2, 1],
        b => vec![b],
    };
    // Solve n = nu*64 + nt*8 + lane/4 and k = ku*64 + kk*16 + 2*(lane%4) + 8*r + h.
    let (nu, nt, lane_hi) = (n / 64, (n % 64) / 8, n % 8);
    let (ku, kk, r, lane_lo, h) = (k / 64, (k % 64) / 16, (k % 16) / 8, (k % 8) / 2, k % 2);
    let lane = lane_hi * 4 + lane_lo;
    let q = nt * 2 + r;
    let unit_word0 = (ku * (n_total / 64) + nu) * 128 * bits as usize;
    let mut out = vec![];
    let mut off = 0;
    for s in widths {
        let per = 16 / s as usize;
        let word = unit_word0 + 128 * off as usize + (kk * 32 + lane) * s as usize + q / per;
        out.push((word, (q % per) as u32 * s + 16 * h as u32, s, off));
        off += s;
    }
    out
}

fn read_bits(b: &[u8], word: usize, bit: u32, width: u32) -> u32 {
    let w = u32::from_le_bytes([
        b[4 * word],
        b[4 * word + 1],
        b[4 * word + 2],
        b[4 * word + 3],
    ]);
    (w >> bit) & ((1 << width) - 1)
}

#[test]
fn single_code_lands_where_the_formula_says() {
    let (n_total, k_total) = (128, 128);
    let elems = [
        (0, 0),
        (0, 1),
        (0, 8),
        (8, 0),
        (1, 0),
        (0, 2),
        (0, 16),
        (63, 63),
        (64, 0),
        (5, 77),
        (127, 127),
        (70, 100),
    ];
    for bits in 1..=8u32 {
        for signed in [false, true] {
            if signed && bits == 1 {
                continue;
            }
            let spec = ks(&format!(
                "a: f16, b: {}{bits}, scale: channel",
                if signed { "i" } else { "u" }
            ));
            // Every other code is the one whose stored pattern is 0: 0 for uN, -2^(b-1) for iN.
            let base: u8 = if signed { 1 << (bits - 1) } else { 0 };
            for &(n, k) in &elems {
                for code in [
                    1u8,
                    ((1u32 << bits) - 1) as u8,
                    (0xA5u32 & ((1 << bits) - 1)) as u8,
                ] {
                    let mut codes = vec![base; n_total * k_total];
                    codes[n * k_total + k] = code;
                    let w = QuantizedWeights::from_parts(
                        &spec,
                        n_total,
                        k_total,
                        codes,
                        vec![1.0; n_total],
                        ZeroPoints::None,
                    )
                    .unwrap();
                    let p = w.pack().unwrap();
                    let stored = u32::from(code ^ base);
                    let mut total = 0;
                    for (word, bit, s, off) in formula_positions(bits, n_total, n, k) {
                        assert_eq!(
                            read_bits(&p.b, word, bit, s),
                            (stored >> off) & ((1 << s) - 1),
                            "bits {bits} ({n}, {k}) code {code}"
                        );
                        total += ((stored >> off) & ((1 << s) - 1)).count_ones();
                    }
                    let ones: u32 = p.b.iter().map(|x| x.count_ones()).sum();
                    assert_eq!(
                        ones, total,
                        "stray bits for bits {bits} ({n}, {k}) code {code}"
                    );
                }
            }
        }
    }
}

#[test]
fn hand_checked_positions() {
    // u4, one unit: (n, k) -> byte and nibble, worked out by hand from the header comment.
    let spec = ks("a: f16, b: u4, scale: channel");
    let cases: [((usize, usize), usize, u32); 7] = [
        ((0, 0), 0, 0),    // lane 0, kk 0, q 0: word 0, bits 0..4
        ((0, 1), 2, 0),    // h = 1: word 0, bits 16..20 -> byte 2
        ((0, 8), 0, 4),    // r = 1 -> q 1: word 0, bits 4..8
        ((8, 0), 1, 0),    // nt = 1 -> q 2: word 0, bits 8..12 -> byte 1
        ((1, 0), 64, 0),   // lane 4: word 16 -> byte 64
        ((0, 2), 16, 0),   // lane 1: word 4 -> byte 16
        ((0, 16), 512, 0), // kk 1: word 128 -> byte 512
    ];
    for ((n, k), byte, shift) in cases {
        let mut codes = vec![0u8; 64 * 64];
        codes[n * 64 + k] = 0xB;
        let w = QuantizedWeights::from_parts(&spec, 64, 64, codes, vec![1.0; 64], ZeroPoints::None)
            .unwrap();
        let p = w.pack().unwrap();
        assert_eq!(p.b[byte], 0xB << shift, "({n}, {k})");
        assert_eq!(p.b.iter().filter(|&&x| x != 0).count(), 1);
    }
    // u3 = 2 + 1: code 0b101 at (0, 0): part 0 (2 bits) 0b01 at word 0; part 1 (1 bit) 1 at word 256.
    let spec3 = ks("a: f16, b: u3, scale: channel");
    let mut codes = vec![0u8; 128 * 64];
    codes[0] = 0b101;
    codes[64 * 64] = 0b110; // n = 64, k = 0: second unit along N, at byte 512 * 3
    let p = QuantizedWeights::from_parts(&spec3, 128, 64, codes, vec![1.0; 128], ZeroPoints::None)
        .unwrap()
        .pack()
        .unwrap();
    assert_eq!(p.b[0], 0b01);
    assert_eq!(p.b[1024], 1);
    assert_eq!(p.b[1536], 0b10);
    assert_eq!(p.b[1536 + 1024], 1);
    assert_eq!(p.b.iter().map(|x| x.count_ones()).sum::<u32>(), 4);
    // i4: -1 (0b1111) is stored as offset binary 0b0111, and -8 (0b1000) as 0.
    let spec_i = ks("a: f16, b: i4, scale: channel");
    let mut codes = vec![0b1000u8; 64 * 64];
    codes[0] = 0b1111;
    let p = QuantizedWeights::from_parts(&spec_i, 64, 64, codes, vec![1.0; 64], ZeroPoints::None)
        .unwrap()
        .pack()
        .unwrap();
    assert_eq!(p.b[0], 0b0111);
    assert!(p.b[1..].iter().all(|&x| x == 0));
}

#[test]
fn scale_and_zero_permutation() {
    assert_eq!(permuted_column(0), 0);
    assert_eq!(permuted_column(1), 8);
    assert_eq!(permuted_column(7), 56);
    assert_eq!(permuted_column(8), 1);
    assert_eq!(permuted_column(63), 63);
    assert_eq!(permuted_column(64 + 9), 64 + 9);
    assert_eq!(permuted_column(64 + 10), 64 + 17);
    let n = 128;
    let k = 128;
    for (s, dt) in [
        (
            "a: f16, b: u4, scale: group(64), zero_point: int",
            DType::F16,
        ),
        (
            "a: bf16, b: u4, scale: group(64), zero_point: int",
            DType::BF16,
        ),
    ] {
        let spec = ks(s);
        let scales: Vec<f32> = (0..2 * n).map(|i| (i + 1) as f32).collect();
        let zeros: Vec<u8> = (0..2 * n).map(|i| (i % 16) as u8).collect();
        let w = QuantizedWeights::from_parts(
            &spec,
            n,
            k,
            vec![0; n * k],
            scales,
            ZeroPoints::Integer(zeros),
        )
        .unwrap();
        let p = w.pack().unwrap();
        for g in 0..2 {
            for blk in 0..2 {
                for j in 0..64 {
                    let src = g * n + blk * 64 + j;
                    let dst = g * n + blk * 64 + (j % 8) * 8 + j / 8;
                    assert_eq!(p.scales[dst], bits16((src + 1) as f32, dt));
                    assert_eq!(p.zeros[dst], bits16((src % 16) as f32, dt));
                }
            }
        }
    }
    // Exact value encodings: f16 3.0 = 0x4200, bf16 3.0 = 0x4040.
    let w = QuantizedWeights::from_parts(
        &ks("a: f16, b: u4, scale: channel, zero_point: int"),
        64,
        64,
        vec![0; 4096],
        vec![0.5; 64],
        ZeroPoints::Integer(vec![3; 64]),
    )
    .unwrap();
    let p = w.pack().unwrap();
    assert!(p.zeros.iter().all(|&z| z == 0x4200));
    // 0.5, channel scale in the epilogue: the f32 channel factors, plain [N]; no grid on B.
    assert!(p.scales.is_empty() && p.channel.iter().all(|&s| s == 0.5));
    let w = QuantizedWeights::from_parts(
        &ks("a: bf16, b: u4, scale: channel, zero_point: int"),
        64,
        64,
        vec![0; 4096],
        vec![0.5; 64],
        ZeroPoints::Integer(vec![3; 64]),
    )
    .unwrap();
    assert!(w.pack().unwrap().zeros.iter().all(|&z| z == 0x4040));
    // Channel scale in the epilogue: f32 channel factors, plain [N], not permuted.
    let spec_c = ks("a: f16, b: u4, scale: channel");
    let scales: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let p = QuantizedWeights::from_parts(
        &spec_c,
        n,
        k,
        vec![0; n * k],
        scales.clone(),
        ZeroPoints::None,
    )
    .unwrap()
    .pack()
    .unwrap();
    assert_eq!(p.channel, scales);
    assert!(p.scales.is_empty());
    assert!(p.zeros.is_empty());
    // Channel scale with a float offset is applied on B: permuted, one row; offsets too.
    let spec_f = ks("a: f16, b: u4, scale: channel, zero_point: float");
    let scales: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let offs: Vec<f32> = (0..n).map(|i| -(i as f32) * 0.25).collect();
    let p = QuantizedWeights::from_parts(
        &spec_f,
        n,
        k,
        vec![0; n * k],
        scales,
        ZeroPoints::Float(offs),
    )
    .unwrap()
    .pack()
    .unwrap();
    for j in 0..n {
        assert_eq!(p.scales[permuted_column(j)], bits16(j as f32, DType::F16));
        assert_eq!(
            p.zeros[permuted_column(j)],
            bits16(-(j as f32) * 0.25, DType::F16)
        );
    }
}

fn arg_of<T: std::fmt::Debug>(r: humming_runtime::Result<T>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn pack_needs_whole_units() {
    let spec = ks("a: f16, b: u4, scale: group(32)");
    let w = QuantizedWeights::from_parts(
        &spec,
        32,
        64,
        vec![0; 32 * 64],
        vec![1.0; 2 * 32],
        ZeroPoints::None,
    )
    .unwrap();
    assert_eq!(arg_of(w.pack()), "n");
    let w = QuantizedWeights::from_parts(
        &spec,
        64,
        96,
        vec![0; 64 * 96],
        vec![1.0; 3 * 64],
        ZeroPoints::None,
    )
    .unwrap();
    assert_eq!(arg_of(w.pack()), "k");
    let msg = w.pack().unwrap_err().to_string();
    assert!(msg.contains("K % 64 == 0") && msg.contains("96"), "{msg}");
}

#[test]
fn unpack_rejects_bad_buffers() {
    let spec_z = ks("a: f16, b: u4, scale: group(64), zero_point: int");
    let w = QuantizedWeights::from_parts(
        &spec_z,
        64,
        128,
        vec![1; 64 * 128],
        vec![1.0; 2 * 64],
        ZeroPoints::Integer(vec![2; 2 * 64]),
    )
    .unwrap();
    let good = w.pack().unwrap();
    assert_eq!(good.unpack(&spec_z).unwrap(), w);

    let mut p = good.clone();
    p.b.pop();
    assert_eq!(arg_of(p.unpack(&spec_z)), "b");
    let mut p = good.clone();
    p.scales.push(0);
    assert_eq!(arg_of(p.unpack(&spec_z)), "scales");
    let mut p = good.clone();
    p.scales[3] = 0x7C00; // +inf
    assert_eq!(arg_of(p.unpack(&spec_z)), "scales");
    let mut p = good.clone();
    p.scales[3] = 0x7E00; // NaN
    assert_eq!(arg_of(p.unpack(&spec_z)), "scales");
    let mut p = good.clone();
    p.zeros.clear();
    assert_eq!(arg_of(p.unpack(&spec_z)), "zeros");
    let mut p = good.clone();
    p.zeros[0] = 0x3E00; // 1.5: not an integer
    assert_eq!(arg_of(p.unpack(&spec_z)), "zeros");
    let mut p = good.clone();
    p.zeros[0] = 0x4C00; // 16: does not fit in 4 bits
    assert_eq!(arg_of(p.unpack(&spec_z)), "zeros");
    let mut p = good.clone();
    p.zeros[0] = 0xBC00; // -1
    assert_eq!(arg_of(p.unpack(&spec_z)), "zeros");
    let mut p = good.clone();
    p.n = 0;
    assert_eq!(arg_of(p.unpack(&spec_z)), "n");
    let mut p = good.clone();
    p.k = 96;
    assert_eq!(arg_of(p.unpack(&spec_z)), "k");
    // The same buffers under another spec: no zero points expected.
    assert_eq!(
        arg_of(good.unpack(&ks("a: f16, b: u4, scale: group(64)"))),
        "zeros"
    );
    // Different width: the B length no longer matches.
    assert_eq!(
        arg_of(good.unpack(&ks("a: f16, b: u8, scale: group(64), zero_point: int"))),
        "b"
    );
    // Unsupported spec.
    let mut bad = spec_z;
    bad.scale.dtype = DType::F32;
    assert_eq!(arg_of(good.unpack(&bad)), "spec");

    let spec_f = ks("a: bf16, b: u4, scale: group(64), zero_point: float");
    let w = QuantizedWeights::from_parts(
        &spec_f,
        64,
        64,
        vec![1; 64 * 64],
        vec![1.0; 64],
        ZeroPoints::Float(vec![-0.5; 64]),
    )
    .unwrap();
    let mut p = w.pack().unwrap();
    assert_eq!(p.unpack(&spec_f).unwrap(), w);
    p.zeros[5] = 0xFF80; // bf16 -inf
    assert_eq!(arg_of(p.unpack(&spec_f)), "zeros");
}

#[test]
fn unpack_of_arbitrary_bytes_round_trips() {
    // Every bit of the B buffer carries information: any byte string packs back to itself.
    let spec = ks("a: bf16, b: i7, scale: group(32)");
    let b: Vec<u8> = (0..64 * 128 * 7 / 8).map(|i| (i * 37 + 11) as u8).collect();
    let p = PackedWeights {
        n: 64,
        k: 128,
        b,
        scales: vec![0x3F80; 4 * 64],
        zeros: vec![],
        channel: vec![],
        layout: humming_spec::layout::WeightLayout::Fragments,
        block_scales: vec![],
    };
    let w = p.unpack(&spec).unwrap();
    assert_eq!(w.pack().unwrap(), p);
}

#[test]
fn device_scales_keep_extremes_in_range() {
    let f = |s: &str| parse_kernel_str(s).unwrap();
    // bf16, ue8m0 2^-127 everywhere: below bf16's normal range, so the grid holds 2^-126 and the
    // channel factor 1/2.
    let spec = f("a: bf16, b: e2m1, scale: group(32, ue8m0)");
    let tiny = 2f32.powi(-127);
    let w = QuantizedWeights::from_parts(
        &spec,
        64,
        64,
        vec![2; 64 * 64],
        vec![tiny; 2 * 64],
        ZeroPoints::None,
    )
    .unwrap();
    let p = w.pack().unwrap();
    assert!(
        p.scales.iter().all(|&s| s == 0x0080),
        "{:x?}",
        &p.scales[..4]
    );
    assert!(p.channel.iter().all(|&c| c == 0.5));
    // f16, e4m3 weights under a channel scale: the weights are read as w * 2^-8, the channel factor
    // carries 2^8.
    let spec = f("a: f16, b: e4m3, scale: channel(f16)");
    let w = QuantizedWeights::from_parts(
        &spec,
        64,
        64,
        vec![0x38; 64 * 64],
        vec![0.5; 64],
        ZeroPoints::None,
    )
    .unwrap();
    let p = w.pack().unwrap();
    assert!(p.scales.is_empty() && p.channel.iter().all(|&c| c == 128.0));
    // f16, ue8m0 2^20: the grid times the carried 2^14 of e2m1 would leave f16; it is divided by a
    // power of two that the channel factor takes.
    let spec = f("a: f16, b: e2m1, scale: group(32, ue8m0)");
    let big = 2f32.powi(20);
    let w = QuantizedWeights::from_parts(
        &spec,
        64,
        64,
        vec![7; 64 * 64],
        vec![big; 2 * 64],
        ZeroPoints::None,
    )
    .unwrap();
    let p = w.pack().unwrap();
    let g = half::f16::from_bits(p.scales[0]).to_f64();
    assert!(
        g < 65504.0 && g * 2f64.powi(-14) * f64::from(p.channel[0]) == f64::from(big),
        "{g} {}",
        p.channel[0]
    );
    // Unpacking is only defined where packing is exact.
    assert!(p.unpack(&spec).is_err());
}

/// Kernels with 8-bit activations: the packing round-trips, and the word of channel `n` of a lane in
/// k16 slab `kk` holds, byte by byte (8-bit codes) or nibble by nibble (4-bit codes, nibbles 0, 1, 4,
/// 5 of channel tile `nt` even), K = 16 kk + 4 (lane % 4) + i: the `mma.m16n8k32` operand's order.
#[test]
fn act8_packing_is_the_k32_operand_order() {
    // (Unpacking is defined where the scales pack exactly: grids of C's dtype.)
    for (fields, unpacks) in [
        (
            "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
            true,
        ),
        (
            "a: i8, b: u4, c: bf16, scale: group(64, bf16), zero_point: int",
            true,
        ),
        ("a: i8, b: i8, c: bf16, scale: channel(f32)", false),
        (
            "a: e4m3, b: e4m3, c: f16, scale: channel(f32), arch: [sm_90a]",
            false,
        ),
    ] {
        let spec = ks(fields);
        let bits = spec.b.bits();
        let (n, k) = (128, 192);
        let raw: Vec<u32> = (0..4096u32)
            .map(|i| i.wrapping_mul(2_654_435_761) & 0x3FFF_FF3F) // (codes below 64: no e4m3 NaN)
            .collect();
        let w = weights_from(&spec, n, k, &raw);
        let p = w.pack().expect("pack");
        if unpacks {
            assert_eq!(p.unpack(&spec).expect("unpack"), w, "{fields}");
        }
        // Codes c(n, k) = (n + 3k) mod 2^bits, stored offset-binary for signed weights.
        let xor = if matches!(spec.b, DType::SInt { .. }) {
            1u8 << (bits - 1)
        } else {
            0
        };
        let codes: Vec<u8> = (0..n * k)
            .map(|i| (((i / k) + 3 * (i % k)) % (1 << bits).min(127)) as u8)
            .collect();
        let w = QuantizedWeights::from_parts(
            &spec,
            n,
            k,
            codes.clone(),
            w.scales().to_vec(),
            w.zeros().clone(),
        )
        .expect("parts");
        let b = w.pack().expect("pack").b;
        let words =
            |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        for (ku, nu, kk, lane, nt) in [
            (0, 0, 0, 0, 0),
            (1, 1, 3, 13, 5),
            (2, 0, 2, 31, 7),
            (0, 1, 1, 6, 2),
        ] {
            let unit = (ku * (n / 64) + nu) * 128 * bits as usize;
            let ch = nu * 64 + nt * 8 + lane / 4;
            for i in 0..4 {
                let kx = ku * 64 + kk * 16 + 4 * (lane % 4) + i;
                let want = u32::from(codes[ch * k + kx] ^ xor);
                let got = if bits == 8 {
                    (words(unit + (kk * 32 + lane) * 8 + nt) >> (8 * i)) & 0xFF
                } else {
                    let nib = [0, 1, 4, 5][i] + 2 * (nt % 2);
                    (words(unit + (kk * 32 + lane) * 4 + nt / 2) >> (4 * nib)) & 0xF
                };
                assert_eq!(
                    got, want,
                    "{fields}: unit ({ku}, {nu}) slab {kk} lane {lane} nt {nt} byte {i}"
                );
            }
        }
    }
}

/// The persistent kernel's layout keeps the codes and the scales as given: channel scales in the
/// channel factor, block scales exact in f32 (with a channel factor of 1); other formats are refused.
#[test]
fn k_major_layout_keeps_codes_and_scales() {
    use humming_spec::layout::WeightLayout;
    let (n, k) = (192, 384);
    let weights: Vec<f32> = (0..n * k)
        .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0)
        .collect();
    for fields in [
        "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a]",
        "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]",
        "a: e5m2, b: e5m2, c: bf16, scale: tensor(f32), arch: [sm_90a]",
    ] {
        let w = QuantizedWeights::quantize(&ks(fields), n, k, &weights).unwrap();
        let p = w.pack_for(WeightLayout::KMajor).unwrap();
        assert_eq!(p.layout, WeightLayout::KMajor);
        assert_eq!(p.b, w.codes(), "{fields}");
        assert!(p.scales.is_empty() && p.zeros.is_empty());
        if fields.contains("block") {
            assert_eq!(p.block_scales, w.scales(), "{fields}");
            assert!(p.channel.iter().all(|&c| c == 1.0) && p.channel.len() == n);
        } else {
            assert!(p.block_scales.is_empty());
            let want: Vec<f32> = (0..n)
                .map(|c| w.scales()[if w.scales().len() == 1 { 0 } else { c }])
                .collect();
            assert_eq!(p.channel, want, "{fields}");
        }
        assert_eq!(arg_of(p.unpack(w.spec())), "layout");
        assert_eq!(
            w.pack_for(WeightLayout::Fragments).unwrap(),
            w.pack().unwrap()
        );
    }
    let w4 = QuantizedWeights::quantize(&ks("a: f16, b: u4, scale: group(128)"), n, k, &weights)
        .unwrap();
    k_major_4bit_as_the_kernel_reads_it(&weights[..n * 320], n, 320);
    assert!(matches!(
        w4.pack_for(WeightLayout::KMajor),
        Err(humming_runtime::Error::InvalidArgument { arg: "spec", .. })
    ));
}

/// The K-major layout of 4-bit weights read back as the persistent kernel's lanes read it
/// (`persistent.cuh`, `step_mma` and `widen`): lane quad `t` of row `r` takes the row's 16 bytes at
/// `16 t` of each 64-byte block; word `j`'s byte `i` holds code `32 j + 4 t + i` in its low nibble and
/// `32 j + 16 + 4 t + i` in its high one, signed codes under e4m3 as sign and magnitude - 1 below zero.
/// K = 320 leaves a half block, whose codes past K must read as zero.
fn k_major_4bit_as_the_kernel_reads_it(weights: &[f32], n: usize, k: usize) {
    use humming_spec::layout::WeightLayout;
    for fields in [
        "a: e4m3, b: i4, c: bf16, scale: group(128, bf16), arch: [sm_90a]",
        "a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
        "a: e4m3, b: u4, c: f16, scale: channel(f32), arch: [sm_90a]",
    ] {
        let spec = ks(fields);
        // (Unsigned codes without a zero point hold non-negative weights.)
        let abs: Vec<f32> = weights.iter().map(|v| v.abs()).collect();
        let src = if fields.contains("u4") { &abs } else { weights };
        let w = QuantizedWeights::quantize(&spec, n, k, src).unwrap();
        let p = w.pack_for(WeightLayout::KMajor).unwrap();
        let row = k.div_ceil(128) * 64; // (64 bytes per 128 codes: the kernel's stage row)
        assert_eq!(p.b.len(), n * row, "{fields}");
        let signed = fields.contains("i4");
        let float_a = fields.contains("e4m3");
        let value = |nib: u8| -> i32 {
            match (signed, float_a) {
                (false, _) => i32::from(nib),
                (true, false) => i32::from(nib) - 8,
                (true, true) if nib >= 8 => -(i32::from(nib & 7) + 1),
                (true, true) => i32::from(nib),
            }
        };
        let mut seen = 0usize;
        for r in 0..n {
            for blk in 0..row / 64 {
                for t in 0..4 {
                    for j in 0..4 {
                        for i in 0..4 {
                            let byte = p.b[r * row + blk * 64 + 16 * t + 4 * j + i];
                            for (half, nib) in [(0, byte & 15), (1, byte >> 4)] {
                                let kk = blk * 128 + 32 * j + 16 * half + 4 * t + i;
                                let want = if kk < k {
                                    // (Codes as held: two's complement for signed weights.)
                                    let c = i32::from(w.codes()[r * k + kk]);
                                    if signed && c >= 8 { c - 16 } else { c }
                                } else {
                                    0
                                };
                                assert_eq!(value(nib), want, "{fields}: row {r}, k {kk}");
                                seen += usize::from(want != 0);
                            }
                        }
                    }
                }
            }
        }
        assert!(
            seen > n * k / 2,
            "{fields}: the weights are mostly non-zero"
        );
        if fields.contains("group") {
            assert_eq!(p.block_scales, w.scales(), "{fields}");
        } else {
            assert!(p.block_scales.is_empty() && p.channel.len() == n);
        }
    }
}
