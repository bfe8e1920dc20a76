//! The layer sweep of the real-model examples (`smollm2`, `gemma3`): a progress bar, one forward pass
//! of a model's linear layers launched one by one, the same pass captured once as a CUDA graph and
//! replayed (its outputs compared bit for bit with the launches'), and the lines that report them.

use super::timing::{Res, capture, events_us};
use cudarc::driver::{CudaSlice, CudaStream};
use humming::cuda::{DeviceWeights, Gemm};
use humming::half::f16;
use humming_import::LinearLayer;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::Arc;

/// A progress bar on stderr: `msg`, the bar, `pos/len` and the elapsed time.
pub fn progress(len: usize, msg: &'static str) -> ProgressBar {
    let pb = ProgressBar::new(len as u64);
    pb.set_style(
        ProgressStyle::with_template("{msg:<26} [{bar:40}] {pos}/{len} {elapsed_precise}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// `N x K` of a layer.
pub fn nk(l: &LinearLayer) -> String {
    format!("{} x {}", l.weights.n(), l.weights.k())
}

/// GB/s of `bytes` read in `us` microseconds.
pub fn gbs(bytes: usize, us: f64) -> f64 {
    bytes as f64 / (us * 1e-6) / 1e9
}

/// One layer at one M: its index in the example's list of layers, time and error.
pub struct Timed {
    pub layer: usize,
    pub m: usize,
    pub us: f64,
    pub err: f64,
}

/// Activations and outputs of one layer on the GPU.
pub type Bufs = (CudaSlice<f16>, CudaSlice<f16>);

/// The layers of one forward pass on the GPU, in order: each with the kernel that runs it and its
/// packed weights.
pub struct Sweep<'a> {
    pub stream: &'a Arc<CudaStream>,
    pub layers: &'a [&'a LinearLayer],
    pub gemms: Vec<&'a Gemm<f16, f16>>,
    pub dws: &'a [DeviceWeights],
}

impl Sweep<'_> {
    /// One forward pass: every layer once, in order, at `m` rows.
    pub fn forward(&self, bufs: &mut [Bufs], m: usize) -> Res<()> {
        for ((gemm, dw), (a, c)) in self.gemms.iter().zip(self.dws).zip(bufs) {
            gemm.run(a, m, dw, None, c)?;
        }
        Ok(())
    }

    /// Captures [`Sweep::forward`] at `m` rows (the same launches, buffers and options) once into a
    /// CUDA graph, checks that a replay writes the bits the launches one by one wrote, and times
    /// `replays` replays.
    pub fn graph_pass(&self, bufs: &mut [Bufs], m: usize, replays: usize) -> Res<GraphPass> {
        let s = self.stream;
        // Nothing allocates in the capture: reserve() grows each kernel's split-K partials and tickets
        // to cover M <= m beforehand (a launch allocates only if its plan needs more), and the
        // deterministic reduction's last split resets its ticket to 0, so every replay starts from the
        // captured state.
        for (l, gemm) in self.layers.iter().zip(&self.gemms) {
            gemm.reserve(m, l.weights.n(), l.weights.k())?;
        }
        let outputs = |bufs: &[Bufs]| -> Res<Vec<Vec<f16>>> {
            let rows = self.layers.iter().zip(bufs);
            rows.map(|(l, (_, c))| Ok(s.clone_dtoh(&c.slice(..m * l.weights.n()))?))
                .collect()
        };
        self.forward(bufs, m)?;
        let want = outputs(bufs)?;
        let graph = capture(s, 1, 1, &mut |_| self.forward(bufs, m))?;
        graph.upload()?;
        // Poison C (f16 NaN), so that an output the replay did not write differs.
        for (_, c) in bufs.iter_mut() {
            s.memcpy_htod(&vec![f16::from_bits(0x7e01); c.len()], c)?;
        }
        graph.launch()?;
        let got = outputs(bufs)?;
        let compared = want.iter().map(Vec::len).sum();
        let mismatched = want
            .iter()
            .zip(&got)
            .map(|(w, g)| bit_mismatches(w, g))
            .sum();
        let us = events_us(s, 2, replays, || Ok(graph.launch()?))?;
        Ok(GraphPass {
            us,
            compared,
            mismatched,
        })
    }
}

