//! A whole mixture-of-experts layer on the GPU ([`MoeLayer`], vLLM's `fused_moe`): the routing, the
//! gate-up projection with SiLU-GLU, the down projection times the router's weights, and the sum of
//! each token's `top_k` rows ([`Launcher::combine`], also a launch of its own).
//!
//! Two forms, by the kernels given:
//! - a gate-up kernel with a SiLU-GLU epilogue (`[slots, I]` out) and any `moe_indexed` down kernel:
//!   both launches read the one routing (the down projection's rows are the slots, `top_k` = 1);
//! - persistent 8-bit kernels (W4A8, W8A8 FP8 blocks on sm_90a) without an epilogue: the gate-up
//!   writes `[gate | up]` in the routing's gathered order, one pass turns each row into the down
//!   projection's codes of `silu(gate) * up` (and its scales), and the down projection reads them in
//!   that order and writes each slot's row.

use super::act8::GatherRows;
use super::driver::{self, driver_err};
use super::gemm::{DeviceWeights, Gemm, Launcher};
use super::moe::{MoeLaunch, Routing, check_i32};
use super::weights::optional_ptr;
use crate::error::{Error, Result, invalid};
use crate::kernel::Element;
use crate::moe::{expected_row_tiles, moe_block_m, persistent_moe_block_m};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};
use humming_spec::Layout;
use humming_spec::abi::CombineParams;
use humming_spec::layout::c_columns;

/// A MoE layer's two expert GEMMs (A and C of one 16-bit dtype) and their weights: `w13` `[E, 2 I, H]` (gate rows, then up rows),
/// `w2` `[E, H, I]`. See the module doc for the two forms.
pub struct MoeLayer<'a, T: Element> {
    gate_up: &'a Gemm<T, T>,
    w13: &'a DeviceWeights,
    down: &'a Gemm<T, T>,
    w2: &'a DeviceWeights,
    /// The persistent form: gate and up out in the gathered order, SiLU-GLU with the quantization.
    gathered: bool,
}

/// The buffers of one batch size of a [`MoeLayer`] (see [`MoeLayer::buffers`]): the routing, the
/// gate-up output and the down projection's output per slot. They keep their addresses, so a whole
/// [`MoeLayer::forward`] can be captured in a CUDA graph and replayed on new inputs.
pub struct MoeLayerBuffers<C: Element> {
    routing: Routing,
    h: CudaSlice<C>,
    y: CudaSlice<C>,
}

impl<C: Element> MoeLayerBuffers<C> {
    /// The routing the layer fills on each call.
    pub fn routing(&self) -> &Routing {
        &self.routing
    }
}

fn persistent<A: Element, C: Element>(g: &Gemm<A, C>) -> bool {
    !g.infos.is_empty() && g.infos.iter().all(|i| i.tile.persistent())
}

impl<'a, T: Element> MoeLayer<'a, T> {
    /// The layer of `gate_up` on `w13` and `down` on `w2`.
    ///
    /// Errors ([`crate::Error::InvalidArgument`]): kernels of another layout than `moe_indexed`;
    /// weights of another kernel or of different expert counts; shapes that do not chain (`w13`'s K
    /// and `w2`'s N are the hidden size, the gate-up's output columns `w2`'s K); a gate-up kernel
    /// with neither a SiLU-GLU epilogue nor, with a persistent down kernel, persistent tiles and no
    /// epilogue.
    pub fn new(
        gate_up: &'a Gemm<T, T>,
        w13: &'a DeviceWeights,
        down: &'a Gemm<T, T>,
        w2: &'a DeviceWeights,
    ) -> Result<Self> {
        for (name, g) in [("gate_up", gate_up), ("down", down)] {
            if g.spec.layout != Layout::MoeIndexed {
                return Err(invalid(
                    name,
                    format!("kernel {} is not of the `moe_indexed` layout", g.name),
                ));
            }
        }
        let gathered = !gate_up.spec.epilogue.is_glu()
            && gate_up.spec.epilogue == humming_spec::Epilogue::None
            && persistent(gate_up)
            && persistent(down);
        if !gate_up.spec.epilogue.is_glu() && !gathered {
            return Err(invalid(
                "gate_up",
                format!(
                    "kernel {} needs a SiLU-GLU epilogue (or, with a persistent down kernel, persistent tiles and no epilogue)",
                    gate_up.name
                ),
            ));
        }
        let inter = if gathered {
            w13.n / 2
        } else {
            c_columns(gate_up.spec.epilogue, w13.n)
        };
        if w13.experts != w2.experts || w13.k != w2.n || inter != w2.k || w13.n != 2 * inter {
            return Err(invalid(
                "weights",
                format!(
                    "w13 is {} x [{}, {}] and w2 {} x [{}, {}]: expected E x [2 I, H] and E x [H, I]",
                    w13.experts, w13.n, w13.k, w2.experts, w2.n, w2.k
                ),
            ));
        }
        Ok(Self {
            gate_up,
            w13,
            down,
            w2,
            gathered,
        })
    }

