//! The public face of the runtime: a loaded kernel ([`Gemm`]), its weights on the GPU
//! ([`DeviceWeights`]) and launches ([`Launcher`]).

use super::driver::{self, driver_err};
use super::nvrtc::nvrtc_compile;
use super::options::LaunchOptions;
use super::plan::{
    DeviceInfo, KReduction, LaunchPlan, LaunchShape, TileInfo, check_launch, plan_launch,
};
pub use super::weights::DeviceWeights;
use super::weights::{optional_ptr, upload_nonempty};
use crate::act_quant::ActScale;
use crate::error::{Error, Result, invalid};
use crate::kernel::{Element, GemmKernel};
use crate::quant::QuantizedWeights;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, sys,
};
use humming_spec::abi::{
    FLAG_ATOMIC_C, FLAG_CLUSTER_SPLIT_K, FLAG_EARLY_TRIGGER, FLAG_STREAM_K, GemmParams,
    MAX_CLUSTER_SPLITS, MAX_ROUTE_EXPERTS, STATIC_SMEM_BYTES, route_smem_bytes,
};
use humming_spec::codegen::{combine_entry_name, entry_name, quant_entry_name, route_entry_name};
use humming_spec::layout::{WeightLayout, c_columns, is_8bit_activation};
use humming_spec::resources::{atomic_split_k, smem_bytes, staged_epilogue};
use humming_spec::{KernelSpec, Layout, Mma};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// How a kernel's module was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// The fatbin compiled by NVCC at build time.
    Fatbin,
    /// Run-time compilation with NVRTC (from the disk cache or freshly compiled).
    Nvrtc,
}

/// The entry point of one loaded tile (`Gemm::infos[i]` describes it).
pub(super) struct LoadedTile {
    pub(super) func: CudaFunction,
    pub(super) smem: u32,
}

/// A loaded quantized GEMM: `C[M, N] = epilogue(A[M, K] · dequant(B)[N, K]ᵀ · channel scale + bias)`.
///
/// `A` and `C` are the element types (`half::f16` or `half::bf16`) the kernel's declaration fixes,
/// so passing a buffer of the wrong type does not compile; [`Gemm::load`] infers them from the kernel.
pub struct Gemm<A: Element, C: Element> {
    pub(super) stream: Arc<CudaStream>,
    pub(super) name: String,
    pub(super) spec: KernelSpec,
    pub(super) tiles: Vec<LoadedTile>,
    /// What the planner knows of each loaded tile, in the order of `tiles` (a slice of its own, so
    /// that planning a launch allocates nothing).
    pub(super) infos: Vec<TileInfo>,
    source: ModuleSource,
    pub(super) device: DeviceInfo,
    pub(super) options: LaunchOptions,
    pub(super) workspace: Mutex<super::workspace::Workspace>,
    /// `moe_indexed`: the routing and combine helpers of the module.
    pub(super) helpers: Option<(CudaFunction, CudaFunction)>,
    /// 8-bit activations: the input quantization of the module.
    pub(super) quant: Option<CudaFunction>,
    /// The packed layout the loaded tiles read (they all read one: `load` keeps persistent tiles alone
    /// where they load).
    pub(super) layout: WeightLayout,
    _types: PhantomData<fn(A) -> C>,
}

fn capability(stream: &CudaStream) -> Result<u32> {
    let (major, minor) = stream
        .context()
        .compute_capability()
        .map_err(driver_err("reading the compute capability"))?;
    Ok((major * 10 + minor) as u32)
}

impl<A: Element, C: Element> Gemm<A, C> {
    /// Loads a kernel declared with `gemm!`, e.g. `Gemm::load::<W4A16>(&stream)` (A and C come from
    /// the kernel): its NVCC fatbin, or, when the image is empty (no NVCC at build time) or holds no
    /// code for this GPU, the NVRTC compilation of its source (disk-cached).
    ///
    /// # Errors
    /// [`Error::UnsupportedDevice`] below compute capability 8.0; [`Error::InvalidArgument`] (`spec`)
    /// when no tile fits the GPU's shared memory; [`Error::Nvrtc`] when run-time compilation fails;
    /// [`Error::Driver`] when loading the module or setting its attributes fails.
    pub fn load<K: GemmKernel<A = A, C = C>>(stream: &Arc<CudaStream>) -> Result<Self> {
        Self::load_parts(stream, K::NAME, K::DESCRIPTOR, K::CUDA_SOURCE, K::IMAGE)
    }