/// The forward pass at one M as one CUDA graph.
pub struct GraphPass {
    /// Microseconds per replay (CUDA events around `--replays` replays).
    pub us: f64,
    /// Output elements (the first `m` rows of every layer's C) compared with the launches', and how
    /// many of them differ in any bit.
    pub compared: usize,
    pub mismatched: usize,
}

/// Outputs whose bits differ.
pub fn bit_mismatches(a: &[f16], b: &[f16]) -> usize {
    let differ = a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits());
    differ.count() + a.len().abs_diff(b.len())
}

/// The summary line of the forward pass at one M, launch by launch and as one CUDA graph.
pub fn forward_line(
    layers: usize,
    m: usize,
    sweep_us: f64,
    graph: &Result<GraphPass, String>,
) -> String {
    let head =
        format!("forward pass ({layers} layers, M = {m}): {sweep_us:.1} us launch by launch");
    match graph {
        Ok(g) => {
            let check = if g.mismatched == 0 {
                format!("replay = launches bit for bit ({} outputs)", g.compared)
            } else {
                format!(
                    "FAIL: {} of {} replay outputs differ from the launches'",
                    g.mismatched, g.compared
                )
            };
            format!(
                "{head}, {:.1} us as one CUDA graph ({:.2}x); {check}",
                g.us,
                sweep_us / g.us
            )
        }
        Err(e) => format!("{head}; CUDA graph FAILED: {e}"),
    }
}

/// Whether every graph replay ran and matched the launches bit for bit.
pub fn graphs_pass(graphs: &[Result<GraphPass, String>]) -> bool {
    graphs
        .iter()
        .all(|g| g.as_ref().is_ok_and(|g| g.mismatched == 0))
}

/// The summary's clause on [`graphs_pass`].
pub fn graphs_note(graphs: &[Result<GraphPass, String>]) -> &'static str {
    if graphs_pass(graphs) {
        ", graph replays = launches bit for bit"
    } else {
        ", GRAPH CHECK FAILED"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The graph check counts outputs that differ in any bit: -0 against +0 and two NaNs of different
    /// payloads too, and a missing output.
    #[test]
    fn graph_check_is_bitwise() {
        let h = |bits: &[u16]| bits.iter().map(|&b| f16::from_bits(b)).collect::<Vec<_>>();
        let want = h(&[0x3c00, 0x0000, 0x7e00, 0xc000]);
        assert_eq!(bit_mismatches(&want, &want), 0);
        assert_eq!(
            bit_mismatches(&want, &h(&[0x3c00, 0x8000, 0x7e01, 0xc000])),
            2
        );
        assert_eq!(bit_mismatches(&want, &want[..3]), 1);
    }

    /// The forward-pass line: both times and their ratio, the check, or why the graph failed.
    #[test]
    fn forward_line_reads() {
        let pass = |mismatched| {
            Ok(GraphPass {
                us: 312.4,
                compared: 123_456,
                mismatched,
            })
        };
        assert_eq!(
            forward_line(210, 1, 1046.2, &pass(0)),
            "forward pass (210 layers, M = 1): 1046.2 us launch by launch, 312.4 us as one CUDA graph \
             (3.35x); replay = launches bit for bit (123456 outputs)"
        );
        assert!(
            forward_line(210, 1, 1046.2, &pass(7))
                .ends_with("FAIL: 7 of 123456 replay outputs differ from the launches'")
        );
        let failed = forward_line(210, 16, 900.0, &Err("capture: not permitted".into()));
        assert_eq!(
            failed,
            "forward pass (210 layers, M = 16): 900.0 us launch by launch; CUDA graph FAILED: \
             capture: not permitted"
        );
        assert!(graphs_pass(&[pass(0), pass(0)]));
        assert!(!graphs_pass(&[pass(0), pass(1)]));
        assert!(!graphs_pass(&[pass(0), Err("x".into())]));
        assert_eq!(
            graphs_note(&[pass(0)]),
            ", graph replays = launches bit for bit"
        );
        assert_eq!(graphs_note(&[pass(1)]), ", GRAPH CHECK FAILED");
    }
}
