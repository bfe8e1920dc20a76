//! The activation quantizer (`humming_runtime::act_quant`): the scale formula, rounding,
//! saturation, zero rows and the argument errors, on fresh random inputs.

use humming_runtime::act_quant::{ActScale, quantize_activations};
use humming_runtime::spec::DType;

mod gpu_common;
use gpu_common::{Rng, seed};

const E4M3: DType = DType::E4M3;
const E5M2: DType = DType::E5M2;
const I8: DType = DType::SInt { bits: 8 };
const I4: DType = DType::SInt { bits: 4 };

/// `[m, k]` values of mixed magnitude per row, with an outlier in some rows.
fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut a = Vec::with_capacity(m * k);
    for r in 0..m {
        let mag = 10f32.powi(rng.below(7) as i32 - 3);
        for _ in 0..k {
            a.push(mag * rng.uniform());
        }
        if r % 3 == 1 {
            let c = rng.below(k);
            a[r * k + c] = 50.0 * mag * if rng.below(2) == 0 { 1.0 } else { -1.0 };
        }
    }
    a
}

/// The largest error of one code: half its spacing at `|v|` (relative 2^-(man+1) for floats, plus
/// half the smallest subnormal; 0.5 for integers), in units of the scale.
fn half_step(dtype: DType, code_value: f64) -> f64 {
    match dtype {
        DType::Float { exp, man } => {
            let bias = (1i32 << (exp - 1)) - 1;
            let sub = 2f64.powi(1 - bias - man as i32);
            code_value.abs() * 2f64.powi(-(man as i32) - 1) + sub / 2.0
        }
        _ => 0.5,
    }
}

#[test]
fn each_code_is_the_nearest_and_the_cell_max_is_the_largest_code() {
    let mut rng = Rng::new(seed());
    for dtype in [E4M3, E5M2, I8, I4] {
        for g in [
            ActScale::PerToken,
            ActScale::PerGroup(128),
            ActScale::PerGroup(64),
        ] {
            let (m, k) = (1 + rng.below(9), 64 * (1 + rng.below(5)) + 32);
            let a = activations(&mut rng, m, k);
            let q = quantize_activations(&a, m, k, dtype, g).expect("quantize");
            let deq = q.dequantize();
            let qmax = dtype.max_finite();
            for r in 0..m {
                for c in 0..k {
                    let (x, s) = (f64::from(a[r * k + c]), f64::from(q.scale(r, c)));
                    assert!(s > 0.0, "{dtype} {g:?}: scale of ({r}, {c}) is {s}");
                    let code = deq[r * k + c] / s;
                    assert!(code.abs() <= qmax, "{dtype}: code {code} beyond {qmax}");
                    let err = (x - deq[r * k + c]).abs() / s;
                    // (x * inv rounds once in f32 before the code: a relative 2^-23 more.)
                    let bound = half_step(dtype, code) + (x / s).abs() * 2f64.powi(-22);
                    assert!(
                        err <= bound,
                        "{dtype} {g:?} ({r}, {c}): x {x}, code {code}, scale {s}: error {err} > {bound}"
                    );
                }
            }
            // The largest |x| of every cell gets the largest code.
            let group = match g {
                ActScale::PerGroup(gr) => gr,
                _ => k,
            };
            for r in 0..m {
                for c0 in (0..k).step_by(group) {
                    let cols = c0..(c0 + group).min(k);
                    let big = cols
                        .max_by(|&i, &j| a[r * k + i].abs().total_cmp(&a[r * k + j].abs()))
                        .unwrap();
                    let code = deq[r * k + big] / f64::from(q.scale(r, big));
                    assert_eq!(code.abs(), qmax, "{dtype} {g:?}: row {r} cell at {c0}");
                }
            }
        }
    }
}

#[test]
fn zero_rows_get_scale_zero_and_zero_codes() {
    let mut rng = Rng::new(seed());
    let (m, k) = (4, 256);
    let mut a = activations(&mut rng, m, k);
    a[k..2 * k].fill(0.0);
    a[3 * k + 128..4 * k].fill(0.0); // the second group of row 3
    for dtype in [E4M3, E5M2, I8] {
        for g in [ActScale::PerToken, ActScale::PerGroup(128)] {
            let q = quantize_activations(&a, m, k, dtype, g).expect("quantize");
            let deq = q.dequantize();
            assert!(
                deq.iter().all(|v| v.is_finite()),
                "{dtype} {g:?}: a NaN or inf"
            );
            assert_eq!(q.scale(1, 0), 0.0);
            assert!(
                q.codes[k..2 * k].iter().all(|&c| c == 0),
                "{dtype}: row 1 codes"
            );
            assert!(deq[k..2 * k].iter().all(|&v| v == 0.0));
            if g == ActScale::PerGroup(128) {
                assert_eq!(q.scale(3, 200), 0.0);
                assert!(q.scale(3, 0) > 0.0);
            }
        }
    }
}

