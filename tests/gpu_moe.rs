//! GPU correctness of the mixture-of-experts layouts and the SiLU-GLU epilogue, against the f64 CPU
//! reference (`humming::moe::reference_moe`, `reference_gemm`).
//!
//! - `gpu_moe_route_*`: the routing helper equals the host routing (`route_indexed`) bit for bit over
//!   E in {1, 8, 64, 256}, top_k in {1, 2, 8}, tokens in {0, 1, 7, 33, 1000}, uniform, one-hot,
//!   mostly-empty and partly invalid (-1, E + 3) routings.
//! - `gpu_moe_indexed_*`, `gpu_moe_contiguous_*`, `gpu_moe_masked_*`: every layout over those E and
//!   tokens (and formats: u4 group 128, MXFP4 with bias, u4 with zero points and SiLU-GLU, i8 channel
//!   scales with bias, NVFP4, interleaved SiLU-GLU), C poisoned with NaN first: every row the layout
//!   names is finite and within 1e-2 (f16) / 2e-2 (bf16) of the reference, every other row keeps its
//!   poison bit for bit, and the guard past C is untouched.
//! - The same for 8-bit activations (the launch quantizes A per token, or per 1 x 128 group; the
//!   reference takes A quantized and dequantized alike): W4A8 FP8 indexed (every tile too), W4A8 INT8
//!   indexed with zero points and SiLU-GLU, MXFP4 x e4m3 indexed with a bias, W8A8 FP8 128 x 128 blocks
//!   indexed, W4A8 FP8 contiguous with interleaved SiLU-GLU, W8A8 FP8 masked.
//! - `gpu_moe_block`: route, gate-up with SiLU-GLU, down with the router's weights, combine, captured
//!   in one CUDA graph and replayed on new routings: equal to the launches bit for bit and to the f64
//!   reference of the whole block.
//! - `gpu_moe_grouped_graph`: both grouped layouts in one CUDA graph, replayed on new offsets and
//!   counts: equal to the launches bit for bit and to the reference.
//! - `gpu_moe_rows_isolated`: NaN activations of the rows routed to one expert reach no other row
//!   (an expert with NaN scales is refused when its weights are built).
//! - `gpu_dense_glu`: the SiLU-GLU epilogue on a dense kernel, halves and interleaved.
//!
//! Without a GPU every test prints that it was skipped and passes.

use half::{bf16, f16};
use humming::cuda::{self, Gemm};
use humming::moe::{MoeRows, reference_moe, route_indexed};
use humming::quant::QuantizedWeights;
use humming::{Element, reference};
use std::sync::Arc;

// The seeded generator, the GPU or a printed skip, the poison and guard of the runtime's GPU tests.
#[path = "../humming-runtime/tests/gpu_common/mod.rs"]
mod gpu_common;
use gpu_common::{GUARD, POISON, Rng, gpu_or_skip, quick, seed};

// The routings, inputs and checks of these tests.
mod gpu_moe_common;
use gpu_moe_common::*;

type Stream = Arc<cudarc::driver::CudaStream>;