    /// Compiles a descriptor built at run time (e.g. with [`humming_spec::parse_kernel_str`]) with
    /// NVRTC and loads it.
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
        let lowered = spec.lower();
        // 8-bit activations: the caller hands in 16-bit A of C's dtype, which `run` quantizes.
        let a_in = if lowered.act8 { spec.c } else { spec.a };
        if a_in != A::DTYPE || spec.c != C::DTYPE {
            return Err(invalid(
                "spec",
                format!(
                    "kernel {name} takes A of {a_in} and writes C of {}, but was loaded as a={} c={}",
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
        let mut infos = Vec::new();
        let mut wgmma_skipped = 0;
        let all = lowered.tiles;
        let fits = |t: &humming_spec::TileConfig| smem_bytes(&spec, t) + STATIC_SMEM_BYTES <= optin;
        // Persistent tiles read their own packed layout: where one loads, it serves every launch.
        let persistent = cap == 90 && all.iter().any(|t| t.persistent() && fits(t));
        for (i, tile) in all.into_iter().enumerate() {
            let smem = smem_bytes(&spec, &tile);
            // wgmma exists on sm_90a only (compute capability 9.0); elsewhere those entries trap.
            if tile.mma != Mma::Sync && cap != 90 {
                wgmma_skipped += 1;
                continue;
            }
            if !fits(&tile) || tile.persistent() != persistent {
                continue;
            }
            let entry = entry_name(&spec, i);
            let func = module.load_function(&entry).map_err(|e| Error::Driver {
                context: format!("finding entry {entry} of {name}"),
                source: e,
            })?;
            // Always raise the dynamic limit: the default (48 KiB) also counts the kernel's static
            // shared memory, so a tile of exactly 48 KiB of dynamic memory would not launch.
            ctx.bind_to_thread()
                .map_err(driver_err("binding the context"))?;
            func.set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem as i32,
            )
            .map_err(driver_err("raising the dynamic shared-memory limit"))?;
            let ctas_per_sm = func
                .occupancy_max_active_blocks_per_multiprocessor(tile.threads(), smem as usize, None)
                .map_err(driver_err("querying occupancy"))?
                .max(1) as usize;
            let staged = staged_epilogue(&spec, &tile);
            let mut max_clusters = [0; MAX_CLUSTER_SPLITS as usize + 1];
            if staged {
                // A failed query leaves 0: that tile then always sums through the workspace.
                for (size, slot) in max_clusters.iter_mut().enumerate().skip(2) {
                    *slot = driver::max_active_clusters(&func, tile.threads(), smem, size as u32)
                        .unwrap_or(0);
                }
            }
            tiles.push(LoadedTile { func, smem });
            infos.push(TileInfo {
                tile,
                ctas_per_sm,
                staged,
                atomic: atomic_split_k(&spec, &tile),
                max_clusters,
            });
        }
        if tiles.is_empty() {
            let why = if wgmma_skipped > 0 {
                format!(
                    "{wgmma_skipped} are `mma = wgmma` or `wgmma_ss` tiles, which need compute capability 9.0 (this GPU: {cap}), \
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
        let helpers = if spec.layout == Layout::MoeIndexed {
            let find = |entry: String| {
                module.load_function(&entry).map_err(|e| Error::Driver {
                    context: format!("finding entry {entry} of {name}"),
                    source: e,
                })
            };
            let route = find(route_entry_name(&spec))?;
            // Its per-warp counts grow with the experts: allow what this GPU has, up to the most.
            route
                .set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    route_smem_bytes(MAX_ROUTE_EXPERTS).min(optin - STATIC_SMEM_BYTES) as i32,
                )
                .map_err(driver_err(
                    "raising the routing helper's shared-memory limit",
                ))?;
            Some((route, find(combine_entry_name(&spec))?))
        } else {
            None
        };
        let quant = if lowered.act8 {
            let entry = quant_entry_name(&spec);
            Some(module.load_function(&entry).map_err(|e| Error::Driver {
                context: format!("finding entry {entry} of {name}"),
                source: e,
            })?)
        } else {
            None
        };
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("reading the multiprocessor count"))? as usize;
        Ok(Gemm {
            stream: stream.clone(),
            name: name.to_string(),
            spec,
            tiles,
            infos,
            source: how,
            device: DeviceInfo {
                sms,
                capability: cap,
            },
            options: LaunchOptions::default(),
            workspace: Mutex::new(super::workspace::Workspace::default()),
            helpers,
            quant,
            layout: if persistent {
                WeightLayout::KMajor
            } else {
                WeightLayout::Fragments
            },
            _types: PhantomData,
        })
    }

    /// The launch settings of [`Gemm::run`] and [`Gemm::run_strided`].
    pub fn options(&self) -> LaunchOptions {
        self.options
    }

    /// Sets the launch settings of [`Gemm::run`] and [`Gemm::run_strided`] (for one launch with other
    /// settings, see [`Gemm::with`]).
    pub fn set_options(&mut self, options: LaunchOptions) {
        self.options = options;
    }

    /// Launches with other settings than the `Gemm`'s own, e.g.
    /// `gemm.with(LaunchOptions { reduction: Reduction::Deterministic, ..gemm.options() }).run(...)`.
    pub fn with(&self, options: LaunchOptions) -> Launcher<'_, A, C> {
        Launcher {
            gemm: self,
            options,
        }
    }

    /// The plan of a launch of `m` rows on `[n, k]` weights with the `Gemm`'s settings.
    pub fn plan(&self, m: usize, n: usize, k: usize) -> LaunchPlan {
        self.with(self.options).plan(m, n, k)
    }

    /// Makes sure the split-K workspace covers launches of every M from 1 to `max_m` rows of `[n, k]`
    /// weights with the `Gemm`'s settings ([`Launcher::reserve`]).
    pub fn reserve(&self, max_m: usize, n: usize, k: usize) -> Result<()> {
        self.with(self.options).reserve(max_m, n, k)
    }

    /// `C = A · Bᵀ` for contiguous row-major `A [m, K]` and `C [m, N]` ([`Launcher::run`]).
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
        self.with(self.options).run(a, m, w, bias, c)
    }

    /// `C = A · Bᵀ` with row strides `lda` and `ldc` ([`Launcher::run_strided`]).
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
        self.with(self.options)
            .run_strided(a, m, lda, w, bias, c, ldc)
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

    /// The device facts launches are planned with.
    pub fn device(&self) -> DeviceInfo {
        self.device
    }

    /// The tiles available on this device, in declaration order, with their occupancy.
    pub fn tiles(&self) -> Vec<TileInfo> {
        self.infos.clone()
    }

    /// Packs quantized weights into the kernel layout and uploads them.
    ///
    /// Errors if the weights were made for another format (another descriptor but for its targets
    /// and tiles), or N or K is not a multiple of 64.
    pub fn upload(&self, w: &QuantizedWeights) -> Result<DeviceWeights> {
        self.upload_experts(std::slice::from_ref(w))
    }

    /// Packs the weights of E experts (one spec, one shape) and uploads them stacked, `[E, N, K]`, for
    /// the MoE layouts (a dense kernel takes one).
    ///
    /// Errors: no experts, weights of another format or another shape than the first, several
    /// experts for a dense kernel, N or K not a multiple of 64.
    pub fn upload_experts(&self, experts: &[QuantizedWeights]) -> Result<DeviceWeights> {
        let Some(first) = experts.first() else {
            return Err(invalid("weights", "no weights given"));
        };
        if experts.len() > 1 && !self.spec.layout.is_moe() {
            return Err(invalid(
                "weights",
                format!(
                    "kernel {} is dense: it takes one matrix, not {} experts",
                    self.name,
                    experts.len()
                ),
            ));
        }
        if experts.len() > i32::MAX as usize {
            return Err(invalid("weights", "2^31 experts or more"));
        }
        for (e, w) in experts.iter().enumerate() {
            if !self.spec.takes_weights_of(w.spec()) {
                return Err(invalid(
                    "weights",
                    format!(
                        "weights of expert {e} were quantized for `{}`, kernel {} is `{}`",
                        w.spec(),
                        self.name,
                        self.spec
                    ),
                ));
            }
            if (w.n(), w.k()) != (first.n(), first.k()) {
                return Err(invalid(
                    "weights",
                    format!(
                        "expert {e} is {} x {}, expert 0 {} x {}",
                        w.n(),
                        w.k(),
                        first.n(),
                        first.k()
                    ),
                ));
            }
        }
        let packed = super::weights::pack_experts(experts, self.layout)?;
        let cat = |part: &dyn Fn(&crate::PackedWeights) -> usize| packed.iter().map(part).sum();
        let mut b = Vec::with_capacity(cat(&|p| p.b.len()));
        let mut scales = Vec::with_capacity(cat(&|p| p.scales.len()));
        let mut zeros = Vec::with_capacity(cat(&|p| p.zeros.len()));
        let mut channel = Vec::with_capacity(cat(&|p| p.channel.len()));
        for p in &packed {
            b.extend_from_slice(&p.b);
            scales.extend_from_slice(&p.scales);
            zeros.extend_from_slice(&p.zeros);
            channel.extend_from_slice(&p.channel);
        }
        let s = &self.stream;
        // (The K-major layout's f32 block or group scales take the scale grid's place.)
        let (b_expert, s_expert) = (
            packed[0].b.len(),
            packed[0].scales.len().max(packed[0].block_scales.len()),
        );
        let b = s
            .clone_htod(&b)
            .map_err(driver_err("uploading packed weights"))?;
        let scales = upload_nonempty(s, &scales, "uploading scales")?;
        let zeros = upload_nonempty(s, &zeros, "uploading zero points")?;
        let channel = upload_nonempty(s, &channel, "uploading channel factors")?;
        let block_scales: Vec<f32> = packed
            .iter()
            .flat_map(|p| p.block_scales.iter().copied())
            .collect();
        let block_scales = upload_nonempty(s, &block_scales, "uploading block scales")?;
        Ok(DeviceWeights {
            spec: self.spec,
            n: first.n(),
            k: first.k(),
            experts: experts.len(),
            b_expert,
            s_expert,
            b,
            scales,
            zeros,
            channel,
            layout: self.layout,
            block_scales,
        })
    }

    /// The packed layout of B that this kernel's loaded tiles read, and [`Gemm::upload`] packs:
    /// [`WeightLayout::KMajor`] where the kernel's persistent (`wgmma_ss`) tiles load (compute
    /// capability 9.0), else [`WeightLayout::Fragments`].
    pub fn layout(&self) -> WeightLayout {
        self.layout
    }

    /// Device pointers of the split-K buffers a plan needs (partials, tickets; 0 for each it does
    /// not need), growing them if needed.
    pub(super) fn workspace_ptrs(&self, plan: &LaunchPlan) -> Result<(u64, u64)> {
        if plan.workspace_floats == 0 && plan.tickets == 0 {
            return Ok((0, 0));
        }
        let mut guard = self.workspace.lock().map_err(|_| {
            invalid(
                "workspace",
                "the split-K workspace lock was poisoned by a panic",
            )
        })?;
        guard.split_k_ptrs(&self.stream, plan.workspace_floats, plan.tickets)
    }
}

/// A [`Gemm`] with the settings of one or more launches ([`Gemm::with`]).
pub struct Launcher<'g, A: Element, C: Element> {
    pub(super) gemm: &'g Gemm<A, C>,
    pub(super) options: LaunchOptions,
}

