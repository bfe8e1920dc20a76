//! The GPU path of the real-model examples (`smollm2`, `gemma3`): every layer uploaded, checked
//! against the f64 reference and timed at every M, then the forward pass of the block layers timed
//! launch by launch and as one CUDA graph.

use super::gguf_kernels::Kernels;
use super::layer_inputs::Inputs;
use super::layer_sweep::{GraphPass, Sweep, Timed, progress};
use super::timing::{Res, events_us};
use cudarc::driver::{CudaSlice, CudaStream};
use humming::cuda::{DeviceWeights, Gemm};
use humming::half::f16;
use humming::reference::to_f64;
use humming::{Element, reference_gemm, relative_error};
use humming_import::LinearLayer;
use std::sync::Arc;

/// The options of the measurements, flattened into an example's arguments (whose
/// `#[command(mut_arg("sweeps", ...))]` says how many layers a sweep runs).
#[derive(clap::Args, Debug, Clone)]
pub struct Runs {
    /// Batch sizes (rows of activations) to run every layer with.
    #[arg(long, value_delimiter = ',', default_value = "1,16,128")]
    pub ms: Vec<usize>,
    /// Timed launches per layer and M (back to back, between two CUDA events).
    #[arg(long, default_value_t = 200)]
    pub iters: usize,
    /// Untimed launches before each timing.
    #[arg(long, default_value_t = 20)]
    pub warmup: usize,
    /// Timed sweeps over all the block layers (one forward pass each) per M.
    #[arg(long, default_value_t = 20)]
    pub sweeps: usize,
    /// Timed replays per M of the forward pass captured as one CUDA graph.
    #[arg(long, default_value_t = 200)]
    pub replays: usize,
}

/// Every layer on the GPU and what was measured.
pub struct Measured<'m> {
    /// The block layers, then the LM head (if any).
    pub all: Vec<&'m LinearLayer>,
    /// Where the LM head is in `all`: the number of block layers.
    pub head_at: usize,
    /// Their packed weights on the GPU.
    pub dws: Vec<DeviceWeights>,
    /// Checks and times of the block layers, and of the LM head.
    pub timed: Vec<Timed>,
    pub head_timed: Vec<Timed>,
    /// One forward pass of the block layers per M of `--ms`, in microseconds.
    pub sweep_us: Vec<f64>,
    /// The same forward pass as one CUDA graph per M of `--ms`, or why its capture or replay failed.
    pub graph: Vec<Result<GraphPass, String>>,
    /// The block layers' bytes on the GPU.
    pub layer_bytes: usize,
}

/// Uploads every layer of `all` (packed into the kernel layout; the first `head_at` are the block
/// layers, then the LM head if any), checks and times each at every M on the activations of
/// `inputs` (made for the largest M), and times forward passes of the block layers.
pub fn measure<'m, 'i>(
    gpu: &Kernels,
    runs: &Runs,
    all: Vec<&'m LinearLayer>,
    head_at: usize,
    how_bench: &str,
    inputs: impl FnOnce(usize) -> Res<Inputs<'i>>,
) -> Res<Measured<'m>> {
    let s = &gpu.stream;
    let pb = progress(all.len(), "packing + uploading");
    let mut dws = Vec::with_capacity(all.len());
    for l in &all {
        dws.push(gpu.gemm(l).upload(&l.weights)?);
        pb.inc(1);
    }
    pb.finish_and_clear();
    let layer_bytes: usize = dws[..head_at].iter().map(DeviceWeights::bytes).sum();
    let head = match dws.get(head_at) {
        Some(dw) => format!(" + LM head ({:.1} MB)", dw.bytes() as f64 / 1e6),
        None => String::new(),
    };
    println!(
        "uploaded {head_at} layers ({:.1} MB){head}",
        layer_bytes as f64 / 1e6
    );
    println!("activations: {how_bench}");

    // Check every layer at every M against the f64 reference, and time it.
    let rows = *runs.ms.iter().max().unwrap();
    let mut inputs = inputs(rows)?;
    let mut bufs = Vec::with_capacity(all.len());
    let mut timed = Vec::new();
    let pb = progress(all.len(), "checking + timing layers");
    for (i, l) in all.iter().enumerate() {
        let a_h = inputs.for_layer(l)?;
        let reference = reference_gemm(&l.weights, &to_f64(&a_h), rows, None)?;
        inputs.record(l, &reference);
        let (gemm, dw, n) = (gpu.gemm(l), &dws[i], l.weights.n());
        let a = s.clone_htod(&a_h)?;
        let mut c = s.alloc_zeros::<f16>(rows * n)?;
        timed.extend(check_and_time(
            s,
            runs,
            gemm,
            (&a, dw, &mut c),
            &reference,
            i,
        )?);
        bufs.push((a, c));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let (timed, head_timed) = timed.into_iter().partition(|t| t.layer < head_at);

    // One forward pass: all block layers back to back, each once, `sweeps` times; then as one graph.
    let (layers, bufs) = (&all[..head_at], &mut bufs[..head_at]);
    let sweep = Sweep {
        stream: s,
        layers,
        gemms: layers.iter().map(|l| gpu.gemm(l)).collect(),
        dws: &dws,
    };
    let mut sweep_us = Vec::new();
    let mut graph = Vec::new();
    for &m in &runs.ms {
        let us = events_us(s, 2, runs.sweeps.max(1), || sweep.forward(bufs, m))?;
        sweep_us.push(us);
        let pass = sweep.graph_pass(bufs, m, runs.replays.max(1));
        graph.push(pass.map_err(|e| e.to_string()));
    }
    Ok(Measured {
        all,
        head_at,
        dws,
        timed,
        head_timed,
        sweep_us,
        graph,
        layer_bytes,
    })
}

/// Layer `layer` at each M of `runs` (`reference`: its f64 product at the largest M, `[rows, N]`):
/// C zeroed, one launch checked against the reference's first M rows, then timed by events.
pub fn check_and_time<E: Element>(
    s: &Arc<CudaStream>,
    runs: &Runs,
    gemm: &Gemm<E, E>,
    (a, dw, c): (&CudaSlice<E>, &DeviceWeights, &mut CudaSlice<E>),
    reference: &[f64],
    layer: usize,
) -> Res<Vec<Timed>> {
    let n = dw.n();
    let mut timed = Vec::with_capacity(runs.ms.len());
    for &m in &runs.ms {
        s.memset_zeros(c)?;
        gemm.run(a, m, dw, None, c)?;
        let got = to_f64(&s.clone_dtoh(c)?[..m * n]);
        let err = relative_error(&got, &reference[..m * n]);
        let us = events_us(s, runs.warmup, runs.iters, || {
            Ok(gemm.run(a, m, dw, None, c)?)
        })?;
        timed.push(Timed { layer, m, us, err });
    }
    Ok(timed)
}
