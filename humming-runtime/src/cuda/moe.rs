//! Mixture-of-experts launches: the three MoE layouts of a [`Gemm`] ([`Launcher::run_indexed`],
//! [`Launcher::run_contiguous`], [`Launcher::run_masked`]), and the `moe_indexed` helpers: routing
//! on the GPU ([`Launcher::route`]) and the sum of each token's `top_k` rows ([`Launcher::combine`]).
//! The host side (the rows each layout names, the reference, the block-M rule) is [`crate::moe`].
//!
//! A kernel of 8-bit activations takes A in C's 16-bit dtype, as [`Launcher::run`] does: each launch
//! quantizes A's rows (the tokens, not the slots) per token, or per activation group
//! ([`crate::act_quant::ActScale::of_kernel`]), into the kernel's own buffers first
//! ([`Gemm::reserve`] sizes them ahead, e.g. before a CUDA graph capture).

use super::driver::{self, driver_err};
use super::gemm::{DeviceWeights, Gemm, Launcher, flag};
use super::plan::{KReduction, LaunchPlan, plan_moe};
use super::weights::optional_ptr;
use crate::error::{Error, Result, invalid};
use crate::kernel::Element;
use crate::moe::{
    IndexedRouting, expected_row_tiles, moe_block_m, persistent_moe_block_m, route_capacity,
};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};
use humming_spec::Layout;
use humming_spec::abi::{
    FLAG_EARLY_TRIGGER, GemmParams, MAX_ROUTE_EXPERTS, ROUTE_THREADS, RouteParams, route_smem_bytes,
};
use humming_spec::layout::{c_columns, is_8bit_activation};

/// The `moe_indexed` routing of one batch on the GPU, filled by [`Launcher::route_into`] from the
/// router's choices and read by [`Launcher::run_indexed`]: each expert's slots in blocks of
/// `block_m`, the expert of each block, the slots in use. Tokens, top_k, experts and block M are
/// fixed when [`Launcher::route`] creates it (one `Routing` per batch size); its buffers keep their
/// addresses, so `route_into` and the launches that read it can be captured in a CUDA graph and
/// replayed on new choices.
pub struct Routing {
    pub(super) sorted_ids: CudaSlice<i32>,
    pub(super) expert_ids: CudaSlice<i32>,
    pub(super) slots_used: CudaSlice<i32>,
    tokens: usize,
    top_k: usize,
    experts: usize,
    block_m: usize,
    capacity: usize,
}

impl Routing {
    /// Tokens (rows of A).
    pub fn tokens(&self) -> usize {
        self.tokens
    }
    /// Choices per token.
    pub fn top_k(&self) -> usize {
        self.top_k
    }
    /// Experts.
    pub fn experts(&self) -> usize {
        self.experts
    }
    /// Slots per block: the block M of the GEMM tile that reads this routing.
    pub fn block_m(&self) -> usize {
        self.block_m
    }
    /// Slots of the buffers (the most the routing may use).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Copies the routing to the host (waits for the stream), as [`crate::moe::route_indexed`] gives
    /// it.
    pub fn to_host(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Result<IndexedRouting> {
        let used = stream
            .clone_dtoh(&self.slots_used)
            .map_err(driver_err("reading the routing"))?[0]
            .max(0) as usize;
        let mut sorted_ids = stream
            .clone_dtoh(&self.sorted_ids)
            .map_err(driver_err("reading the routing"))?;
        let mut expert_ids = stream
            .clone_dtoh(&self.expert_ids)
            .map_err(driver_err("reading the routing"))?;
        sorted_ids.truncate(used);
        expert_ids.truncate(used / self.block_m.max(1));
        Ok(IndexedRouting {
            sorted_ids,
            expert_ids,
            slots_used: used,
        })
    }
}

pub(super) fn check_i32(name: &'static str, v: usize) -> Result<()> {
    if v > i32::MAX as usize {
        return Err(invalid(name, format!("{name} = {v} is 2^31 or more")));
    }
    Ok(())
}

/// What one MoE launch hands the kernel beyond the dense fields.
pub(super) struct MoeLaunch {
    pub a_rows: usize,
    pub c_rows: usize,
    pub grid_rows: usize,
    pub expected_tiles: usize,
    pub block_m: usize,
    pub route: u64,
    pub expert_ids: u64,
    pub route_slots: u64,
    pub row_weights: u64,
    pub top_k: usize,
    pub expert_rows: usize,
    /// Persistent tiles: A's codes already gathered (`[grid_rows, K]`), their scales and the scales
    /// per row, instead of quantizing A by slot.
    pub codes: Option<(u64, u64, usize)>,
    /// Persistent tiles: `FLAG_GATHERED_C` (C `[grid_rows, N]` in the gathered order).
    pub gathered_c: bool,
}

impl MoeLaunch {
    /// The MoE fields of a launch's parameters (the routing's and the experts' strides) on `w`, the
    /// others at their defaults.
    pub(super) fn params(&self, w: &DeviceWeights) -> GemmParams {
        GemmParams {
            experts: w.experts as i32,
            route: self.route,
            expert_ids: self.expert_ids,
            route_slots: self.route_slots,
            row_weights: self.row_weights,
            b_expert: w.b_expert as i64,
            s_expert: w.s_expert as i64,
            top_k: self.top_k as i32,
            expert_rows: self.expert_rows as i32,
            ..GemmParams::default()
        }
    }
}

impl<A: Element, C: Element> Launcher<'_, A, C> {
    pub(super) fn moe_layout(&self, want: Layout, call: &str) -> Result<()> {
        let g = self.gemm;
        if g.spec.layout != want {
            return Err(invalid(
                "spec",
                format!(
                    "{call} launches the `{}` layout; kernel {} has `{}`",
                    want.name(),
                    g.name,
                    g.spec.layout.name()
                ),
            ));
        }
        Ok(())
    }

