//! GPU correctness of float weights and of every scale kind and scale dtype, against the f64 CPU
//! reference (the checks of `gpu_correctness.rs`: fresh random inputs per case, C poisoned and guarded,
//! every element written and finite, two launches, relative error at most 1e-2 (f16) / 2e-2 (bf16)).
//!
//! - `gpu_every_float_format_*`: every signed `eXmY` of at most 8 bits that converts exactly to A's
//!   dtype (and the `e0mY` sign-magnitude integers), every finite code drawn (subnormals, the largest
//!   value, negative zero), group-32 scales of A's dtype, one tile.
//! - `gpu_named_formats_*`: FP8 W8A16 (channel, 128 x 128 block), MXFP4, NVFP4 (e4m3 group 16 + f32
//!   tensor scale), MXFP8, MXFP6 (e2m3, e3m2), tensor scales, per-channel secondary scales, integer
//!   codes under e4m3 / ue8m0 / f32-block scales, the GGUF K-quants' two-level scales (Q2_K .. Q6_K);
//!   default tiles, M from 1 to 128, K up to 4096 (split-K).
//! - `gpu_format_matrix_*`: e4m3, e5m2, e3m4, e3m2, e2m3, e2m1 and e0m3 weights under every scale kind
//!   and scale dtype (channel in A's dtype or e4m3, group in A's dtype, ue8m0, e5m2 or e4m3 with a
//!   tensor scale, group with a channel scale, 128 x 128 block, tensor), f16 and bf16, at the M, N and
//!   K of `gpu_correctness`'s matrix.
//! - `gpu_scale_extremes_*`: the smallest and the largest value of each scale dtype (A scaled so that the
//!   true result fits C where A's dtype allows it), and all-zero scale cells under the largest scale.
//!
//! Kernels are compiled from descriptors at run time (NVRTC). Without a GPU every test prints that it was
//! skipped and passes. `HUMMING_GPU_QUICK=1` runs a reduced set.

use half::{bf16, f16};
use humming_runtime::cuda::Gemm;
use humming_runtime::quant::{QuantizedWeights, ZeroPoints, scale_shape, scale2_len};
use humming_runtime::spec::{DType, KernelSpec, ScaleGranularity};
use humming_runtime::{Element, spec};
use std::sync::Arc;

mod gpu_common;
use gpu_common::*;

type Stream = Arc<cudarc::driver::CudaStream>;

fn parse(fields: &str) -> KernelSpec {
    spec::parse_kernel_str(fields).unwrap_or_else(|e| panic!("{fields}: {e}"))
}

/// A random finite value of `d` near `2^[lo, hi]` (`ue8m0`: a power of two in that range).
fn random_in(rng: &mut Rng, d: DType, lo: f32, hi: f32) -> f32 {
    let u = lo + (hi - lo) * (rng.uniform() * 0.5 + 0.5);
    let v = f64::from(2f32.powf(u));
    let r = if d == DType::UE8M0 {
        2f64.powi(v.log2().round() as i32)
    } else if d == DType::F32 {
        v
    } else {
        d.round(v).unwrap_or(1.0)
    };
    r as f32
}

/// Random weights for `sp`: every finite code equally likely, scales near 1 in the scale dtype (and
/// secondary scales near 1), or all scales `scale` and all secondary scales 1 when given.
fn random_format_weights(
    rng: &mut Rng,
    sp: &KernelSpec,
    n: usize,
    k: usize,
    scale: Option<f32>,
) -> QuantizedWeights {
    let b = sp.b;
    let finite: Vec<u8> = (0..1u32 << b.bits())
        .filter(|&c| b.finite_value(c).is_some())
        .map(|c| c as u8)
        .collect();
    let codes: Vec<u8> = (0..n * k)
        .map(|_| finite[rng.below(finite.len())])
        .collect();
    let (rows, cols) = scale_shape(sp, n, k);
    // Scales near 1 / (largest weight), so that C stays in f16's range whatever the format's range.
    let top = -(b.max_finite().log2() as f32);
    let scales: Vec<f32> = (0..rows * cols)
        .map(|_| scale.unwrap_or_else(|| random_in(rng, sp.scale.dtype, top - 2.0, top + 1.0)))
        .collect();
    if sp.scale.dtype.is_integer() {
        return two_level_weights(rng, sp, n, k, codes);
    }
    let scale2: Vec<f32> = (0..scale2_len(sp, n, k))
        .map(|_| {
            if scale.is_some() {
                1.0
            } else {
                random_in(rng, DType::F32, -1.0, 1.0)
            }
        })
        .collect();
    QuantizedWeights::from_parts_with_scale2(sp, n, k, codes, scales, scale2, ZeroPoints::None)
        .unwrap_or_else(|e| panic!("{sp}: weights: {e}"))
}

