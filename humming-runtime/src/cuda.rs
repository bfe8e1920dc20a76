//! Loading and launching generated kernels on a GPU (cudarc).
//!
//! ```no_run
//! # use humming_runtime::*;
//! # fn demo<K: GemmKernel<A = half::f16, C = half::f16>>(w: &quant::QuantizedWeights) -> Result<()> {
//! let stream = cuda::default_stream(0)?;             // or your own cudarc stream
//! let gemm = cuda::Gemm::<half::f16, half::f16>::load::<K>(&stream)?;
//! let weights = gemm.upload(w)?;                     // packed into the kernel layout, on the GPU
//! let m = 16;
//! let a = stream.clone_htod(&vec![half::f16::ONE; m * w.k()]).map_err(cuda::driver_err("upload A"))?;
//! let mut c = stream.alloc_zeros::<half::f16>(m * w.n()).map_err(cuda::driver_err("alloc C"))?;
//! gemm.run(&a, m, &weights, None, &mut c)?;
//! # Ok(()) }
//! ```

use crate::error::{Error, Result, invalid};
use crate::kernel::{Element, GemmKernel};
use crate::quant::QuantizedWeights;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
    LaunchConfig, sys,
};
use humming_spec::codegen::{
    HEADERS, MAX_CLUSTER_SPLITS, STATIC_SMEM_BYTES, entry_name, smem_bytes, staged_epilogue,
    tiles_of,
};
use humming_spec::{KernelSpec, Mma, TileConfig};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Maps a cudarc driver error into [`Error::Driver`] with a context string.
pub fn driver_err(context: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |source| Error::Driver {
        context: context.to_string(),
        source,
    }
}

/// True if the CUDA driver library can be loaded (it says nothing about whether a GPU is present).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda; no other effect.
    unsafe { sys::is_culib_present() }
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

/// Arguments of the generated kernels; mirrors `humming::GemmParams` in `cuda/humming/common.cuh`
/// (64-byte aligned: it starts with a TMA tensor map, which the kernels read in place as a
/// `__grid_constant__` parameter).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct GemmParams {
    /// `wgmma` tiles: A as a `CUtensorMap` (see [`encode_a_map`]); zero for other tiles.
    a_map: [u64; 16],
    a: u64,
    b: u64,
    scales: u64,
    zeros: u64,
    bias: u64,
    c: u64,
    workspace: u64,
    locks: u64,
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldc: i32,
    splits: i32,
    /// Bit 0: trigger the dependent launch at kernel start ([`Gemm::set_early_dependent_trigger`]);
    /// bit 1: K splits summed in a thread-block cluster; bit 2: stream-K; bit 3: K splits added into
    /// C with f16 atomics ([`Gemm::set_deterministic`]); bit 4: with bit 3, split 0 does not claim
    /// the zeroing of C at its start (testing aid). The kernel's `kFlag*` constants
    /// (`cuda/humming/common.cuh`).
    flags: i32,
}

// The CUDA struct (`cuda/humming/common.cuh`) asserts the same size and alignment.
const _: () =
    assert!(std::mem::size_of::<GemmParams>() == 256 && std::mem::align_of::<GemmParams>() == 64);

// SAFETY: plain #[repr(C, align(64))] data of integers, identical in layout to the CUDA struct (field
// by field; size and alignment asserted on both sides).
unsafe impl DeviceRepr for GemmParams {}

/// How a kernel's module was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// The fatbin compiled by NVCC at build time.
    Fatbin,
    /// Run-time compilation with NVRTC (from the disk cache or freshly compiled).
    Nvrtc,
}

/// How one launch sums its K splits ([`Gemm::split_mode`]).
struct SplitMode {
    /// Stream-K CTAs, or `None` for a grid of output tiles x splits.
    stream_k: Option<usize>,
    /// K splits (with stream-K, the most CTAs that share a tile).
    splits: usize,
    /// Each split adds its partial into C with f16 atomics (`kFlagAtomicC`).
    atomic_c: bool,
    /// The splits of a tile are one thread-block cluster (`kFlagClusterSplitK`).
    cluster: bool,
}

struct LoadedTile {
    tile: TileConfig,
    func: CudaFunction,
    smem: u32,
    /// Resident CTAs per multiprocessor (occupancy), at least 1.
    ctas_per_sm: usize,
    /// Writes C through shared memory, and can sum its K splits in a cluster ([`staged_epilogue`]).
    staged: bool,
    /// `max_clusters[s]`: clusters of `s` CTAs (2 to [`MAX_CLUSTER_SPLITS`]) of this tile the GPU holds at
    /// once (`cuOccupancyMaxActiveClusters`; 0 where unknown or not staged).
    max_clusters: [usize; MAX_CLUSTER_SPLITS as usize + 1],
}

/// A loaded quantized GEMM: `C[M, N] = epilogue(A[M, K] · dequant(B)[N, K]ᵀ · channel scale + bias)`.
///
/// `A` and `C` are the element types (`half::f16` or `half::bf16`), fixed by the kernel's declaration,
/// so passing a buffer of the wrong type does not compile.
pub struct Gemm<A: Element, C: Element> {
    stream: Arc<CudaStream>,
    name: String,
    spec: KernelSpec,
    tiles: Vec<LoadedTile>,
    source: ModuleSource,
    sms: usize,
    split_k: std::sync::atomic::AtomicBool,
    forced_splits: std::sync::atomic::AtomicUsize,
    /// [`Gemm::set_stream_k`]: 0 = off, n = n CTAs.
    stream_k: std::sync::atomic::AtomicUsize,
    /// The device's compute capability, e.g. 90 (programmatic dependent launch from 90 on).
    cap: u32,
    pdl: std::sync::atomic::AtomicBool,
    /// [`Gemm::set_early_dependent_trigger`]: 0 = the automatic rule, 1 = always, 2 = never.
    pdl_early: std::sync::atomic::AtomicU8,
    /// [`Gemm::set_cluster_split_k`].
    cluster_split_k: std::sync::atomic::AtomicBool,
    /// [`Gemm::set_deterministic`].
    deterministic: std::sync::atomic::AtomicBool,
    /// [`Gemm::set_atomic_start_claim`].
    atomic_start_claim: std::sync::atomic::AtomicBool,
    workspace: std::sync::Mutex<Workspace>,
    _types: PhantomData<fn(A) -> C>,
}

/// Quantized weights packed into the kernel layout and uploaded to the GPU.
pub struct DeviceWeights {
    spec: KernelSpec,
    n: usize,
    k: usize,
    b: CudaSlice<u8>,
    scales: CudaSlice<u16>,
    zeros: Option<CudaSlice<u16>>,
}

impl DeviceWeights {
    /// Output channels.
    pub fn n(&self) -> usize {
        self.n
    }
    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Bytes on the GPU (packed weights, scales, zero points).
    pub fn bytes(&self) -> usize {
        self.b.len() + 2 * self.scales.len() + self.zeros.as_ref().map_or(0, |z| 2 * z.len())
    }
    /// The descriptor the weights were packed for.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }
}

fn capability(stream: &CudaStream) -> Result<u32> {
    let (major, minor) = stream
        .context()
        .compute_capability()
        .map_err(driver_err("reading the compute capability"))?;
    Ok((major * 10 + minor) as u32)
}

