//! Benchmark of a whole MoE layer (`humming::cuda::MoeLayer`: route, gate-up with SiLU-GLU, down times
//! the router's weights, combine) on MoE shapes, W4A8 FP8 and W4A16, against the DRAM floor of the
//! experts each routing touches.
//!
//! Shapes (humming-kernels' names): `qwen3_30b_a3b` (E = 128, top_k = 8, H = 2048, I = 768) and
//! `deepseek_v3` (E = 256, top_k = 8, H = 7168, I = 2048). For each model, format and M it uploads E
//! experts (expert e a copy of one of `--distinct` random ones), checks one call on tokens 0 and M - 1
//! against `reference_moe_layer` (C filled with NaN first), and times the whole call by CUDA-graph
//! replay (`examples/common/timing.rs`), the median per call. W4A8: one persistent kernel for both
//! projections, the layer's gathered form; W4A16: a gate-up kernel with the SiLU-GLU epilogue and a
//! down kernel.
//!
//! ```text
//! cargo run --release --example bench_moe_layer -- --models qwen3_30b_a3b --ms 1,16,128,1024
//! ```
//!
//! Output: a table, and `bench_moe_layer.json` in `--out` (default `$OUT`, else `./bench-out`).
//! Without a GPU it prints `no GPU: <reason>` and exits 0; a failed check makes the exit status 1.

use clap::Parser;
use cudarc::driver::CudaStream;
use humming::cuda::{Gemm, MoeLayer};
use humming::half::f16;
use humming::moe::reference_moe_layer;
use humming::quant::QuantizedWeights;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

mod common;
use common::bench_report::write_json;
use common::host::{Rng, random_matrix, random_routing, to_elements};
use common::timing::{Res, copy_bandwidth, replay};

humming::gemm! {
    /// W4A8 FP8 experts (e4m3 per token, i4 group 128): the gate-up and the down projection alike.
    pub kernel LayerW4A8 { a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a] }
    /// W4A16 gate-up with the SiLU-GLU epilogue.
    pub kernel LayerGateUpW4A16 { a: f16, b: i4, scale: group(128, f16), epilogue: silu_glu, layout: moe_indexed }
    /// W4A16 down.
    pub kernel LayerDownW4A16 { a: f16, b: i4, scale: group(128, f16), layout: moe_indexed }
}

#[derive(Parser)]
#[command(
    about = "Times a whole MoE layer (route, gate-up + SiLU-GLU, down, combine), W4A8 and W4A16."
)]
struct Args {
    /// Models, comma separated: qwen3_30b_a3b, deepseek_v3.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "qwen3_30b_a3b,deepseek_v3"
    )]
    models: Vec<String>,
    /// Formats, comma separated: w4a8, w4a16.
    #[arg(long, value_delimiter = ',', default_value = "w4a8,w4a16")]
    formats: Vec<String>,
    /// Values of M (tokens), comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128,1024,4096")]
    ms: Vec<usize>,
    /// Distinct random experts; expert e is a copy of distinct expert e % this.
    #[arg(long, default_value_t = 4)]
    distinct: usize,
    /// Timed graph replays per case (the median is reported).
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Calls per graph.
    #[arg(long, default_value_t = 10)]
    reps: usize,
    /// Folder for bench_moe_layer.json [default: $OUT, else ./bench-out].
    #[arg(long)]
    out: Option<PathBuf>,
}

/// (name, E, top_k, H, I)
const MODELS: [(&str, usize, usize, usize, usize); 2] = [
    ("qwen3_30b_a3b", 128, 8, 2048, 768),
    ("deepseek_v3", 256, 8, 7168, 2048),
];

#[derive(serde::Serialize)]
struct Row {
    model: String,
    format: String,
    m: usize,
    touched_experts: f64,
    floor_us: f64,
    layer_us: f64,
    rel_err: f64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let stream = match humming::cuda::default_stream(0) {
        Ok(s) => s,
        Err(e) => {
            println!("no GPU: {e}");
            return ExitCode::SUCCESS;
        }
    };
    // SAFETY: before any buffer is allocated: no launch captured into a graph waits on an event
    // recorded outside the capture.
    unsafe { stream.context().disable_event_tracking() };
    match run(&args, &stream) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bench_moe_layer: {e}");
            ExitCode::FAILURE
        }
    }
}

fn experts(
    spec: &humming::spec::KernelSpec,
    distinct: usize,
    n: usize,
    k: usize,
    seed: u64,
) -> Res<Vec<QuantizedWeights>> {
    (0..distinct)
        .map(|d| {
            let w: Vec<f32> = random_matrix(n, k, seed + d as u64, true)
                .iter()
                .map(|v| 0.05 * v)
                .collect();
            Ok(QuantizedWeights::quantize(spec, n, k, &w)?)
        })
        .collect()
}