humming::gemm! {
    /// W4A16 experts, group 128 (the MoE benchmark's format).
    pub kernel IdxU4 { a: f16, b: u4, scale: group(128), layout: moe_indexed, arch: [sm_90a] }

    /// MXFP4 experts with a bias, bf16.
    pub kernel IdxMxfp4 { a: bf16, b: e2m1, scale: group(32, ue8m0), bias: true, layout: moe_indexed, arch: [sm_90a] }

    /// A gate-up projection: zero points, SiLU-GLU of the halves.
    pub kernel IdxGlu { a: f16, b: u4, scale: group(64), zero_point: int, epilogue: silu_glu, layout: moe_indexed, arch: [sm_90a] }

    /// i8 experts with channel scales and a bias, rows contiguous per expert.
    pub kernel ContI8 { a: bf16, b: i8, scale: channel, bias: true, layout: moe_grouped_contiguous, arch: [sm_90a] }

    /// Interleaved SiLU-GLU, rows contiguous per expert.
    pub kernel ContGlu { a: f16, b: i4, scale: group(128), epilogue: silu_glu_interleaved, layout: moe_grouped_contiguous, arch: [sm_90a] }

    /// NVFP4 experts, masked rows.
    pub kernel MaskNvfp4 { a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32), layout: moe_grouped_masked, arch: [sm_90a] }

    /// u4 with zero points, bf16, masked rows.
    pub kernel MaskU4 { a: bf16, b: u4, scale: group(128), zero_point: int, layout: moe_grouped_masked, arch: [sm_90a] }

    /// W4A8 FP8 experts (the activations quantized per token by the launch), group 128.
    pub kernel IdxE4U4 { a: e4m3, b: u4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a] }

    /// W4A8 INT8 gate-up experts: zero points, SiLU-GLU of the halves, bf16.
    pub kernel IdxS8Glu { a: i8, b: u4, c: bf16, scale: group(64, bf16), zero_point: int, epilogue: silu_glu, layout: moe_indexed, arch: [sm_90a] }

    /// W4A8 FP8 with interleaved SiLU-GLU, rows contiguous per expert.
    pub kernel ContE4Glu { a: e4m3, b: i4, c: f16, scale: group(128, f16), epilogue: silu_glu_interleaved, layout: moe_grouped_contiguous, arch: [sm_90a] }

    /// W4A8 MXFP4 experts (e2m1, ue8m0 scales of 32) with a bias under e4m3 activations, bf16.
    pub kernel IdxE4Mxfp4 { a: e4m3, b: e2m1, c: bf16, scale: group(32, ue8m0), bias: true, layout: moe_indexed, arch: [sm_90a] }

    /// W8A8 FP8 experts with channel scales, masked rows.
    pub kernel MaskE4E4 { a: e4m3, b: e4m3, c: bf16, scale: channel(f32), layout: moe_grouped_masked, arch: [sm_90a] }

    /// W8A8 FP8 with 128 x 128 weight blocks and 1 x 128 activation groups, `moe_indexed` (DeepSeek-V3).
    pub kernel IdxE4E4Block { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), layout: moe_indexed, arch: [sm_90a] }

    /// The dense SiLU-GLU epilogue, halves and interleaved.
    pub kernel DenseGlu { a: f16, b: u4, scale: group(128), epilogue: silu_glu, arch: [sm_90a] }
    pub kernel DenseGluInter { a: bf16, b: i4, scale: group(64), epilogue: silu_glu_interleaved, arch: [sm_90a] }
}

#[test]
fn gpu_moe_route_matches_host() {
    let name = "gpu_moe_route_matches_host";
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<IdxU4>(&s).expect("load");
    let mut rng = Rng::new(seed());
    let mut cases = 0;
    for &e in &EXPERTS {
        for &top_k in &TOP_KS {
            for &tokens in &TOKENS {
                for how in ROUTINGS {
                    let ids = choices(&mut rng, tokens, top_k, e, how);
                    let d_ids = s.clone_htod(&ids).expect("ids");
                    let routing = gemm.route(&d_ids, tokens, top_k, e).expect("route");
                    let got = routing.to_host(&s).expect("read routing");
                    let want = route_indexed(&ids, e, routing.block_m());
                    assert_eq!(got, want, "E={e} top_k={top_k} tokens={tokens} {how:?}");
                    assert!(want.slots_used <= routing.capacity());
                    cases += 1;
                }
            }
        }
    }
    eprintln!("{name}: {cases} routings equal to the host's");
}

