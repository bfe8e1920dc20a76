//! 8-bit activations on the GPU: the input quantization of a kernel with `e4m3`, `e5m2` or `i8`
//! activations ([`Gemm::quantize_activations`], the rules of [`crate::act_quant`] bit for bit) and
//! its launches on activations already quantized ([`Launcher::run_quantized`]).
//!
//! [`Launcher::run`] on such a kernel takes 16-bit A (C's dtype) and quantizes it into buffers of its
//! own first, per token or per its activation groups ([`ActScale::of_kernel`]); quantize explicitly
//! for a static tensor scale, or to reuse the codes.

use super::driver;
use super::gemm::{ActInput, DeviceWeights, Gemm, Launcher};
use super::plan::{LaunchShape, check_launch};
use super::weights::optional_ptr;
use crate::act_quant::{ActScale, QuantizedActivations};
use crate::error::{Error, Result, invalid};
use crate::kernel::Element;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};
use humming_spec::abi::{ACT_QUANT_THREADS, ActQuantParams};
use humming_spec::layout::{c_columns, is_8bit_activation};

/// The rows of A's codes that a persistent `moe_indexed` launch reads: row `i` of `out_rows` from
/// the slot id `rows[i]` (a device pointer of the routing; 0: row `i` of A), those from `*used` on
/// left alone; with `glu`, each row of A is `[gate | up]` and its codes are those of
/// `silu(gate) * up`.
#[derive(Clone, Copy, Debug)]
pub(super) struct GatherRows {
    pub rows: u64,
    pub used: u64,
    pub top_k: usize,
    pub out_rows: usize,
    pub glu: bool,
}
use humming_spec::{DType, Layout};

/// Activations quantized on the GPU: `[m, k]` codes (one byte each, row-major) and their f32 scales
/// (`[m]` per token, and with a static scale that scale in every row; `[m, ceil(k / group)]` per
/// group).
pub struct DeviceActivations {
    pub(super) dtype: DType,
    pub(super) m: usize,
    pub(super) k: usize,
    pub(super) granularity: ActScale,
    pub(super) codes: CudaSlice<u8>,
    pub(super) scales: CudaSlice<f32>,
}

impl DeviceActivations {
    /// The code type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Rows.
    pub fn m(&self) -> usize {
        self.m
    }
    /// Columns (K).
    pub fn k(&self) -> usize {
        self.k
    }
    /// Where the scales apply.
    pub fn granularity(&self) -> ActScale {
        self.granularity
    }
    /// The codes.
    pub fn codes(&self) -> &CudaSlice<u8> {
        &self.codes
    }
    /// The scales.
    pub fn scales(&self) -> &CudaSlice<f32> {
        &self.scales
    }

    /// Copies the codes and scales to the host (waits for the stream) in the form of
    /// [`crate::act_quant::quantize_activations`] (one scale for a static tensor scale).
    pub fn to_host(&self) -> Result<QuantizedActivations> {
        let s = self.codes.stream();
        let codes = s
            .clone_dtoh(&self.codes)
            .map_err(super::driver_err("copying activation codes to the host"))?;
        let mut scales = s
            .clone_dtoh(&self.scales)
            .map_err(super::driver_err("copying activation scales to the host"))?;
        if matches!(self.granularity, ActScale::Tensor(_)) {
            scales.truncate(1);
        }
        Ok(QuantizedActivations {
            dtype: self.dtype,
            m: self.m,
            k: self.k,
            granularity: self.granularity,
            codes,
            scales,
        })
    }
}

/// Scales of a quantization of `m` rows of `k` columns, and the kernel's group argument.
fn scale_layout(m: usize, k: usize, granularity: ActScale) -> Result<(usize, i32, u32)> {
    match granularity {
        ActScale::PerToken => Ok((m, 0, 0)),
        ActScale::Tensor(s) if s.is_finite() && s > 0.0 => Ok((m, 0, s.to_bits())),
        ActScale::Tensor(s) => Err(invalid(
            "scale",
            format!("a static scale must be finite and above 0; found {s}"),
        )),
        ActScale::PerGroup(g) if g > 0 && g % 8 == 0 && g <= i32::MAX as usize => {
            Ok((m * granularity.scales_per_row(k), g as i32, 0))
        }
        ActScale::PerGroup(g) => Err(invalid(
            "scale",
            format!("a group of activation scales is a positive multiple of 8 columns; found {g}"),
        )),
    }
}

