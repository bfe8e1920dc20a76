//! The helpers of `tests/gpu_moe.rs`: random routings, offsets, experts and activations, the poisoned
//! output buffers and the row-by-row check against the f64 reference, and the sweep constants.

use super::Stream;
use super::gpu_common::{GUARD, POISON, Rng};
use humming::act_quant::{ActScale, quantize_activations};
use humming::cuda::{self, Gemm};
use humming::moe::{MoeReference, MoeRows, reference_moe};
use humming::quant::QuantizedWeights;
use humming::{Element, reference, spec::KernelSpec};

/// How the router spreads the choices.
#[derive(Clone, Copy, Debug)]
pub enum Routing {
    Uniform,
    /// Most choices to one expert.
    Hot,
    /// Two experts of E get everything.
    MostEmpty,
    /// Uniform, with a fifth of the choices invalid (-1 or E + 3).
    Invalid,
}

pub const ROUTINGS: [Routing; 4] = [
    Routing::Uniform,
    Routing::Hot,
    Routing::MostEmpty,
    Routing::Invalid,
];

/// `[tokens, top_k]` choices; a token's valid choices are distinct experts where E allows.
pub fn choices(
    rng: &mut Rng,
    tokens: usize,
    top_k: usize,
    experts: usize,
    how: Routing,
) -> Vec<i32> {
    let mut ids = Vec::with_capacity(tokens * top_k);
    for _ in 0..tokens {
        let mut row: Vec<i32> = Vec::new();
        for j in 0..top_k {
            let mut e = match how {
                Routing::Hot if rng.below(4) != 0 => 0,
                Routing::MostEmpty => ([1, experts - 1][rng.below(2)] % experts) as i32,
                _ => rng.below(experts) as i32,
            };
            // Distinct within the token where E allows (a router's top_k are distinct).
            let mut tries = 0;
            while row.contains(&e) && top_k <= experts && tries < 4 * experts {
                e = ((e as usize + 1) % experts) as i32;
                tries += 1;
            }
            if matches!(how, Routing::Invalid) && rng.below(5) == 0 {
                e = if j % 2 == 0 { -1 } else { experts as i32 + 3 };
            }
            row.push(e);
        }
        ids.extend(row);
    }
    ids
}

pub fn random_weights(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    let mut w = vec![0f32; n * k];
    for row in w.chunks_mut(k) {
        let mag = 0.02 + 0.1 * rng.uniform().abs();
        for v in row {
            *v = mag * rng.uniform();
        }
    }
    w
}

pub fn experts_for(
    rng: &mut Rng,
    spec: &KernelSpec,
    e: usize,
    n: usize,
    k: usize,
) -> Vec<QuantizedWeights> {
    (0..e)
        .map(|_| {
            QuantizedWeights::quantize(spec, n, k, &random_weights(rng, n, k)).expect("quantize")
        })
        .collect()
}

pub fn tol<T: Element>() -> f64 {
    if T::DTYPE == humming::spec::DType::BF16 {
        2e-2
    } else {
        1e-2
    }
}

/// A device buffer of `len` elements plus a guard, all NaN.
pub fn poisoned<T: Element>(s: &Stream, len: usize) -> cudarc::driver::CudaSlice<T> {
    s.clone_htod(&vec![T::from_bits(POISON); len + GUARD])
        .expect("poisoned buffer")
}

/// Checks C against the reference: written rows finite and close (relative error of the whole set
/// of written rows), other rows and the guard still poison. Returns the relative error.
pub fn check_rows<T: Element>(what: &str, got: &[T], want: &MoeReference) -> f64 {
    let nc = want.columns;
    let (mut g, mut w) = (Vec::new(), Vec::new());
    for (r, &written) in want.written.iter().enumerate() {
        let row = &got[r * nc..(r + 1) * nc];
        if written {
            for (j, v) in row.iter().enumerate() {
                let x = v.to_f64();
                assert!(
                    x.is_finite(),
                    "{what}: row {r} col {j} = {x} (not written or not finite)"
                );
                g.push(x);
                w.push(want.c[r * nc + j]);
            }
        } else {
            assert!(
                row.iter().all(|v| v.to_bits() == POISON),
                "{what}: row {r} is not routed but was written"
            );
        }
    }
    assert!(
        got[want.written.len() * nc..]
            .iter()
            .all(|v| v.to_bits() == POISON),
        "{what}: C written past its rows"
    );
    let err = reference::relative_error(&g, &w);
    assert!(err <= tol::<T>(), "{what}: relative error {err:.3e}");
    err
}

pub fn random_a<T: Element>(rng: &mut Rng, rows: usize, k: usize) -> (Vec<T>, Vec<f64>) {
    let a: Vec<T> = (0..rows * k).map(|_| T::from_f32(rng.uniform())).collect();
    let f = a.iter().map(|v| v.to_f64()).collect();
    (a, f)
}