fn indexed_suite<T: Element, K: humming::GemmKernel<A = T, C = T>>(name: &str, n: usize, k: usize) {
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<K>(&s).expect("load");
    let mut rng = Rng::new(seed());
    let (mut worst, mut cases) = (0f64, 0);
    for &e in &EXPERTS {
        // Few distinct experts' weights: the kernel reads each expert's own copy all the same.
        let distinct = experts_for(&mut rng, &K::DESCRIPTOR, e.min(8), n, k);
        let experts: Vec<QuantizedWeights> = (0..e)
            .map(|i| distinct[i % distinct.len()].clone())
            .collect();
        let dw = gemm.upload_experts(&experts).expect("upload");
        for (ti, &top_k) in TOP_KS.iter().enumerate() {
            for (mi, &tokens) in TOKENS.iter().enumerate() {
                if quick() && tokens == 1000 {
                    continue;
                }
                let how = ROUTINGS[(ti + mi + e) % ROUTINGS.len()];
                let err = indexed_case::<T, K>(
                    &s,
                    &gemm,
                    &experts,
                    &dw,
                    &mut rng,
                    tokens,
                    top_k,
                    how,
                    top_k == 1,
                    (gemm.options(), 0),
                );
                worst = worst.max(err);
                cases += 1;
            }
        }
    }
    eprintln!("{name}: {cases} cases, worst relative error {worst:.2e}");
}

/// Every tile of an indexed kernel (block M forced), each with the runtime's K splits and with 3
/// (the split-K workspace tails of the `mma.sync` and `wgmma` tiles, whose epilogues differ).
fn every_tile<T: Element, K: humming::GemmKernel<A = T, C = T>>(name: &str) {
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<K>(&s).expect("load");
    let mut rng = Rng::new(seed());
    let (n, k, e) = (256, 768, 8);
    let experts = experts_for(&mut rng, &K::DESCRIPTOR, e, n, k);
    let dw = gemm.upload_experts(&experts).expect("upload");
    let (mut worst, mut cases) = (0f64, 0);
    for t in gemm.tiles() {
        for split_k in [
            cuda::SplitK::Auto,
            cuda::SplitK::Fixed(3.try_into().unwrap()),
        ] {
            let options = cuda::LaunchOptions {
                split_k,
                ..gemm.options()
            };
            for (tokens, how) in [
                (5, Routing::Uniform),
                (300, Routing::Invalid),
                (200, Routing::Hot),
            ] {
                let err = indexed_case::<T, K>(
                    &s,
                    &gemm,
                    &experts,
                    &dw,
                    &mut rng,
                    tokens,
                    2,
                    how,
                    true,
                    (options, t.tile.block_m as usize),
                );
                worst = worst.max(err);
                cases += 1;
            }
        }
    }
    eprintln!("{name}: {cases} cases, worst relative error {worst:.2e}");
}

#[test]
fn gpu_moe_indexed_every_tile() {
    every_tile::<f16, IdxU4>("gpu_moe_indexed_every_tile");
}

#[test]
fn gpu_moe_indexed_every_tile_w4a8() {
    every_tile::<f16, IdxE4U4>("gpu_moe_indexed_every_tile_w4a8");
}

#[test]
fn gpu_moe_indexed_u4() {
    indexed_suite::<f16, IdxU4>("gpu_moe_indexed_u4", 128, 256);
}

#[test]
fn gpu_moe_indexed_mxfp4_bias_bf16() {
    indexed_suite::<bf16, IdxMxfp4>("gpu_moe_indexed_mxfp4_bias_bf16", 192, 320);
}

#[test]
fn gpu_moe_indexed_glu() {
    indexed_suite::<f16, IdxGlu>("gpu_moe_indexed_glu", 256, 192);
}

#[test]
fn gpu_moe_indexed_w4a8_fp8() {
    indexed_suite::<f16, IdxE4U4>("gpu_moe_indexed_w4a8_fp8", 128, 256);
}

#[test]
fn gpu_moe_indexed_w8a8_fp8_block() {
    indexed_suite::<bf16, IdxE4E4Block>("gpu_moe_indexed_w8a8_fp8_block", 256, 384);
}

#[test]
fn gpu_moe_indexed_w4a8_mxfp4_bias() {
    indexed_suite::<bf16, IdxE4Mxfp4>("gpu_moe_indexed_w4a8_mxfp4_bias", 192, 320);
}

#[test]
fn gpu_moe_indexed_w4a8_int8_glu() {
    indexed_suite::<bf16, IdxS8Glu>("gpu_moe_indexed_w4a8_int8_glu", 256, 192);
}