impl<A: Element, C: Element> Gemm<A, C> {
    /// Loads a kernel declared with `gemm!`: its NVCC fatbin, or, when the image is empty (no NVCC at
    /// build time) or holds no code for this GPU, the NVRTC compilation of its source (disk-cached).
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] below compute capability 8.0; [`Error::InvalidArgument`] (`spec`)
    /// when no tile fits the GPU's shared memory; [`Error::Nvrtc`] when run-time compilation fails;
    /// [`Error::Driver`] when loading the module or setting its attributes fails.
    pub fn load<K: GemmKernel<A = A, C = C>>(stream: &Arc<CudaStream>) -> Result<Self> {
        Self::load_parts(stream, K::NAME, K::DESCRIPTOR, K::CUDA_SOURCE, K::IMAGE)
    }

    /// Compiles a descriptor built at run time (e.g. with [`humming_spec::parse_kernel_str`]) with NVRTC
    /// and loads it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] (`spec`) if the descriptor breaks a rule of `gemm!`
    /// ([`humming_spec::check_spec`]) or its A/C dtypes are not `A`/`C`; otherwise as [`Gemm::load`].
    pub fn compile(stream: &Arc<CudaStream>, name: &str, spec: KernelSpec) -> Result<Self> {
        humming_spec::check_spec(&spec)
            .map_err(|e| invalid("spec", format!("kernel {name}: {e}")))?;
        let source = humming_spec::codegen::generate_cuda(&spec);
        Self::load_parts(stream, name, spec, &source, &[])
    }

    fn load_parts(
        stream: &Arc<CudaStream>,
        name: &str,
        spec: KernelSpec,
        source: &str,
        image: &[u8],
    ) -> Result<Self> {
        if spec.a != A::DTYPE || spec.c != C::DTYPE {
            return Err(invalid(
                "spec",
                format!(
                    "kernel {name} has a={} c={}, but was loaded as a={} c={}",
                    spec.a,
                    spec.c,
                    A::DTYPE,
                    C::DTYPE
                ),
            ));
        }
        let ctx = stream.context();
        let cap = capability(stream)?;
        if cap < 80 {
            return Err(Error::UnsupportedDevice {
                kernel: name.to_string(),
                capability: cap,
                archs: spec
                    .archs
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(","),
            });
        }
        let mut module = None;
        let mut how = ModuleSource::Fatbin;
        if !image.is_empty() {
            match ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image.to_vec())) {
                Ok(m) => module = Some(m),
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU => {}
                Err(e) => {
                    return Err(Error::Driver {
                        context: format!("loading the fatbin of {name}"),
                        source: e,
                    });
                }
            }
        }
        let module = match module {
            Some(m) => m,
            None => {
                how = ModuleSource::Nvrtc;
                let cubin = nvrtc_compile(name, source, cap)?;
                ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
                    .map_err(|e| Error::Driver {
                        context: format!("loading the NVRTC module of {name}"),
                        source: e,
                    })?
            }
        };
        let optin = ctx
            .attribute(
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )
            .map_err(driver_err("reading the shared-memory limit"))? as u32;
        let mut tiles = Vec::new();
        let mut wgmma_skipped = 0;
        for (i, tile) in tiles_of(&spec).into_iter().enumerate() {
            let smem = smem_bytes(&spec, &tile);
            // wgmma exists on sm_90a only (compute capability 9.0); elsewhere those entries trap.
            if tile.mma == Mma::Wgmma && cap != 90 {
                wgmma_skipped += 1;
                continue;
            }
            if smem + STATIC_SMEM_BYTES > optin {
                continue;
            }
            let func = module
                .load_function(&entry_name(&spec, i))
                .map_err(|e| Error::Driver {
                    context: format!("finding entry {} of {name}", entry_name(&spec, i)),
                    source: e,
                })?;
            // Always raise the dynamic limit: the default (48 KiB) also counts the kernel's static
            // shared memory, so a tile of exactly 48 KiB of dynamic memory would not launch.
            {
                ctx.bind_to_thread()
                    .map_err(driver_err("binding the context"))?;
                func.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .map_err(driver_err("raising the dynamic shared-memory limit"))?;
            }
            let ctas_per_sm = func
                .occupancy_max_active_blocks_per_multiprocessor(tile.threads(), smem as usize, None)
                .map_err(driver_err("querying occupancy"))?
                .max(1) as usize;
            let staged = staged_epilogue(&spec, &tile);
            let mut max_clusters = [0; MAX_CLUSTER_SPLITS as usize + 1];
            if staged {
                // A failed query leaves 0: that tile then always sums through the workspace.
                for (size, slot) in max_clusters.iter_mut().enumerate().skip(2) {
                    *slot =
                        max_active_clusters(&func, tile.threads(), smem, size as u32).unwrap_or(0);
                }
            }
            tiles.push(LoadedTile {
                tile,
                func,
                smem,
                ctas_per_sm,
                staged,
                max_clusters,
            });
        }
        if tiles.is_empty() {
            let why = if wgmma_skipped > 0 {
                format!(
                    "{wgmma_skipped} are `mma = wgmma` tiles, which need compute capability 9.0 (this GPU: {cap}), \
                     and the others do not fit in {optin} bytes of shared memory"
                )
            } else {
                format!("none fits in {optin} bytes of shared memory")
            };
            return Err(invalid(
                "spec",
                format!("no tile configuration of {name} can run on this GPU: {why}"),
            ));
        }
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("reading the multiprocessor count"))? as usize;
        Ok(Gemm {
            stream: stream.clone(),
            name: name.to_string(),
            spec,
            tiles,
            source: how,
            sms,
            split_k: std::sync::atomic::AtomicBool::new(true),
            forced_splits: std::sync::atomic::AtomicUsize::new(0),
            stream_k: std::sync::atomic::AtomicUsize::new(0),
            cap,
            pdl: std::sync::atomic::AtomicBool::new(cap >= 90),
            pdl_early: std::sync::atomic::AtomicU8::new(0),
            cluster_split_k: std::sync::atomic::AtomicBool::new(true),
            deterministic: std::sync::atomic::AtomicBool::new(false),
            atomic_start_claim: std::sync::atomic::AtomicBool::new(true),
            workspace: std::sync::Mutex::new(Workspace::default()),
            _types: PhantomData,
        })
    }

    /// Turns split-K on (the default) or off. With it off, every row of C is reduced over K in the
    /// same order whatever M is (with one fixed tile, results are then batch-invariant). With it on,
    /// partials are summed in a fixed split order, except where a launch adds them into C with
    /// atomics (f16 C on the staged `wgmma` tiles and, on compute capability 9.x, the 8-row tile's
    /// launches of more CTAs than SMs; [`Gemm::set_deterministic`] turns that off).
    pub fn set_split_k(&self, on: bool) {
        self.split_k.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Turns programmatic dependent launch on (the default on compute capability 9.0 and newer; a no-op
    /// elsewhere) or off. With it on, each launch of a tile of which at most two CTAs fit on a
    /// multiprocessor (every default tile) carries `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`:
    /// the kernel may start while the kernel queued before it on the stream is still running, and
    /// streams its first stages of weights (which no kernel writes) while it waits, in
    /// `griddepcontrol.wait`, for that kernel to complete before it touches A, C or the split-K workspace.
    /// The kernel also lets the kernel after it start early the same way. Stream order is otherwise
    /// unchanged: results are those of launches in sequence (CUDA Programming Guide, "Programmatic
    /// Dependent Launch and Synchronization").
    pub fn set_programmatic_launch(&self, on: bool) {
        self.pdl
            .store(on && self.cap >= 90, std::sync::atomic::Ordering::Relaxed);
    }

    /// Where a launch that uses programmatic dependent launch lets the next kernel of the stream start:
    /// `None` (the default) follows the runtime's rule, `Some(true)` at the start of every CTA,
    /// `Some(false)` after every CTA's main loop. Triggered at the start, the next kernel's CTAs can
    /// take free slots and stream their first weights while this kernel still runs; after the main
    /// loop, they cannot take DRAM bandwidth from it. The rule: at the start for tiles of at most 16
    /// rows of which two CTAs fit per SM, when the launch has more CTAs than the GPU has SMs, else
    /// after the main loop (H200, W4A16 g128, M = 1: 13.1 -> 12.6 us at 8192 x 8192, 20.0 -> 18.7 us at
    /// 28672 x 4096, but 6.8 -> 7.4 us at 4096 x 4096, whose 128 CTAs leave SMs idle; M = 16 on the
    /// two-CTA 16-row tile at 28672 x 4096: 26.3 -> 25.3 us; the one-CTA 16-row tile lost, 19.1 -> 21.3
    /// us at 8192 x 8192). Results are the same either way: the next kernel still waits for this one
    /// before it reads A.
    pub fn set_early_dependent_trigger(&self, early: Option<bool>) {
        let mode = match early {
            None => 0,
            Some(true) => 1,
            Some(false) => 2,
        };
        self.pdl_early
            .store(mode, std::sync::atomic::Ordering::Relaxed);
    }

    /// Turns the cluster reduction of K splits on (the default) or off. With it on, a launch of a
    /// `wgmma` tile that writes C through shared memory ([`staged_epilogue`]), runs one CTA per SM,
    /// and has 2 to [`MAX_CLUSTER_SPLITS`] splits whose clusters all fit the GPU at once (see
    /// `cluster_launch`; [`Gemm::uses_cluster`] says) is one thread-block cluster per output tile (launch attribute
    /// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`, 1 x 1 x splits): each CTA keeps its partial tile in
    /// shared memory and sums 1 / splits of the tile's rows over the cluster's partials (distributed
    /// shared memory) in split order, with no global workspace. Off: the partials go through the
    /// global split-K workspace and the last split to finish sums them. Both sum in the same order:
    /// results are bit-identical. A launch that adds its splits with atomics
    /// ([`Gemm::set_deterministic`]) is not a cluster launch: on the H200 the atomics were as fast or
    /// faster (W4A16 g128, 4096 x 4096, M = 256, 2 splits: 17.6 against 18.0 us; 8192 x 8192,
    /// M = 128: 29.3 against 29.9).
    pub fn set_cluster_split_k(&self, on: bool) {
        self.cluster_split_k
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Keeps every launch deterministic, or (the default) lets launches add their K splits into C
    /// with atomics where that is faster. Off: a launch that splits K on a `wgmma` tile with the
    /// staged epilogue (`codegen::atomic_split_k`: the default tiles for M > 16 on sm_90a), or on the
    /// 8-row `mma.sync` tile (M <= 8) with more CTAs than the GPU has SMs (compute capability 9.x),
    /// for a kernel with f16 C, no bias and no epilogue, and is not stream-K, adds each split's
    /// partial into C with 16-byte f16 atomics (PTX `red.add.noftz.v4.f16x2`) once split 0 (or, where it starts
    /// late, the first split to finish) has zeroed the tile's C, instead of summing the partials
    /// through the workspace or a cluster: no split waits for the others, and none reloads their
    /// partials (H200, W4A16 g128, 4096 x 4096: M = 128 15.8 -> 11.9 us, M = 64 10.7 -> 9.2;
    /// 4096 x 14336, M = 32 19.0 -> 15.5). humming-kernels reduces its
    /// stream-K slices into C the same way by default; vLLM's Marlin kernels have it opt-in
    /// (`use_atomic_add`). H200, W4A16 g128, M = 1 with the 8-row tile (256 CTAs): 8192 x 8192
    /// 11.8 -> 11.2 us, 4096 x 14336 10.7 -> 10.2. The price: the order of the additions, and so the
    /// last bits of C, may change from launch to launch; each split adds two f16 roundings to an output (its partial's,
    /// and the addition's: relative error within about 2 x splits x 2^-11 of the largest partial),
    /// and a partial beyond the f16 range becomes infinite even where the sum would not be. On: every
    /// launch sums its splits in split order, and the same inputs give the same bits on the same GPU
    /// (the default tile and split count depend on its number of SMs). Launches without K splits,
    /// kernels with bf16 C, a bias or a fused epilogue, stream-K launches, the `mma.sync` tiles of
    /// more than 8 rows (M = 9-16 with the default tiles on sm_90a), launches of the 8-row tile with at
    /// most one CTA per SM and every launch outside compute capability 9.x are deterministic either
    /// way. Batch invariance (a row of C the same whatever M is) also needs one declared tile, and
    /// either `set_split_k(false)` (no splits: enough by itself) or `set_splits(Some(n))` with this
    /// on.
    pub fn set_deterministic(&self, on: bool) {
        self.deterministic
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether launches are kept deterministic ([`Gemm::set_deterministic`]).
    pub fn deterministic(&self) -> bool {
        self.deterministic
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a launch of `m` rows on `[n, k]` weights adds its K splits into C with f16 atomics
    /// ([`Gemm::set_deterministic`]).
    pub fn uses_atomic_c(&self, m: usize, n: usize, k: usize) -> bool {
        let lt = &self.tiles[self.select_index(m, n, k)];
        self.split_mode(lt, m, n, k).atomic_c
    }

    /// How a launch of `m` rows of `t` on `[n, k]` weights sums its K splits: the one decision that
    /// the launch, [`Gemm::uses_atomic_c`] and [`Gemm::uses_cluster`] share. Atomics
    /// ([`Gemm::set_deterministic`]) where the tile can and the launch splits K without stream-K; a
    /// cluster ([`Gemm::set_cluster_split_k`]) only where neither stream-K nor atomics apply (the
    /// atomics measured as fast or faster than the cluster sum on the H200: see
    /// `set_cluster_split_k`). `output_tiles` caps the row tiles at one launch's 65535, as
    /// `run_strided`'s chunks do.
    fn split_mode(&self, t: &LoadedTile, m: usize, n: usize, k: usize) -> SplitMode {
        let (stream_k, splits) = self.launch_splits(t, m, n, k);
        // The 8-row mma.sync tile only where its launch has more CTAs than SMs, on compute
        // capability 9.x (where it was measured; codegen::atomic_split_k). (Decided once per call:
        // where M is cut into launches of at most 65535 row tiles, a last short launch follows the
        // first's decision.)
        let atomic_c = !self.deterministic()
            && splits > 1
            && stream_k.is_none()
            && humming_spec::codegen::atomic_split_k(&self.spec, &t.tile)
            && (t.tile.mma == Mma::Wgmma
                || (self.cap / 10 == 9
                    && output_tiles(&t.tile, m, n).saturating_mul(splits) > self.sms));
        let cluster = stream_k.is_none()
            && !atomic_c
            && self.cluster_launch(t, splits, output_tiles(&t.tile, m, n));
        SplitMode {
            stream_k,
            splits,
            atomic_c,
            cluster,
        }
    }

    /// Testing aid: with `false`, split 0 of an atomic split-K launch ([`Gemm::set_deterministic`])
    /// does not claim the zeroing of its tile's C at its start, so the first split to end claims it
    /// and the others wait for it: the path a launch takes when split 0's CTA starts late. Default
    /// `true`.
    #[doc(hidden)]
    pub fn set_atomic_start_claim(&self, on: bool) {
        self.atomic_start_claim
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a launch of `t` with `splits` K splits over `tiles` output tiles is a cluster launch
    /// ([`Gemm::set_cluster_split_k`]): only when every cluster is resident at once (at most
    /// `cuOccupancyMaxActiveClusters`; otherwise a second wave of clusters costs more than the cluster
    /// saves) and the tile runs one CTA per multiprocessor (the cluster scheduler packs the CTAs of a
    /// cluster onto fewer SMs where two fit). H200, W4A16 g128: 4096 x 4096 at M = 32 / 64, 16 clusters
    /// of 4, 14.3 -> 12.4 / 18.5 -> 15.5 us; 32 clusters of 4 at 8192 x 8192, M = 32, which do not
    /// all fit, 23.4 -> 40.6 us; the 2-CTA 128-row tile at 4096 x 4096, M = 128, 21.1 -> 24.3 us.
    fn cluster_launch(&self, t: &LoadedTile, splits: usize, tiles: usize) -> bool {
        t.staged
            && t.ctas_per_sm == 1
            && (2..=MAX_CLUSTER_SPLITS as usize).contains(&splits)
            && tiles <= t.max_clusters[splits]
            && self
                .cluster_split_k
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a launch of `m` rows on `[n, k]` weights sums its K splits in thread-block clusters
    /// ([`Gemm::set_cluster_split_k`]).
    pub fn uses_cluster(&self, m: usize, n: usize, k: usize) -> bool {
        let lt = &self.tiles[self.select_index(m, n, k)];
        self.split_mode(lt, m, n, k).cluster
    }

    /// Pins the number of K splits of every launch (for tuning, or, with
    /// [`Gemm::set_deterministic`]`(true)`, for results that do not depend on the GPU's size):
    /// `None` (the default) lets [`choose_splits`] decide; `Some(n)` uses `n` splits, clamped to
    /// 1..=64 and to the number of `block_k` steps of K. Applies while split-K is on.
    pub fn set_splits(&self, splits: Option<usize>) {
        self.forced_splits.store(
            splits.map_or(0, |n| n.clamp(1, 64)),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Stream-K for launches of `mma.sync` tiles: `None` (the default) launches output tiles x K splits
    /// ([`choose_splits`]); `Some(g)` launches a 1-D grid of `g` CTAs (clamped to 2..=64 per SM and to
    /// the launch's output tiles x `block_k` steps) that take equal ranges of those steps, tile-major
    /// (Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense Matrix Multiplication",
    /// PPoPP 2023). A CTA walks the pieces of tiles in its range in order; the CTAs that meet in a tile
    /// are its K splits, summed in K order through the split-K workspace by the last to finish
    /// (deterministic, as split-K). Applies while split-K is on and its count is not pinned
    /// ([`Gemm::set_split_k`], [`Gemm::set_splits`]), for `mma.sync` tiles whose warps cover at most
    /// 16 rows (`warp_m <= 16`: the default M <= 16 tiles); other tiles ignore it, as do launches of
    /// more than 65535 row tiles and shapes whose step counts would overflow the kernel's integers
    /// ([`Gemm::stream_k_ctas`] says whether a launch uses it). `Some(0)` is `None`.
    ///
    /// Off by default because it did not pay on the H200 (W4A16 g128, 264 CTAs, two per SM): 28672 x
    /// 4096 at M = 1 / 8 / 16 took 20.4 / 20.6 / 25.1 us against 18.0 / 18.2 / 23.1 us without it
    /// (a CTA's pipeline drains and refills between its two pieces, and the tile's last piece pays the
    /// split-K tail), and every shape whose K the split rule already splits lost 1.7-10.2 us.
    pub fn set_stream_k(&self, ctas: Option<usize>) {
        self.stream_k
            .store(ctas.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    }

    /// The CTAs of a stream-K launch of `m` rows on `[n, k]` weights, or `None` when the launch does not
    /// use stream-K ([`Gemm::set_stream_k`]).
    pub fn stream_k_ctas(&self, m: usize, n: usize, k: usize) -> Option<usize> {
        let lt = &self.tiles[self.select_index(m, n, k)];
        self.stream_k_for(lt, m, n, k)
    }

    fn stream_k_for(&self, lt: &LoadedTile, m: usize, n: usize, k: usize) -> Option<usize> {
        let t = &lt.tile;
        // Swap-AB mma.sync tiles (warps of at most 16 rows; the kernel runs others without the segment
        // loop), one launch only (rows beyond 65535 row tiles go in chunks), split-K on and not pinned.
        if t.mma == Mma::Wgmma
            || t.warp_m > 16
            || m > 65535 * t.block_m as usize
            || !self.split_k.load(std::sync::atomic::Ordering::Relaxed)
            || self
                .forced_splits
                .load(std::sync::atomic::Ordering::Relaxed)
                != 0
        {
            return None;
        }
        let tiles = output_tiles(t, m, n);
        let total = tiles.saturating_mul(k.div_ceil(t.block_k.max(1) as usize));
        let g = match self.stream_k.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            // At most 64 CTAs per SM: stream-K is for one wave, not for many.
            g => (total >= 2).then(|| g.min(self.sms.saturating_mul(64)).clamp(2, total)),
        }?;
        // The kernel's tile index and a CTA's step count (`ring`) are ints, its step arithmetic
        // `(step + 1) * G` an i64.
        (tiles <= i32::MAX as usize
            && total / g < (i32::MAX / 2) as usize
            && total.checked_mul(g + 1).is_some_and(|v| v < 1 << 62))
        .then_some(g)
    }

    /// The stream-K CTAs of a launch of `lt` ([`Gemm::set_stream_k`]; `None` without stream-K) and the
    /// split slots of its workspace: for stream-K at least the most CTAs that share a tile
    /// ([`stream_k_splits`], a bound), else the K splits.
    fn launch_splits(
        &self,
        lt: &LoadedTile,
        m: usize,
        n: usize,
        k: usize,
    ) -> (Option<usize>, usize) {
        match self.stream_k_for(lt, m, n, k) {
            Some(g) => (Some(g), stream_k_splits(&lt.tile, m, n, k, g)),
            None => (None, self.splits_for(&lt.tile, m, n, k)),
        }
    }

    /// Makes sure the split-K workspace covers launches of every M from 1 to `max_m` rows of an
    /// `[n, k]` weight, so that no allocation happens later (needed before capturing launches into a
    /// CUDA graph). The workspace grows to the largest need over those M with the split settings of
    /// the time of the call ([`Gemm::set_split_k`], [`Gemm::set_splits`], [`Gemm::set_stream_k`]: turning
    /// stream-K on afterwards may need more), also for launches that
    /// sum their splits in a cluster (so that [`Gemm::set_cluster_split_k`] may change later)
    /// (computed on the host, one allocation at most). Errors: `max_m`, `n` or `k` of 2^31 or more ([`Error::InvalidArgument`]),
    /// or the allocation failing.
    pub fn reserve(&self, max_m: usize, n: usize, k: usize) -> Result<()> {
        for (name, v) in [("max_m", max_m), ("n", n), ("k", k)] {
            if v > i32::MAX as usize {
                return Err(invalid(name, format!("{name} = {v} is 2^31 or more")));
            }
        }
        let (mut floats, mut tiles) = (0, 0);
        for m in 1..=max_m.max(1) {
            let lt = &self.tiles[self.select_index(m, n, k)];
            let t = lt.tile;
            let (_, splits) = self.launch_splits(lt, m, n, k);
            // Also for launches that sum in a cluster, so that `set_cluster_split_k(false)` after
            // this call does not allocate either.
            if splits > 1 {
                let (f, c) = workspace_size(&t, m, n, splits);
                floats = floats.max(f);
                tiles = tiles.max(c);
            }
        }
        if floats > 0 {
            self.ensure_workspace(floats, tiles)?;
        }
        Ok(())
    }

    /// The tile and the number of K splits a launch of `m` rows on `[n, k]` weights uses.
    pub fn plan(&self, m: usize, n: usize, k: usize) -> (TileConfig, usize) {
        let t = self.select_tile(m, n, k);
        (t, self.splits_for(&t, m, n, k))
    }

    fn splits_for(&self, t: &TileConfig, m: usize, n: usize, k: usize) -> usize {
        if self.split_k.load(std::sync::atomic::Ordering::Relaxed) {
            let occupancy = self
                .tiles
                .iter()
                .find(|l| l.tile == *t)
                .map_or(1, |l| l.ctas_per_sm);
            match self
                .forced_splits
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                0 => choose_splits(t, m, n, k, self.sms, occupancy),
                f => f.min(k.div_ceil(t.block_k.max(1) as usize)).max(1),
            }
        } else {
            1
        }
    }

    /// Device pointers of a workspace of `splits` partial tiles and its tickets, growing it if needed.
    /// Retired buffers are kept until the `Gemm` is dropped, so graphs captured earlier stay valid.
    fn workspace_ptrs(
        &self,
        t: &TileConfig,
        m: usize,
        n: usize,
        splits: usize,
    ) -> Result<(u64, u64)> {
        if splits <= 1 {
            return Ok((0, 0));
        }
        let (floats, tiles) = workspace_size(t, m, n, splits);
        self.ensure_workspace(floats, tiles)
    }

    /// Device pointers of a workspace of at least `floats` partials and `tiles` tickets, growing it if
    /// needed.
    fn ensure_workspace(&self, floats: usize, tiles: usize) -> Result<(u64, u64)> {
        let mut ws = self.workspace.lock().map_err(|_| {
            invalid(
                "workspace",
                "the split-K workspace lock was poisoned by a panic",
            )
        })?;
        if ws.partials.as_ref().is_none_or(|p| p.len() < floats) {
            let p = self
                .stream
                .alloc_zeros::<f32>(floats.max(1 << 16))
                .map_err(driver_err("allocating the split-K workspace"))?;
            if let Some(old) = ws.partials.replace(p) {
                ws.retired_f32.push(old);
            }
        }
        if ws.locks.as_ref().is_none_or(|l| l.len() < tiles) {
            let l = self
                .stream
                .alloc_zeros::<i32>(tiles.max(4096))
                .map_err(driver_err("allocating split-K tickets"))?;
            if let Some(old) = ws.locks.replace(l) {
                ws.retired_i32.push(old);
            }
        }
        let (Some(p), Some(l)) = (&ws.partials, &ws.locks) else {
            return Err(invalid(
                "workspace",
                "split-K workspace missing after allocation",
            ));
        };
        let (pp, _r1) = p.device_ptr(&self.stream);
        let (lp, _r2) = l.device_ptr(&self.stream);
        Ok((pp, lp))
    }

    /// The kernel's descriptor.
    pub fn spec(&self) -> &KernelSpec {
        &self.spec
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the module came from the NVCC fatbin or from NVRTC.
    pub fn module_source(&self) -> ModuleSource {
        self.source
    }

    /// The stream kernels are launched on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The tile configurations available on this device, in declaration order.
    pub fn tiles(&self) -> Vec<TileConfig> {
        self.tiles.iter().map(|t| t.tile).collect()
    }

    /// The tile used for `m` rows of `[n, k]` weights: the smallest `block_m` that covers `m`, else
    /// the largest (a `wgmma` tile before an `mma.sync` one of the same `block_m`), see
    /// [`select_tile_index`]; among several tiles of that `block_m` and kind whose launch fits one wave
    /// of resident CTAs, with its own split-K count, and has at most one output tile per SM: for
    /// `wgmma` tiles the first, or a later one of fewer K splits and no fewer CTAs
    /// ([`fewest_splits_single_wave`]), for `mma.sync` tiles the
    /// one of most CTAs, the first of equals ([`fullest_single_wave`]); where none fits, the last of
    /// them. Where that is a `wgmma` tile of 256 rows or more, the pick among the `wgmma` tiles of
    /// half its `block_m` replaces it if its launch gives the busiest SM less work
    /// ([`least_wave_work`]; the larger tile on equal work). See [`select_launch_tile`].
    pub fn select_tile(&self, m: usize, n: usize, k: usize) -> TileConfig {
        self.tiles[self.select_index(m, n, k)].tile
    }

    fn select_index(&self, m: usize, n: usize, k: usize) -> usize {
        // (No allocation: this runs on every launch.)
        select_launch_tile(
            &self.tiles,
            |l| (l.tile, l.ctas_per_sm),
            self.sms,
            (m, n, k),
            |t| self.splits_for(t, m, n, k),
        )
    }

    /// Packs quantized weights into the kernel layout and uploads them.
    ///
    /// Errors if the weights were made for another descriptor, or N or K is not a multiple of 64.
    pub fn upload(&self, w: &QuantizedWeights) -> Result<DeviceWeights> {
        if w.spec() != &self.spec {
            return Err(invalid(
                "weights",
                format!(
                    "weights were quantized for `{}`, kernel {} is `{}`",
                    w.spec(),
                    self.name,
                    self.spec
                ),
            ));
        }
        let packed = w.pack()?;
        let s = &self.stream;
        let b = s
            .clone_htod(&packed.b)
            .map_err(driver_err("uploading packed weights"))?;
        let scales = s
            .clone_htod(&packed.scales)
            .map_err(driver_err("uploading scales"))?;
        let zeros = if packed.zeros.is_empty() {
            None
        } else {
            Some(
                s.clone_htod(&packed.zeros)
                    .map_err(driver_err("uploading zero points"))?,
            )
        };
        Ok(DeviceWeights {
            spec: self.spec,
            n: w.n(),
            k: w.k(),
            b,
            scales,
            zeros,
        })
    }

    /// `C = A · Bᵀ` for contiguous row-major `A [m, K]` and `C [m, N]`. See [`Gemm::run_strided`].
    ///
    /// By default, on compute capability 9.x with f16 C and no bias or epilogue, a launch may add its
    /// K splits into C with f16 atomics, so that the last bits can differ between launches
    /// ([`Gemm::uses_atomic_c`] says when; [`Gemm::set_deterministic`] turns it off).
    ///
    /// Asynchronous: the kernel is queued on the stream and its launch error checked; C is ready once
    /// the stream has reached it (`stream.synchronize()`, or a copy back such as `clone_dtoh`), and a
    /// fault inside the kernel is reported by that later call.
    pub fn run<Ab, Cb>(
        &self,
        a: &Ab,
        m: usize,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.run_strided(a, m, w.k, w, bias, c, w.n)
    }

    /// `C[i, j] = epilogue(Σ_k A[i, k] · W[j, k] + bias[j])` for `i < m`, with row strides `lda` and
    /// `ldc` in elements. Only `C[i, j]` with `i < m`, `j < N` are written.
    ///
    /// Checks (each a typed [`Error::InvalidArgument`] naming the argument): `w` matches this kernel;
    /// `lda >= K` and `lda % 8 == 0`; `ldc >= N` and `ldc` even; `a` holds `(m - 1) · lda + K` elements
    /// and starts 16-byte aligned; `c` holds `(m - 1) · ldc + N` elements and starts 4-byte aligned;
    /// `bias` is given (with N elements) exactly when the kernel declares `bias: true`; `m < 2^31`.
    /// `m == 0` returns at once without a launch.
    #[allow(clippy::too_many_arguments)]
    pub fn run_strided<Ab, Cb>(
        &self,
        a: &Ab,
        m: usize,
        lda: usize,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
        ldc: usize,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        if m == 0 && w.spec == self.spec {
            return Ok(());
        }
        let stream = &self.stream;
        let (a_len, c_len) = (a.len(), c.len());
        let (a_ptr, _ra) = a.device_ptr(stream);
        let (c_ptr, _rc) = c.device_ptr_mut(stream);
        check_launch(
            &self.name,
            &self.spec,
            &w.spec,
            &LaunchShape {
                m,
                n: w.n,
                k: w.k,
                lda,
                ldc,
                a_len,
                c_len,
                bias_len: bias.map(|b| b.len()),
                a_addr: a_ptr,
                c_addr: c_ptr,
            },
        )?;
        let (n, k) = (w.n, w.k);
        let idx = self.select_index(m, n, k);
        let t = &self.tiles[idx];
        let (b_ptr, _rb) = w.b.device_ptr(stream);
        let (s_ptr, _rs) = w.scales.device_ptr(stream);
        let (z_ptr, _rz) = match &w.zeros {
            Some(z) => {
                let (p, r) = z.device_ptr(stream);
                (p, Some(r))
            }
            None => (0, None),
        };
        let (bias_ptr, _rbias) = match bias {
            Some(b) => {
                let (p, r) = b.device_ptr(stream);
                (p, Some(r))
            }
            None => (0, None),
        };
        // grid.y is limited to 65535: launch in chunks of rows.
        let bm = t.tile.block_m as usize;
        let rows_per_launch = 65535 * bm;
        let grid_x = n.div_ceil(t.tile.block_n as usize) as u32;
        let SplitMode {
            stream_k,
            splits,
            atomic_c,
            cluster,
        } = self.split_mode(t, m, n, k);
        let (ws_ptr, locks_ptr) = if cluster {
            (0, 0)
        } else {
            self.workspace_ptrs(&t.tile, m.min(rows_per_launch), n, splits)?
        };
        let mut row = 0usize;
        while row < m {
            let rows = rows_per_launch.min(m - row);
            let a_rows = a_ptr + (row * lda * 2) as u64;
            let a_map = if t.tile.mma == Mma::Wgmma {
                encode_a_map(a_rows, rows, k, lda, u32::from(t.tile.block_m)).map_err(|e| {
                    Error::Driver {
                        context: format!("encoding the TMA tensor map of A for {}", self.name),
                        source: e,
                    }
                })?
            } else {
                [0; 16]
            };
            // Not for tiles of which more than two CTAs fit on a multiprocessor: the split rule never
            // places more than two, so the next kernel's CTAs would start early in the free slots and
            // take DRAM bandwidth from this one (H200, the 16-row tile at M = 16: 19.2 -> 22.0 us at
            // 8192 x 8192 with it on, 28.3 -> 30.8 us at 28672 x 4096).
            let pdl = self.pdl.load(std::sync::atomic::Ordering::Relaxed) && t.ctas_per_sm <= 2;
            let ctas = stream_k.unwrap_or(grid_x as usize * rows.div_ceil(bm) * splits);
            let early = pdl
                && match self.pdl_early.load(std::sync::atomic::Ordering::Relaxed) {
                    0 => t.tile.block_m <= 16 && t.ctas_per_sm == 2 && ctas > self.sms,
                    mode => mode == 1,
                };
            let params = GemmParams {
                a_map,
                a: a_rows,
                b: b_ptr,
                scales: s_ptr,
                zeros: z_ptr,
                bias: bias_ptr,
                c: c_ptr + (row * ldc * 2) as u64,
                workspace: ws_ptr,
                locks: locks_ptr,
                m: rows as i32,
                n: n as i32,
                k: k as i32,
                lda: lda as i32,
                ldc: ldc as i32,
                splits: splits as i32,
                flags: i32::from(early)
                    | (i32::from(cluster) << 1)
                    | (i32::from(stream_k.is_some()) << 2)
                    | (i32::from(atomic_c) << 3)
                    | (i32::from(
                        atomic_c
                            && !self
                                .atomic_start_claim
                                .load(std::sync::atomic::Ordering::Relaxed),
                    ) << 4),
            };
            // (Stream-K launches have one chunk of rows: `stream_k_for`.)
            let grid_dim = match stream_k {
                Some(g) => (g as u32, 1, 1),
                None => (grid_x, rows.div_ceil(bm) as u32, splits as u32),
            };
            let cfg = LaunchConfig {
                grid_dim,
                block_dim: (t.tile.threads(), 1, 1),
                shared_mem_bytes: t.smem,
            };
            let context = || format!("launching {} ({})", self.name, t.tile);
            let cluster_z = if cluster { splits as u32 } else { 1 };
            // SAFETY: the kernel reads A[rows, lda], the packed weights, scales, zero points and bias,
            // and writes C[rows, ldc] for columns < N only (and, without a cluster, the split-K
            // workspace sized above); every length and alignment was checked above. `params`
            // outlives the call (the driver copies kernel arguments).
            unsafe { launch_ex(stream, &t.func, cfg, &params, pdl, cluster_z) }.map_err(|e| {
                Error::Driver {
                    context: context(),
                    source: e,
                }
            })?;
            row += rows;
        }
        Ok(())
    }
}

/// The TMA tensor map of A for a `wgmma` tile (`cuda/humming/loader.cuh`, `load_a_tma`): a 2-D tensor
/// of 16-bit elements at device address `a` (16-byte aligned), dims `{k, rows}` (K innermost), rows
/// `lda * 2` bytes apart (a multiple of 16), boxes of 64 x `block_m` elements written to shared memory
/// in the 128-byte swizzle (rows of 128 bytes whose 16-byte chunks are XOR-ed with row % 8, the layout
/// the `wgmma` descriptor reads), zero fill outside the tensor. Checked by `run_strided` beforehand:
/// alignment, `lda % 8 == 0`, `lda >= k`. Errors: the driver's `cuTensorMapEncodeTiled` result.
fn encode_a_map(
    a: u64,
    rows: usize,
    k: usize,
    lda: usize,
    block_m: u32,
) -> std::result::Result<[u64; 16], cudarc::driver::DriverError> {
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dims: [u64; 2] = [k as u64, rows as u64];
    let strides: [u64; 1] = [(lda * 2) as u64];
    let boxes: [u32; 2] = [64, block_m];
    let element_strides: [u32; 2] = [1, 1];
    // SAFETY: every pointer refers to a live local of the size the driver reads (rank 2); the call
    // only encodes `map` on the host.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            2,
            a as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
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
unsafe fn launch_ex(
    stream: &CudaStream,
    func: &cudarc::driver::CudaFunction,
    cfg: LaunchConfig,
    params: &GemmParams,
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
    let mut args = [params as *const GemmParams as *mut std::ffi::c_void];
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

/// Output tiles of a launch of `m` rows (at most 65535 row tiles) and `n` channels.
fn output_tiles(t: &TileConfig, m: usize, n: usize) -> usize {
    n.div_ceil(t.block_n.max(1) as usize)
        .saturating_mul(m.div_ceil(t.block_m.max(1) as usize).min(65535))
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
fn max_active_clusters(
    func: &cudarc::driver::CudaFunction,
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

/// Split-K workspace of a [`Gemm`].
#[derive(Default)]
struct Workspace {
    partials: Option<CudaSlice<f32>>,
    locks: Option<CudaSlice<i32>>,
    retired_f32: Vec<CudaSlice<f32>>,
    retired_i32: Vec<CudaSlice<i32>>,
}

/// f32 partials and tickets the split-K workspace needs for one launch: `splits` partial tiles of
/// `block_m x block_n` per output tile, one ticket per output tile.
fn workspace_size(t: &TileConfig, m: usize, n: usize, splits: usize) -> (usize, usize) {
    let tiles = output_tiles(t, m, n);
    (
        splits
            .saturating_mul(tiles)
            .saturating_mul(t.block_m as usize * t.block_n as usize),
        tiles,
    )
}

/// The most CTAs of a stream-K launch of `g` CTAs that share one output tile (so the workspace's split
/// slots): a tile's `steps` steps start in one CTA's range and meet the start of at most
/// `ceil((steps - 1) / w)` more, `w` the fewest steps a CTA has.
pub fn stream_k_splits(t: &TileConfig, m: usize, n: usize, k: usize, g: usize) -> usize {
    let steps = k.div_ceil(t.block_k.max(1) as usize);
    let total = output_tiles(t, m, n).saturating_mul(steps);
    let w = total / g.max(1);
    if w == 0 {
        return steps.max(1);
    }
    1 + steps.saturating_sub(1).div_ceil(w)
}

/// Number of K splits for a launch on `sms` multiprocessors that each hold `ctas_per_sm` CTAs of the
/// tile's kernel at once.
///
/// The most splits `s` whose CTAs (`tiles * s`) fit one wave of at most two resident CTAs per
/// multiprocessor, within: at most 16; at least 4 `block_k` steps and 1024 of K per split (so each
/// split's pipeline fills and its stream of weights is long enough to reach full DRAM bandwidth),
/// 512 for `wgmma` tiles of which one CTA fits per multiprocessor (H200, 4096 x 4096 at M = 32 / 64:
/// 8 splits 12.5 / 17.5 us against 4 splits 14.0 / 18.4; the 2-CTA 128-row tile at M = 128 keeps
/// 1024: 20.9 us with 4 splits, 23.7 with 8);
/// for mma.sync tiles at most `K / 64 / M` (the f32 partials, 8 bytes per element of C per split, stay
/// within a quarter of the weight traffic at 4 bits); for `wgmma` tiles at most [`MAX_CLUSTER_SPLITS`]
/// (so that the splits can reduce in a cluster, [`Gemm::set_cluster_split_k`]; 16 splits never won a
/// sweep there). 1 when even one split per tile fills the wave,
/// and for empty or degenerate shapes.
///
/// A rule fitted to sweeps of fixed split counts on the H200 (W4A16 g128, `examples/tune.rs --splits`,
/// `perf/2026-11-30d_h200_tune_splits.log`): it picks the fastest of the swept counts in all six
/// mma.sync cases (M = 1 and 16 on three shapes) and, for wgmma tiles, 4 splits at 4096 x 4096, M = 128
/// (30.3 us in the previous sweep, `perf/2026-11-30c_h200_tune.log`, against 38.7 us with 8). A second
/// wave of CTAs, or a third resident CTA per multiprocessor, costs more than it gains (e.g. 28672 x 4096 at M = 16: 25.5 us with one split,
/// 32.4 us with four; 8192 x 8192 at M = 16: 17.7 us with four, 18.8 us with six).
/// [`Gemm::set_splits`] overrides it.
pub fn choose_splits(
    t: &TileConfig,
    m: usize,
    n: usize,
    k: usize,
    sms: usize,
    ctas_per_sm: usize,
) -> usize {
    // (Row tiles capped at 65535 as in a launch: where the cap binds, one split anyway.)
    let tiles = output_tiles(t, m, n);
    let steps = k.div_ceil(t.block_k.max(1) as usize);
    if tiles == 0 || steps == 0 {
        return 1;
    }
    let slots = sms.max(1).saturating_mul(ctas_per_sm.clamp(1, 2));
    // K per split: 1024, or 512 for wgmma tiles of one CTA per SM (their pipeline fills faster).
    let min_k = if t.mma == Mma::Wgmma && ctas_per_sm == 1 {
        512
    } else {
        1024
    };
    let mut max_s = 16.min(steps / 4).min(k / min_k);
    if t.mma != Mma::Wgmma {
        max_s = max_s.min(k / 64 / m.max(1));
    } else {
        max_s = max_s.min(MAX_CLUSTER_SPLITS as usize);
    }
    (1..=max_s.max(1))
        .rev()
        .find(|&s| tiles.saturating_mul(s) <= slots)
        .unwrap_or(1)
}

/// One tile's launch, a candidate of [`fewest_splits_single_wave`], [`fullest_single_wave`] or
/// [`least_wave_work`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaveCandidate {
    /// Index of the tile in [`Gemm::tiles`] (the tiles loaded on this device; they may be fewer than
    /// the kernel's entry points, e.g. no `wgmma` tile off Hopper).
    pub index: usize,
    /// Output tiles of the launch (row tiles x column tiles).
    pub tiles: usize,
    /// CTAs of the launch: output tiles x K splits.
    pub ctas: usize,
    /// CTAs of this tile the GPU holds at once (SMs x CTAs per SM).
    pub slots: usize,
}

/// The multiply-adds the busiest SM runs in a launch of tile `t` (`c`: its output tiles, CTAs and
/// resident CTAs, `sms` multiprocessors, K of `k`): whole waves of `c.slots` CTAs, each CTA
/// `block_m x block_n x` its K steps (`ceil(ceil(K / block_k) / splits) x block_k`), `c.slots / sms`
/// CTAs sharing an SM. A model of the time of tiles of like efficiency per multiply-add; 0 for a
/// launch of no CTAs.
pub fn wave_work(c: &WaveCandidate, t: &TileConfig, k: usize, sms: usize) -> u128 {
    if c.ctas == 0 || c.tiles == 0 || c.slots == 0 || sms == 0 {
        return 0;
    }
    let splits = (c.ctas / c.tiles).max(1);
    let bk = t.block_k.max(1) as usize;
    let k_per_cta = k.div_ceil(bk).div_ceil(splits) as u128 * bk as u128;
    let waves = c.ctas.div_ceil(c.slots) as u128;
    let per_sm = (c.slots / sms).max(1) as u128;
    waves
        .saturating_mul(per_sm)
        .saturating_mul(t.block_m as u128 * t.block_n as u128)
        .saturating_mul(k_per_cta)
}

/// Of `candidates` (each a launch and its tile), the index of the one of least [`wave_work`], the
/// first of equals; `None` for an empty list.
///
/// Used between the pick among `wgmma` tiles of 256 rows or more and that among the tiles of half
/// their `block_m` ([`select_launch_tile`]). H200, W4A16 g128 (sixteenth session,
/// `perf/2026-11-30p_h200_tune.log`), (256, 128, 64) (one CTA per SM) against the 128-row tiles:
/// 28672 x 4096, M = 384: 448 CTAs in 4 waves against 672 CTAs of (128, 128, 64) in 3 waves of two
/// per SM, 193.2 against 157.8 us (the model: 4 x 256 against 3 x 2 x 128 rows); at M = 512 (4 waves
/// each, equal work: the first) 189.4 against 225.0; 8192 x 8192 and 4096 x 14336 at M = 384 / 512
/// (equal work) 83.3 / 89.0 and 79.3 / 80.9 against 93.8 / 99.1 and 81.5 / 86.2. Not modelled: 4096
/// x 4096, M = 384 (equal work; 27.5 against 25.5).
pub fn least_wave_work(
    candidates: &[(WaveCandidate, TileConfig)],
    k: usize,
    sms: usize,
) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(i, (c, t))| (wave_work(c, t, k, sms), *i))
        .map(|(_, (c, _))| c.index)
}

/// Among `candidates` whose CTAs fit one wave and whose output tiles are at most one per SM (`sms`),
/// the index of the first, replaced by a later one of fewer K splits (CTAs per output tile) and at
/// least as many CTAs; where none fits, the last; `None` for an empty list. (A tile of two CTAs per
/// SM may get fewer splits only because `choose_splits` gives each of its splits more K: its
/// launch then has fewer CTAs, and is not taken; e.g. (128, 128, 64) against (128, 128, 128) at
/// 4096 x 2048, M = 128: 64 against 128 CTAs.)
///
/// Used to choose between `wgmma` tiles of one `block_m` (`mma.sync` tiles: [`fullest_single_wave`]).
/// H200, W4A16 g128: the tiles of 128 channels and two warpgroups along K come before those of one
/// warpgroup or 256 channels. At M = 64, (64, 128, 128) (one CTA per SM with a producer warpgroup,
/// eleventh session) takes 11.0 / 21.9 / 21.7 us at 4096 x 4096 / 8192 x 8192 / 4096 x 14336
/// against 17.1 / 24.8 / 25.9 for (64, 256, 128), but 40.0 against 31.7 at 28672 x 4096, whose 224
/// output tiles need two waves of it (hence the one-tile-per-SM condition; the eighth session's
/// figures, with the tile at two CTAs per SM, led the same way); at M = 128, (128, 128, 128) (one CTA
/// per SM) 17.7 / 37.7 / 37.7 against 20.2 / 41.8 / 41.5 for (128, 128, 64), and 70.2 against 61.7
/// at 28672 x 4096. Among the M = 32 tiles, (32, 128, 128) with warps of 32 channels after
/// (32, 256, 128): at 4096 x 4096 the first needs 4 splits where the second needs 8 (9.1 against
/// 11.5-11.9 us, fourteenth session, `perf/2026-11-30n_h200_tune.log`); at 8192 x 8192 and 4096 x
/// 14336 both need as many (4, 8) and (32, 256, 128) is kept (18.7 / 19.0 against 19.5 / 18.6), at
/// 28672 x 4096 the first's 224 output tiles exceed one per SM (26.8 against 30.9).
pub fn fewest_splits_single_wave(candidates: &[WaveCandidate], sms: usize) -> Option<usize> {
    fewest_splits_single_wave_in(candidates.iter().copied(), sms)
}

/// Among `candidates` whose CTAs fit one wave and whose output tiles are at most one per SM (`sms`),
/// the index of the one of most CTAs (the first of equals), else of the last; `None` for an empty list.
///
/// Used to choose between `mma.sync` tiles of one `block_m`: the default 16-row tile (16, 128, 256) of
/// 8 warps compiled for one CTA per SM (176 registers) and the same tile with `ctas_per_sm = 2` (128
/// registers, twice the K splits in one wave). H200, W4A16 g128, M = 16 (fourteenth session, two
/// rounds each, `perf/2026-11-30n_h200_tune.log`): 8192 x 8192 15.83 / 15.89 us with one CTA per SM
/// (2 splits, 128 CTAs) against 15.29 / 15.33 with two (4 splits, 256 CTAs); 4096 x 14336 14.70 /
/// 14.69 (4 splits) against 14.61 / 14.59 (8 splits); 4096 x 4096, where both launch 128 CTAs (4
/// splits: K / 1024), 7.15 / 7.12 against 7.37 / 7.36 (the first of equals); 28672 x 4096, where
/// neither fits (224 output tiles: more than one per SM) and the last is taken, 29.15 against 22.97.
pub fn fullest_single_wave(candidates: &[WaveCandidate], sms: usize) -> Option<usize> {
    fullest_single_wave_in(candidates.iter().copied(), sms)
}

/// [`fullest_single_wave`] over any sequence of candidates.
fn fullest_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
) -> Option<usize> {
    best_single_wave_in(candidates, sms, |c, best| c.ctas > best.ctas)
}

/// Among `candidates` whose CTAs fit one wave and whose output tiles are at most one per SM, the
/// index of the best: a later one replaces the best so far where `better(later, best)`; else the
/// index of the last candidate; `None` for an empty list. (The rule shared by
/// [`fewest_splits_single_wave`] and [`fullest_single_wave`].)
fn best_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
    better: impl Fn(&WaveCandidate, &WaveCandidate) -> bool,
) -> Option<usize> {
    let mut last = None;
    let mut best: Option<WaveCandidate> = None;
    for c in candidates {
        if c.ctas <= c.slots && c.tiles <= sms && best.is_none_or(|b| better(&c, &b)) {
            best = Some(c);
        }
        last = Some(c.index);
    }
    best.map(|b| b.index).or(last)
}

/// [`fewest_splits_single_wave`] over any sequence of candidates.
fn fewest_splits_single_wave_in(
    candidates: impl IntoIterator<Item = WaveCandidate>,
    sms: usize,
) -> Option<usize> {
    // Fewer splits (c.ctas / c.tiles < b.ctas / b.tiles, compared without division) and no fewer
    // CTAs.
    best_single_wave_in(candidates, sms, |c, b| {
        c.ctas >= b.ctas
            && (c.ctas as u128) * (b.tiles as u128) < (b.ctas as u128) * (c.tiles as u128)
    })
}

/// Index of the tile a launch of `m` rows of `[n, k]` weights uses ([`Gemm::select_tile`]), among
/// `tiles` (`of` gives each one's configuration and resident CTAs per SM) on `sms` multiprocessors,
/// with `splits(t)` K splits for a launch of tile `t`: the tiles of [`select_tile_index`]'s
/// `block_m` and kind; among several, for `wgmma` tiles [`fewest_splits_single_wave`], for `mma.sync`
/// tiles [`fullest_single_wave`]. Where that is a `wgmma` tile of 256 rows or more and `wgmma` tiles
/// of half its `block_m` exist, their pick (by the same rule) replaces it if its launch gives the
/// busiest SM fewer multiply-adds ([`least_wave_work`]; the larger tile on equal work). 0 for an
/// empty list. Pure: no GPU needed.
pub fn select_launch_tile<L>(
    tiles: &[L],
    of: impl Fn(&L) -> (TileConfig, usize),
    sms: usize,
    (m, n, k): (usize, usize, usize),
    splits: impl Fn(&TileConfig) -> usize,
) -> usize {
    let candidate = |index: usize| {
        let (t, per_sm) = of(&tiles[index]);
        let count = output_tiles(&t, m, n);
        (
            WaveCandidate {
                index,
                tiles: count,
                ctas: count.saturating_mul(splits(&t)),
                slots: sms.saturating_mul(per_sm),
            },
            t,
        )
    };
    // The pick among the tiles of the block M and kind of tile `first`.
    let among = |first: usize| {
        let Some((f, _)) = tiles.get(first).map(&of) else {
            return first;
        };
        let wgmma = f.mma == Mma::Wgmma;
        let group = (0..tiles.len())
            .filter(|&i| {
                let t = of(&tiles[i]).0;
                t.block_m == f.block_m && (t.mma == Mma::Wgmma) == wgmma
            })
            .map(|i| candidate(i).0);
        if wgmma {
            fewest_splits_single_wave_in(group, sms).unwrap_or(first)
        } else {
            fullest_single_wave_in(group, sms).unwrap_or(first)
        }
    };
    let first = select_tile_index_in(tiles.iter().map(|l| of(l).0), m);
    let pick = among(first);
    let Some((f, _)) = tiles.get(first).map(&of) else {
        return pick;
    };
    // Measured with the (256, 128, 64) tile against the 128-row ones (sixteenth session); other
    // block M are left to the rules above.
    if f.mma != Mma::Wgmma || f.block_m < 256 {
        return pick;
    }
    let Some(h) = tiles.iter().position(|l| {
        let t = of(l).0;
        t.block_m == f.block_m / 2 && t.mma == Mma::Wgmma
    }) else {
        return pick;
    };
    let alt = among(h);
    least_wave_work(&[candidate(pick), candidate(alt)], k, sms).unwrap_or(pick)
}

/// Index of the tile whose `block_m` and kind a launch of `m` rows starts from ([`select_launch_tile`]
/// then chooses among that tile's group and, past 128 rows, against the half-height `wgmma` tiles):
/// the smallest `block_m` that covers `m`, else the largest `block_m`; among equal `block_m` a
/// [`Mma::Wgmma`] tile (the list holds only tiles the GPU can run), then the first. 0 for an empty
/// list.
pub fn select_tile_index(tiles: &[TileConfig], m: usize) -> usize {
    select_tile_index_in(tiles.iter().copied(), m)
}

/// [`select_tile_index`] over any (cloneable) sequence of tiles.
fn select_tile_index_in(tiles: impl Iterator<Item = TileConfig> + Clone, m: usize) -> usize {
    let plain = |t: &TileConfig| t.mma != Mma::Wgmma;
    let covering = tiles
        .clone()
        .enumerate()
        .filter(|(_, t)| t.block_m as usize >= m)
        .min_by_key(|(i, t)| (t.block_m, plain(t), *i));
    let largest = tiles.enumerate().max_by_key(|(i, t)| {
        (
            t.block_m,
            std::cmp::Reverse(plain(t)),
            std::cmp::Reverse(*i),
        )
    });
    covering.or(largest).map_or(0, |(i, _)| i)
}

/// The sizes, strides and addresses of one launch, as checked by [`check_launch`].
#[derive(Clone, Copy, Debug)]
pub struct LaunchShape {
    /// Rows of A and C.
    pub m: usize,
    /// Output channels (columns of C), from the weights.
    pub n: usize,
    /// Input features, from the weights.
    pub k: usize,
    /// Row stride of A in elements.
    pub lda: usize,
    /// Row stride of C in elements.
    pub ldc: usize,
    /// Elements in the A buffer.
    pub a_len: usize,
    /// Elements in the C buffer.
    pub c_len: usize,
    /// Elements in the bias buffer, if one is passed.
    pub bias_len: Option<usize>,
    /// Device address of A.
    pub a_addr: u64,
    /// Device address of C.
    pub c_addr: u64,
}

/// Checks one launch of kernel `name` (descriptor `kernel`) with weights packed for `weights`.
///
/// Pure: it needs no GPU. Every failure is an [`Error::InvalidArgument`] naming the argument:
/// `weights` (packed for another descriptor), `m` (at least 2^31), `lda` (below K, not a multiple of 8),
/// `ldc` (below N, odd), `a` / `c` (buffer too short for `m` rows, misaligned: A 16 bytes, C 4 bytes),
/// `bias` (missing, unexpected, or not N elements). `m == 0` passes (nothing is launched).
pub fn check_launch(
    name: &str,
    kernel: &KernelSpec,
    weights: &KernelSpec,
    s: &LaunchShape,
) -> Result<()> {
    let LaunchShape {
        m, n, k, lda, ldc, ..
    } = *s;
    if weights != kernel {
        return Err(invalid(
            "weights",
            format!("weights were packed for `{weights}`, not for kernel {name} (`{kernel}`)"),
        ));
    }
    if m == 0 {
        return Ok(());
    }
    if m > i32::MAX as usize {
        return Err(invalid("m", format!("m = {m} exceeds 2^31 - 1")));
    }
    if lda < k || lda % 8 != 0 || lda > i32::MAX as usize {
        return Err(invalid(
            "lda",
            format!("lda = {lda} must be >= K = {k}, a multiple of 8 and below 2^31"),
        ));
    }
    if ldc < n || ldc % 2 != 0 || ldc > i32::MAX as usize {
        return Err(invalid(
            "ldc",
            format!("ldc = {ldc} must be >= N = {n}, even and below 2^31"),
        ));
    }
    let need_a = (m - 1).checked_mul(lda).and_then(|x| x.checked_add(k));
    if need_a.is_none_or(|need| s.a_len < need) {
        return Err(invalid(
            "a",
            format!(
                "A holds {} elements; m = {m}, lda = {lda}, K = {k} need {need_a:?}",
                s.a_len
            ),
        ));
    }
    let need_c = (m - 1).checked_mul(ldc).and_then(|x| x.checked_add(n));
    if need_c.is_none_or(|need| s.c_len < need) {
        return Err(invalid(
            "c",
            format!(
                "C holds {} elements; m = {m}, ldc = {ldc}, N = {n} need {need_c:?}",
                s.c_len
            ),
        ));
    }
    match (kernel.bias, s.bias_len) {
        (true, None) => {
            return Err(invalid(
                "bias",
                format!("kernel {name} declares `bias: true`; pass a bias of N = {n} elements"),
            ));
        }
        (false, Some(_)) => {
            return Err(invalid(
                "bias",
                format!("kernel {name} declares no bias; pass None"),
            ));
        }
        (true, Some(len)) if len != n => {
            return Err(invalid(
                "bias",
                format!("bias holds {len} elements; N = {n}"),
            ));
        }
        _ => {}
    }
    if !s.a_addr.is_multiple_of(16) {
        return Err(invalid(
            "a",
            format!(
                "A must start 16-byte aligned (device address {:#x})",
                s.a_addr
            ),
        ));
    }
    if !s.c_addr.is_multiple_of(4) {
        return Err(invalid(
            "c",
            format!(
                "C must start 4-byte aligned (device address {:#x})",
                s.c_addr
            ),
        ));
    }
    Ok(())
}

/// The cache folder: `$HUMMING_CACHE_DIR`, else `$XDG_CACHE_HOME/humming`, else `$HOME/.cache/humming`,
/// else the system temp folder.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HUMMING_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("humming");
    }
    if let Some(d) = std::env::var_os("HOME") {
        return PathBuf::from(d).join(".cache").join("humming");
    }
    std::env::temp_dir().join("humming")
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn nvrtc_arch(cap: u32) -> &'static str {
    match cap {
        80 => "sm_80",
        86 => "sm_86",
        87 => "sm_87",
        89 => "sm_89",
        90 => "sm_90a",
        100 => "sm_100a",
        103 => "sm_103a",
        120 => "sm_120a",
        121 => "sm_121a",
        _ => "sm_80",
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// Compiles a generated source with NVRTC to a cubin (machine code) for compute capability `cap`
/// (`sm_90a` for Hopper), through a disk cache keyed by the source, the headers, the NVRTC version,
/// the arch and the options (`<cache_dir>/nvrtc/<sha256>.cubin`). Compiling to machine code, not PTX,
/// spares the driver a second (PTX) compilation at every load.
///
/// Errors: [`Error::Nvrtc`] when libnvrtc cannot be loaded or the compilation fails (with NVRTC's log),
/// [`Error::Io`] when the cache cannot be written.
pub fn nvrtc_compile(name: &str, source: &str, cap: u32) -> Result<Vec<u8>> {
    use sha2::Digest;
    let fail = |msg: String| Error::Nvrtc {
        kernel: name.to_string(),
        msg,
    };
    // SAFETY: only tries to dlopen libnvrtc.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(fail("libnvrtc could not be loaded; install the CUDA NVRTC library (e.g. `pip install nvidia-cuda-nvrtc==13.0.88` and add its lib folder to LD_LIBRARY_PATH), or build with NVCC".into()));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: plain out-parameters.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    let arch = nvrtc_arch(cap);
    let mut h = sha2::Sha256::new();
    h.update(source.as_bytes());
    for (p, c) in HEADERS {
        h.update(p.as_bytes());
        h.update(c.as_bytes());
    }
    h.update(format!("nvrtc {major}.{minor} {arch} {NVRTC_OPTIONS:?} cubin").as_bytes());
    let key = crate::spec::hex(&h.finalize());
    let dir = cache_dir().join("nvrtc");
    let cubin_path = dir.join(format!("{key}.cubin"));
    if let Ok(cubin) = std::fs::read(&cubin_path)
        && !cubin.is_empty()
    {
        return Ok(cubin);
    }
    let include = include_dir(&dir, &key);
    for (p, c) in HEADERS {
        let path = include.join(p);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&path, c).map_err(io_err(&path))?;
    }
    let mut options: Vec<String> = NVRTC_OPTIONS.iter().map(|o| o.to_string()).collect();
    options.push(format!("--gpu-architecture={arch}"));
    options.push(format!("--include-path={}", include.display()));
    let result = nvrtc_cubin(name, source, &options);
    let _ = std::fs::remove_dir_all(&include);
    let cubin = result.map_err(fail)?;
    write_atomic(&cubin_path, &cubin)?;
    Ok(cubin)
}

/// The folder of one compilation's header files under `dir`: its own for every call, so that threads
/// of one process compiling the same source at once never write into, or remove, each other's
/// headers (two GPU-test threads loading one kernel did: "cannot open source file humming/gemm.cuh").
fn include_dir(dir: &std::path::Path, key: &str) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(
        "include-{}-{}-{call}",
        &key[..16.min(key.len())],
        std::process::id()
    ))
}

/// NVRTC options of every run-time compilation (besides the arch and the include path).
const NVRTC_OPTIONS: [&str; 1] = ["-std=c++17"];

/// One NVRTC compilation to a cubin; the error is NVRTC's message and log.
fn nvrtc_cubin(
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

#[cfg(test)]
mod tests {
    use super::include_dir;

    /// Two compilations of one source (the same key) in one process get different header folders,
    /// also from different threads.
    #[test]
    fn include_dirs_are_unique_per_compilation() {
        let dir = std::path::Path::new("/tmp/humming-test");
        let key = "0123456789abcdef0123456789abcdef";
        let here = [include_dir(dir, key), include_dir(dir, key)];
        let there = std::thread::spawn(move || include_dir(dir, key))
            .join()
            .unwrap();
        assert_ne!(here[0], here[1]);
        assert_ne!(here[0], there);
        assert_ne!(here[1], there);
        for p in here.iter().chain([&there]) {
            assert!(p.starts_with(dir), "{p:?} is not under {dir:?}");
        }
    }
}
