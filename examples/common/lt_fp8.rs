//! cuBLASLt FP8: row-major `C[m, n] = sa · sb · A[m, k] · W[n, k]ᵀ` with e4m3 A and W, f32
//! accumulation, one f32 scale per tensor and f16 C (`torch._scaled_mm` with tensor scales): the
//! in-run anchor of the 8-bit-activation benchmarks. Column-major, that is `Cᵀ = Wᵀᵀ · A`, the "TN"
//! form cuBLASLt's FP8 kernels take. Its FP8 kernels need every dimension a multiple of 16, so M is
//! padded up to one ([`LtFp8::rows`]), as `torch._scaled_mm` callers pad.

use super::timing::{Res, Trials, replay};
use cudarc::cublaslt::{result as lt, sys};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use half::f16;
use std::ffi::c_void;
use std::sync::Arc;

/// Workspace of the chosen algorithm (cuBLASLt's recommendation for Hopper).
const WORKSPACE_BYTES: usize = 32 << 20;

/// One FP8 GEMM shape with its algorithm chosen once.
pub struct LtFp8 {
    handle: sys::cublasLtHandle_t,
    desc: sys::cublasLtMatmulDesc_t,
    /// W (`k x n`, transposed), A (`k x m`), C (`n x m`), column-major.
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    workspace: CudaSlice<u8>,
    /// `[sb, sa]` on the device (scale pointers).
    scales: CudaSlice<f32>,
    stream: Arc<CudaStream>,
    rows: usize,
}

impl LtFp8 {
    /// The GEMM of `m x n x k`, or `None` (with a warning) where libcublasLt cannot be loaded or
    /// has no FP8 algorithm for it.
    pub fn new(stream: &Arc<CudaStream>, (m, n, k): (usize, usize, usize)) -> Res<Option<Self>> {
        let m = m.div_ceil(16) * 16;
        // SAFETY: only asks whether the dynamically loaded library is present.
        if !unsafe { sys::is_culib_present() } {
            eprintln!("warning: libcublasLt could not be loaded; no cuBLASLt FP8 times");
            return Ok(None);
        }
        let ctx = |what: &'static str| move |e: lt::CublasError| format!("{what}: {e:?}");
        let handle = lt::create_handle().map_err(ctx("cublasLtCreate"))?;
        let desc = lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType_t::CUDA_R_32F,
        )
        .map_err(ctx("cublasLtMatmulDescCreate"))?;
        let fp8 = sys::cudaDataType_t::CUDA_R_8F_E4M3;
        let layout = |t, rows: usize, cols: usize| {
            lt::create_matrix_layout(t, rows as u64, cols as u64, rows as i64)
                .map_err(ctx("cublasLtMatrixLayoutCreate"))
        };
        let layouts = [
            layout(fp8, k, n)?,
            layout(fp8, k, m)?,
            layout(sys::cudaDataType_t::CUDA_R_16F, n, m)?,
        ];
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        let scales = stream.clone_htod(&[1.0f32, 1.0])?;
        let mut me = LtFp8 {
            handle,
            desc,
            layouts,
            algo: sys::cublasLtMatmulAlgo_t { data: [0; 8] },
            workspace,
            scales,
            stream: stream.clone(),
            rows: m,
        };
        let transposed: i32 = 1; // CUBLAS_OP_T
        let (sb, sa) = {
            let (p, _r) = me.scales.device_ptr(stream);
            (p, p + 4)
        };
        let pref = lt::create_matmul_pref()?;
        // SAFETY: each attribute is written from a value of the size and type cuBLASLt documents
        // for it (an i32 operation, device pointers, a u64 byte count); the handles are live.
        let found = unsafe {
            let set =
                |attr, v: *const c_void, size| lt::set_matmul_desc_attribute(desc, attr, v, size);
            set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                (&transposed as *const i32).cast(),
                4,
            )
            .map_err(ctx("TRANSA"))?;
            set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                (&sb as *const u64).cast(),
                8,
            )
            .map_err(ctx("A_SCALE_POINTER"))?;
            set(
                sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                (&sa as *const u64).cast(),
                8,
            )
            .map_err(ctx("B_SCALE_POINTER"))?;
            let bytes = WORKSPACE_BYTES as u64;
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                8,
            )
            .map_err(ctx("MAX_WORKSPACE_BYTES"))?;
            let found = lt::get_matmul_algo_heuristic(
                handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], pref,
            );
            lt::destroy_matmul_pref(pref).map_err(ctx("cublasLtMatmulPreferenceDestroy"))?;
            found
        };
        match found {
            Ok(h) => {
                me.algo = h.algo;
                Ok(Some(me))
            }
            Err(e) => {
                eprintln!("warning: cuBLASLt has no FP8 algorithm for {m}x{n}x{k}: {e}");
                Ok(None)
            }
        }
    }

    /// The rows A and C hold: M padded up to a multiple of 16.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// `C = A · Wᵀ` on this GEMM's shape (`w` `n x k`, `a` `rows x k` e4m3 codes, `c` `rows x n`).
    pub fn run(&self, w: &CudaSlice<u8>, a: &CudaSlice<u8>, c: &mut CudaSlice<f16>) -> Res<()> {
        let s = &self.stream;
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (wp, _rw) = w.device_ptr(s);
        let (ap, _ra) = a.device_ptr(s);
        let (cp, _rc) = c.device_ptr_mut(s);
        let (ws, _rws) = self.workspace.device_ptr(s);
        // SAFETY: the buffers hold the layouts' shapes (the caller allocates them for this GEMM's
        // m, n, k); C is read (beta = 0) and written as D.
        unsafe {
            lt::matmul(
                self.handle,
                self.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                wp as *const c_void,
                self.layouts[0],
                ap as *const c_void,
                self.layouts[1],
                cp as *const c_void,
                self.layouts[2],
                cp as *mut c_void,
                self.layouts[2],
                &self.algo,
                ws as *mut c_void,
                WORKSPACE_BYTES,
                s.cu_stream() as sys::cudaStream_t,
            )
            .map_err(|e| format!("cublasLtMatmul: {e:?}"))?;
        }
        Ok(())
    }
}