/// K-quant style weights: random integer sub-group scales (and offsets) of the scale dtype under
/// random f16 super-group factors.
fn two_level_weights(
    rng: &mut Rng,
    sp: &KernelSpec,
    n: usize,
    k: usize,
    codes: Vec<u8>,
) -> QuantizedWeights {
    let sd = sp.scale.dtype;
    let (lo, hi) = (sd.min_finite() as i64, sd.max_finite() as i64);
    let int = |rng: &mut Rng, lo: i64| (lo + rng.below((hi - lo + 1) as usize) as i64) as f32;
    let (rows, cols) = scale_shape(sp, n, k);
    let scales: Vec<f32> = (0..rows * cols).map(|_| int(rng, lo)).collect();
    let s2d = sp.scale2.map_or(DType::F32, |s| s.dtype);
    let top = -((sp.b.max_finite() * sd.max_finite()).log2() as f32);
    let n2 = scale2_len(sp, n, k);
    let scale2: Vec<f32> = (0..n2)
        .map(|_| random_in(rng, s2d, top - 1.0, top + 1.0))
        .collect();
    let zeros = if sp.zero_point == spec::ZeroPoint::FloatOffset {
        ZeroPoints::FloatTwoLevel {
            offsets: (0..rows * cols).map(|_| int(rng, 0)).collect(),
            factors: (0..n2)
                .map(|_| -random_in(rng, s2d, top - 1.0, top + 1.0))
                .collect(),
        }
    } else {
        ZeroPoints::None
    };
    QuantizedWeights::from_parts_with_scale2(sp, n, k, codes, scales, scale2, zeros)
        .unwrap_or_else(|e| panic!("{sp}: weights: {e}"))
}

/// The cases of one descriptor: every M for every (N, K); `scale`: one value for every scale (the
/// extremes test), with A scaled by `2^a_exp`.
#[derive(Clone, Copy)]
struct Cases<'a> {
    ms: &'a [usize],
    ns: &'a [usize],
    ks: &'a [usize],
    scale: Option<f32>,
    a_exp: i32,
}

/// The small set: M = 1 and 33, N = 192, K = 576.
const SMALL: Cases<'static> = Cases {
    ms: &[1, 33],
    ns: &[192],
    ks: &[576],
    scale: None,
    a_exp: 0,
};

/// [`check`] with A and C of bf16 (`bf`) or f16.
fn check_in(bf: bool, stream: &Stream, fields: &str, cases: Cases, rng: &mut Rng) -> f64 {
    if bf {
        check::<bf16>(stream, fields, cases, rng)
    } else {
        check::<f16>(stream, fields, cases, rng)
    }
}

/// Every case of one descriptor; the kernel is compiled once. Returns the worst relative error.
fn check<T: Element>(stream: &Stream, fields: &str, c: Cases, rng: &mut Rng) -> f64 {
    let sp = parse(fields);
    let tol = if T::DTYPE == DType::F16 { 1e-2 } else { 2e-2 };
    let gemm =
        Gemm::<T, T>::compile(stream, fields, sp).unwrap_or_else(|e| panic!("{fields}: {e}"));
    let mut worst = 0f64;
    for &n in c.ns {
        for &k in c.ks {
            let w = random_format_weights(rng, &sp, n, k, c.scale);
            let w_ref = w.dequantize();
            let dw = gemm
                .upload(&w)
                .unwrap_or_else(|e| panic!("{fields}: upload: {e}"));
            for &m in c.ms {
                let label = format!("{fields} M={m} N={n} K={k}");
                let opts = CaseOpts {
                    a_exp: c.a_exp,
                    ..CaseOpts::default()
                };
                let (e, _) = run_case(stream, &gemm, &w, &w_ref, &dw, m, rng, &label, opts);
                assert!(e <= tol, "{label}: relative error {e:.3e} > {tol:.0e}");
                worst = worst.max(e);
            }
        }
    }
    worst
}

fn dtype_name(bf: bool) -> &'static str {
    if bf { "bf16" } else { "f16" }
}

