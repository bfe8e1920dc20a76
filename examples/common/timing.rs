//! GPU timing: device-to-device copy bandwidth, CUDA-event timing of back-to-back launches, and
//! CUDA-graph replay of launches rotated through several copies of their buffers.

use cudarc::driver::{CudaGraph, CudaStream, sys};
use std::sync::Arc;

/// Boxed error of the examples.
pub type BoxError = Box<dyn std::error::Error>;
/// `Result` with [`BoxError`].
pub type Res<T> = Result<T, BoxError>;

/// Event flags that allow timing (`None` would disable it).
pub fn event_flags() -> Option<sys::CUevent_flags> {
    Some(sys::CUevent_flags::CU_EVENT_DEFAULT)
}

/// Median device-to-device copy bandwidth (bytes read + written per second) of a `bytes` copy.
pub fn copy_bandwidth(stream: &Arc<CudaStream>, bytes: usize) -> Res<f64> {
    // SAFETY: the buffers are only copied from and to; their contents do not matter.
    let src = unsafe { stream.alloc::<u8>(bytes) }?;
    let mut dst = unsafe { stream.alloc::<u8>(bytes) }?;
    for _ in 0..3 {
        stream.memcpy_dtod(&src, &mut dst)?;
    }
    let mut ts = Vec::new();
    for _ in 0..10 {
        let e0 = stream.record_event(event_flags())?;
        stream.memcpy_dtod(&src, &mut dst)?;
        let e1 = stream.record_event(event_flags())?;
        ts.push(f64::from(e0.elapsed_ms(&e1)?) * 1e-3);
    }
    ts.sort_by(f64::total_cmp);
    Ok(2.0 * bytes as f64 / ts[ts.len() / 2])
}

/// Mean microseconds per launch of `iters` back-to-back launches between two CUDA events, after
/// `warmup` untimed ones.
pub fn events_us(
    stream: &Arc<CudaStream>,
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut() -> Res<()>,
) -> Res<f64> {
    for _ in 0..warmup {
        launch()?;
    }
    let e0 = stream.record_event(event_flags())?;
    for _ in 0..iters {
        launch()?;
    }
    let e1 = stream.record_event(event_flags())?;
    Ok(f64::from(e0.elapsed_ms(&e1)?) * 1e3 / iters.max(1) as f64)
}

/// Captures `reps` launches (copy `i % copies` for the i-th) into a graph.
pub fn capture(
    stream: &Arc<CudaStream>,
    reps: usize,
    copies: usize,
    launch: &mut impl FnMut(usize) -> Res<()>,
) -> Res<CudaGraph> {
    stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)?;
    let mut failed = None;
    for i in 0..reps {
        if let Err(e) = launch(i % copies) {
            failed = Some(e);
            break;
        }
    }
    // An error that cudarc stored during the capture (from a drop) would make end_capture return it
    // before ending the capture: take it first, so that the stream always leaves capture mode.
    let stored = stream.context().check_err();
    let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0));
    if let Some(e) = failed {
        return Err(e);
    }
    stored?;
    graph?.ok_or_else(|| "the stream capture gave no graph".into())
}

/// Per-launch times of [`replay`].
pub struct Trials {
    /// Microseconds per launch, one value per timed trial, in trial order.
    pub us: Vec<f64>,
    /// Launches per trial: the requested count rounded up to a whole number of turns.
    pub launches: usize,
    /// `"graph"` (CUDA-graph replay) or `"events"` (back-to-back launches, if capture failed).
    pub method: &'static str,
}

impl Trials {
    /// The median of [`Trials::us`].
    pub fn median(&self) -> f64 {
        let mut ts = self.us.clone();
        ts.sort_by(f64::total_cmp);
        ts[ts.len() / 2]
    }
}

/// Times `launch(i)`, which uses copy `i` of its buffers: one untimed turn through the `copies`,
/// then `trials` replays of a graph of at least `reps` launches (a whole number of turns), each
/// between two CUDA events. Rotating copies that together exceed the L2 cache makes each launch
/// read its weights from DRAM. If capture fails (a launch that cannot be captured), it times as
/// many back-to-back launches instead, and says so on stderr.
pub fn replay(
    stream: &Arc<CudaStream>,
    reps: usize,
    copies: usize,
    trials: usize,
    mut launch: impl FnMut(usize) -> Res<()>,
) -> Res<Trials> {
    let copies = copies.max(1);
    let reps = reps.max(1).div_ceil(copies) * copies;
    for i in 0..copies {
        launch(i)?;
    }
    stream.synchronize()?;
    let mut us = Vec::with_capacity(trials.max(1));
    let method = match capture(stream, reps, copies, &mut launch) {
        Ok(graph) => {
            graph.upload()?;
            graph.launch()?;
            stream.synchronize()?;
            for _ in 0..trials.max(1) {
                let e0 = stream.record_event(event_flags())?;
                graph.launch()?;
                let e1 = stream.record_event(event_flags())?;
                us.push(f64::from(e0.elapsed_ms(&e1)?) * 1e3 / reps as f64);
            }
            "graph"
        }
        Err(e) => {
            eprintln!("  (graph capture failed: {e}; timing back-to-back launches with events)");
            stream.synchronize()?;
            // Round 0 warms up.
            for round in 0..=trials.max(1) {
                let e0 = stream.record_event(event_flags())?;
                for i in 0..reps {
                    launch(i % copies)?;
                }
                let e1 = stream.record_event(event_flags())?;
                let t = f64::from(e0.elapsed_ms(&e1)?) * 1e3 / reps as f64;
                if round > 0 {
                    us.push(t);
                }
            }
            "events"
        }
    };
    Ok(Trials {
        us,
        launches: reps,
        method,
    })
}