impl Drop for LtFp8 {
    fn drop(&mut self) {
        // SAFETY: each handle was created by `new` and is destroyed once.
        unsafe {
            for l in self.layouts {
                let _ = lt::destroy_matrix_layout(l);
            }
            let _ = lt::destroy_matmul_desc(self.desc);
            let _ = lt::destroy_handle(self.handle);
        }
    }
}

/// cuBLASLt FP8 on e4m3 codes of `m x n x k` (M padded to 16) replayed over `copies` rotating weight
/// copies ([`replay`]); `None` where cuBLASLt is missing or has no algorithm.
pub fn time(
    stream: &Arc<CudaStream>,
    (m, n, k): (usize, usize, usize),
    copies: usize,
    reps: usize,
    trials: usize,
) -> Res<Option<Trials>> {
    let Some(lt) = LtFp8::new(stream, (m, n, k))? else {
        return Ok(None);
    };
    let rows = lt.rows();
    // Finite codes of both signs, magnitudes below 2 (no NaN pattern).
    let code = |i: usize| ((i.wrapping_mul(2_654_435_761) >> 7) as u8 & 0x3F) | (i as u8 & 0x80);
    let w8: Vec<u8> = (0..n * k).map(code).collect();
    let a8: Vec<u8> = (0..rows * k).map(|i| code(i + 1)).collect();
    let w8 = (0..copies)
        .map(|_| stream.clone_htod(&w8))
        .collect::<Result<Vec<_>, _>>()?;
    let a8 = stream.clone_htod(&a8)?;
    let mut c8 = stream.alloc_zeros::<f16>(rows * n)?;
    // Once outside the timed CUDA graph, so that a refusal shows here rather than inside a capture.
    lt.run(&w8[0], &a8, &mut c8)?;
    stream.synchronize()?;
    let t = replay(stream, reps, copies, trials, |i| {
        lt.run(&w8[i], &a8, &mut c8)
    })?;
    Ok(Some(t))
}