    /// The block M of this kernel's tiles (those loaded on this device) for `rows` choices over
    /// `experts` ([`moe_block_m`]).
    pub fn moe_block_m(&self, rows: usize, experts: usize) -> usize {
        let bms: Vec<usize> = self
            .gemm
            .infos
            .iter()
            .map(|i| i.tile.block_m as usize)
            .collect();
        if self.gemm.infos.iter().all(|i| i.tile.persistent()) {
            persistent_moe_block_m(&bms, rows, experts).unwrap_or(16)
        } else {
            moe_block_m(&bms, rows, experts).unwrap_or(8)
        }
    }

    /// Allocates the routing of `tokens` x `top_k` choices over `experts` (block M from
    /// [`Launcher::moe_block_m`]) and fills it from `topk_ids` ([`Launcher::route_into`]).
    ///
    /// Errors: a kernel of another layout, `experts` of 0 or above 1024, sizes of 2^31 or more, a
    /// `topk_ids` of another length than `tokens * top_k`; the allocation or the launch failing.
    pub fn route(
        &self,
        topk_ids: &CudaSlice<i32>,
        tokens: usize,
        top_k: usize,
        experts: usize,
    ) -> Result<Routing> {
        let block_m = self.moe_block_m(tokens.saturating_mul(top_k), experts);
        self.route_with_block_m(topk_ids, tokens, top_k, experts, block_m)
    }

    /// [`Launcher::route`] with the block M given (as vLLM's `fused_moe` configs give it): one of
    /// this kernel's tiles loaded on this device.
    ///
    /// Errors: those of [`Launcher::route`], and a block M of no tile.
    pub fn route_with_block_m(
        &self,
        topk_ids: &CudaSlice<i32>,
        tokens: usize,
        top_k: usize,
        experts: usize,
        block_m: usize,
    ) -> Result<Routing> {
        let mut routing = self.alloc_routing(tokens, top_k, experts, block_m)?;
        self.route_into(topk_ids, &mut routing)?;
        Ok(routing)
    }