fn grouped_suite<T: Element, K: humming::GemmKernel<A = T, C = T>>(
    name: &str,
    n: usize,
    k: usize,
    masked: bool,
) {
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<K>(&s).expect("load");
    let sp = K::DESCRIPTOR;
    let nc = humming::spec::layout::c_columns(sp.epilogue, n);
    let mut rng = Rng::new(seed());
    let (mut worst, mut cases) = (0f64, 0);
    for &e in &EXPERTS {
        let distinct = experts_for(&mut rng, &sp, e.min(8), n, k);
        let experts: Vec<QuantizedWeights> = (0..e)
            .map(|i| distinct[i % distinct.len()].clone())
            .collect();
        let dw = gemm.upload_experts(&experts).expect("upload");
        for &tokens in &TOKENS {
            // (Masked: A holds E * max_m rows; 1000 per expert only up to 8 experts.)
            if (quick() || (masked && e > 8)) && tokens == 1000 {
                continue;
            }
            let (rows, route): (usize, Vec<i32>) = if masked {
                let max_m = tokens.max(1);
                let counts = (0..e)
                    .map(|_| match rng.below(4) {
                        0 => 0,
                        1 => max_m as i32,
                        _ => rng.below(max_m + 1) as i32,
                    })
                    .collect();
                (e * max_m, counts)
            } else {
                (tokens, offsets(&mut rng, e, tokens))
            };
            let (a, af) = random_a_for::<T>(&mut rng, rows, k, &sp);
            let (bias, bias_f) = bias_for::<T>(&mut rng, e, n);
            let d_a = s.clone_htod(&a).expect("a");
            let d_route = s.clone_htod(&route).expect("route");
            let d_bias = sp.bias.then(|| s.clone_htod(&bias).expect("bias"));
            let mut c = poisoned::<T>(&s, rows * nc);
            let rows_desc = if masked {
                let max_m = rows / e;
                gemm.run_masked(
                    &d_a,
                    max_m,
                    &d_route,
                    max_m.div_ceil(2),
                    &dw,
                    d_bias.as_ref(),
                    &mut c,
                )
                .expect("run_masked");
                MoeRows::Masked {
                    counts: &route,
                    max_m,
                }
            } else {
                gemm.run_contiguous(&d_a, rows, &d_route, &dw, d_bias.as_ref(), &mut c)
                    .expect("run_contiguous");
                MoeRows::Contiguous { offsets: &route }
            };
            let got = s.clone_dtoh(&c).expect("read C");
            let want = reference_moe(
                &experts,
                &af,
                rows,
                &rows_desc,
                sp.bias.then_some(&bias_f[..]),
            )
            .expect("reference");
            let err = check_rows(&format!("{} E={e} rows={rows}", K::NAME), &got, &want);
            worst = worst.max(err);
            cases += 1;
        }
    }
    eprintln!("{name}: {cases} cases, worst relative error {worst:.2e}");
}

#[test]
fn gpu_moe_contiguous_i8_bias_bf16() {
    grouped_suite::<bf16, ContI8>("gpu_moe_contiguous_i8_bias_bf16", 128, 512, false);
}

#[test]
fn gpu_moe_contiguous_glu_interleaved() {
    grouped_suite::<f16, ContGlu>("gpu_moe_contiguous_glu_interleaved", 256, 256, false);
}

#[test]
fn gpu_moe_masked_nvfp4() {
    grouped_suite::<f16, MaskNvfp4>("gpu_moe_masked_nvfp4", 128, 256, true);
}

#[test]
fn gpu_moe_masked_u4_bf16() {
    grouped_suite::<bf16, MaskU4>("gpu_moe_masked_u4_bf16", 192, 384, true);
}

#[test]
fn gpu_moe_contiguous_w4a8_glu_interleaved() {
    grouped_suite::<f16, ContE4Glu>("gpu_moe_contiguous_w4a8_glu_interleaved", 256, 256, false);
}

