//! What the GPU test binaries share: the seeded generator, the GPU (or a printed skip), one checked
//! launch ([`run_case`]: fresh random A, C poisoned and guarded, two launches, every element written,
//! relative error against the f64 reference), integer descriptors and their random weights, and the
//! launch options the tests pin.
#![allow(dead_code)]

use humming_runtime::cuda::{
    self, DependentTrigger, Gemm, KReduction, LaunchOptions, Reduction, SplitK,
};
use humming_runtime::quant::QuantizedWeights;
use humming_runtime::{Element, spec};
use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::Arc;

pub const GUARD: usize = 64;
pub const POISON: u16 = 0x7FFF; // a NaN in both f16 and bf16

#[derive(Clone)]
pub struct Rng(pub u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

pub fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

pub fn gpu() -> Option<Arc<cudarc::driver::CudaStream>> {
    match cuda::default_stream(0) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!("(no GPU: {e})");
            None
        }
    }
}

/// The GPU's stream, or `None` after printing `skipped: <name> (no GPU)` (to stderr, past libtest's
/// output capture, so that the skip is visible in every run).
pub fn gpu_or_skip(name: &str) -> Option<Arc<cudarc::driver::CudaStream>> {
    let stream = gpu();
    if stream.is_none() {
        let _ = writeln!(std::io::stderr(), "skipped: {name} (no GPU)");
    }
    stream
}

pub fn quick() -> bool {
    std::env::var("HUMMING_GPU_QUICK").is_ok_and(|v| v == "1")
}

pub struct Outcome {
    pub worst: f64,
    pub cases: usize,
}

pub fn checked_rows(rng: &mut Rng, m: usize) -> Vec<usize> {
    if m <= 16 {
        return (0..m).collect();
    }
    let mut rows: Vec<usize> = (0..4).chain(m - 4..m).collect();
    for _ in 0..4 {
        rows.push(rng.below(m));
    }
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// How [`run_case`] places C and checks it (`CaseOpts::default()`: C 16-byte aligned, a sample of
/// its rows checked).
#[derive(Clone, Copy, Default)]
pub struct CaseOpts {
    /// Elements between a 16-byte boundary and the start of C (even: C stays 4-byte aligned).
    pub c_offset: usize,
    /// Every row against the reference, not a sample of them (`checked_rows`).
    pub all_rows: bool,
    /// A's values are uniform in `[-2^a_exp, 2^a_exp)` (0: in `[-1, 1)`), to keep extreme scales'
    /// products in range.
    pub a_exp: i32,
}

/// One launch of `gemm` on fresh random A (and bias), C poisoned first and placed as `opts` says,
/// checked against the f64 reference.
#[allow(clippy::too_many_arguments)]
pub fn run_case<T: Element>(
    stream: &Arc<cudarc::driver::CudaStream>,
    gemm: &Gemm<T, T>,
    w: &QuantizedWeights,
    w_ref: &[f64],
    dw: &cuda::DeviceWeights,
    m: usize,
    rng: &mut Rng,
    label: &str,
    opts: CaseOpts,
) -> (f64, Vec<u16>) {
    let (n, k) = (w.n(), w.k());
    let guard = GUARD + opts.c_offset;
    let a_mag = 2f32.powi(opts.a_exp);
    let a_host: Vec<T> = (0..m * k)
        .map(|_| T::from_f32(rng.uniform() * a_mag))
        .collect();
    let bias_host: Option<Vec<T>> = w
        .spec()
        .bias
        .then(|| (0..n).map(|_| T::from_f32(0.5 * rng.uniform())).collect());
    let a = stream.clone_htod(&a_host).expect("upload A");
    let bias = bias_host
        .as_ref()
        .map(|b| stream.clone_htod(b).expect("upload bias"));
    let mut outs: Vec<Vec<u16>> = Vec::new();
    for _run in 0..2 {
        let poisoned = vec![T::from_bits(POISON); m * n + 2 * guard];
        let mut c = stream.clone_htod(&poisoned).expect("upload C");
        {
            let mut view = c.slice_mut(guard..guard + m * n);
            gemm.run(&a, m, dw, bias.as_ref(), &mut view)
                .unwrap_or_else(|e| panic!("{label}: launch: {e}"));
        }
        stream
            .synchronize()
            .unwrap_or_else(|e| panic!("{label}: kernel failed: {e}"));
        let host: Vec<T> = stream.clone_dtoh(&c).expect("download C");
        let bits: Vec<u16> = host.iter().map(|v| v.to_bits()).collect();
        assert!(
            bits[..guard].iter().all(|&b| b == POISON),
            "{label}: guard before C was overwritten"
        );
        assert!(
            bits[guard + m * n..].iter().all(|&b| b == POISON),
            "{label}: guard after C was overwritten"
        );
        outs.push(bits[guard..guard + m * n].to_vec());
    }
    // Bit for bit, unless the launches add their K splits with atomics (in an order that may change);
    // then each launch is checked on its own below.
    let atomic = gemm.plan(m, n, k).reduction == KReduction::Atomic;
    assert!(
        outs[0] == outs[1] || atomic,
        "{label}: two launches gave different results"
    );
    let checked = if atomic { 2 } else { 1 };
    for (run, out) in outs.iter().take(checked).enumerate() {
        for (i, &b) in out.iter().enumerate() {
            let v = T::from_bits(b).to_f64();
            assert!(
                v.is_finite(),
                "{label}: launch {run}: C[{}, {}] = {v} (not written or not finite)",
                i / n,
                i % n
            );
        }
    }
    let (mut num, mut den) = ([0f64; 2], 0f64);
    let rows = if opts.all_rows {
        (0..m).collect()
    } else {
        checked_rows(rng, m)
    };
    for row in rows {
        let a_row: Vec<f64> = a_host[row * k..(row + 1) * k]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        for col in 0..n {
            let wr = &w_ref[col * k..(col + 1) * k];
            let mut acc = [0f64; 4];
            let mut i = 0;
            while i + 4 <= k {
                acc[0] += a_row[i] * wr[i];
                acc[1] += a_row[i + 1] * wr[i + 1];
                acc[2] += a_row[i + 2] * wr[i + 2];
                acc[3] += a_row[i + 3] * wr[i + 3];
                i += 4;
            }
            let mut want = acc[0] + acc[1] + acc[2] + acc[3];
            while i < k {
                want += a_row[i] * wr[i];
                i += 1;
            }
            if let Some(b) = &bias_host {
                want += b[col].to_f64();
            }
            for (run, out) in outs.iter().take(checked).enumerate() {
                let got = T::from_bits(out[row * n + col]).to_f64();
                num[run] += (got - want) * (got - want);
            }
            den += want * want;
        }
    }
    let worst = num[0].max(num[1]);
    (
        (worst / den.max(f64::MIN_POSITIVE)).sqrt(),
        outs.swap_remove(0),
    )
}

/// Changes some of a `Gemm`'s launch settings.
pub fn set_options<A: Element, C: Element>(
    gemm: &mut Gemm<A, C>,
    f: impl FnOnce(&mut LaunchOptions),
) {
    let mut o = gemm.options();
    f(&mut o);
    gemm.set_options(o);
}

/// `n` pinned K splits (at least 1).
pub fn fixed(n: usize) -> SplitK {
    SplitK::Fixed(NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN))
}