    /// The buffers of a routing (unfilled), after the checks of [`Launcher::route_with_block_m`].
    pub(super) fn alloc_routing(
        &self,
        tokens: usize,
        top_k: usize,
        experts: usize,
        block_m: usize,
    ) -> Result<Routing> {
        self.moe_layout(Layout::MoeIndexed, "route")?;
        if !self
            .gemm
            .infos
            .iter()
            .any(|i| i.tile.block_m as usize == block_m)
        {
            return Err(invalid(
                "block_m",
                format!(
                    "kernel {} has no tile of block M {block_m} on this device",
                    self.gemm.name
                ),
            ));
        }
        if experts == 0 || experts > MAX_ROUTE_EXPERTS as usize {
            return Err(invalid(
                "experts",
                format!(
                    "the routing helper takes 1 to {MAX_ROUTE_EXPERTS} experts; found {experts}"
                ),
            ));
        }
        if top_k == 0 {
            return Err(invalid("top_k", "top_k must be at least 1"));
        }
        let ids = tokens
            .checked_mul(top_k)
            .ok_or_else(|| invalid("tokens", "tokens * top_k overflows"))?;
        check_i32("tokens * top_k", ids)?;
        let capacity = route_capacity(ids, experts, block_m);
        check_i32("capacity", capacity)?;
        let s = &self.gemm.stream;
        let alloc = |len: usize, what: &'static str| {
            s.alloc_zeros::<i32>(len.max(1)).map_err(driver_err(what))
        };
        Ok(Routing {
            sorted_ids: alloc(capacity, "allocating the routing")?,
            expert_ids: alloc(capacity / block_m, "allocating the routing")?,
            slots_used: alloc(1, "allocating the routing")?,
            tokens,
            top_k,
            experts,
            block_m,
            capacity,
        })
    }

    /// (The helper keeps 132 bytes of shared memory per expert and 4 KiB more: on GPUs with 99 KiB
    /// per block, sm_86 and sm_89, more than about 730 experts fail at launch, a [`Error::Driver`].)
    ///
    /// Fills `routing` from the router's choices `topk_ids` (`[tokens, top_k]`, int32; ids outside
    /// `0..experts` take no slot) with the routing helper: one CTA, deterministic, queued on the stream.
    pub fn route_into(&self, topk_ids: &CudaSlice<i32>, routing: &mut Routing) -> Result<()> {
        self.moe_layout(Layout::MoeIndexed, "route_into")?;
        let g = self.gemm;
        let ids = routing.tokens * routing.top_k;
        if topk_ids.len() != ids {
            return Err(invalid(
                "topk_ids",
                format!(
                    "expected tokens * top_k = {} * {} = {ids} choices, found {}",
                    routing.tokens,
                    routing.top_k,
                    topk_ids.len()
                ),
            ));
        }
        let Some((route, _)) = &g.helpers else {
            return Err(invalid("spec", "the module has no routing helper"));
        };
        let s = &g.stream;
        let (ids_ptr, _r0) = topk_ids.device_ptr(s);
        let (sorted, _r1) = routing.sorted_ids.device_ptr_mut(s);
        let (experts_ptr, _r2) = routing.expert_ids.device_ptr_mut(s);
        let (used, _r3) = routing.slots_used.device_ptr_mut(s);
        let params = RouteParams {
            topk_ids: ids_ptr,
            sorted_ids: sorted,
            expert_ids: experts_ptr,
            slots_used: used,
            ids: ids as i32,
            experts: routing.experts as i32,
            block_m: routing.block_m as i32,
            capacity: routing.capacity as i32,
        };
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (ROUTE_THREADS, 1, 1),
            shared_mem_bytes: route_smem_bytes(routing.experts as u32),
        };
        // SAFETY: the helper reads `ids` choices and writes `capacity` slots, `capacity / block_m`
        // experts and one int, the lengths of the buffers it is given (checked or allocated above).
        unsafe { driver::launch(s, route, cfg, &params, false, 1) }.map_err(|e| Error::Driver {
            context: format!("launching the routing helper of {}", g.name),
            source: e,
        })
    }

    /// `moe_indexed`: `C[s] = epilogue(A[s / top_k] · W_e[N, K]ᵀ + bias_e) · row_weights[s]` for each
    /// slot `s` of `routing` (expert `e` of its block), C `[tokens * top_k, N]` (N / 2 with a gated
    /// epilogue). Rows of C whose choice is invalid are not written. `row_weights` (`[tokens *
    /// top_k]`, f32): the router's weights, for the down projection.
    ///
    /// Errors ([`Error::InvalidArgument`] naming the argument): a kernel of another layout; weights
    /// of another number of experts than the routing; a routing whose block M is not a tile of this
    /// kernel; `a`, `c`, `bias` (`[E, N]`) or `row_weights` of the wrong length; misaligned A or C;
    /// more than 65535 row tiles of block M in one launch.
    pub fn run_indexed<Ab, Cb>(
        &self,
        a: &Ab,
        routing: &Routing,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        row_weights: Option<&CudaSlice<f32>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.moe_layout(Layout::MoeIndexed, "run_indexed")?;
        let g = self.gemm;
        if routing.experts != w.experts {
            return Err(invalid(
                "routing",
                format!(
                    "the routing is over {} experts, the weights hold {}",
                    routing.experts, w.experts
                ),
            ));
        }
        let slots = routing.tokens * routing.top_k;
        if let Some(rw) = row_weights
            && rw.len() != slots
        {
            return Err(invalid(
                "row_weights",
                format!(
                    "expected tokens * top_k = {slots} weights, found {}",
                    rw.len()
                ),
            ));
        }
        let s = &g.stream;
        let (route, _r0) = routing.sorted_ids.device_ptr(s);
        let (expert_ids, _r1) = routing.expert_ids.device_ptr(s);
        let (route_slots, _r2) = routing.slots_used.device_ptr(s);
        let (rw_ptr, _r3) = optional_ptr(row_weights, s);
        let bm = routing.block_m;
        self.launch_moe(
            a,
            w,
            bias,
            c,
            MoeLaunch {
                a_rows: routing.tokens,
                c_rows: slots,
                grid_rows: routing.capacity,
                expected_tiles: expected_row_tiles(slots, routing.experts, bm),
                block_m: bm,
                route,
                expert_ids,
                route_slots,
                row_weights: rw_ptr,
                top_k: routing.top_k,
                expert_rows: 0,
                codes: None,
                gathered_c: false,
            },
        )
    }

    /// `moe_grouped_contiguous`: rows `offsets[e]..offsets[e + 1]` of A `[rows, K]` go through expert
    /// `e` into the same rows of C `[rows, N]` (N / 2 with a gated epilogue); rows outside every
    /// expert's range are not written. `offsets` (`[E + 1]`, int32, on the device, read by the kernel:
    /// a launch can be captured in a CUDA graph) should be non-decreasing from 0 to at most `rows`;
    /// the kernel clamps them to that. Block M from `rows / E`.
    ///
    /// Errors as [`Launcher::run_indexed`], and `offsets` of another length than E + 1.
    pub fn run_contiguous<Ab, Cb>(
        &self,
        a: &Ab,
        rows: usize,
        offsets: &CudaSlice<i32>,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.moe_layout(Layout::MoeGroupedContiguous, "run_contiguous")?;
        if offsets.len() != w.experts + 1 {
            return Err(invalid(
                "offsets",
                format!(
                    "expected E + 1 = {} offsets, found {}",
                    w.experts + 1,
                    offsets.len()
                ),
            ));
        }
        let bm = self.moe_block_m(rows, w.experts);
        let (route, _r) = offsets.device_ptr(&self.gemm.stream);
        self.launch_moe(
            a,
            w,
            bias,
            c,
            MoeLaunch {
                a_rows: rows,
                c_rows: rows,
                grid_rows: (rows.div_ceil(bm) + rows.min(w.experts)) * bm,
                expected_tiles: expected_row_tiles(rows, w.experts, bm),
                block_m: bm,
                route,
                expert_ids: 0,
                route_slots: 0,
                row_weights: 0,
                top_k: 1,
                expert_rows: 0,
                codes: None,
                gathered_c: false,
            },
        )
    }

    /// `moe_grouped_masked`: A is `[E, max_m, K]` and C `[E, max_m, N]` (N / 2 with a gated
    /// epilogue); expert `e` computes its first `counts[e]` rows (`counts`: `[E]`, int32, on the
    /// device, clamped to `0..=max_m` by the kernel); the other rows are not written. Block M from
    /// `expected_m`, the rows an expert gets on average.
    ///
    /// Errors as [`Launcher::run_indexed`], `counts` of another length than E, and E * max_m of 2^31
    /// or more.
    #[allow(clippy::too_many_arguments)]
    pub fn run_masked<Ab, Cb>(
        &self,
        a: &Ab,
        max_m: usize,
        counts: &CudaSlice<i32>,
        expected_m: usize,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.moe_layout(Layout::MoeGroupedMasked, "run_masked")?;
        if counts.len() != w.experts {
            return Err(invalid(
                "counts",
                format!("expected E = {} counts, found {}", w.experts, counts.len()),
            ));
        }
        let rows = w
            .experts
            .checked_mul(max_m)
            .ok_or_else(|| invalid("max_m", "E * max_m overflows"))?;
        check_i32("E * max_m", rows)?;
        let bm = self.moe_block_m(expected_m.saturating_mul(w.experts), w.experts);
        let (route, _r) = counts.device_ptr(&self.gemm.stream);
        self.launch_moe(
            a,
            w,
            bias,
            c,
            MoeLaunch {
                a_rows: rows,
                c_rows: rows,
                grid_rows: w.experts * max_m.div_ceil(bm) * bm,
                expected_tiles: w.experts * expected_m.clamp(1, max_m.max(1)).div_ceil(bm),
                block_m: bm,
                route,
                expert_ids: 0,
                route_slots: 0,
                row_weights: 0,
                top_k: 1,
                expert_rows: max_m,
                codes: None,
                gathered_c: false,
            },
        )
    }

    pub(super) fn launch_moe<Ab, Cb>(
        &self,
        a: &Ab,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
        l: MoeLaunch,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        let g = self.gemm;
        if !g.spec.takes_weights_of(&w.spec) {
            return Err(invalid(
                "weights",
                format!(
                    "weights were packed for `{}`, not for kernel {} (`{}`)",
                    w.spec, g.name, g.spec
                ),
            ));
        }
        let (n, k) = (w.n, w.k);
        let nc = c_columns(g.spec.epilogue, n);
        for (name, v) in [
            ("rows of A", l.a_rows),
            ("rows of C", l.c_rows),
            ("slots", l.grid_rows),
        ] {
            check_i32(name, v)?;
        }
        let need_a = l.a_rows.checked_mul(k);
        if need_a.is_none_or(|need| a.len() < need) {
            return Err(invalid(
                "a",
                format!(
                    "A holds {} elements; {} rows of K = {k} need {need_a:?}",
                    a.len(),
                    l.a_rows
                ),
            ));
        }
        let need_c = l.c_rows.checked_mul(nc);
        if need_c.is_none_or(|need| c.len() < need) {
            return Err(invalid(
                "c",
                format!(
                    "C holds {} elements; {} rows of {nc} need {need_c:?}",
                    c.len(),
                    l.c_rows
                ),
            ));
        }
        match (g.spec.bias, bias.map(|b| b.len())) {
            (true, Some(len)) if len == w.experts * n => {}
            (false, None) => {}
            (true, got) => {
                return Err(invalid(
                    "bias",
                    format!(
                        "kernel {} declares `bias: true`: pass E * N = {} elements (found {got:?})",
                        g.name,
                        w.experts * n
                    ),
                ));
            }
            (false, Some(_)) => {
                return Err(invalid(
                    "bias",
                    format!("kernel {} declares no bias; pass None", g.name),
                ));
            }
        }
        let plan: LaunchPlan = plan_moe(
            &g.infos,
            &g.device,
            &self.options,
            l.block_m,
            (l.grid_rows, l.expected_tiles),
            (n, k),
        )
        .ok_or_else(|| {
            invalid(
                "routing",
                format!(
                    "kernel {} has no mma.sync tile of block M {}",
                    g.name, l.block_m
                ),
            )
        })?;
        let s = &g.stream;
        let (a_ptr, _ra) = a.device_ptr(s);
        let (c_ptr, _rc) = c.device_ptr_mut(s);
        if !a_ptr.is_multiple_of(16) || !c_ptr.is_multiple_of(4) {
            return Err(invalid(
                "a",
                "A must start 16-byte aligned and C 4-byte aligned",
            ));
        }
        let grid_y = l.grid_rows.div_ceil(l.block_m);
        if grid_y > 65535 && !plan.tile.persistent() {
            return Err(invalid(
                "rows",
                format!(
                    "{} row tiles of {} rows: at most 65535 per launch",
                    grid_y, l.block_m
                ),
            ));
        }
        if grid_y == 0 || l.c_rows == 0 {
            return Ok(());
        }
        if plan.tile.persistent() {
            let (bias_ptr, _rbias) = optional_ptr(bias, s);
            return self.launch_moe_persistent(&plan, a_ptr, w, (bias_ptr, c_ptr, nc), &l);
        }
        // 8-bit activations: A's rows (tokens, not slots) quantized per token (or per activation
        // group) into the kernel's own buffers first (stream-ordered: the launch below reads them).
        let (a_ptr, a_scales, a_scale_stride) = if is_8bit_activation(g.spec.a) {
            g.quantize_into_workspace(a_ptr, l.a_rows, k, k)?
        } else {
            (a_ptr, 0, 0)
        };
        let t = &g.tiles[plan.tile_index];
        let wp = w.ptrs(s);
        let (bias_ptr, _rbias) = optional_ptr(bias, s);
        let (ws_ptr, tickets_ptr) = g.workspace_ptrs(&plan)?;
        debug_assert!(matches!(
            plan.reduction,
            KReduction::None | KReduction::Ordered
        ));
        let params = GemmParams {
            a: a_ptr,
            b: wp.b,
            scales: wp.scales,
            zeros: wp.zeros,
            channel: wp.channel,
            bias: bias_ptr,
            c: c_ptr,
            workspace: ws_ptr,
            locks: tickets_ptr,
            m: l.a_rows as i32,
            n: n as i32,
            k: k as i32,
            lda: k as i32,
            ldc: nc as i32,
            splits: plan.splits as i32,
            flags: flag(plan.early_trigger, FLAG_EARLY_TRIGGER),
            a_scales,
            a_scale_stride: a_scale_stride as i32,
            ..l.params(w)
        };
        let tile = plan.tile;
        let cfg = LaunchConfig {
            grid_dim: (
                n.div_ceil(tile.block_n as usize) as u32,
                grid_y as u32,
                plan.splits as u32,
            ),
            block_dim: (tile.threads(), 1, 1),
            shared_mem_bytes: t.smem,
        };
        // SAFETY: the kernel reads the rows of A and writes the rows of C the routing names, each
        // clamped in the kernel to `m` rows of A and (indexed) `m * top_k` or (grouped) `m` rows of C,
        // whose lengths were checked above; it reads E experts' packed weights, scales and channel
        // factors, as uploaded, and the routing buffers within the grid's rows; the split-K workspace
        // is sized by the plan.
        unsafe { driver::launch(s, &t.func, cfg, &params, plan.programmatic, 1) }.map_err(|e| {
            Error::Driver {
                context: format!("launching {} ({})", g.name, tile),
                source: e,
            }
        })
    }
}