#[test]
fn gpu_moe_masked_w8a8_fp8() {
    grouped_suite::<bf16, MaskE4E4>("gpu_moe_masked_w8a8_fp8", 128, 256, true);
}

/// NaN activations of every token routed to expert 3 reach only the rows of those tokens.
#[test]
fn gpu_moe_rows_isolated() {
    let name = "gpu_moe_rows_isolated";
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<IdxU4>(&s).expect("load");
    let mut rng = Rng::new(seed());
    let (e, n, k, tokens, top_k) = (8, 128, 256, 64, 2);
    let experts = experts_for(&mut rng, &IdxU4::DESCRIPTOR, e, n, k);
    let dw = gemm.upload_experts(&experts).expect("upload");
    let ids = choices(&mut rng, tokens, top_k, e, Routing::Uniform);
    let (mut a, _) = random_a::<f16>(&mut rng, tokens, k);
    let hot: Vec<bool> = (0..tokens)
        .map(|t| ids[t * top_k..(t + 1) * top_k].contains(&3))
        .collect();
    for (t, _) in hot.iter().enumerate().filter(|(_, h)| **h) {
        a[t * k..(t + 1) * k].fill(f16::NAN);
    }
    let d_ids = s.clone_htod(&ids).expect("ids");
    let routing = gemm.route(&d_ids, tokens, top_k, e).expect("route");
    let d_a = s.clone_htod(&a).expect("a");
    let mut c = poisoned::<f16>(&s, tokens * top_k * n);
    gemm.run_indexed(&d_a, &routing, &dw, None, None, &mut c)
        .expect("run");
    let got = s.clone_dtoh(&c).expect("read");
    for slot in 0..tokens * top_k {
        let row = &got[slot * n..(slot + 1) * n];
        let nan = row.iter().any(|v| v.is_nan());
        assert_eq!(
            nan,
            hot[slot / top_k],
            "slot {slot}: NaN {nan}, its token's rows NaN {}",
            hot[slot / top_k]
        );
    }
    eprintln!(
        "{name}: NaN rows of {} tokens stayed in their own rows",
        hot.iter().filter(|h| **h).count()
    );
}

