//! What the 8-bit-activation GPU tests share (`tests/gpu_act8.rs`, `tests/gpu_persistent.rs`): random
//! inputs, and the suite of `run` cases checked against the f64 reference of the quantized
//! activations (see `gpu_act8.rs`'s module doc).

use super::Stream;
use super::gpu_common::{GUARD, POISON, Rng, gpu_or_skip, quick, seed};
use humming::act_quant::{ActScale, quantize_activations};
use humming::cuda::{Gemm, SplitK};
use humming::quant::QuantizedWeights;
use humming::{Element, GemmKernel, reference};

pub fn tol<T: Element>() -> f64 {
    if T::DTYPE == humming::spec::DType::BF16 {
        8e-3
    } else {
        2e-3
    }
}

pub fn random_weights(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    (0..n * k).map(|_| rng.uniform()).collect()
}

/// Random A with row 0 zero and an outlier (x64) in row 1.
pub fn random_a<T: Element>(rng: &mut Rng, m: usize, k: usize) -> Vec<T> {
    let mut a: Vec<f32> = (0..m * k).map(|_| rng.uniform()).collect();
    a[..k].iter_mut().for_each(|x| *x = 0.0);
    if m > 1 {
        let j = rng.below(k);
        a[k + j] = 64.0;
    }
    a.iter().map(|&x| T::from_f32(x)).collect()
}

pub fn to_f32<T: Element>(a: &[T]) -> Vec<f32> {
    a.iter().map(|v| v.to_f64() as f32).collect()
}

/// One launch of `run` on 16-bit A, checked (see the module doc). Returns (error against the
/// reference of the quantized activations, error of the 16-bit product).
#[allow(clippy::too_many_arguments)]
pub fn case<T: Element>(
    s: &Stream,
    gemm: &Gemm<T, T>,
    w: &QuantizedWeights,
    dw: &humming::cuda::DeviceWeights,
    m: usize,
    rng: &mut Rng,
    label: &str,
) -> (f64, f64) {
    let (n, k) = (w.n(), w.k());
    let spec = w.spec();
    let a_host = random_a::<T>(rng, m, k);
    let bias_host: Option<Vec<T>> = spec
        .bias
        .then(|| (0..n).map(|_| T::from_f32(0.5 * rng.uniform())).collect());
    let a = s.clone_htod(&a_host).expect("upload A");
    let bias = bias_host.as_ref().map(|b| s.clone_htod(b).expect("bias"));
    let mut outs = Vec::new();
    for _ in 0..2 {
        let mut c = s
            .clone_htod(&vec![T::from_bits(POISON); m * n + 2 * GUARD])
            .expect("C");
        {
            let mut view = c.slice_mut(GUARD..GUARD + m * n);
            gemm.run(&a, m, dw, bias.as_ref(), &mut view)
                .unwrap_or_else(|e| panic!("{label}: launch: {e}"));
        }
        s.synchronize()
            .unwrap_or_else(|e| panic!("{label}: kernel failed: {e}"));
        let host: Vec<T> = s.clone_dtoh(&c).expect("download C");
        let bits: Vec<u16> = host.iter().map(|v| v.to_bits()).collect();
        assert!(
            bits[..GUARD].iter().all(|&b| b == POISON)
                && bits[GUARD + m * n..].iter().all(|&b| b == POISON),
            "{label}: a guard around C was overwritten"
        );
        outs.push(bits[GUARD..GUARD + m * n].to_vec());
    }
    assert!(outs[0] == outs[1], "{label}: two launches differ");
    let got: Vec<f64> = outs[0].iter().map(|&b| T::from_bits(b).to_f64()).collect();
    for (i, v) in got.iter().enumerate() {
        assert!(
            v.is_finite(),
            "{label}: C[{}, {}] = {v} (not written or not finite)",
            i / n,
            i % n
        );
    }
    let qa = quantize_activations(&to_f32(&a_host), m, k, spec.a, ActScale::of_kernel(spec))
        .expect("quantize A");
    let b64: Option<Vec<f64>> = bias_host
        .as_ref()
        .map(|b| b.iter().map(|v| v.to_f64()).collect());
    let want = reference::reference_gemm(w, &qa.dequantize(), m, b64.as_deref()).expect("ref");
    let a64: Vec<f64> = a_host.iter().map(|v| v.to_f64()).collect();
    let exact = reference::reference_gemm(w, &a64, m, b64.as_deref()).expect("ref");
    let err = reference::relative_error(&got, &want);
    assert!(
        err <= tol::<T>(),
        "{label}: relative error {err:.3e} against the quantized reference"
    );
    // The zero row: C is the epilogue of the bias alone.
    let zero_row = reference::reference_gemm(w, &vec![0.0; k], 1, b64.as_deref()).expect("ref");
    for j in 0..n {
        let d = (got[j] - zero_row[j]).abs();
        assert!(
            d <= 1e-2 * (1.0 + zero_row[j].abs()),
            "{label}: zero row, column {j}: {} vs {}",
            got[j],
            zero_row[j]
        );
    }
    (err, reference::relative_error(&want, &exact))
}

pub fn suite<T: Element, K: GemmKernel<A = T, C = T>>(name: &str) {
    let Some(s) = gpu_or_skip(name) else { return };
    let sd = seed();
    let mut rng = Rng::new(sd);
    let mut gemm = Gemm::load::<K>(&s).unwrap_or_else(|e| panic!("{name}: load: {e}"));
    let shapes: &[(usize, usize)] = if quick() {
        &[(128, 256)]
    } else {
        &[(128, 256), (320, 1024), (128, 320)]
    };
    let ms: &[usize] = if quick() {
        &[1, 33]
    } else {
        &[1, 7, 16, 20, 33, 200]
    };
    let (mut worst, mut quant_err, mut cases) = (0f64, 0f64, 0);
    for &(n, k) in shapes {
        let w = QuantizedWeights::quantize(&K::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
            .unwrap_or_else(|e| panic!("{name}: quantize: {e}"));
        let dw = gemm.upload(&w).expect("upload");
        for split in [
            SplitK::Auto,
            SplitK::Fixed(std::num::NonZeroUsize::new(3).unwrap()),
        ] {
            let mut o = gemm.options();
            o.split_k = split;
            gemm.set_options(o);
            for &m in ms {
                let label = format!("{name} N={n} K={k} M={m} {split:?} seed={sd}");
                let (e, q) = case(&s, &gemm, &w, &dw, m, &mut rng, &label);
                worst = worst.max(e);
                quant_err = quant_err.max(q);
                cases += 1;
            }
        }
    }
    eprintln!(
        "{name}: {cases} cases, worst relative error {worst:.2e} against the quantized reference; activation quantization adds up to {quant_err:.2e} against the 16-bit product"
    );
}
