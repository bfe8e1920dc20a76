//! The f64 CPU reference GEMM, its epilogues and helpers, on hand-computed cases.

use humming_runtime::reference::{
    apply_epilogue, erf, reference_gemm, reference_gemm_elements, relative_error, round_to,
    round_value, to_f64,
};
use humming_runtime::spec::{Epilogue, KernelSpec, parse_kernel_str};
use humming_runtime::{Error, QuantizedWeights, ZeroPoints};

fn ks(s: &str) -> KernelSpec {
    parse_kernel_str(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn arg_of<T: std::fmt::Debug>(r: humming_runtime::Result<T>) -> &'static str {
    match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// i4, channel scales, N = 2, K = 3:
///   W = [[1, -2, 3] * 0.5, [0, 4, -1] * 2] = [[0.5, -1, 1.5], [0, 8, -2]]
///   A = [[1, 2, 3], [-1, 0.5, 4]]
///   A·Wᵀ = [[0.5 - 2 + 4.5, 0 + 16 - 6], [-0.5 - 0.5 + 6, 0 + 4 - 8]] = [[3, 10], [5, -4]]
fn small(fields: &str) -> QuantizedWeights {
    let spec = ks(&format!("a: f16, b: i4, scale: channel{fields}"));
    let codes = [1i8, -2, 3, 0, 4, -1]
        .iter()
        .map(|&c| (c as u8) & 0xF)
        .collect();
    QuantizedWeights::from_parts(&spec, 2, 3, codes, vec![0.5, 2.0], ZeroPoints::None).unwrap()
}

const A: [f64; 6] = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0];

#[test]
fn hand_computed_gemm() {
    let w = small("");
    assert_eq!(w.dequantize(), vec![0.5, -1.0, 1.5, 0.0, 8.0, -2.0]);
    assert_eq!(
        reference_gemm(&w, &A, 2, None).unwrap(),
        vec![3.0, 10.0, 5.0, -4.0]
    );
    assert_eq!(
        reference_gemm(&w, &A[..3], 1, None).unwrap(),
        vec![3.0, 10.0]
    );
    assert_eq!(reference_gemm(&w, &[], 0, None).unwrap(), Vec::<f64>::new());

    let w = small(", bias: true");
    assert_eq!(
        reference_gemm(&w, &A, 2, Some(&[1.0, -1.0])).unwrap(),
        vec![4.0, 9.0, 6.0, -5.0]
    );
    let w = small(", bias: true, epilogue: relu");
    assert_eq!(
        reference_gemm(&w, &A, 2, Some(&[1.0, -1.0])).unwrap(),
        vec![4.0, 9.0, 6.0, 0.0]
    );
    let w = small(", epilogue: silu");
    let c = reference_gemm(&w, &A, 2, None).unwrap();
    let silu = |x: f64| x / (1.0 + (-x).exp());
    assert_eq!(c, vec![silu(3.0), silu(10.0), silu(5.0), silu(-4.0)]);
    assert!((c[0] - 2.857722380467299_8).abs() < 1e-15);
    let w = small(", epilogue: gelu");
    let c = reference_gemm(&w, &A, 2, None).unwrap();
    assert!((c[0] - 2.99595030590511).abs() < 1e-14, "{}", c[0]);
    let w = small(", epilogue: gelu_tanh");
    let c = reference_gemm(&w, &A, 2, None).unwrap();
    assert!((c[0] - 2.996362607918227).abs() < 1e-14, "{}", c[0]);
}

#[test]
fn hand_computed_zero_points() {
    // u2 with integer zero points, group(16), N = 1, K = 32:
    //   group 0: codes 3, z = 1, s = 0.25 -> 0.5;  group 1: codes 0, z = 2, s = 4 -> -8.
    //   A = 1 everywhere -> 16 * 0.5 + 16 * -8 = -120; A = k -> 0.5 * (0+..+15) - 8 * (16+..+31) = 60 - 3008.
    let spec = ks("a: f16, b: u2, scale: group(16), zero_point: int");
    let codes = [vec![3u8; 16], vec![0u8; 16]].concat();
    let w = QuantizedWeights::from_parts(
        &spec,
        1,
        32,
        codes,
        vec![0.25, 4.0],
        ZeroPoints::Integer(vec![1, 2]),
    )
    .unwrap();
    assert_eq!(
        reference_gemm(&w, &[1.0; 32], 1, None).unwrap(),
        vec![-120.0]
    );
    let a: Vec<f64> = (0..32).map(f64::from).collect();
    assert_eq!(
        reference_gemm(&w, &a, 1, None).unwrap(),
        vec![60.0 - 3008.0]
    );

    // u1 with a float offset, channel: codes [1, 0, 1], s = 2, m = -1 -> W = [1, -1, 1]; A = [3, 4, 5] -> 4.
    let spec = ks("a: bf16, b: u1, scale: channel, zero_point: float");
    let w = QuantizedWeights::from_parts(
        &spec,
        1,
        3,
        vec![1, 0, 1],
        vec![2.0],
        ZeroPoints::Float(vec![-1.0]),
    )
    .unwrap();
    assert_eq!(
        reference_gemm(&w, &[3.0, 4.0, 5.0], 1, None).unwrap(),
        vec![4.0]
    );
}

#[test]
fn erf_and_epilogues() {
    let cases = [
        (0.1, 0.1124629160182849),
        (0.5, 0.5204998778130465),
        (1.0, 0.8427007929497149),
        (-1.0, -0.8427007929497149),
        (2.0, 0.9953222650189527),
        (3.0, 0.9999779095030014),
        (4.5, 0.9999999998033839),
        (7.0, 1.0),
        (1.4999, 0.9660932516622953),
        (1.5, 0.9661051464753108),
        (1.7, 0.9837904585907745),
        (2.5, 0.999593047982555),
        (3.7, 0.9999998328489421),
        (5.5, 0.9999999999999927),
        (-0.3, -0.3286267594591274),
        (1e-8, 1.1283791670955126e-8),
        (-30.0, -1.0),
    ];
    for (x, want) in cases {
        assert!(
            (erf(x) - want).abs() <= 1e-15 * want.abs().max(1e-300),
            "erf({x}) = {} != {want}",
            erf(x)
        );
    }
    assert_eq!(erf(0.0), 0.0);
    assert!(erf(f64::NAN).is_nan());
    // Odd, monotone, and continuous at the 1.5 switch.
    assert_eq!(erf(-1.7), -erf(1.7));
    assert!((erf(1.5 - 1e-12) - erf(1.5)).abs() < 1e-11);
    let mut last = -1.0;
    for i in -700..=700 {
        let v = erf(f64::from(i) * 0.01);
        assert!(v >= last, "erf not monotone at {i}");
        last = v;
    }
    let close = |got: f64, want: f64| {
        assert!(
            (got - want).abs() <= 1e-15 * want.abs().max(1.0),
            "{got} != {want}"
        )
    };
    close(apply_epilogue(Epilogue::Gelu, 1.0), 0.8413447460685429);
    close(apply_epilogue(Epilogue::Gelu, -2.0), -0.04550026389635842);
    close(apply_epilogue(Epilogue::Gelu, 0.5), 0.34573123063700656);
    close(apply_epilogue(Epilogue::Silu, 1.0), 0.7310585786300049);
    close(apply_epilogue(Epilogue::Silu, -2.0), -0.2384058440442351);
    close(apply_epilogue(Epilogue::GeluTanh, 1.0), 0.8411919906082768);
    close(
        apply_epilogue(Epilogue::GeluTanh, -2.0),
        -0.04540230591222494,
    );
    assert_eq!(apply_epilogue(Epilogue::Relu, -3.0), 0.0);
    assert_eq!(apply_epilogue(Epilogue::Relu, 3.0), 3.0);
    assert_eq!(apply_epilogue(Epilogue::None, -3.0), -3.0);
    // No NaN from large magnitudes.
    for e in [Epilogue::Silu, Epilogue::Gelu, Epilogue::GeluTanh] {
        assert_eq!(apply_epilogue(e, -1e6), 0.0);
        assert_eq!(apply_epilogue(e, 1e6), 1e6);
    }
}

#[test]
fn reference_errors() {
    let w = small("");
    assert_eq!(arg_of(reference_gemm(&w, &A[..5], 2, None)), "a");
    assert_eq!(arg_of(reference_gemm(&w, &A, 3, None)), "a");
    assert_eq!(arg_of(reference_gemm(&w, &A, usize::MAX, None)), "m");
    assert_eq!(arg_of(reference_gemm(&w, &A, 2, Some(&[0.0, 0.0]))), "bias");
    let wb = small(", bias: true");
    assert_eq!(arg_of(reference_gemm(&wb, &A, 2, None)), "bias");
    assert_eq!(arg_of(reference_gemm(&wb, &A, 2, Some(&[0.0]))), "bias");
    let mut spec = *w.spec();
    spec.layout = humming_runtime::spec::Layout::MoeIndexed;
    // The dense reference refuses an expert's weights: humming_runtime::moe::reference_moe takes them.
    let moe = QuantizedWeights::from_parts(
        &spec,
        2,
        3,
        w.codes().to_vec(),
        w.scales().to_vec(),
        ZeroPoints::None,
    )
    .expect("an expert's weights");
    assert_eq!(arg_of(reference_gemm(&moe, &A, 2, None)), "spec");
}

#[test]
fn element_helpers() {
    let w = small(", bias: true");
    let a: Vec<half::f16> = A.iter().map(|&x| half::f16::from_f64(x)).collect();
    assert_eq!(to_f64(&a), A.to_vec());
    let bias = [half::f16::from_f32(0.25), half::f16::from_f32(-1.0)];
    let c: Vec<half::f16> = reference_gemm_elements(&w, &a, 2, Some(&bias)).unwrap();
    assert_eq!(to_f64(&c), vec![3.25, 9.0, 5.25, -5.0]);
    // Type checks against the spec.
    let ab: Vec<half::bf16> = A.iter().map(|&x| half::bf16::from_f64(x)).collect();
    assert_eq!(
        arg_of(reference_gemm_elements::<half::bf16, half::f16>(
            &w,
            &ab,
            2,
            Some(&bias)
        )),
        "a"
    );
    let bias_b = [half::bf16::ZERO; 2];
    assert_eq!(
        arg_of(reference_gemm_elements::<half::f16, half::bf16>(
            &w,
            &a,
            2,
            Some(&bias_b)
        )),
        "c"
    );

    // round_value rounds f64 directly (1 + 2^-11 + 2^-40 is above the f16 tie: rounds up).
    let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    assert_eq!(round_value::<half::f16>(v).to_f64(), 1.0 + 2f64.powi(-10));
    assert_eq!(round_value::<half::f16>(1.0 + 2f64.powi(-11)).to_f64(), 1.0);
    assert_eq!(
        round_value::<half::bf16>(1.0 + 2f64.powi(-8) + 2f64.powi(-30)).to_f64(),
        1.0 + 2f64.powi(-7)
    );
    assert!(round_value::<half::f16>(1e9).to_f64().is_infinite());
    assert!(round_value::<half::bf16>(f64::NAN).is_nan());
    assert_eq!(
        round_to::<half::bf16>(&[1.5, -2.0]),
        vec![half::bf16::from_f32(1.5), half::bf16::from_f32(-2.0)]
    );
}

#[test]
fn relative_error_values() {
    assert_eq!(relative_error(&[3.0, 4.0], &[3.0, 4.0]), 0.0);
    assert_eq!(relative_error(&[3.0, 5.0], &[3.0, 4.0]), 0.2);
    assert_eq!(relative_error(&[0.0, 0.0], &[3.0, 4.0]), 1.0);
    assert_eq!(relative_error(&[0.0], &[0.0]), 0.0);
    assert_eq!(relative_error(&[1.0], &[0.0]), f64::INFINITY);
    assert_eq!(relative_error(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    assert!(relative_error(&[f64::NAN], &[1.0]).is_nan());
}

#[test]
fn large_problem_uses_threads_and_matches() {
    // Big enough for the threaded path (M * N * K >= 2^22); checked against a direct sum.
    let spec = ks("a: f16, b: u4, scale: group(64), zero_point: int, bias: true, epilogue: gelu");
    let (m, n, k) = (33, 128, 1024);
    let wf: Vec<f32> = (0..n * k)
        .map(|i| (i * 2654435761usize % 1000) as f32 / 500.0 - 1.0)
        .collect();
    let w = QuantizedWeights::quantize(&spec, n, k, &wf).unwrap();
    let a: Vec<f64> = (0..m * k)
        .map(|i| (i * 40503 % 777) as f64 / 388.5 - 1.0)
        .collect();
    let bias: Vec<f64> = (0..n).map(|j| j as f64 * 0.01).collect();
    let c = reference_gemm(&w, &a, m, Some(&bias)).unwrap();
    let d = w.dequantize();
    for (i, j) in [(0, 0), (5, 77), (32, 127), (17, 64)] {
        let dot: f64 = (0..k).map(|x| a[i * k + x] * d[j * k + x]).sum::<f64>() + bias[j];
        let want = 0.5 * dot * (1.0 + erf(dot / 2f64.sqrt()));
        assert!(
            (c[i * n + j] - want).abs() <= 1e-12 * want.abs().max(1.0),
            "({i}, {j})"
        );
    }
    assert!(relative_error(&c, &c) == 0.0);
}
