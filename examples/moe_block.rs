//! A mixture-of-experts block through generated kernels, one library call (`cuda::MoeLayer`): the
//! router's top-k choices routed on the GPU, the gate-up projection of every expert with its SiLU-GLU
//! fused into the epilogue, the down projection multiplied by the router's weights, and the sum of
//! each token's top-k rows; checked against the f64 CPU reference of the same quantized experts
//! (`reference_moe_layer`). `examples/bench_moe_layer.rs` times the layer, W4A16 and W4A8.
//!
//! ```sh
//! cargo run --release --example moe_block -- [--tokens 64] [--experts 32] [--top-k 4] \
//!     [--hidden 1024] [--inter 512]
//! ```
//!
//! Without a GPU it computes the CPU reference only and says so (exit status 0).

use clap::Parser;
use half::f16;
use humming::moe::reference_moe_layer;
use humming::quant::QuantizedWeights;
use humming::spec::DType;
use humming::{cuda, reference};
use std::process::ExitCode;

mod common;
use common::host::Rng;

humming::gemm! {
    /// The experts' gate-up projection `[2 I, H]` (gates, then up projections: vLLM's `w13`), W4A16
    /// with group-128 scales; C is `silu(gate) · up`, `[slots, I]`.
    pub kernel GateUp { a: f16, b: i4, scale: group(128), epilogue: silu_glu, layout: moe_indexed }

    /// The experts' down projection `[H, I]`, the same format.
    pub kernel Down { a: f16, b: i4, scale: group(128), layout: moe_indexed }
}

#[derive(Parser)]
#[command(
    about = "A MoE block (route, gate-up with SiLU-GLU, down, combine) against the CPU reference."
)]
struct Args {
    /// Tokens M.
    #[arg(long, default_value_t = 64)]
    tokens: usize,
    /// Experts E.
    #[arg(long, default_value_t = 32)]
    experts: usize,
    /// Experts per token.
    #[arg(long, default_value_t = 4)]
    top_k: usize,
    /// Hidden size H (a multiple of 128).
    #[arg(long, default_value_t = 1024)]
    hidden: usize,
    /// Intermediate size I of each expert (a multiple of 128).
    #[arg(long, default_value_t = 512)]
    inter: usize,
}

fn experts(
    rng: &mut Rng,
    spec: &humming::spec::KernelSpec,
    e: usize,
    n: usize,
    k: usize,
) -> humming::Result<Vec<QuantizedWeights>> {
    (0..e)
        .map(|_| {
            let w: Vec<f32> = (0..n * k).map(|_| 0.05 * rng.uniform()).collect();
            QuantizedWeights::quantize(spec, n, k, &w)
        })
        .collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moe_block: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> humming::Result<()> {
    let (m, e, top_k, h, i) = (
        args.tokens,
        args.experts,
        args.top_k,
        args.hidden,
        args.inter,
    );
    let bad = |arg: &'static str, msg: String| Err(humming::Error::InvalidArgument { arg, msg });
    if e == 0 || top_k == 0 || top_k > e {
        return bad(
            "top_k",
            format!("need 1 <= top_k <= experts; found top_k = {top_k}, experts = {e}"),
        );
    }
    if h == 0 || i == 0 || !h.is_multiple_of(128) || !i.is_multiple_of(128) {
        return bad(
            "hidden",
            format!("H and I must be positive multiples of 128 (the group size); found {h}, {i}"),
        );
    }
    let slots = m * top_k;
    let mut rng = Rng::new(0x5EED);
    let w13 = experts(&mut rng, &GateUp::DESCRIPTOR, e, 2 * i, h)?;
    let w2 = experts(&mut rng, &Down::DESCRIPTOR, e, h, i)?;
    let x: Vec<f16> = (0..m * h).map(|_| f16::from_f32(rng.uniform())).collect();
    // The router: top_k distinct experts per token and softmax-like weights.
    let mut ids = Vec::with_capacity(slots);
    let mut weights = Vec::with_capacity(slots);
    for _ in 0..m {
        // top_k distinct experts: a random start, then steps of E / top_k (top_k <= E).
        let first = (rng.next_u64() % e as u64) as usize;
        let step = e / top_k;
        for j in 0..top_k {
            ids.push(((first + j * step + j / (e / step).max(1)) % e) as i32);
            weights.push(1.0 / top_k as f32);
        }
    }

    // The f64 reference of the whole layer (rounding to f16 where the launches round).
    let xf: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
    let want = reference_moe_layer(&w13, &w2, &xf, m, &ids, top_k, &weights, DType::F16)?;

    let stream = match cuda::default_stream(0) {
        Ok(s) => s,
        Err(err) => {
            println!("no GPU ({err}): computed the CPU reference only, no kernel was run");
            println!(
                "SUMMARY: PASS (CPU only): MoE block of {m} tokens, {e} experts, top {top_k}, H = {h}, I = {i}"
            );
            return Ok(());
        }
    };
    let d = cuda::driver_err;
    let up = cuda::Gemm::load::<GateUp>(&stream)?;
    let down = cuda::Gemm::load::<Down>(&stream)?;
    let (d13, d2) = (up.upload_experts(&w13)?, down.upload_experts(&w2)?);
    let d_x = stream.clone_htod(&x).map_err(d("uploading x"))?;
    let d_ids = stream
        .clone_htod(&ids)
        .map_err(d("uploading the choices"))?;
    let d_w = stream
        .clone_htod(&weights)
        .map_err(d("uploading the weights"))?;
    let mut out = stream.alloc_zeros::<f16>(m * h).map_err(d("allocating"))?;

    // One call: route, gate-up with SiLU-GLU, down times the router's weights, combine.
    let layer = cuda::MoeLayer::new(&up, &d13, &down, &d2)?;
    let mut bufs = layer.buffers(m, top_k)?;
    layer.forward(&d_x, &d_ids, &d_w, &mut bufs, &mut out)?;
    let got: Vec<f64> = stream
        .clone_dtoh(&out)
        .map_err(d("reading the output"))?
        .iter()
        .map(|v| v.to_f64())
        .collect();
    let err = reference::relative_error(&got, &want);
    println!(
        "MoE block: {m} tokens, {e} experts, top {top_k}, H = {h}, I = {i}: block M {}; relative error vs f64 {err:.2e}",
        bufs.routing().block_m()
    );
    if err <= 1e-2 {
        println!("SUMMARY: PASS: MoE block against the CPU reference ({err:.2e}, tol 1e-2)");
        Ok(())
    } else {
        Err(humming::Error::InvalidArgument {
            arg: "result",
            msg: format!("relative error {err:.2e} above 1e-2"),
        })
    }
}