/// [`random_a`] for a kernel `spec`: with 8-bit activations the reference's A is A quantized per
/// token or per activation group (as the launch quantizes it) and dequantized.
pub fn random_a_for<T: Element>(
    rng: &mut Rng,
    rows: usize,
    k: usize,
    spec: &humming::spec::KernelSpec,
) -> (Vec<T>, Vec<f64>) {
    let (a, f) = random_a::<T>(rng, rows, k);
    if !humming::spec::layout::is_8bit_activation(spec.a) {
        return (a, f);
    }
    let a32: Vec<f32> = f.iter().map(|&x| x as f32).collect();
    let how = ActScale::of_kernel(spec);
    let q = quantize_activations(&a32, rows, k, spec.a, how).expect("quantize A");
    (a, q.dequantize())
}

pub fn bias_for<T: Element>(rng: &mut Rng, e: usize, n: usize) -> (Vec<T>, Vec<f64>) {
    let b: Vec<T> = (0..e * n)
        .map(|_| T::from_f32(0.1 * rng.uniform()))
        .collect();
    let f = b.iter().map(|v| v.to_f64()).collect();
    (b, f)
}

pub const EXPERTS: [usize; 4] = [1, 8, 64, 256];
pub const TOP_KS: [usize; 3] = [1, 2, 8];
pub const TOKENS: [usize; 5] = [0, 1, 7, 33, 1000];

/// Random offsets `[E + 1]` over `rows` (empty experts included), the last at most `rows`.
pub fn offsets(rng: &mut Rng, e: usize, rows: usize) -> Vec<i32> {
    let end = if rows > 0 && rng.below(3) == 0 {
        rows - rng.below(rows.min(5))
    } else {
        rows
    };
    let mut cuts: Vec<i32> = (0..e - 1).map(|_| rng.below(end + 1) as i32).collect();
    if rng.below(2) == 0 && e > 2 {
        // Most experts empty: everything in two of them.
        cuts.iter_mut()
            .for_each(|c| *c = if *c < (end / 2) as i32 { 0 } else { end as i32 });
    }
    cuts.sort_unstable();
    std::iter::once(0)
        .chain(cuts)
        .chain(std::iter::once(end as i32))
        .collect()
}

/// One indexed case: route on the GPU, run, check every row.
#[allow(clippy::too_many_arguments)]
pub fn indexed_case<T: Element, K: humming::GemmKernel<A = T, C = T>>(
    s: &Stream,
    gemm: &Gemm<T, T>,
    experts: &[QuantizedWeights],
    dw: &cuda::DeviceWeights,
    rng: &mut Rng,
    tokens: usize,
    top_k: usize,
    how: Routing,
    with_weights: bool,
    (options, block_m): (cuda::LaunchOptions, usize),
) -> f64 {
    let (e, n, k) = (experts.len(), experts[0].n(), experts[0].k());
    let sp = K::DESCRIPTOR;
    let nc = humming::spec::layout::c_columns(sp.epilogue, n);
    let ids = choices(rng, tokens, top_k, e, how);
    let (a, af) = random_a_for::<T>(rng, tokens, k, &sp);
    let (bias, bias_f) = bias_for::<T>(rng, e, n);
    let rw: Vec<f32> = (0..tokens * top_k)
        .map(|_| 0.5 + 0.5 * rng.uniform().abs())
        .collect();
    let d_ids = s.clone_htod(&ids).expect("ids");
    let l = gemm.with(options);
    let routing = match block_m {
        0 => l.route(&d_ids, tokens, top_k, e),
        b => l.route_with_block_m(&d_ids, tokens, top_k, e, b),
    }
    .expect("route");
    let d_a = s.clone_htod(&a).expect("a");
    let d_bias = sp.bias.then(|| s.clone_htod(&bias).expect("bias"));
    let d_rw = s.clone_htod(&rw).expect("row weights");
    let mut c = poisoned::<T>(s, tokens * top_k * nc);
    l.run_indexed(
        &d_a,
        &routing,
        dw,
        d_bias.as_ref(),
        with_weights.then_some(&d_rw),
        &mut c,
    )
    .expect("run_indexed");
    let got = s.clone_dtoh(&c).expect("read C");
    let want = reference_moe(
        experts,
        &af,
        tokens,
        &MoeRows::Indexed {
            topk_ids: &ids,
            top_k,
            weights: with_weights.then_some(&rw[..]),
        },
        sp.bias.then_some(&bias_f[..]),
    )
    .expect("reference");
    check_rows(
        &format!(
            "{} E={e} top_k={top_k} tokens={tokens} {how:?} block_m={} {:?}",
            K::NAME,
            routing.block_m(),
            options.split_k
        ),
        &got,
        &want,
    )
}