impl<A: Element, C: Element> Gemm<A, C> {
    fn quant_function(&self) -> Result<&cudarc::driver::CudaFunction> {
        self.quant.as_ref().ok_or_else(|| {
            invalid(
                "spec",
                format!(
                    "kernel {} has `{}` activations: it takes A as it is, with no quantization",
                    self.name, self.spec.a
                ),
            )
        })
    }

    /// Quantizes `m` rows of `k` columns of 16-bit A (row stride `lda`) to this kernel's activation
    /// codes with scales of `granularity`, on the kernel's stream ([`crate::act_quant`] gives the
    /// rules; the result equals [`crate::act_quant::quantize_activations`] of the same values bit for
    /// bit). A holding infinity or NaN gives NaN scales.
    ///
    /// Errors ([`Error::InvalidArgument`]): a kernel without 8-bit activations; `k` or `lda` not a
    /// multiple of 8, `lda < k`, `a` too short or not 16-byte aligned; `m` or `k` of 2^31 or more; a
    /// group that is not a positive multiple of 8, or a static scale that is not finite and above 0.
    pub fn quantize_activations<Ab: DevicePtr<A>>(
        &self,
        a: &Ab,
        m: usize,
        k: usize,
        lda: usize,
        granularity: ActScale,
    ) -> Result<DeviceActivations> {
        self.quant_function()?;
        let (n_scales, _, _) = scale_layout(m, k, granularity)?;
        let s = &self.stream;
        let codes = s
            .alloc_zeros::<u8>((m * k).max(1))
            .map_err(super::driver_err("allocating activation codes"))?;
        let scales = s
            .alloc_zeros::<f32>(n_scales.max(1))
            .map_err(super::driver_err("allocating activation scales"))?;
        let mut out = DeviceActivations {
            dtype: self.spec.a,
            m,
            k,
            granularity,
            codes,
            scales,
        };
        self.quantize_activations_into(a, m, k, lda, granularity, &mut out)?;
        Ok(out)
    }

    /// [`Gemm::quantize_activations`] into `out`'s buffers (no allocation, so it can be captured in a
    /// CUDA graph). Errors as there, and `out` when its buffers hold fewer than `m * k` codes or
    /// than the scales of `granularity`.
    pub fn quantize_activations_into<Ab: DevicePtr<A>>(
        &self,
        a: &Ab,
        m: usize,
        k: usize,
        lda: usize,
        granularity: ActScale,
        out: &mut DeviceActivations,
    ) -> Result<()> {
        self.quant_function()?;
        let (n_scales, _, _) = scale_layout(m, k, granularity)?;
        if out.codes.len() < m * k || out.scales.len() < n_scales {
            return Err(invalid(
                "out",
                format!(
                    "its buffers hold {} codes and {} scales; {m} x {k} activations need {} and {n_scales}",
                    out.codes.len(),
                    out.scales.len(),
                    m * k
                ),
            ));
        }
        let s = &self.stream;
        {
            let (a_ptr, _ra) = a.device_ptr(s);
            let (q_ptr, _rq) = out.codes.device_ptr_mut(s);
            let (s_ptr, _rs) = out.scales.device_ptr_mut(s);
            self.launch_quant(a_ptr, a.len(), m, k, lda, granularity, q_ptr, s_ptr, None)?;
        }
        out.dtype = self.spec.a;
        out.m = m;
        out.k = k;
        out.granularity = granularity;
        Ok(())
    }

    /// `run`'s quantization: with the kernel's scales ([`ActScale::of_kernel`]), into its own
    /// buffers; returns their addresses and the elements between consecutive rows' scales.
    pub(super) fn quantize_into_workspace(
        &self,
        a_ptr: u64,
        m: usize,
        k: usize,
        lda: usize,
    ) -> Result<(u64, u64, usize)> {
        // (A's length was checked by check_launch.)
        self.quantize_rows_into_workspace(a_ptr, (m - 1) * lda + k, m, k, lda, None)
    }