/// The deterministic reduction (the default), or f16 atomics into C where the tile has them.
pub fn reduction(deterministic: bool) -> Reduction {
    if deterministic {
        Reduction::Deterministic
    } else {
        Reduction::AtomicF16
    }
}

/// The dependent-launch trigger: `None` the runtime's rule, `Some(true)` at the start.
pub fn trigger(early: Option<bool>) -> DependentTrigger {
    match early {
        None => DependentTrigger::Auto,
        Some(true) => DependentTrigger::AtStart,
        Some(false) => DependentTrigger::AfterMainLoop,
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Zp {
    Symmetric,
    Integer,
    Float,
}

/// The descriptor of one configuration; `extra` is appended to the fields (e.g. `, tiles: [...]`).
pub fn spec_for(
    a: &str,
    bits: u32,
    zp: Zp,
    group: u32,
    bias: bool,
    extra: &str,
) -> spec::KernelSpec {
    let b = match zp {
        Zp::Symmetric if bits > 1 => format!("i{bits}"),
        _ => format!("u{bits}"),
    };
    let z = match zp {
        Zp::Symmetric => "none",
        Zp::Integer => "int",
        Zp::Float => "float",
    };
    let scale = if group == 0 {
        "channel".to_string()
    } else {
        format!("group({group})")
    };
    let fields = format!("a: {a}, b: {b}, scale: {scale}, zero_point: {z}, bias: {bias}{extra}");
    spec::parse_kernel_str(&fields).unwrap_or_else(|e| panic!("{fields}: {e}"))
}

/// Weights with a different magnitude per output channel, like real checkpoints.
pub fn random_weights(rng: &mut Rng, n: usize, k: usize) -> Vec<f32> {
    let mut w = vec![0f32; n * k];
    for row in w.chunks_mut(k) {
        let mag = 0.01 + 0.1 * (rng.uniform().abs());
        let shift = 0.02 * rng.uniform();
        for v in row {
            *v = mag * rng.uniform() + shift;
        }
    }
    w
}

/// Random weights `[n, k]` (`random_weights`) quantized for `sp`, their f64 dequantization (the
/// reference's B, row-major `[n, k]`) and their upload for `gemm`.
pub fn random_uploaded<A: Element, C: Element>(
    rng: &mut Rng,
    sp: &spec::KernelSpec,
    gemm: &Gemm<A, C>,
    n: usize,
    k: usize,
) -> (QuantizedWeights, Vec<f64>, cuda::DeviceWeights) {
    let wf = random_weights(rng, n, k);
    let w = QuantizedWeights::quantize(sp, n, k, &wf).expect("quantize");
    let w_ref = w.dequantize();
    let dw = gemm.upload(&w).expect("upload weights");
    (w, w_ref, dw)
}