#[test]
fn a_static_scale_saturates_values_beyond_the_range() {
    let (m, k) = (1, 8);
    let a = [0.5f32, -0.5, 1000.0, -1000.0, 1e30, -1e30, 0.001, 447.0];
    for (dtype, qmax) in [(E4M3, 448.0), (E5M2, 57344.0), (I8, 127.0)] {
        let q = quantize_activations(&a, m, k, dtype, ActScale::Tensor(1.0)).expect("quantize");
        let deq = q.dequantize();
        assert_eq!(q.scales, vec![1.0]);
        let lo = dtype.min_finite();
        assert_eq!(deq[0], if dtype == I8 { 0.0 } else { 0.5 }, "{dtype}: 0.5");
        assert_eq!(
            deq[2],
            dtype.round(1000f64.min(qmax)).unwrap(),
            "{dtype}: 1000"
        );
        assert_eq!(
            deq[3],
            dtype.round((-1000f64).max(lo)).unwrap(),
            "{dtype}: -1000"
        );
        assert_eq!(deq[4], qmax, "{dtype}: +1e30 saturates");
        assert_eq!(
            deq[5],
            if dtype == I8 { -128.0 } else { -qmax },
            "{dtype}: -1e30 saturates"
        );
        assert!(deq.iter().all(|v| v.is_finite()));
    }
    // Ties go to even: 0.5 in i8 is 0, 1.5 is 2.
    let q = quantize_activations(&[0.5, 1.5, 2.5, -0.5], 1, 4, I8, ActScale::Tensor(1.0)).unwrap();
    assert_eq!(q.dequantize(), vec![0.0, 2.0, 2.0, 0.0]);
}

#[test]
fn bad_arguments_are_typed_errors() {
    let a = vec![1f32; 64];
    let cases: Vec<(&str, humming_runtime::Result<_>)> = vec![
        (
            "dtype",
            quantize_activations(&a, 1, 64, DType::F16, ActScale::PerToken),
        ),
        (
            "dtype",
            quantize_activations(&a, 1, 64, DType::UInt { bits: 8 }, ActScale::PerToken),
        ),
        (
            "a",
            quantize_activations(&a, 2, 64, E4M3, ActScale::PerToken),
        ),
        (
            "a",
            quantize_activations(&[f32::NAN; 64], 1, 64, E4M3, ActScale::PerToken),
        ),
        (
            "a",
            quantize_activations(&[f32::INFINITY; 64], 1, 64, I8, ActScale::PerToken),
        ),
        (
            "granularity",
            quantize_activations(&a, 1, 64, E4M3, ActScale::PerGroup(0)),
        ),
        (
            "granularity",
            quantize_activations(&a, 1, 64, E4M3, ActScale::Tensor(0.0)),
        ),
        (
            "granularity",
            quantize_activations(&a, 1, 64, E4M3, ActScale::Tensor(f32::NAN)),
        ),
        (
            "granularity",
            quantize_activations(&a, 1, 64, E4M3, ActScale::Tensor(-1.0)),
        ),
    ];
    for (arg, r) in cases {
        match r {
            Err(humming_runtime::Error::InvalidArgument { arg: got, .. }) => assert_eq!(got, arg),
            other => panic!("expected an error on `{arg}`, got {other:?}"),
        }
    }
    // M = 0 is no work, not an error.
    let q = quantize_activations(&[], 0, 64, E4M3, ActScale::PerToken).unwrap();
    assert!(q.codes.is_empty() && q.scales.is_empty());
}

#[test]
fn codes_are_the_ocp_and_twos_complement_bits() {
    let a = [1.0f32, -1.0, 448.0, -448.0, 0.0, 2f32.powi(-9), 0.75, -2.0];
    let q = quantize_activations(&a, 1, 8, E4M3, ActScale::Tensor(1.0)).unwrap();
    assert_eq!(
        q.codes,
        vec![0x38, 0xB8, 0x7E, 0xFE, 0x00, 0x01, 0x34, 0xC0]
    );
    let q = quantize_activations(&a[..2], 1, 2, E5M2, ActScale::Tensor(1.0)).unwrap();
    assert_eq!(q.codes, vec![0x3C, 0xBC]);
    let q =
        quantize_activations(&[1.0, -1.0, -128.0, 127.0], 1, 4, I8, ActScale::Tensor(1.0)).unwrap();
    assert_eq!(q.codes, vec![0x01, 0xFF, 0x80, 0x7F]);
    let q = quantize_activations(&[-1.0, 7.0, -8.0], 1, 3, I4, ActScale::Tensor(1.0)).unwrap();
    assert_eq!(q.codes, vec![0x0F, 0x07, 0x08]);
}

/// Which scales a kernel takes: 1 x k groups for W8A8 FP8 block scales (k the block's K extent),
/// one per row otherwise; a kernel refuses the other kind.
#[test]
fn kernels_take_row_or_group_scales() {
    let spec = |f: &str| humming_runtime::spec::parse_kernel_str(f).expect(f);
    let block = spec("a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]");
    let rows = spec("a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a]");
    assert_eq!(ActScale::of_kernel(&block), ActScale::PerGroup(128));
    assert_eq!(ActScale::of_kernel(&rows), ActScale::PerToken);
    assert!(ActScale::PerGroup(128).fits_kernel(&block));
    for other in [
        ActScale::PerToken,
        ActScale::PerGroup(64),
        ActScale::Tensor(0.5),
    ] {
        assert!(!other.fits_kernel(&block), "{other:?}");
    }
    assert!(ActScale::PerToken.fits_kernel(&rows));
    assert!(ActScale::Tensor(0.5).fits_kernel(&rows));
    assert!(!ActScale::PerGroup(128).fits_kernel(&rows));
    // Scales per row: a last group shorter than the others counts.
    assert_eq!(ActScale::PerGroup(128).scales_per_row(320), 3);
    assert_eq!(ActScale::PerToken.scales_per_row(320), 1);
    let mut rng = Rng::new(seed());
    let (m, k) = (3, 320);
    let a = activations(&mut rng, m, k);
    let q = quantize_activations(&a, m, k, E4M3, ActScale::PerGroup(128)).expect("quantize");
    assert_eq!(q.scales.len(), m * 3);
}
