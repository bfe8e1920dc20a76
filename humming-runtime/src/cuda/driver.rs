//! The CUDA driver and NVRTC calls that cudarc's safe API does not cover: launches with attributes,
//! TMA tensor maps, cluster occupancy, run-time compilation to a cubin. Every `unsafe` block of the
//! runtime is in this module.

use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, sys};

use std::sync::Arc;

/// Maps a cudarc driver error into [`Error::Driver`] with a context string.
pub fn driver_err(context: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver {
        context: context.to_string(),
        source,
    }
}

/// True if the CUDA driver library can be loaded (it says nothing about whether a GPU is present).
#[cfg(not(feature = "dynamic-linking"))]
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no other effect.
    unsafe { sys::is_culib_present() }
}

/// True: with the `dynamic-linking` feature libcuda is linked into the program, which could not have
/// started without it (cudarc has no `is_culib_present` in that mode).
#[cfg(feature = "dynamic-linking")]
pub fn driver_present() -> bool {
    true
}

/// Opens GPU `ordinal` and returns a new stream on its primary context.
///
/// Errors: [`Error::NoCudaDriver`] when `libcuda.so` is absent (cudarc would panic), [`Error::Driver`]
/// when there is no such device.
pub fn default_stream(ordinal: usize) -> Result<Arc<CudaStream>> {
    if !driver_present() {
        return Err(Error::NoCudaDriver);
    }
    let ctx = CudaContext::new(ordinal).map_err(driver_err("opening the CUDA device"))?;
    ctx.new_stream().map_err(driver_err("creating a stream"))
}

/// The TMA tensor map of A for a `wgmma` tile (`cuda/humming/loader.cuh`, `load_a_tma`): a 2-D tensor
/// of `elem_bytes`-byte elements (2, or 1 for 8-bit codes) at device address `a` (16-byte aligned),
/// dims `{k, rows}` (K innermost), rows `lda * elem_bytes` bytes apart (a multiple of 16), boxes of
/// 64 x `block_m` elements written to shared memory in the 128-byte (64-byte) swizzle, the layout
/// the `wgmma` descriptor reads; zero fill outside the tensor. The caller has checked alignment,
/// `lda % 8 == 0` (16 for codes) and `lda >= k`.
pub(super) fn encode_a_map(
    a: u64,
    rows: usize,
    k: usize,
    lda: usize,
    block_m: u32,
    elem_bytes: usize,
) -> std::result::Result<[u64; 16], cudarc::driver::DriverError> {
    // 64 elements per box row: 128 bytes of 16-bit A in the 128-byte swizzle, or 64 bytes of 8-bit
    // codes in the 64-byte swizzle (the layouts of a_swizzle in loader.cuh).
    let (dtype, swizzle) = if elem_bytes == 1 {
        (
            TmaElement::Byte,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        )
    } else {
        (
            TmaElement::Half,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        )
    };
    let promote = sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    encode_2d(
        a,
        dtype,
        [k, rows],
        lda * elem_bytes,
        [64, block_m],
        (swizzle, promote),
    )
}

/// Elements of a TMA tensor map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TmaElement {
    /// 8-bit codes.
    Byte,
    /// 16-bit values (f16, bf16).
    Half,
}

/// How a TMA box lands in shared memory: in the 128-byte swizzle (what wgmma descriptors read), or as
/// plain rows (the persistent kernel's 4-bit weight rows, read by plain shared-memory loads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BoxLayout {
    Swizzle128,
    Plain,
}

/// A 2-D TMA tensor map of the persistent kernel's boxes (`persistent.cuh`): `dims` `{inner, outer}`
/// elements at device address `base` (16-byte aligned), outer rows `stride` bytes apart (a multiple of
/// 16), boxes of `boxes` `{inner, outer}` elements (the inner one 128 bytes in the swizzle, a multiple
/// of 16 bytes plain); loads zero-fill outside the tensor, stores leave it untouched.
pub(super) fn encode_boxes(
    base: u64,
    elem: TmaElement,
    dims: [usize; 2],
    stride: usize,
    boxes: [u32; 2],
    layout: BoxLayout,
) -> std::result::Result<[u64; 16], cudarc::driver::DriverError> {
    let swizzle = match layout {
        BoxLayout::Swizzle128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        BoxLayout::Plain => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
    };
    // (256-byte L2 promotion: two 128-byte box rows per request, as measured.)
    let promote = sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    encode_2d(base, elem, dims, stride, boxes, (swizzle, promote))
}

fn encode_2d(
    base: u64,
    elem: TmaElement,
    dims: [usize; 2],
    stride: usize,
    boxes: [u32; 2],
    (swizzle, promote): (sys::CUtensorMapSwizzle, sys::CUtensorMapL2promotion),
) -> std::result::Result<[u64; 16], cudarc::driver::DriverError> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dims: [u64; 2] = [dims[0] as u64, dims[1] as u64];
    let strides: [u64; 1] = [stride as u64];
    let dtype = match elem {
        TmaElement::Byte => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        TmaElement::Half => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
    };
    let element_strides: [u32; 2] = [1, 1];
    // SAFETY: every pointer refers to a live local of the size the driver reads (rank 2); the call
    // only encodes `map` on the host.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            2,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            promote,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()?;
    Ok(map.opaque)
}