impl<A: Element, C: Element> Gemm<A, C> {
    /// [`Launcher::route`] with the `Gemm`'s settings.
    pub fn route(
        &self,
        topk_ids: &CudaSlice<i32>,
        tokens: usize,
        top_k: usize,
        experts: usize,
    ) -> Result<Routing> {
        self.with(self.options)
            .route(topk_ids, tokens, top_k, experts)
    }

    /// [`Launcher::route_with_block_m`] with the `Gemm`'s settings.
    pub fn route_with_block_m(
        &self,
        topk_ids: &CudaSlice<i32>,
        tokens: usize,
        top_k: usize,
        experts: usize,
        block_m: usize,
    ) -> Result<Routing> {
        self.with(self.options)
            .route_with_block_m(topk_ids, tokens, top_k, experts, block_m)
    }

    /// [`Launcher::route_into`] with the `Gemm`'s settings.
    pub fn route_into(&self, topk_ids: &CudaSlice<i32>, routing: &mut Routing) -> Result<()> {
        self.with(self.options).route_into(topk_ids, routing)
    }

    /// [`Launcher::run_indexed`] with the `Gemm`'s settings.
    pub fn run_indexed<Ab, Cb>(
        &self,
        a: &Ab,
        routing: &Routing,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        row_weights: Option<&CudaSlice<f32>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.with(self.options)
            .run_indexed(a, routing, w, bias, row_weights, c)
    }

    /// [`Launcher::run_contiguous`] with the `Gemm`'s settings.
    pub fn run_contiguous<Ab, Cb>(
        &self,
        a: &Ab,
        rows: usize,
        offsets: &CudaSlice<i32>,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.with(self.options)
            .run_contiguous(a, rows, offsets, w, bias, c)
    }

    /// [`Launcher::run_masked`] with the `Gemm`'s settings.
    #[allow(clippy::too_many_arguments)]
    pub fn run_masked<Ab, Cb>(
        &self,
        a: &Ab,
        max_m: usize,
        counts: &CudaSlice<i32>,
        expected_m: usize,
        w: &DeviceWeights,
        bias: Option<&CudaSlice<C>>,
        c: &mut Cb,
    ) -> Result<()>
    where
        Ab: DevicePtr<A>,
        Cb: DevicePtrMut<C>,
    {
        self.with(self.options)
            .run_masked(a, max_m, counts, expected_m, w, bias, c)
    }
}