    /// [`Gemm::quantize_into_workspace`] of the `gather.out_rows` rows of A's codes that a persistent
    /// `moe_indexed` launch reads (see [`GatherRows`]; A has `m` rows of K, or of 2 K with `glu`, and
    /// no other stride).
    pub(super) fn quantize_gathered_into_workspace(
        &self,
        a_ptr: u64,
        m: usize,
        k: usize,
        gather: GatherRows,
    ) -> Result<(u64, u64, usize)> {
        let lda = if gather.glu { 2 * k } else { k };
        self.quantize_rows_into_workspace(a_ptr, m * lda, m, k, lda, Some(gather))
    }

    /// The two above: the codes of `gather.out_rows` (else `m`) rows into the kernel's buffers.
    fn quantize_rows_into_workspace(
        &self,
        a_ptr: u64,
        a_len: usize,
        m: usize,
        k: usize,
        lda: usize,
        gather: Option<GatherRows>,
    ) -> Result<(u64, u64, usize)> {
        let rows = gather.map_or(m, |g| g.out_rows);
        let granularity = ActScale::of_kernel(&self.spec);
        let (n_scales, _, _) = scale_layout(rows, k, granularity)?;
        let mut guard = self.workspace.lock().map_err(|_| {
            invalid(
                "workspace",
                "the activation buffers' lock was poisoned by a panic",
            )
        })?;
        let ws = &mut *guard;
        let s = &self.stream;
        ws.grow_activations(s, rows * k, n_scales)?;
        let (q_ptr, s_ptr) = ws.activation_ptrs(s);
        self.launch_quant(a_ptr, a_len, m, k, lda, granularity, q_ptr, s_ptr, gather)?;
        Ok((q_ptr, s_ptr, granularity.scales_per_row(k)))
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_quant(
        &self,
        a_ptr: u64,
        a_len: usize,
        m: usize,
        k: usize,
        lda: usize,
        granularity: ActScale,
        q_ptr: u64,
        s_ptr: u64,
        gather: Option<GatherRows>,
    ) -> Result<()> {
        let func = self.quant_function()?;
        let (_, group, static_scale) = scale_layout(m, k, granularity)?;
        for (name, v) in [("m", m), ("k", k), ("lda", lda)] {
            if v > i32::MAX as usize {
                return Err(invalid(name, format!("{name} = {v} is 2^31 or more")));
            }
        }
        if !k.is_multiple_of(8) {
            return Err(invalid(
                "k",
                format!("K must be a multiple of 8; found {k}"),
            ));
        }
        if lda < k || !lda.is_multiple_of(8) {
            return Err(invalid(
                "lda",
                format!("lda must be at least K = {k} and a multiple of 8; found {lda}"),
            ));
        }
        if m == 0 {
            return Ok(());
        }
        // (A GLU row holds gate and up: 2 K values.)
        let row = if gather.is_some_and(|g| g.glu) {
            2 * k
        } else {
            k
        };
        if lda < row || a_len < (m - 1) * lda + row {
            return Err(invalid(
                "a",
                format!(
                    "A holds {a_len} elements; {m} rows of stride {lda} and {row} values need {}",
                    (m - 1) * lda + row
                ),
            ));
        }
        if !a_ptr.is_multiple_of(16) {
            return Err(invalid("a", "A must start 16-byte aligned"));
        }
        let params = ActQuantParams {
            a: a_ptr,
            codes: q_ptr,
            scales: s_ptr,
            m: m as i32,
            k: k as i32,
            lda: lda as i32,
            ldq: k as i32,
            group,
            static_scale,
            rows: gather.map_or(0, |g| g.rows),
            rows_used: gather.map_or(0, |g| g.used),
            top_k: gather.map_or(1, |g| g.top_k as i32),
            glu: i32::from(gather.is_some_and(|g| g.glu)),
        };
        let rows = gather.map_or(m, |g| g.out_rows);
        // Scales per group: one warp per group, so a row's groups spread over CTAs along y.
        let group_ctas = if group > 0 {
            granularity
                .scales_per_row(k)
                .div_ceil((ACT_QUANT_THREADS / 32) as usize)
                .min(65535) as u32
        } else {
            1
        };
        let cfg = LaunchConfig {
            grid_dim: (rows as u32, group_ctas, 1),
            block_dim: (ACT_QUANT_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel reads A[m, lda] (checked above; gathered: rows below m only) and writes
        // `rows` * k codes and their scales of `granularity` into buffers of at least that size
        // (allocated by the callers); gathered, it reads `rows` slot ids and one int.
        unsafe { driver::launch(&self.stream, func, cfg, &params, false, 1) }.map_err(|e| {
            Error::Driver {
                context: format!("launching the input quantization of {}", self.name),
                source: e,
            }
        })
    }
}

impl<A: Element, C: Element> Gemm<A, C> {
    /// [`Launcher::run_quantized`] with the kernel's launch settings.
    pub fn run_quantized<Cb: DevicePtrMut<C>>(
        &self,
        a: &DeviceActivations,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()> {
        self.with(self.options).run_quantized(a, w, bias, c)
    }
}

impl<A: Element, C: Element> Launcher<'_, A, C> {
    /// `C = A · Bᵀ` on activations quantized by [`Gemm::quantize_activations`] with the kernel's
    /// scales ([`ActScale::fits_kernel`]), `C` contiguous `[m, N]`. See [`Launcher::run_quantized_strided`].
    pub fn run_quantized<Cb: DevicePtrMut<C>>(
        &self,
        a: &DeviceActivations,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()> {
        self.run_quantized_strided(a, w, bias, c, c_columns(w.spec.epilogue, w.n))
    }

    /// `C[i, j] = epilogue(s_i Σ_k q[i, k] · W[j, k] + bias[j])` with the codes `q` and row scales
    /// `s` of `a` (with activation groups, `Σ_g s_ig Σ_{k in g} ...`), C's rows `ldc` elements apart.
    ///
    /// Errors ([`Error::InvalidArgument`]): a kernel without 8-bit activations, or of a MoE layout;
    /// `a` of another code type, of another K than the weights, or with other scales than the
    /// kernel's ([`ActScale::fits_kernel`]); and the checks of [`Launcher::run_strided`] on `w`,
    /// `bias`, `c` and `ldc`.
    pub fn run_quantized_strided<Cb: DevicePtrMut<C>>(
        &self,
        a: &DeviceActivations,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
        ldc: usize,
    ) -> Result<()> {
        let g = self.gemm;
        let stream = &g.stream;
        if !is_8bit_activation(g.spec.a) || g.spec.layout != Layout::Dense {
            return Err(invalid(
                "spec",
                format!(
                    "kernel {} is not a dense kernel of 8-bit activations: launch it with run",
                    g.name
                ),
            ));
        }
        if a.dtype != g.spec.a {
            return Err(invalid(
                "a",
                format!(
                    "activations of `{}`; kernel {} takes `{}`",
                    a.dtype, g.name, g.spec.a
                ),
            ));
        }
        if a.k != w.k {
            return Err(invalid(
                "a",
                format!("activations of K = {}; the weights have K = {}", a.k, w.k),
            ));
        }
        if !a.granularity.fits_kernel(&g.spec) {
            return Err(invalid(
                "a",
                format!(
                    "activations with {}: kernel {} takes {}",
                    a.granularity,
                    g.name,
                    ActScale::of_kernel(&g.spec)
                ),
            ));
        }
        let c_len = c.len();
        let (c_ptr, _rc) = c.device_ptr_mut(stream);
        let (q_ptr, _rq) = a.codes.device_ptr(stream);
        let (s_ptr, _rs) = a.scales.device_ptr(stream);
        check_launch(
            &g.name,
            &g.spec,
            &w.spec,
            &LaunchShape {
                m: a.m,
                n: w.n,
                k: w.k,
                lda: a.k,
                ldc,
                a_len: if a.m == 0 { 0 } else { a.codes.len() },
                c_len,
                bias_len: bias.map(|b| b.len()),
                a_addr: q_ptr,
                c_addr: c_ptr,
            },
        )?;
        if a.m == 0 {
            return Ok(());
        }
        let (bias_ptr, _rbias) = optional_ptr(bias, stream);
        let a_in = ActInput {
            ptr: q_ptr,
            lda: a.k,
            bytes: 1,
            scales: s_ptr,
            scale_stride: a.granularity.scales_per_row(a.k),
        };
        self.launch_dense(&a_in, a.m, w, bias_ptr, c_ptr, ldc)
    }
}