/// A whole MoE block: route, gate-up (SiLU-GLU), down (the router's weights, top_k = 1 over the
/// expanded rows), combine; one CUDA graph replayed on new routings equals the launches.
#[test]
fn gpu_moe_block() {
    let name = "gpu_moe_block";
    let Some(s) = gpu_or_skip(name) else { return };
    // SAFETY: before any buffer of this test is allocated, and every one of them is used on this one
    // stream only. With cudarc's event tracking on, each launch in the capture would wait on events
    // recorded before it, which invalidates the capture.
    unsafe { s.context().disable_event_tracking() };
    let up = Gemm::load::<IdxGlu>(&s).expect("load gate-up");
    let down = Gemm::load::<IdxU4>(&s).expect("load down");
    let mut rng = Rng::new(seed());
    let (e, top_k, tokens, hidden, inter) = (16, 4, 48, 256, 128);
    let w13 = experts_for(&mut rng, &IdxGlu::DESCRIPTOR, e, 2 * inter, hidden);
    let w2 = experts_for(&mut rng, &IdxU4::DESCRIPTOR, e, hidden, inter);
    let (d13, d2) = (
        up.upload_experts(&w13).expect("w13"),
        down.upload_experts(&w2).expect("w2"),
    );
    let (x, xf) = random_a::<f16>(&mut rng, tokens, hidden);
    let d_x = s.clone_htod(&x).expect("x");
    let slots = tokens * top_k;
    let mut h = s.alloc_zeros::<f16>(slots * inter).expect("h");
    let mut y = s.alloc_zeros::<f16>(slots * hidden).expect("y");
    let mut out = s.alloc_zeros::<f16>(tokens * hidden).expect("out");
    let ids0 = choices(&mut rng, tokens, top_k, e, Routing::Uniform);
    let mut d_ids = s.clone_htod(&ids0).expect("ids");
    let wts0: Vec<f32> = (0..slots).map(|_| rng.uniform().abs()).collect();
    let mut d_w = s.clone_htod(&wts0).expect("weights");
    let mut r_up = up.route(&d_ids, tokens, top_k, e).expect("route");
    // The down projection's rows are the slots: token t * top_k + j, top_k = 1, the same experts.
    let down_ids_dev = |ids: &[i32]| s.clone_htod(ids).expect("down ids");
    let mut d_ids_down = down_ids_dev(&ids0);
    let mut r_down = down.route(&d_ids_down, slots, 1, e).expect("route down");
    let block = |d_ids: &cudarc::driver::CudaSlice<i32>,
                 d_ids_down: &cudarc::driver::CudaSlice<i32>,
                 d_w: &cudarc::driver::CudaSlice<f32>,
                 r_up: &mut cuda::Routing,
                 r_down: &mut cuda::Routing,
                 h: &mut cudarc::driver::CudaSlice<f16>,
                 y: &mut cudarc::driver::CudaSlice<f16>,
                 out: &mut cudarc::driver::CudaSlice<f16>| {
        up.route_into(d_ids, r_up).expect("route");
        down.route_into(d_ids_down, r_down).expect("route down");
        up.run_indexed(&d_x, r_up, &d13, None, None, h)
            .expect("gate-up");
        down.run_indexed(&*h, r_down, &d2, None, Some(d_w), y)
            .expect("down");
        down.combine(&*y, d_ids, (tokens, top_k, e), hidden, None, out)
            .expect("combine");
    };
    let host_block = |ids: &[i32], wts: &[f32]| -> Vec<f64> {
        let hr = reference_moe(
            &w13,
            &xf,
            tokens,
            &MoeRows::Indexed {
                topk_ids: ids,
                top_k,
                weights: None,
            },
            None,
        )
        .expect("ref gate-up");
        // The kernel's h is rounded to f16 before the down projection.
        let hf: Vec<f64> = hr.c.iter().map(|&v| f16::from_f64(v).to_f64()).collect();
        let yr = reference_moe(
            &w2,
            &hf,
            slots,
            &MoeRows::Indexed {
                topk_ids: ids,
                top_k: 1,
                weights: Some(wts),
            },
            None,
        )
        .expect("ref down");
        let mut o = vec![0f64; tokens * hidden];
        for t in 0..tokens {
            for j in 0..top_k {
                if yr.written[t * top_k + j] {
                    for c in 0..hidden {
                        o[t * hidden + c] +=
                            f16::from_f64(yr.c[(t * top_k + j) * hidden + c]).to_f64();
                    }
                }
            }
        }
        o
    };
    // Launches, then a graph of the same launches replayed on fresh routings.
    block(
        &d_ids,
        &d_ids_down,
        &d_w,
        &mut r_up,
        &mut r_down,
        &mut h,
        &mut y,
        &mut out,
    );
    let got: Vec<f64> = s
        .clone_dtoh(&out)
        .expect("out")
        .iter()
        .map(|v| v.to_f64())
        .collect();
    let err = reference::relative_error(&got, &host_block(&ids0, &wts0));
    assert!(err < 1e-2, "{name}: launches vs reference {err:.3e}");
    s.synchronize().expect("launches");
    s.begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .expect("capture");
    block(
        &d_ids,
        &d_ids_down,
        &d_w,
        &mut r_up,
        &mut r_down,
        &mut h,
        &mut y,
        &mut out,
    );
    // (An error cudarc stored during the capture: taken before ending it.)
    let stored = s.context().check_err();
    let graph = s
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .expect("end capture")
        .expect("a graph");
    stored.expect("no error during the capture");
    let replays = if quick() { 2 } else { 6 };
    let mut worst = err;
    for r in 0..replays {
        let how = ROUTINGS[r % ROUTINGS.len()];
        let ids = choices(&mut rng, tokens, top_k, e, how);
        let wts: Vec<f32> = (0..slots).map(|_| rng.uniform().abs()).collect();
        s.memcpy_htod(&ids, &mut d_ids).expect("ids");
        s.memcpy_htod(&ids, &mut d_ids_down).expect("down ids");
        s.memcpy_htod(&wts, &mut d_w).expect("weights");
        graph.launch().expect("replay");
        let replayed = s.clone_dtoh(&out).expect("out");
        block(
            &d_ids,
            &d_ids_down,
            &d_w,
            &mut r_up,
            &mut r_down,
            &mut h,
            &mut y,
            &mut out,
        );
        let launched = s.clone_dtoh(&out).expect("out");
        assert!(
            replayed
                .iter()
                .zip(&launched)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: replay {r} differs from the launches"
        );
        let got: Vec<f64> = launched.iter().map(|v| v.to_f64()).collect();
        let err = reference::relative_error(&got, &host_block(&ids, &wts));
        assert!(
            err < 1e-2,
            "{name}: replay {r} ({how:?}) vs reference {err:.3e}"
        );
        worst = worst.max(err);
    }
    eprintln!(
        "{name}: route + gate-up (SiLU-GLU) + down + combine, {replays} graph replays = launches; worst {worst:.2e}"
    );
}

