//! The buffers a [`Gemm`](super::Gemm) keeps between launches: the split-K workspace and the 8-bit
//! activation codes `run` quantizes A into.

use super::driver_err;
use crate::error::Result;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// Split-K buffers of a [`Gemm`](super::Gemm): the ordered reduction's partials and the tickets / lock words (zero
/// between launches). Retired buffers are kept until the `Gemm` is dropped, so that CUDA graphs
/// captured earlier stay valid.
#[derive(Default)]
pub(super) struct Workspace {
    partials: Option<CudaSlice<f32>>,
    tickets: Option<CudaSlice<i32>>,
    retired_f32: Vec<CudaSlice<f32>>,
    retired_i32: Vec<CudaSlice<i32>>,
    /// 8-bit activations: the codes and scales (per row or per group) `run` quantizes A into.
    act_codes: Option<CudaSlice<u8>>,
    act_scales: Option<CudaSlice<f32>>,
    retired_u8: Vec<CudaSlice<u8>>,
}

impl Workspace {
    /// Makes the activation buffers hold at least `codes` codes and `scales` scales.
    pub(super) fn grow_activations(
        &mut self,
        stream: &Arc<CudaStream>,
        codes: usize,
        scales: usize,
    ) -> Result<()> {
        grow(
            stream,
            &mut self.act_codes,
            &mut self.retired_u8,
            codes,
            1 << 16,
            "allocating the activation codes",
        )?;
        grow(
            stream,
            &mut self.act_scales,
            &mut self.retired_f32,
            scales,
            1 << 10,
            "allocating the activation scales",
        )
    }

    /// Makes the split-K buffers hold `floats` partials and `tickets` tickets, and returns their device
    /// addresses (0 for a kind not asked for).
    pub(super) fn split_k_ptrs(
        &mut self,
        stream: &Arc<CudaStream>,
        floats: usize,
        tickets: usize,
    ) -> Result<(u64, u64)> {
        grow(
            stream,
            &mut self.partials,
            &mut self.retired_f32,
            floats,
            1 << 16,
            "allocating the split-K workspace",
        )?;
        grow(
            stream,
            &mut self.tickets,
            &mut self.retired_i32,
            tickets,
            4096,
            "allocating split-K tickets",
        )?;
        let partials = match &self.partials {
            Some(b) if floats > 0 => b.device_ptr(stream).0,
            _ => 0,
        };
        let ticket_ptr = match &self.tickets {
            Some(t) if tickets > 0 => t.device_ptr(stream).0,
            _ => 0,
        };
        Ok((partials, ticket_ptr))
    }

    /// The device addresses of the activation buffers (0 before they exist).
    pub(super) fn activation_ptrs(&self, stream: &CudaStream) -> (u64, u64) {
        let codes = self
            .act_codes
            .as_ref()
            .map_or(0, |b| b.device_ptr(stream).0);
        let scales = self
            .act_scales
            .as_ref()
            .map_or(0, |b| b.device_ptr(stream).0);
        (codes, scales)
    }
}

/// Makes `slot` a zeroed buffer of at least `len` elements (at least `min`), retiring the old one.
fn grow<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    slot: &mut Option<CudaSlice<T>>,
    retired: &mut Vec<CudaSlice<T>>,
    len: usize,
    min: usize,
    what: &'static str,
) -> Result<()> {
    if len > 0 && slot.as_ref().is_none_or(|b| b.len() < len) {
        let b = stream
            .alloc_zeros::<T>(len.max(min))
            .map_err(driver_err(what))?;
        if let Some(old) = slot.replace(b) {
            retired.push(old);
        }
    }
    Ok(())
}
