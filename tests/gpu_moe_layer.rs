//! GPU correctness of a whole MoE layer (`humming::cuda::MoeLayer`: route, gate-up with SiLU-GLU, down
//! times the router's weights, combine) against its f64 reference (`humming::moe::reference_moe_layer`,
//! which rounds where the launches round), in both forms:
//!
//! - `gpu_moe_layer_w4a8`: persistent W4A8 FP8 kernels (sm_90a): gate and up in the routing's
//!   gathered order, SiLU-GLU with the down projection's input quantization;
//! - `gpu_moe_layer_w4a16`: a W4A16 gate-up kernel with the SiLU-GLU epilogue and a W4A16 down kernel.
//!
//! Each over several token counts (0 among them) and top_k, uniform routings and routings with a fifth
//! of the choices invalid, the buffers of a batch size reused across calls. Without a GPU every test
//! prints that it was skipped.

use half::f16;
use humming::cuda::{Gemm, MoeLayer};
use humming::moe::reference_moe_layer;
use humming::quant::QuantizedWeights;
use std::sync::Arc;

#[path = "../humming-runtime/tests/gpu_common/mod.rs"]
mod gpu_common;
use gpu_common::{Rng, gpu_or_skip, seed};

#[allow(dead_code)]
mod gpu_moe_common;
use gpu_moe_common::{Routing, choices, experts_for, random_a};

type Stream = Arc<cudarc::driver::CudaStream>;

humming::gemm! {
    /// W4A8 FP8 experts, the gate-up and the down projection alike (no epilogue: the layer's form).
    pub kernel LayerW4A8 { a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a] }
    /// W4A16 gate-up with SiLU-GLU.
    pub kernel LayerGateUp { a: f16, b: i4, scale: group(128), epilogue: silu_glu, layout: moe_indexed }
    /// W4A16 down.
    pub kernel LayerDown { a: f16, b: i4, scale: group(128), layout: moe_indexed }
}

fn layer_suite(name: &str, s: &Stream, up: &Gemm<f16, f16>, down: &Gemm<f16, f16>) {
    let mut rng = Rng::new(seed());
    let (e, hidden, inter) = (16, 256, 384);
    let w13: Vec<QuantizedWeights> = experts_for(&mut rng, up.spec(), e, 2 * inter, hidden);
    let w2: Vec<QuantizedWeights> = experts_for(&mut rng, down.spec(), e, hidden, inter);
    let (d13, d2) = (
        up.upload_experts(&w13).expect("upload w13"),
        down.upload_experts(&w2).expect("upload w2"),
    );
    let layer = MoeLayer::new(up, &d13, down, &d2).expect("layer");
    let (mut worst, mut cases) = (0f64, 0);
    for (tokens, top_k) in [(0, 2), (1, 4), (9, 2), (77, 4), (300, 8)] {
        let mut bufs = layer.buffers(tokens, top_k).expect("buffers");
        for round in 0..2 {
            let how = if round == 0 {
                Routing::Uniform
            } else {
                Routing::Invalid
            };
            let ids = choices(&mut rng, tokens, top_k, e, how);
            let weights: Vec<f32> = (0..tokens * top_k)
                .map(|_| 0.25 + 0.5 * rng.uniform().abs())
                .collect();
            let (x, xf) = random_a::<f16>(&mut rng, tokens, hidden);
            let want = reference_moe_layer(
                &w13,
                &w2,
                &xf,
                tokens,
                &ids,
                top_k,
                &weights,
                humming::spec::DType::F16,
            )
            .expect("reference");
            let d_x = s.clone_htod(&x).expect("x");
            let d_ids = s.clone_htod(&ids).expect("ids");
            let d_w = s.clone_htod(&weights).expect("weights");
            let mut out = s
                .clone_htod(&vec![f16::NAN; (tokens * hidden).max(1)])
                .expect("out");
            layer
                .forward(&d_x, &d_ids, &d_w, &mut bufs, &mut out)
                .expect("forward");
            let got: Vec<f64> = s.clone_dtoh(&out).expect("read")[..tokens * hidden]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            assert!(
                got.iter().all(|v| v.is_finite()),
                "{name}: a value of out is not finite"
            );
            let err = humming::reference::relative_error(&got, &want);
            let what = format!("{name}: tokens={tokens} top_k={top_k} {how:?}");
            assert!(
                err <= 1e-2 || tokens == 0,
                "{what}: relative error {err:.3e}"
            );
            worst = worst.max(if tokens == 0 { 0.0 } else { err });
            cases += 1;
        }
    }
    eprintln!("{name}: {cases} calls, worst relative error {worst:.2e}");
}

#[test]
fn gpu_moe_layer_w4a8() {
    let name = "gpu_moe_layer_w4a8";
    let Some(s) = gpu_or_skip(name) else { return };
    let g = Gemm::load::<LayerW4A8>(&s).expect("load");
    if !g.tiles().iter().all(|t| t.tile.persistent()) {
        eprintln!("{name}: skipped (no persistent tiles on this GPU)");
        return;
    }
    layer_suite(name, &s, &g, &g);
}

#[test]
fn gpu_moe_layer_w4a16() {
    let name = "gpu_moe_layer_w4a16";
    let Some(s) = gpu_or_skip(name) else { return };
    let up = Gemm::load::<LayerGateUp>(&s).expect("load");
    let down = Gemm::load::<LayerDown>(&s).expect("load");
    layer_suite(name, &s, &up, &down);
}
