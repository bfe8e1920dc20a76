//! The CPU path of the real-model examples (`smollm2`, `gemma3`): one layer through the f64 reference
//! (`reference_gemm`, from the converted weights), checked against ggml's own f32 dequantization of
//! the raw GGUF blocks.

use super::layer_inputs::Inputs;
use super::timing::Res;
use humming::reference::to_f64;
use humming::{reference_gemm, relative_error};
use humming_import::{GgufFile, LinearLayer, ggml_dequantize};
use std::time::Instant;

/// One layer on the CPU.
pub struct CpuCheck {
    /// The reference output, `[m, n]`.
    pub reference: Vec<f64>,
    /// Milliseconds that `reference_gemm` took.
    pub ms: f64,
    /// Relative error of the reference against ggml's dequantization times the same activations.
    pub err: f64,
}

/// Runs `l` at `m` rows of its [`Inputs`] (recording its output for the later layers of its block)
/// and checks it against ggml's dequantization of its blocks in `file`.
pub fn check_layer(
    file: &GgufFile,
    inputs: &mut Inputs,
    l: &LinearLayer,
    m: usize,
) -> Res<CpuCheck> {
    let a = to_f64(&inputs.for_layer(l)?);
    let started = Instant::now();
    let reference = reference_gemm(&l.weights, &a, m, None)?;
    let ms = started.elapsed().as_secs_f64() * 1e3;
    inputs.record(l, &reference);
    // The oracle: ggml's own f32 dequantization of the raw blocks, times the same activations.
    let (n, k) = (l.weights.n(), l.weights.k());
    let ggml = ggml_dequantize(l.ggml_type, file.tensor(&l.name)?.bytes(), n * k)?;
    let oracle: Vec<f64> = (0..m * n)
        .map(|i| {
            let (row, col) = (&a[i / n * k..][..k], &ggml[i % n * k..][..k]);
            row.iter().zip(col).map(|(&x, &w)| x * f64::from(w)).sum()
        })
        .collect();
    let err = relative_error(&reference, &oracle);
    Ok(CpuCheck { reference, ms, err })
}
