//! GPU timing helpers shared by the benchmark (`bench.rs`) and the tile explorer (`tune.rs`):
//! device-to-device copy bandwidth, and CUDA-graph capture of rotated launches.

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
    let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0));
    if let Some(e) = failed {
        return Err(e);
    }
    graph?.ok_or_else(|| "the stream capture gave no graph".into())
}