    /// Hidden size H.
    pub fn hidden(&self) -> usize {
        self.w13.k
    }
    /// Intermediate size I.
    pub fn intermediate(&self) -> usize {
        self.w2.k
    }
    /// Experts.
    pub fn experts(&self) -> usize {
        self.w13.experts
    }

    /// The buffers of batches of `tokens` tokens and `top_k` choices each: the routing (block M by
    /// [`moe_block_m`] among the block Ms both kernels have), the gate-up output and the down output.
    ///
    /// Errors: those of [`super::Launcher::route`]; no block M common to the two kernels; the
    /// allocations failing.
    pub fn buffers(&self, tokens: usize, top_k: usize) -> Result<MoeLayerBuffers<T>> {
        let bms = |g: &Gemm<T, T>| -> Vec<usize> {
            g.infos.iter().map(|i| i.tile.block_m as usize).collect()
        };
        let down_bms = bms(self.down);
        let common: Vec<usize> = bms(self.gate_up)
            .into_iter()
            .filter(|b| down_bms.contains(b))
            .collect();
        let slots = tokens.saturating_mul(top_k);
        let pick = if self.gathered {
            persistent_moe_block_m
        } else {
            moe_block_m
        };
        let block_m = pick(&common, slots, self.experts())
            .ok_or_else(|| invalid("down", "the two kernels have no block M in common"))?;
        let routing = self.gate_up.with(self.gate_up.options()).alloc_routing(
            tokens,
            top_k,
            self.experts(),
            block_m,
        )?;
        let h_len = if self.gathered {
            routing.capacity() * self.w13.n
        } else {
            slots * self.intermediate()
        };
        let s = &self.gate_up.stream;
        let alloc = |len: usize| {
            s.alloc_zeros::<T>(len.max(1))
                .map_err(driver_err("allocating the layer's buffers"))
        };
        Ok(MoeLayerBuffers {
            h: alloc(h_len)?,
            y: alloc(slots * self.hidden())?,
            routing,
        })
    }

    /// `out[t] = Σ_j topk_weights[t, j] · down(silu(gate) · up)` of token `t`'s choices `j` (an id
    /// outside `0..E` adds nothing): `x` `[tokens, H]`, `topk_ids` and `topk_weights` `[tokens,
    /// top_k]`, `out` `[tokens, H]`, the sizes of `bufs` (from [`MoeLayer::buffers`]). Every launch
    /// is queued on the kernels' stream.
    ///
    /// Errors ([`crate::Error::InvalidArgument`] naming the argument): lengths that do not match
    /// `bufs`' tokens and top_k, or those of the launches.
    pub fn forward<Xb, Ob>(
        &self,
        x: &Xb,
        topk_ids: &CudaSlice<i32>,
        topk_weights: &CudaSlice<f32>,
        bufs: &mut MoeLayerBuffers<T>,
        out: &mut Ob,
    ) -> Result<()>
    where
        Xb: DevicePtr<T>,
        Ob: DevicePtrMut<T>,
    {
        let (tokens, top_k) = (bufs.routing.tokens(), bufs.routing.top_k());
        let slots = tokens * top_k;
        if topk_weights.len() != slots {
            return Err(invalid(
                "topk_weights",
                format!(
                    "expected tokens * top_k = {slots} weights, found {}",
                    topk_weights.len()
                ),
            ));
        }
        let up = self.gate_up.with(self.gate_up.options());
        let down = self.down.with(self.down.options());
        up.route_into(topk_ids, &mut bufs.routing)?;
        let r = &bufs.routing;
        let s = &self.gate_up.stream;
        let (route, _r0) = r.sorted_ids.device_ptr(s);
        let (expert_ids, _r1) = r.expert_ids.device_ptr(s);
        let (route_slots, _r2) = r.slots_used.device_ptr(s);
        let (weights, _r3) = optional_ptr(Some(topk_weights), s);
        let (bm, capacity) = (r.block_m(), r.capacity());
        let launch = |a_rows: usize, c_rows: usize, top_k: usize, row_weights: u64| MoeLaunch {
            a_rows,
            c_rows,
            grid_rows: capacity,
            expected_tiles: expected_row_tiles(slots, r.experts(), bm),
            block_m: bm,
            route,
            expert_ids,
            route_slots,
            row_weights,
            top_k,
            expert_rows: 0,
            codes: None,
            gathered_c: false,
        };
        if self.gathered {
            // Gate and up of every gathered row, then the down projection's codes of silu(gate) * up.
            up.launch_moe(
                x,
                self.w13,
                None,
                &mut bufs.h,
                MoeLaunch {
                    gathered_c: true,
                    ..launch(tokens, capacity, top_k, 0)
                },
            )?;
            let (h_ptr, _rh) = bufs.h.device_ptr(s);
            let codes = self.down.quantize_gathered_into_workspace(
                h_ptr,
                capacity,
                self.intermediate(),
                GatherRows {
                    rows: 0,
                    used: route_slots,
                    top_k: 1,
                    out_rows: capacity,
                    glu: true,
                },
            )?;
            down.launch_moe(
                &bufs.h,
                self.w2,
                None,
                &mut bufs.y,
                MoeLaunch {
                    codes: Some(codes),
                    ..launch(slots, slots, 1, weights)
                },
            )?;
        } else {
            up.launch_moe(
                x,
                self.w13,
                None,
                &mut bufs.h,
                launch(tokens, slots, top_k, 0),
            )?;
            down.launch_moe(
                &bufs.h,
                self.w2,
                None,
                &mut bufs.y,
                launch(slots, slots, 1, weights),
            )?;
        }
        down.combine(
            &bufs.y,
            topk_ids,
            (tokens, top_k, self.experts()),
            self.hidden(),
            None,
            out,
        )
    }
}

