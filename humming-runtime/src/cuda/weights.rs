//! Weights on the GPU: [`DeviceWeights`] (packed for the layout of the kernel that uploaded them)
//! and the pointers a launch passes to the kernel.

use crate::error::Result;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use humming_spec::KernelSpec;
use humming_spec::layout::WeightLayout;
use std::sync::Arc;

use super::driver::driver_err;

/// Quantized weights packed into the kernel layout and uploaded to the GPU: one matrix, or the
/// stacked `[E, N, K]` weights of E experts ([`Gemm::upload_experts`](super::Gemm::upload_experts)).
pub struct DeviceWeights {
    pub(super) spec: KernelSpec,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) experts: usize,
    /// Bytes of packed B, and elements of the scale grid (of the f32 scales with the K-major
    /// layout), per expert.
    pub(super) b_expert: usize,
    pub(super) s_expert: usize,
    pub(super) b: CudaSlice<u8>,
    pub(super) scales: Option<CudaSlice<u16>>,
    pub(super) zeros: Option<CudaSlice<u16>>,
    pub(super) channel: Option<CudaSlice<f32>>,
    /// The packed layout of `b` (that of the kernel's loaded tiles).
    pub(super) layout: WeightLayout,
    /// [`WeightLayout::KMajor`] with block or group scales: those f32 scales.
    pub(super) block_scales: Option<CudaSlice<f32>>,
}

impl DeviceWeights {
    /// Experts (1 for one matrix).
    pub fn experts(&self) -> usize {
        self.experts
    }
    /// Output channels.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Bytes on the GPU (packed weights, scale grid, zero points, channel factors).
    pub fn bytes(&self) -> usize {
        self.b.len()
            + self.scales.as_ref().map_or(0, |s| 2 * s.len())
            + self.zeros.as_ref().map_or(0, |z| 2 * z.len())
            + self.channel.as_ref().map_or(0, |c| 4 * c.len())
            + self.block_scales.as_ref().map_or(0, |c| 4 * c.len())
    }
    /// The packed layout of the weights: that of the tiles of the kernel that uploaded them.
    pub fn layout(&self) -> WeightLayout {
        self.layout
    }
    /// The descriptor the weights were packed for.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// The device addresses of the packed weights, scale grid, zero points and channel factors (0
    /// for each it lacks), with the guards that record their use on `stream`.
    pub(super) fn ptrs<'a>(&'a self, stream: &'a CudaStream) -> WeightPtrs<'a> {
        let (b, rb) = self.b.device_ptr(stream);
        // (The K-major layout's block scales take the scale grid's place.)
        let (scales, rs) = match &self.block_scales {
            Some(bs) => optional_ptr(Some(bs), stream),
            None => optional_ptr(self.scales.as_ref(), stream),
        };
        let (zeros, rz) = optional_ptr(self.zeros.as_ref(), stream);
        let (channel, rc) = optional_ptr(self.channel.as_ref(), stream);
        WeightPtrs {
            b,
            scales,
            zeros,
            channel,
            _guards: (rb, [rs, rz, rc]),
        }
    }
}

/// [`DeviceWeights::ptrs`]: the fields of `GemmParams` that point at the weights.
pub(super) struct WeightPtrs<'a> {
    pub(super) b: u64,
    pub(super) scales: u64,
    pub(super) zeros: u64,
    pub(super) channel: u64,
    _guards: (
        cudarc::driver::SyncOnDrop<'a>,
        [Option<cudarc::driver::SyncOnDrop<'a>>; 3],
    ),
}

/// A device copy of `host`, or `None` when it is empty (the kernel then gets a null pointer).
pub(super) fn upload_nonempty<T: cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    host: &[T],
    what: &'static str,
) -> Result<Option<CudaSlice<T>>> {
    if host.is_empty() {
        return Ok(None);
    }
    stream.clone_htod(host).map(Some).map_err(driver_err(what))
}

/// The device address of an optional buffer (0 for none) and the guard that records its use.
pub(super) fn optional_ptr<'a, T>(
    buf: Option<&'a CudaSlice<T>>,
    stream: &'a CudaStream,
) -> (u64, Option<cudarc::driver::SyncOnDrop<'a>>) {
    match buf {
        Some(b) => {
            let (p, r) = b.device_ptr(stream);
            (p, Some(r))
        }
        None => (0, None),
    }
}

/// The experts' weights packed for `layout`, in order: host work per expert (seconds for a
/// DeepSeek-V3 layer's 256), so on every core.
pub(super) fn pack_experts(
    experts: &[crate::quant::QuantizedWeights],
    layout: WeightLayout,
) -> Result<Vec<crate::PackedWeights>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = experts.len().div_ceil(threads.max(1)).max(1);
    let parts = std::thread::scope(|scope| {
        let handles: Vec<_> = experts
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|w| w.pack_for(layout))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(crate::error::invalid(
                        "weights",
                        "packing an expert panicked",
                    ))
                })
            })
            .collect::<Result<Vec<Vec<_>>>>()
    })?;
    Ok(parts.into_iter().flatten().collect())
}