/// Every `eXmY` (and `e0mY`) weight of at most 8 bits that converts exactly to A's dtype.
fn every_float_format(a: DType) -> Vec<DType> {
    let mut out = Vec::new();
    for bits in 2u8..=8 {
        for exp in 0..bits {
            let man = bits - 1 - exp;
            let d = DType::Float { exp, man };
            let fits = if exp == 0 {
                u32::from(man) <= a.mantissa_bits() + 1
            } else {
                u32::from(exp) <= a.exponent_bits() && u32::from(man) <= a.mantissa_bits()
            };
            if fits {
                out.push(d);
            }
        }
    }
    out
}

fn every_float_format_for(bf: bool) {
    let a = dtype_name(bf);
    let name = format!("gpu_every_float_format_{a}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let formats = every_float_format(if bf { DType::BF16 } else { DType::F16 });
    let tile = "tiles: [tile(block = (16, 128, 128), warp = (16, 64, 64), stages = 4), tile(block = (64, 128, 64), warp = (32, 64, 64), stages = 3)]";
    let mut worst = 0f64;
    for b in &formats {
        let fields = format!("a: {a}, b: {b}, scale: group(32, {a}), {tile}");
        let e = check_in(bf, &stream, &fields, SMALL, &mut rng);
        worst = worst.max(e);
    }
    println!(
        "{name}: {} formats passed, worst relative error {worst:.3e}",
        formats.len()
    );
}

#[test]
fn gpu_every_float_format_f16() {
    every_float_format_for(false);
}

#[test]
fn gpu_every_float_format_bf16() {
    every_float_format_for(true);
}

/// The named formats users bring, and the other scale kinds, as `gemm!` fields (`{a}`: A's dtype).
const NAMED: &[(&str, &str)] = &[
    ("FP8 W8A16, channel scale", "b: e4m3, scale: channel({a})"),
    (
        "FP8 W8A16, 128 x 128 block scale",
        "b: e4m3, scale: block(128, 128, f32)",
    ),
    ("MXFP4", "b: e2m1, scale: group(32, ue8m0)"),
    (
        "NVFP4",
        "b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)",
    ),
    ("MXFP8", "b: e4m3, scale: group(32, ue8m0)"),
    ("MXFP6 e2m3", "b: e2m3, scale: group(32, ue8m0)"),
    ("MXFP6 e3m2", "b: e3m2, scale: group(32, ue8m0)"),
    ("e5m2, channel scale", "b: e5m2, scale: channel(e5m2)"),
    ("e4m3, tensor scale", "b: e4m3, scale: tensor(f32)"),
    (
        "e2m1, e4m3 group 32 + channel scale2",
        "b: e2m1, scale: group(32, e4m3), scale2: channel(f32)",
    ),
    (
        "e4m3, group 128 + channel scale2",
        "b: e4m3, scale: group(128, {a}), scale2: channel(f32)",
    ),
    (
        "e4m3, channel + tensor scale2",
        "b: e4m3, scale: channel(e4m3), scale2: tensor(f32)",
    ),
    ("u4, e4m3 group 32", "b: u4, scale: group(32, e4m3)"),
    ("i4, ue8m0 group 32", "b: i4, scale: group(32, ue8m0)"),
    (
        "i8, 128 x 128 block scale",
        "b: i8, scale: block(128, 128, f32)",
    ),
    ("i4, tensor scale", "b: i4, scale: tensor(f32)"),
    ("e0m3, group 64", "b: e0m3, scale: group(64, {a})"),
    (
        "GGUF Q2_K",
        "b: u2, scale: group(16, u4), scale2: group(256, f16), zero_point: float",
    ),
    (
        "GGUF Q3_K",
        "b: i3, scale: group(16, i6), scale2: group(256, f16)",
    ),
    (
        "GGUF Q4_K",
        "b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float",
    ),
    (
        "GGUF Q5_K",
        "b: u5, scale: group(32, u6), scale2: group(256, f16), zero_point: float",
    ),
    (
        "GGUF Q6_K",
        "b: i6, scale: group(16, i8), scale2: group(256, f16)",
    ),
    (
        "GGUF IQ4_XS as i8 codebook levels",
        "b: i8, scale: group(32, i6), scale2: group(256, f16)",
    ),
];

fn named_for(bf: bool) {
    let a = dtype_name(bf);
    let name = format!("gpu_named_formats_{a}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ 0x5eed);
    let (ms, ns, ks): (&[usize], &[usize], &[usize]) = if quick() {
        (&[1, 33], &[192], &[576, 4096])
    } else {
        (&[1, 7, 16, 33, 128], &[192, 576], &[576, 4096])
    };
    for (what, fields) in NAMED {
        let fields = format!("a: {a}, {}", fields.replace("{a}", a));
        let cases = Cases {
            ms,
            ns,
            ks,
            ..SMALL
        };
        let e = check_in(bf, &stream, &fields, cases, &mut rng);
        println!("{name}: {what} ({fields}): worst relative error {e:.3e}");
    }
}

#[test]
fn gpu_named_formats_f16() {
    named_for(false);
}

#[test]
fn gpu_named_formats_bf16() {
    named_for(true);
}

/// The smallest and largest scale of each scale dtype (as the only scale value), with A scaled so that
/// the products stay near 1 where A's dtype can hold that scale; then the largest scale with whole
/// scale cells of zero codes.
fn extremes_for(bf: bool) {
    let a = dtype_name(bf);
    let name = format!("gpu_scale_extremes_{a}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let ad = if bf { DType::BF16 } else { DType::F16 };
    let emin_a = 1 - ad.exponent_bias();
    let mut rng = Rng::new(seed() ^ 0xe7);
    let cases: &[(&str, DType)] = &[
        ("b: e4m3, scale: group(32, e4m3)", DType::E4M3),
        ("b: e2m1, scale: group(32, e5m2)", DType::E5M2),
        ("b: e2m1, scale: group(32, ue8m0)", DType::UE8M0),
        ("b: e4m3, scale: block(128, 128, f32)", DType::F32),
        ("b: e4m3, scale: tensor(f32)", DType::F32),
        ("b: i4, scale: group(32, ue8m0)", DType::UE8M0),
        ("b: e4m3, scale: channel({a})", ad),
    ];
    let mut done = 0;
    for &(fields, sd) in cases {
        let fields = format!("a: {a}, {}", fields.replace("{a}", a));
        let smallest = if sd == DType::F32 {
            f32::MIN_POSITIVE
        } else {
            (0..1u32 << sd.bits())
                .filter_map(|c| sd.finite_value(c))
                .filter(|&v| v > 0.0)
                .fold(f64::INFINITY, f64::min) as f32
        };
        let largest = if sd == DType::F32 {
            2f32.powi(100)
        } else {
            sd.max_finite() as f32
        };
        for s in [smallest, largest] {
            // |w * s * a| near 1: A = 2^-log2(s) when A's dtype holds it as a normal value, but A
            // within 2^+-64 (the f32 sums of a * w that a group scale on the accumulators multiplies
            // must stay finite; the results are then near 2^+-62, still normal in bf16).
            let a_exp = -(f64::from(s).log2().round() as i32);
            if a_exp < emin_a || a_exp > ad.exponent_bias() {
                println!(
                    "{name}: {fields} with scale {s:e}: skipped (no {a} activation brings the result into {a}'s range)"
                );
                continue;
            }
            let a_exp = a_exp.clamp(-64, 64);
            let cases = Cases {
                scale: Some(s),
                a_exp,
                ..SMALL
            };
            let e = check_in(bf, &stream, &fields, cases, &mut rng);
            println!(
                "{name}: {fields} with every scale {s:e} (A ~ 2^{a_exp}): relative error {e:.3e}"
            );
            done += 1;
        }
        // Scale cells of zero codes under the largest scale, next to ordinary cells: they give zeros
        // (never NaN or inf) and do not disturb the others.
        let sp = parse(&fields);
        if matches!(
            sp.scale.granularity,
            ScaleGranularity::Group { .. } | ScaleGranularity::Block { .. }
        ) {
            if bf {
                zero_cells::<bf16>(&stream, &fields, sp, largest, &mut rng);
            } else {
                zero_cells::<f16>(&stream, &fields, sp, largest, &mut rng);
            }
            done += 1;
        }
    }
    println!("{name}: {done} extreme-scale cases passed");
}

#[test]
fn gpu_scale_extremes_f16() {
    extremes_for(false);
}

#[test]
fn gpu_scale_extremes_bf16() {
    extremes_for(true);
}

/// The first 128 columns of K hold only zero codes, under the largest scale; the rest ordinary weights.
fn zero_cells<T: Element>(
    stream: &Stream,
    fields: &str,
    sp: KernelSpec,
    largest: f32,
    rng: &mut Rng,
) {
    let (n, k) = (192, 576);
    let gemm =
        Gemm::<T, T>::compile(stream, fields, sp).unwrap_or_else(|e| panic!("{fields}: {e}"));
    let w = random_format_weights(rng, &sp, n, k, None);
    let zero = (0..1u32 << sp.b.bits())
        .find(|&c| sp.b.finite_value(c) == Some(0.0))
        .expect("a zero code") as u8;
    let mut codes = w.codes().to_vec();
    for row in 0..n {
        codes[row * k..row * k + 128].fill(zero);
    }
    let (rows, cols) = scale_shape(&sp, n, k);
    let extent = match sp.scale.granularity {
        ScaleGranularity::Group { size } => size as usize,
        ScaleGranularity::Block { k: bk, .. } => bk as usize,
        _ => k,
    };
    let mut scales = w.scales().to_vec();
    for r in 0..rows {
        if r * extent < 128 {
            scales[r * cols..(r + 1) * cols].fill(largest);
        }
    }
    let w = QuantizedWeights::from_parts_with_scale2(
        &sp,
        n,
        k,
        codes,
        scales,
        w.scale2().to_vec(),
        ZeroPoints::None,
    )
    .unwrap_or_else(|e| panic!("{fields}: weights: {e}"));
    let dw = gemm
        .upload(&w)
        .unwrap_or_else(|e| panic!("{fields}: upload: {e}"));
    let tol = if T::DTYPE == DType::F16 { 1e-2 } else { 2e-2 };
    let label = format!("{fields} (zero cells under scale {largest:e})");
    let (e, _) = run_case(
        stream,
        &gemm,
        &w,
        &w.dequantize(),
        &dw,
        33,
        rng,
        &label,
        CaseOpts::default(),
    );
    assert!(e <= tol, "{label}: relative error {e:.3e} > {tol:.0e}");
    println!("{label}: relative error {e:.3e}");
}

/// Every scale kind and scale dtype that a float weight takes (`{a}`: A's dtype).
const SCALE_KINDS: &[&str] = &[
    "scale: channel({a})",
    "scale: channel(e4m3)",
    "scale: group(32, {a})",
    "scale: group(128, {a}), scale2: channel(f32)",
    "scale: group(32, ue8m0)",
    "scale: group(64, e5m2)",
    "scale: group(16, e4m3), scale2: tensor(f32)",
    "scale: block(128, 128, f32)",
    "scale: tensor(f32)",
];

/// One weight format under every scale kind, f16 and bf16, at the M, N and K of `gpu_correctness`'s
/// matrix (quick: a reduced set).
fn format_matrix(b: &str) {
    let name = format!("gpu_format_matrix_{b}");
    let Some(stream) = gpu_or_skip(&name) else {
        return;
    };
    let mut rng = Rng::new(seed() ^ b.len() as u64);
    let cases = if quick() {
        Cases {
            ms: &[1, 33],
            ns: &[192],
            ks: &[576, 4096],
            ..SMALL
        }
    } else {
        Cases {
            ms: &[1, 7, 16, 33, 128, 1000],
            ns: &[64, 192, 576, 4096],
            ks: &[576, 1536, 4096],
            ..SMALL
        }
    };
    let mut worst = 0f64;
    for bf in [false, true] {
        let a = dtype_name(bf);
        for kind in SCALE_KINDS {
            let fields = format!("a: {a}, b: {b}, {}", kind.replace("{a}", a));
            worst = worst.max(check_in(bf, &stream, &fields, cases, &mut rng));
        }
    }
    println!(
        "{name}: {} scale kinds x f16 / bf16 passed, worst relative error {worst:.3e}",
        SCALE_KINDS.len()
    );
}

macro_rules! format_matrix_tests {
    ($($name:ident: $b:expr;)*) => {
        $(
            #[test]
            fn $name() {
                format_matrix($b);
            }
        )*
    };
}
format_matrix_tests! {
    gpu_format_matrix_e4m3: "e4m3";
    gpu_format_matrix_e5m2: "e5m2";
    gpu_format_matrix_e3m4: "e3m4";
    gpu_format_matrix_e3m2: "e3m2";
    gpu_format_matrix_e2m3: "e2m3";
    gpu_format_matrix_e2m1: "e2m1";
    gpu_format_matrix_e0m3: "e0m3";
}

/// Every descriptor the GPU tests compile is valid (checked without a GPU, so that a typo fails here).
#[test]
fn every_declaration_of_the_gpu_tests_is_valid() {
    let mut n = 0;
    for a in ["f16", "bf16"] {
        for b in ["e4m3", "e5m2", "e3m4", "e3m2", "e2m3", "e2m1", "e0m3"] {
            for kind in SCALE_KINDS {
                parse(&format!("a: {a}, b: {b}, {}", kind.replace("{a}", a)));
                n += 1;
            }
        }
        for (_, fields) in NAMED {
            parse(&format!("a: {a}, {}", fields.replace("{a}", a)));
            n += 1;
        }
    }
    assert_eq!(n, 2 * (7 * SCALE_KINDS.len() + NAMED.len()));
}