/// Launches `func(params)` on `stream` through `cuLaunchKernelEx` (cudarc's launch builder takes no
/// launch attributes), with `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` when `pdl` and
/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` 1 x 1 x `cluster_z` when `cluster_z > 1` (`cfg.grid_dim.2`
/// must then be a multiple of it).
///
/// # Safety
/// As for any kernel launch: `params` must be what `func` expects, and every address in it valid for
/// what the kernel reads and writes.
pub(super) unsafe fn launch<P>(
    stream: &CudaStream,
    func: &CudaFunction,
    cfg: LaunchConfig,
    params: &P,
    pdl: bool,
    cluster_z: u32,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    stream.context().bind_to_thread()?;
    // At most two attributes, in a fixed array (no allocation per launch).
    let mut attrs = [launch_attribute(
        sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
    ); 2];
    let mut used = 0;
    if pdl {
        attrs[used].value.programmaticStreamSerializationAllowed = 1;
        used += 1;
    }
    if cluster_z > 1 {
        attrs[used] = cluster_attribute(cluster_z);
        used += 1;
    }
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: attrs.as_mut_ptr(),
        numAttrs: used as u32,
    };
    let mut args = [params as *const P as *mut std::ffi::c_void];
    // SAFETY: the caller's contract; `config`, `attrs` and `args` live across the call.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            func.cu_function(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
}

/// A launch attribute `id` with an all-zero value, for the caller to fill.
fn launch_attribute(id: sys::CUlaunchAttributeID) -> sys::CUlaunchAttribute {
    sys::CUlaunchAttribute {
        id,
        pad: [0; 4],
        // SAFETY: an all-zero bit pattern is a valid value of this plain-data union.
        value: unsafe { std::mem::zeroed() },
    }
}

/// The launch attribute for thread-block clusters of 1 x 1 x `z` CTAs.
fn cluster_attribute(z: u32) -> sys::CUlaunchAttribute {
    let mut a = launch_attribute(sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    a.value.clusterDim.x = 1;
    a.value.clusterDim.y = 1;
    a.value.clusterDim.z = z;
    a
}

/// Clusters of `size` CTAs (1 x 1 x `size`) of `func` with `threads` threads and `smem` bytes of
/// dynamic shared memory that the GPU holds at once (`cuOccupancyMaxActiveClusters`).
pub(super) fn max_active_clusters(
    func: &CudaFunction,
    threads: u32,
    smem: u32,
    size: u32,
) -> std::result::Result<usize, cudarc::driver::DriverError> {
    let mut attr = cluster_attribute(size);
    let config = sys::CUlaunchConfig {
        gridDimX: 1,
        gridDimY: 1,
        gridDimZ: size,
        blockDimX: threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: smem,
        hStream: std::ptr::null_mut(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    let mut clusters: std::ffi::c_int = 0;
    // SAFETY: `clusters`, `config` and `attr` are live locals; the call only reads the config.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, func.cu_function(), &config) }
        .result()?;
    Ok(clusters.max(0) as usize)
}

/// Whether libnvrtc can be loaded.
#[cfg(not(feature = "dynamic-linking"))]
pub(super) fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen libnvrtc.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// True: with the `dynamic-linking` feature libnvrtc is linked into the program.
#[cfg(feature = "dynamic-linking")]
pub(super) fn nvrtc_present() -> bool {
    true
}

/// NVRTC's version, `(major, minor)`; `(0, 0)` where it cannot say. Only after [`nvrtc_present`].
pub(super) fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (major, minor)
}

/// One NVRTC compilation of `source` (file name `name.cu`) to a cubin; the error is NVRTC's message
/// and log. Only after [`nvrtc_present`].
pub(super) fn nvrtc_cubin(
    name: &str,
    source: &str,
    options: &[String],
) -> std::result::Result<Vec<u8>, String> {
    use cudarc::nvrtc::{result, sys};
    use std::ffi::CString;
    let src = CString::new(source).map_err(|_| "the source contains a NUL byte".to_string())?;
    let file = CString::new(format!("{name}.cu"))
        .map_err(|_| "the kernel name contains a NUL byte".to_string())?;
    if options.iter().any(|o| o.contains('\0')) {
        return Err("an option contains a NUL byte".into());
    }
    let prog = result::create_program(&src, Some(&file))
        .map_err(|e| format!("creating the program: {e:?}"))?;
    struct Program(sys::nvrtcProgram);
    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: created above and destroyed once, here.
            let _ = unsafe { result::destroy_program(self.0) };
        }
    }
    let prog = Program(prog);
    // SAFETY: `prog` is a live program; options hold no NUL bytes (checked above).
    if let Err(e) = unsafe { result::compile_program(prog.0, options) } {
        // SAFETY: `prog` is live.
        let log = unsafe { result::get_program_log(prog.0) }
            .map(|l| {
                l.iter()
                    .take_while(|&&c| c != 0)
                    .map(|&c| c as u8 as char)
                    .collect::<String>()
            })
            .unwrap_or_default();
        return Err(format!("{e:?}\n{log}"));
    }
    let mut size = 0usize;
    // SAFETY: `prog` is live and compiled; `size` is a plain out-parameter.
    unsafe { sys::nvrtcGetCUBINSize(prog.0, &mut size) }
        .result()
        .map_err(|e| format!("cubin size: {e:?}"))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has the size NVRTC reported.
    unsafe { sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr().cast()) }
        .result()
        .map_err(|e| format!("cubin: {e:?}"))?;
    if cubin.is_empty() {
        return Err("NVRTC returned an empty cubin".into());
    }
    Ok(cubin)
}