fn run(args: &Args, s: &Arc<CudaStream>) -> Res<bool> {
    let out_dir = args
        .out
        .clone()
        .or_else(|| std::env::var_os("OUT").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("bench-out"));
    std::fs::create_dir_all(&out_dir)?;
    let bandwidth = copy_bandwidth(s, 2 << 30)?;
    println!("copy bandwidth {:.2} TB/s", bandwidth * 1e-12);
    println!("model          format  M      experts  floor us   layer us  / floor  rel err");
    let w4a8 = Gemm::load::<LayerW4A8>(s)?;
    let (up16, down16) = (
        Gemm::load::<LayerGateUpW4A16>(s)?,
        Gemm::load::<LayerDownW4A16>(s)?,
    );
    let mut rows = Vec::new();
    let mut ok = true;
    for &(model, e, top_k, hidden, inter) in MODELS
        .iter()
        .filter(|m| args.models.iter().any(|x| x == m.0))
    {
        for format in &args.formats {
            let (up, down) = match format.as_str() {
                "w4a8" => (&w4a8, &w4a8),
                "w4a16" => (&up16, &down16),
                other => return Err(format!("unknown format {other}").into()),
            };
            let d = args.distinct.clamp(1, e);
            let w13 = experts(up.spec(), d, 2 * inter, hidden, 11)?;
            let w2 = experts(down.spec(), d, hidden, inter, 23)?;
            let all = |w: &[QuantizedWeights]| -> Vec<QuantizedWeights> {
                (0..e).map(|i| w[i % d].clone()).collect()
            };
            let (d13, d2) = (
                up.upload_experts(&all(&w13))?,
                down.upload_experts(&all(&w2))?,
            );
            let per_expert = (d13.bytes() + d2.bytes()) as f64 / e as f64;
            let layer = MoeLayer::new(up, &d13, down, &d2)?;
            let mut rng = Rng::new(7);
            for &m in &args.ms {
                let ids = random_routing(&mut rng, m, top_k, e);
                let weights: Vec<f32> = (0..m * top_k)
                    .map(|_| 0.1 + 0.2 * rng.uniform().abs())
                    .collect();
                let x: Vec<f16> = to_elements(&random_matrix(m, hidden, 99 + m as u64, false));
                let (d_ids, d_w, d_x) = (
                    s.clone_htod(&ids)?,
                    s.clone_htod(&weights)?,
                    s.clone_htod(&x)?,
                );
                let mut out = s.clone_htod(&vec![f16::NAN; m * hidden])?;
                let mut bufs = layer.buffers(m, top_k)?;
                layer.forward(&d_x, &d_ids, &d_w, &mut bufs, &mut out)?;
                let got = s.clone_dtoh(&out)?;
                // Tokens 0 and M - 1 against the reference, on the distinct experts.
                let (mut g, mut want) = (Vec::new(), Vec::new());
                for t in [0, m - 1] {
                    let sub_ids: Vec<i32> = ids[t * top_k..(t + 1) * top_k]
                        .iter()
                        .map(|&i| i % d as i32)
                        .collect();
                    let xf: Vec<f64> = x[t * hidden..(t + 1) * hidden]
                        .iter()
                        .map(|v| v.to_f64())
                        .collect();
                    let r = reference_moe_layer(
                        &w13,
                        &w2,
                        &xf,
                        1,
                        &sub_ids,
                        top_k,
                        &weights[t * top_k..(t + 1) * top_k],
                        humming::spec::DType::F16,
                    )?;
                    want.extend(r);
                    g.extend(got[t * hidden..(t + 1) * hidden].iter().map(|v| v.to_f64()));
                }
                let err = humming::reference::relative_error(&g, &want);
                let finite = got.iter().all(|v| v.is_finite());
                if !(err <= 1e-2 && finite) {
                    eprintln!(
                        "{model} {format} M={m}: CHECK FAILED (relative error {err:.2e}, all finite {finite})"
                    );
                    ok = false;
                }
                let times = replay(s, args.reps, 1, args.trials, |_| {
                    Ok(layer.forward(&d_x, &d_ids, &d_w, &mut bufs, &mut out)?)
                })?;
                let touched = {
                    let mut seen = vec![false; e];
                    ids.iter().for_each(|&i| seen[i as usize] = true);
                    seen.iter().filter(|&&b| b).count() as f64
                };
                let bytes = touched * per_expert + 2.0 * (m * hidden * 2) as f64;
                let floor_us = bytes / bandwidth * 1e6;
                let us = times.median();
                println!(
                    "{model:<14} {format:<6} {m:<6} {touched:>7.0} {floor_us:>9.1} {us:>10.1} {:>8.2} {err:>8.1e}",
                    us / floor_us
                );
                rows.push(Row {
                    model: model.into(),
                    format: format.clone(),
                    m,
                    touched_experts: touched,
                    floor_us,
                    layer_us: us,
                    rel_err: err,
                });
                write_json(&out_dir.join("bench_moe_layer.json"), &rows)?;
            }
        }
    }
    // The switch: W4A8 layer time over W4A16's, per model and M.
    for r in rows.iter().filter(|r| r.format == "w4a8") {
        if let Some(b) = rows
            .iter()
            .find(|b| b.format == "w4a16" && b.model == r.model && b.m == r.m)
        {
            println!(
                "{} M={}: W4A8 / W4A16 layer time {:.2}",
                r.model,
                r.m,
                r.layer_us / b.layer_us
            );
        }
    }
    Ok(ok)
}