fn dense_glu<T: Element, K: humming::GemmKernel<A = T, C = T>>(name: &str) {
    let Some(s) = gpu_or_skip(name) else { return };
    let gemm = Gemm::load::<K>(&s).expect("load");
    let mut rng = Rng::new(seed());
    let (n, k) = (512, 384);
    let w = QuantizedWeights::quantize(&K::DESCRIPTOR, n, k, &random_weights(&mut rng, n, k))
        .expect("quantize");
    let dw = gemm.upload(&w).expect("upload");
    let mut worst = 0f64;
    for m in [1, 16, 33, 128] {
        let (a, af) = random_a::<T>(&mut rng, m, k);
        let d_a = s.clone_htod(&a).expect("a");
        let mut c = poisoned::<T>(&s, m * n / 2);
        gemm.run(&d_a, m, &dw, None, &mut c).expect("run");
        let got = s.clone_dtoh(&c).expect("read");
        let want = reference::reference_gemm(&w, &af, m, None).expect("reference");
        assert!(
            got[m * n / 2..].iter().all(|v| v.to_bits() == POISON),
            "{name}: C written past its end"
        );
        let g: Vec<f64> = got[..m * n / 2].iter().map(|v| v.to_f64()).collect();
        assert!(
            g.iter().all(|v| v.is_finite()),
            "{name}: M={m}: an element not written"
        );
        let err = reference::relative_error(&g, &want);
        assert!(err <= tol::<T>(), "{name}: M={m}: {err:.3e}");
        worst = worst.max(err);
    }
    eprintln!("{name}: M 1, 16, 33, 128: worst {worst:.2e}");
}

#[test]
fn gpu_dense_glu() {
    dense_glu::<f16, DenseGlu>("gpu_dense_glu");
    dense_glu::<bf16, DenseGluInter>("gpu_dense_glu_interleaved");
}

