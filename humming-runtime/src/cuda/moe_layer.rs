//! A whole mixture-of-experts layer on the GPU ([`MoeLayer`], vLLM's `fused_moe`): the routing, the
//! gate-up projection with SiLU-GLU, the down projection times the router's weights, and the sum of
//! each token's `top_k` rows.
//!
//! Two forms, by the kernels given:
//! - a gate-up kernel with a SiLU-GLU epilogue (`[slots, I]` out) and any `moe_indexed` down kernel:
//!   both launches read the one routing (the down projection's rows are the slots, `top_k` = 1);
//! - persistent 8-bit kernels (W4A8, W8A8 FP8 blocks on sm_90a) without an epilogue: the gate-up
//!   writes `[gate | up]` in the routing's gathered order, one pass turns each row into the down
//!   projection's codes of `silu(gate) * up` (and its scales), and the down projection reads them in
//!   that order and writes each slot's row.

use super::act8::GatherRows;
use super::driver::driver_err;
use super::gemm::{DeviceWeights, Gemm};
use super::moe::{MoeLaunch, Routing};
use super::weights::optional_ptr;
use crate::error::{Result, invalid};
use crate::kernel::Element;
use crate::moe::{expected_row_tiles, moe_block_m, persistent_moe_block_m};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use humming_spec::Layout;
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