impl<A: Element, C: Element> Launcher<'_, A, C> {
    /// The plan of a launch of `m` rows on `[n, k]` weights: tile, K splits, stream-K, how the splits
    /// are summed, programmatic launch. Pure: computed on the host.
    pub fn plan(&self, m: usize, n: usize, k: usize) -> LaunchPlan {
        let g = self.gemm;
        plan_launch(&g.infos, &g.device, &self.options, (m, n, k))
    }

    /// Makes sure the split-K workspace (and, for 8-bit activations, the buffers `run` quantizes A
    /// into) covers launches of every M from 1 to `max_m` rows of an `[n, k]` weight with these settings (sized as if no launch summed in a cluster), so that no
    /// allocation happens later: needed before capturing launches into a CUDA graph.
    ///
    /// Errors: `max_m`, `n` or `k` of 2^31 or more ([`Error::InvalidArgument`]), or the allocation
    /// failing.
    pub fn reserve(&self, max_m: usize, n: usize, k: usize) -> Result<()> {
        for (name, v) in [("max_m", max_m), ("n", n), ("k", k)] {
            if v > i32::MAX as usize {
                return Err(invalid(name, format!("{name} = {v} is 2^31 or more")));
            }
        }
        let g = self.gemm;
        let infos = &g.infos;
        let options = LaunchOptions {
            cluster_reduction: false,
            ..self.options
        };
        let mut need = plan_launch(infos, &g.device, &options, (1, n, k));
        for m in 2..=max_m.max(1) {
            let p = plan_launch(infos, &g.device, &options, (m, n, k));
            need.workspace_floats = need.workspace_floats.max(p.workspace_floats);
            need.tickets = need.tickets.max(p.tickets);
        }
        g.workspace_ptrs(&need)?;
        if is_8bit_activation(g.spec.a) {
            // The buffers `run` quantizes A into.
            let mut ws = g.workspace.lock().map_err(|_| {
                invalid(
                    "workspace",
                    "the activation buffers' lock was poisoned by a panic",
                )
            })?;
            let rows = max_m.max(1);
            let stride = ActScale::of_kernel(&g.spec).scales_per_row(k);
            ws.grow_activations(&g.stream, rows * k, rows * stride)?;
        }
        Ok(())
    }

    /// `C = A · Bᵀ` for contiguous row-major `A [m, K]` and `C [m, N]`. See [`Launcher::run_strided`].
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
        self.run_strided(a, m, w.k, w, bias, c, c_columns(w.spec.epilogue, w.n))
    }

    /// `C[i, j] = epilogue(Σ_k A[i, k] · W[j, k] + bias[j])` for `i < m`, with row strides `lda` and
    /// `ldc` in elements. Only `C[i, j]` with `i < m`, `j < N` are written.
    ///
    /// Checks (each a typed [`Error::InvalidArgument`] naming the argument, [`check_launch`]): `w`
    /// matches this kernel; `lda >= K` and `lda % 8 == 0`; `ldc >= N` and `ldc` even; `a` holds
    /// `(m - 1) · lda + K` elements and starts 16-byte aligned; `c` holds `(m - 1) · ldc + N` elements
    /// and starts 4-byte aligned; `bias` is given (with N elements) exactly when the kernel declares
    /// `bias: true`; `m < 2^31`. `m == 0` is checked the same way, then launches nothing.
    ///
    /// Asynchronous: the kernel is queued on the stream and its launch error checked; C is ready once
    /// the stream has reached it, and a fault inside the kernel is reported by that later call.
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
        let g = self.gemm;
        let stream = &g.stream;
        let (a_len, c_len) = (a.len(), c.len());
        let (a_ptr, _ra) = a.device_ptr(stream);
        let (c_ptr, _rc) = c.device_ptr_mut(stream);
        let (n, k) = (w.n, w.k);
        if g.spec.layout.is_moe() {
            return Err(invalid(
                "spec",
                format!(
                    "kernel {} has the `{}` layout: launch it with run_{}",
                    g.name,
                    g.spec.layout.name(),
                    match g.spec.layout {
                        Layout::MoeIndexed => "indexed",
                        Layout::MoeGroupedContiguous => "contiguous",
                        _ => "masked",
                    }
                ),
            ));
        }
        check_launch(
            &g.name,
            &g.spec,
            &w.spec,
            &LaunchShape {
                m,
                n,
                k,
                lda,
                ldc,
                a_len,
                c_len,
                bias_len: bias.map(|b| b.len()),
                a_addr: a_ptr,
                c_addr: c_ptr,
            },
        )?;
        if m == 0 {
            return Ok(());
        }
        let a_in = if is_8bit_activation(g.spec.a) {
            // Per token (or group) into the kernel's own buffers (stream-ordered: the launch below
            // reads them).
            let (codes, scales, scale_stride) = g.quantize_into_workspace(a_ptr, m, k, lda)?;
            ActInput {
                ptr: codes,
                lda: k,
                bytes: 1,
                scales,
                scale_stride,
            }
        } else {
            ActInput {
                ptr: a_ptr,
                lda,
                bytes: 2,
                scales: 0,
                scale_stride: 0,
            }
        };
        let (bias_ptr, _rbias) = optional_ptr(bias, stream);
        self.launch_dense(&a_in, m, w, bias_ptr, c_ptr, ldc)
    }

    /// The launches of a dense GEMM of `m` rows, after its checks.
    pub(super) fn launch_dense(
        &self,
        a_in: &ActInput,
        m: usize,
        w: &DeviceWeights,
        bias_ptr: u64,
        c_ptr: u64,
        ldc: usize,
    ) -> Result<()> {
        let g = self.gemm;
        let stream = &g.stream;
        let (n, k, lda) = (w.n, w.k, a_in.lda);
        if w.layout != g.layout {
            return Err(invalid(
                "weights",
                format!(
                    "the weights are in the {} layout, but kernel {}'s tiles on this GPU read the {} one: upload them with this kernel",
                    w.layout.name(),
                    g.name,
                    g.layout.name()
                ),
            ));
        }
        let plan = self.plan(m, n, k);
        if plan.tile.persistent() {
            return self.launch_persistent(&plan, a_in, m, w, (bias_ptr, c_ptr, ldc));
        }
        let t = &g.tiles[plan.tile_index];
        let wp = w.ptrs(stream);
        let (ws_ptr, tickets_ptr) = g.workspace_ptrs(&plan)?;
        let tile = plan.tile;
        // grid.y is limited to 65535: launch in chunks of rows (stream-K launches have one chunk).
        let bm = tile.block_m as usize;
        let rows_per_launch = 65535 * bm;
        let grid_x = n.div_ceil(tile.block_n as usize) as u32;
        let cluster = plan.reduction == KReduction::Cluster;
        let flags = flag(plan.early_trigger, FLAG_EARLY_TRIGGER)
            | flag(cluster, FLAG_CLUSTER_SPLIT_K)
            | flag(plan.stream_k.is_some(), FLAG_STREAM_K)
            | flag(plan.reduction == KReduction::Atomic, FLAG_ATOMIC_C);
        let mut row = 0usize;
        while row < m {
            let rows = rows_per_launch.min(m - row);
            let a_rows = a_in.ptr + (row * lda * a_in.bytes) as u64;
            let a_map = if tile.mma == Mma::Wgmma {
                driver::encode_a_map(a_rows, rows, k, lda, u32::from(tile.block_m), a_in.bytes)
                    .map_err(|e| Error::Driver {
                        context: format!("encoding the TMA tensor map of A for {}", g.name),
                        source: e,
                    })?
            } else {
                [0; 16]
            };
            let params = GemmParams {
                a_map,
                a: a_rows,
                b: wp.b,
                scales: wp.scales,
                zeros: wp.zeros,
                channel: wp.channel,
                bias: bias_ptr,
                c: c_ptr + (row * ldc * 2) as u64,
                workspace: ws_ptr,
                locks: tickets_ptr,
                m: rows as i32,
                n: n as i32,
                k: k as i32,
                lda: lda as i32,
                ldc: ldc as i32,
                splits: plan.splits as i32,
                flags,
                experts: 1,
                top_k: 1,
                a_scales: if a_in.scales != 0 {
                    a_in.scales + (row * a_in.scale_stride * 4) as u64
                } else {
                    0
                },
                a_scale_stride: a_in.scale_stride as i32,
                ..GemmParams::default()
            };
            let grid_dim = match plan.stream_k {
                Some(ctas) => (ctas as u32, 1, 1),
                None => (grid_x, rows.div_ceil(bm) as u32, plan.splits as u32),
            };
            let cfg = LaunchConfig {
                grid_dim,
                block_dim: (tile.threads(), 1, 1),
                shared_mem_bytes: t.smem,
            };
            let cluster_z = if cluster { plan.splits as u32 } else { 1 };
            // SAFETY: the kernel reads A[rows, lda], the packed weights, scales, zero points and
            // bias, and writes C[rows, ldc] for columns < N only, and the split-K workspace sized
            // by the plan; every length and alignment was checked above. `params` outlives the call
            // (the driver copies kernel arguments).
            unsafe { driver::launch(stream, &t.func, cfg, &params, plan.programmatic, cluster_z) }
                .map_err(|e| Error::Driver {
                    context: format!("launching {} ({})", g.name, tile),
                    source: e,
                })?;
            row += rows;
        }
        Ok(())
    }
}

/// A of one launch: 16-bit elements, or 8-bit codes with an f32 scale per row.
pub(super) struct ActInput {
    /// Device address of the first row.
    pub(super) ptr: u64,
    /// Row stride in elements.
    pub(super) lda: usize,
    /// Bytes per element.
    pub(super) bytes: usize,
    /// 8-bit codes: the device address of the f32 scales (one per row, or a row's groups); 0
    /// otherwise.
    pub(super) scales: u64,
    /// Elements between the scales of consecutive rows.
    pub(super) scale_stride: usize,
}

pub(super) fn flag(on: bool, bit: i32) -> i32 {
    if on { bit } else { 0 }
}
