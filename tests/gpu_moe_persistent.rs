//! GPU correctness of the persistent `moe_indexed` kernel (`mma = wgmma_ss` tiles on sm_90a: A's codes
//! gathered by slot, the E experts' weights in one TMA map), against the f64 CPU reference.
//!
//! - `gpu_moe_persistent_every_tile_*`: W4A8 FP8 group(128) and W8A8 FP8 128 x 128 blocks, every
//!   tile (block M forced through the routing), N = 192 (a tile's weight box reaches into the next
//!   expert's channels, which C never receives) and 256, K of 3 and 8 steps, routings with experts of
//!   no rows, one row, many (one hot expert), and a fifth of the choices invalid; the router's weights
//!   on the rows; C poisoned first: every routed row within tolerance, every other row untouched.
//! - `gpu_moe_persistent_rows_isolated`: NaN activations of the tokens routed to one expert reach
//!   only their own rows; every other row equals the clean launch bit for bit. (NaN scales never
//!   reach a kernel: `QuantizedWeights` refuses them.)
//! - `gpu_moe_persistent_large_offsets`: rows of C beyond 2^31 elements written where they belong.
//!
//! Without a GPU (or off compute capability 9.0) every test prints that it was skipped and passes.

use half::{bf16, f16};
use humming::Element;
use humming::cuda::Gemm;
use humming::quant::QuantizedWeights;
use std::sync::Arc;

#[path = "../humming-runtime/tests/gpu_common/mod.rs"]
mod gpu_common;
use gpu_common::{POISON, Rng, gpu_or_skip, seed};

#[allow(dead_code)]
mod gpu_moe_common;
use gpu_moe_common::*;

type Stream = Arc<cudarc::driver::CudaStream>;
type Loaded<K> = (
    Stream,
    Gemm<<K as humming::GemmKernel>::A, <K as humming::GemmKernel>::C>,
);

humming::gemm! {
    /// W4A8 FP8 experts (the persistent kernel's 4-bit form: codes widened in registers).
    pub kernel PerE4U4 { a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a] }
    /// W8A8 FP8 experts with DeepSeek-V3's 128 x 128 weight blocks and 1 x 128 activation groups.
    pub kernel PerE4E4Block { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), layout: moe_indexed, arch: [sm_90a] }
}

/// The loaded kernel where it runs on persistent tiles (compute capability 9.0), else a printed skip.
fn persistent_or_skip<K: humming::GemmKernel>(name: &str) -> Option<Loaded<K>> {
    let s = gpu_or_skip(name)?;
    let gemm = Gemm::load::<K>(&s).expect("load");
    if !gemm.tiles().iter().all(|t| t.tile.persistent()) {
        eprintln!("{name}: skipped (no persistent tiles on this GPU)");
        return None;
    }
    Some((s, gemm))
}

