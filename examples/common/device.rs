//! Device buffers of the benchmark: rotating copies of packed weights, and cuBLAS on the
//! unquantized weights.

use super::host::threads;
use super::timing::Res;
use cudarc::cublas::{CudaBlas, GemmConfig, sys::cublasOperation_t};
use cudarc::driver::{CudaSlice, CudaStream};
use humming::Element;
use humming::cuda::{DeviceWeights, Gemm};
use humming::quant::QuantizedWeights;
use std::sync::Arc;

/// Row-major `C[m, n] = A[m, k] · W[n, k]ᵀ` with cuBLAS (column-major: `Cᵀ = W · Aᵀ`).
pub fn cublas_gemm<E: Element>(
    blas: &CudaBlas,
    a: &CudaSlice<E>,
    w: &CudaSlice<E>,
    c: &mut CudaSlice<E>,
    (m, n, k): (usize, usize, usize),
) -> Res<()>
where
    CudaBlas: cudarc::cublas::Gemm<E>,
{
    let cfg = GemmConfig {
        transa: cublasOperation_t::CUBLAS_OP_T,
        transb: cublasOperation_t::CUBLAS_OP_N,
        m: n as i32,
        n: m as i32,
        k: k as i32,
        alpha: E::from_f32(1.0),
        lda: k as i32,
        ldb: k as i32,
        beta: E::from_f32(0.0),
        ldc: n as i32,
    };
    // SAFETY: W holds n·k, A m·k and C m·n elements, as the configuration reads and writes.
    unsafe { cudarc::cublas::Gemm::gemm(blas, cfg, w, a, c) }?;
    Ok(())
}

/// Packs and uploads `count` copies of `q` (packing in parallel).
pub fn upload_copies<E: Element>(
    gemm: &Gemm<E, E>,
    q: &QuantizedWeights,
    count: usize,
) -> Res<Vec<DeviceWeights>> {
    let workers = threads().min(count).max(1);
    let per_worker: Vec<humming::Result<Vec<DeviceWeights>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|t| {
                s.spawn(move || {
                    (t..count)
                        .step_by(workers)
                        .map(|_| gemm.upload(q))
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("an upload thread panicked"))
            .collect()
    });
    let mut out = Vec::with_capacity(count);
    for w in per_worker {
        out.extend(w?);
    }
    Ok(out)
}

/// A cuBLAS handle on `stream`, or `None` (with a warning) where libcublas cannot be loaded.
pub fn cublas(stream: &Arc<CudaStream>) -> Res<Option<CudaBlas>> {
    // SAFETY: only asks whether the dynamically loaded library is present.
    if !unsafe { cudarc::cublas::sys::is_culib_present() } {
        eprintln!(
            "warning: libcublas could not be loaded (add its folder to LD_LIBRARY_PATH); no cuBLAS times"
        );
        return Ok(None);
    }
    Ok(Some(CudaBlas::new(stream.clone())?))
}