/// The grouped layouts read their offsets and counts on the GPU: one CUDA graph of both launches,
/// replayed on new offsets and counts, equals the launches bit for bit and the reference.
#[test]
fn gpu_moe_grouped_graph() {
    let name = "gpu_moe_grouped_graph";
    let Some(s) = gpu_or_skip(name) else { return };
    // SAFETY: before any buffer of this test is allocated; every one is used on this stream only.
    unsafe { s.context().disable_event_tracking() };
    let cont = Gemm::load::<ContI8>(&s).expect("load contiguous");
    let mask = Gemm::load::<MaskNvfp4>(&s).expect("load masked");
    let mut rng = Rng::new(seed());
    let (e, n, k, rows, max_m) = (16, 128, 256, 200, 24);
    let wc = experts_for(&mut rng, &ContI8::DESCRIPTOR, e, n, k);
    let wm = experts_for(&mut rng, &MaskNvfp4::DESCRIPTOR, e, n, k);
    let (dc, dm) = (
        cont.upload_experts(&wc).expect("upload"),
        mask.upload_experts(&wm).expect("upload"),
    );
    let (ac, acf) = random_a::<bf16>(&mut rng, rows, k);
    let (am, amf) = random_a::<f16>(&mut rng, e * max_m, k);
    let (bias, bias_f) = bias_for::<bf16>(&mut rng, e, n);
    let (d_ac, d_am, d_bias) = (
        s.clone_htod(&ac).expect("a"),
        s.clone_htod(&am).expect("a"),
        s.clone_htod(&bias).expect("bias"),
    );
    let new_counts =
        |rng: &mut Rng| -> Vec<i32> { (0..e).map(|_| rng.below(max_m + 1) as i32).collect() };
    let (mut offs, mut counts) = (offsets(&mut rng, e, rows), new_counts(&mut rng));
    let mut d_offs = s.clone_htod(&offs).expect("offsets");
    let mut d_counts = s.clone_htod(&counts).expect("counts");
    let mut cc = poisoned::<bf16>(&s, rows * n);
    let mut cm = poisoned::<f16>(&s, e * max_m * n);
    let launch = |d_offs: &cudarc::driver::CudaSlice<i32>,
                  d_counts: &cudarc::driver::CudaSlice<i32>,
                  cc: &mut cudarc::driver::CudaSlice<bf16>,
                  cm: &mut cudarc::driver::CudaSlice<f16>| {
        cont.run_contiguous(&d_ac, rows, d_offs, &dc, Some(&d_bias), cc)
            .expect("contiguous");
        mask.run_masked(&d_am, max_m, d_counts, max_m / 2, &dm, None, cm)
            .expect("masked");
    };
    s.synchronize().expect("set-up");
    s.begin_capture(cudarc::driver::sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
        .expect("capture");
    launch(&d_offs, &d_counts, &mut cc, &mut cm);
    let stored = s.context().check_err();
    let graph = s
        .end_capture(cudarc::driver::sys::CUgraphInstantiate_flags(0))
        .expect("end capture")
        .expect("a graph");
    stored.expect("no error during the capture");
    let replays = if quick() { 2 } else { 5 };
    for r in 0..replays {
        offs = offsets(&mut rng, e, rows);
        counts = new_counts(&mut rng);
        s.memcpy_htod(&offs, &mut d_offs).expect("offsets");
        s.memcpy_htod(&counts, &mut d_counts).expect("counts");
        // Fresh poison, so that rows the new routing leaves out must stay poisoned.
        s.memcpy_htod(&vec![bf16::from_bits(POISON); rows * n + GUARD], &mut cc)
            .expect("poison");
        s.memcpy_htod(
            &vec![f16::from_bits(POISON); e * max_m * n + GUARD],
            &mut cm,
        )
        .expect("poison");
        graph.launch().expect("replay");
        let (gc, gm) = (s.clone_dtoh(&cc).expect("c"), s.clone_dtoh(&cm).expect("c"));
        let want_c = reference_moe(
            &wc,
            &acf,
            rows,
            &MoeRows::Contiguous { offsets: &offs },
            Some(&bias_f),
        )
        .expect("reference");
        let want_m = reference_moe(
            &wm,
            &amf,
            e * max_m,
            &MoeRows::Masked {
                counts: &counts,
                max_m,
            },
            None,
        )
        .expect("reference");
        check_rows(&format!("{name} replay {r} contiguous"), &gc, &want_c);
        check_rows(&format!("{name} replay {r} masked"), &gm, &want_m);
        launch(&d_offs, &d_counts, &mut cc, &mut cm);
        let (lc, lm) = (s.clone_dtoh(&cc).expect("c"), s.clone_dtoh(&cm).expect("c"));
        assert!(
            lc.iter().zip(&gc).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: replay {r} contiguous differs"
        );
        assert!(
            lm.iter().zip(&gm).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name}: replay {r} masked differs"
        );
    }
    eprintln!(
        "{name}: contiguous and masked launches in one graph, {replays} replays on new offsets and counts = launches and the reference"
    );
}