fn every_tile<T: Element, K: humming::GemmKernel<A = T, C = T>>(name: &str) {
    let Some((s, gemm)) = persistent_or_skip::<K>(name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let (mut worst, mut cases) = (0f64, 0);
    for (n, k, e) in [(192, 384, 6), (256, 1024, 16)] {
        let experts = experts_for(&mut rng, &K::DESCRIPTOR, e, n, k);
        let dw = gemm.upload_experts(&experts).expect("upload");
        for t in gemm.tiles() {
            for (tokens, top_k, how) in [
                (1, 8, Routing::Uniform),
                (5, 2, Routing::Uniform),
                (300, 2, Routing::Invalid),
                (200, 4, Routing::Hot),
                (70, 1, Routing::MostEmpty),
            ] {
                let err = indexed_case::<T, K>(
                    &s,
                    &gemm,
                    &experts,
                    &dw,
                    &mut rng,
                    tokens,
                    top_k.min(e),
                    how,
                    cases % 2 == 0,
                    (gemm.options(), t.tile.block_m as usize),
                );
                worst = worst.max(err);
                cases += 1;
            }
        }
    }
    eprintln!("{name}: {cases} cases, worst relative error {worst:.2e}");
}

#[test]
fn gpu_moe_persistent_every_tile_w4a8() {
    every_tile::<f16, PerE4U4>("gpu_moe_persistent_every_tile_w4a8");
}

#[test]
fn gpu_moe_persistent_every_tile_w8a8_block() {
    every_tile::<bf16, PerE4E4Block>("gpu_moe_persistent_every_tile_w8a8_block");
}

#[test]
fn gpu_moe_persistent_rows_isolated() {
    let name = "gpu_moe_persistent_rows_isolated";
    let Some((s, gemm)) = persistent_or_skip::<PerE4U4>(name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let (e, n, k, tokens, top_k) = (8, 256, 512, 96, 2);
    let experts = experts_for(&mut rng, &PerE4U4::DESCRIPTOR, e, n, k);
    let dw = gemm.upload_experts(&experts).expect("upload");
    let ids = choices(&mut rng, tokens, top_k, e, Routing::Uniform);
    let (clean, _) = random_a::<f16>(&mut rng, tokens, k);
    let hot: Vec<bool> = (0..tokens)
        .map(|t| ids[t * top_k..(t + 1) * top_k].contains(&3))
        .collect();
    let mut dirty = clean.clone();
    for (t, _) in hot.iter().enumerate().filter(|(_, h)| **h) {
        dirty[t * k..(t + 1) * k].fill(f16::NAN);
    }
    let d_ids = s.clone_htod(&ids).expect("ids");
    let routing = gemm.route(&d_ids, tokens, top_k, e).expect("route");
    let run = |a: &[f16]| {
        let d_a = s.clone_htod(a).expect("a");
        let mut c = poisoned::<f16>(&s, tokens * top_k * n);
        gemm.run_indexed(&d_a, &routing, &dw, None, None, &mut c)
            .expect("run");
        s.clone_dtoh(&c).expect("read")
    };
    let (want, got) = (run(&clean), run(&dirty));
    for slot in 0..tokens * top_k {
        let (w, g) = (
            &want[slot * n..(slot + 1) * n],
            &got[slot * n..(slot + 1) * n],
        );
        if hot[slot / top_k] {
            assert!(
                g.iter().any(|v| v.is_nan()),
                "slot {slot}: its token is NaN, its row is not"
            );
        } else {
            assert!(
                w.iter().zip(g).all(|(a, b)| a.to_bits() == b.to_bits()),
                "slot {slot}: a clean token's row changed"
            );
        }
    }
    eprintln!(
        "{name}: NaN rows of {} tokens stayed in their own rows; every other row bit for bit",
        hot.iter().filter(|h| **h).count()
    );
}

/// C of 2^24 + 2^12 slots x 128 channels (2^31 + 2^19 elements): the rows past element 2^31, and a
/// sample of the others, against the reference of their (distinct A row, expert) pair.
#[test]
fn gpu_moe_persistent_large_offsets() {
    let name = "gpu_moe_persistent_large_offsets";
    let Some((s, gemm)) = persistent_or_skip::<PerE4U4>(name) else {
        return;
    };
    let mut rng = Rng::new(seed());
    let (e, n, k) = (3, 128, 128);
    let (tokens, distinct) = ((1usize << 24) + (1 << 12), 512);
    let experts = experts_for(&mut rng, &PerE4U4::DESCRIPTOR, e, n, k);
    let dw = gemm.upload_experts(&experts).expect("upload");
    // A: `distinct` random rows repeated; the down projection's layout (top_k = 1).
    let (rows, rows_f) = random_a_for::<f16>(&mut rng, distinct, k, &PerE4U4::DESCRIPTOR);
    let mut a = Vec::with_capacity(tokens * k);
    while a.len() < tokens * k {
        a.extend_from_slice(&rows);
    }
    a.truncate(tokens * k);
    let ids: Vec<i32> = (0..tokens).map(|_| rng.below(e) as i32).collect();
    let d_a = s.clone_htod(&a).expect("a");
    drop(a);
    let d_ids = s.clone_htod(&ids).expect("ids");
    let routing = gemm.route(&d_ids, tokens, 1, e).expect("route");
    let mut c = s.alloc_zeros::<f16>(tokens * n).expect("C");
    gemm.run_indexed(&d_a, &routing, &dw, None, None, &mut c)
        .expect("run");
    // The reference of each (distinct row, expert).
    let w: Vec<Vec<f64>> = experts.iter().map(QuantizedWeights::dequantize).collect();
    let reference = |r: usize, x: usize| -> Vec<f64> {
        (0..n)
            .map(|j| (0..k).map(|i| rows_f[r * k + i] * w[x][j * k + i]).sum())
            .collect()
    };
    let table: Vec<Vec<Vec<f64>>> = (0..distinct)
        .map(|r| (0..e).map(|x| reference(r, x)).collect())
        .collect();
    let first_high = (1usize << 31) / n;
    let mut checked: Vec<usize> = (first_high - 64..tokens).collect();
    checked.extend((0..4096).map(|_| rng.below(first_high)));
    let (mut g, mut want) = (Vec::new(), Vec::new());
    for &t in &checked {
        let row = s
            .clone_dtoh(&c.slice(t * n..(t + 1) * n))
            .expect("read a row");
        for (j, v) in row.iter().enumerate() {
            assert!(v.to_f64().is_finite(), "row {t} col {j}: {v}");
            assert_ne!(v.to_bits(), POISON);
            g.push(v.to_f64());
            want.push(table[t % distinct][ids[t] as usize][j]);
        }
    }
    let err = humming::reference::relative_error(&g, &want);
    assert!(err <= tol::<f16>(), "{name}: relative error {err:.3e}");
    eprintln!(
        "{name}: {} rows checked ({} past element 2^31), relative error {err:.2e}",
        checked.len(),
        tokens - first_high
    );
}