impl<A: Element, C: Element> Launcher<'_, A, C> {
    /// The sum of each token's rows of an indexed GEMM's output: `out[t, :] = Σ_j w[t, j] ·
    /// y[t * top_k + j, :]` over the choices `j` with an expert in `0..experts`, in `j` order, in f32,
    /// rounded once to C's dtype (`weights`: the router's `[tokens, top_k]` f32 weights, or `None` for
    /// 1); a token with no valid choice gets a row of zeros. `y`: `[tokens * top_k, n]`; `out`:
    /// `[tokens, n]`; `n` a multiple of 8; `y` and `out` 16-byte aligned; at most 65535 tokens.
    #[allow(clippy::too_many_arguments)]
    pub fn combine<Yb, Ob>(
        &self,
        y: &Yb,
        topk_ids: &CudaSlice<i32>,
        (tokens, top_k, experts): (usize, usize, usize),
        n: usize,
        weights: Option<&CudaSlice<f32>>,
        out: &mut Ob,
    ) -> Result<()>
    where
        Yb: DevicePtr<C>,
        Ob: DevicePtrMut<C>,
    {
        self.moe_layout(Layout::MoeIndexed, "combine")?;
        let g = self.gemm;
        let ids = tokens
            .checked_mul(top_k)
            .ok_or_else(|| invalid("tokens", "tokens * top_k overflows"))?;
        check_i32("tokens * top_k", ids)?;
        check_i32("experts", experts)?;
        if n == 0 || !n.is_multiple_of(8) || n > i32::MAX as usize {
            return Err(invalid(
                "n",
                format!("n = {n} must be a positive multiple of 8"),
            ));
        }
        if topk_ids.len() != ids || weights.is_some_and(|w| w.len() != ids) {
            return Err(invalid(
                "topk_ids",
                format!("expected tokens * top_k = {ids} choices and weights"),
            ));
        }
        if ids.checked_mul(n).is_none_or(|need| y.len() < need) {
            return Err(invalid(
                "y",
                format!("y holds {} elements; {ids} rows of {n} needed", y.len()),
            ));
        }
        if tokens.checked_mul(n).is_none_or(|need| out.len() < need) {
            return Err(invalid(
                "out",
                format!(
                    "out holds {} elements; {tokens} rows of {n} needed",
                    out.len()
                ),
            ));
        }
        if tokens == 0 {
            return Ok(());
        }
        if tokens > 65535 {
            return Err(invalid("tokens", "at most 65535 tokens per combine"));
        }
        let Some((_, combine)) = &g.helpers else {
            return Err(invalid("spec", "the module has no combine helper"));
        };
        let s = &g.stream;
        let (y_ptr, _r0) = y.device_ptr(s);
        let (ids_ptr, _r1) = topk_ids.device_ptr(s);
        let (w_ptr, _r2) = optional_ptr(weights, s);
        let (out_ptr, _r3) = out.device_ptr_mut(s);
        if !y_ptr.is_multiple_of(16) || !out_ptr.is_multiple_of(16) {
            return Err(invalid("y", "y and out must start 16-byte aligned"));
        }
        let params = CombineParams {
            y: y_ptr,
            topk_ids: ids_ptr,
            weights: w_ptr,
            out: out_ptr,
            tokens: tokens as i32,
            top_k: top_k as i32,
            n: n as i32,
            experts: experts as i32,
        };
        let threads = 128u32;
        let cfg = LaunchConfig {
            grid_dim: ((n / 8).div_ceil(threads as usize) as u32, tokens as u32, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the helper reads `tokens * top_k` choices (and weights) and rows of `y`, and writes
        // `tokens` rows of `out`, lengths checked above, 16-byte accesses at checked alignment.
        unsafe { driver::launch(s, combine, cfg, &params, false, 1) }.map_err(|e| Error::Driver {
            context: format!("launching the combine helper of {}", g.name),
            source: e,
        })
    }
}

impl<A: Element, C: Element> Gemm<A, C> {
    /// [`Launcher::combine`] with the `Gemm`'s settings; `shape` is `(tokens, top_k, experts)`.
    pub fn combine<Yb, Ob>(
        &self,
        y: &Yb,
        topk_ids: &CudaSlice<i32>,
        shape: (usize, usize, usize),
        n: usize,
        weights: Option<&CudaSlice<f32>>,
        out: &mut Ob,
    ) -> Result<()>
    where
        Yb: DevicePtr<C>,
        Ob: DevicePtrMut<C>,
    {
        self.with(self.options)
            .combine(y, topk_ids, shape, n, weights, out)
    }
}
