//! Launches of the persistent (`wgmma_ss`) tiles: the three TMA tensor maps (A's codes, the K-major
//! weight codes, C), the tile raster, and a grid of at most one CTA per SM (`cuda/humming/persistent.cuh`);
//! for `moe_indexed`, A's codes gathered by slot first, and the weights of every expert in one map.

use super::act8::GatherRows;
use super::driver::{self, BoxLayout, TmaElement};
use super::gemm::{ActInput, DeviceWeights, Launcher, flag};
use super::moe::MoeLaunch;
use super::plan::{LaunchPlan, persistent_rows_per_launch};
use crate::error::{Error, Result, invalid};
use crate::kernel::Element;
use cudarc::driver::LaunchConfig;
use humming_spec::abi::{FLAG_EARLY_TRIGGER, FLAG_GATHERED_C, FLAG_TMA_STORE_C, GemmParams};

/// Row tiles per band of the persistent tile raster (`PersistentTiles` in `scheduler.cuh`): the tiles
/// running at once then span 8 row tiles and about SMs / 8 weight tiles (8 and 16 measured alike).
pub const PERSISTENT_RASTER: i32 = 8;

/// The TMA map error of `what` for kernel `name`.
fn encode(
    name: &str,
    what: &str,
    r: std::result::Result<[u64; 16], cudarc::driver::DriverError>,
) -> Result<[u64; 16]> {
    r.map_err(|e| Error::Driver {
        context: format!("encoding the TMA tensor map of {what} for {name}"),
        source: e,
    })
}

/// The TMA map of the K-major weight codes at `b` (`rows` of N channels: one matrix, or E experts
/// one after the other) in boxes of one stage of `block_n` channels: 8-bit codes in the 128-byte
/// swizzle; 4-bit codes, 64 bytes per 128 codes, plain, as the kernel's loads read them
/// (`WeightLayout::KMajor`).
fn weight_map(
    name: &str,
    b: u64,
    bits: u32,
    k: usize,
    rows: usize,
    block_n: u16,
) -> Result<[u64; 16]> {
    let row = humming_spec::layout::k_major_row_bytes(bits, k);
    let stage_bytes = u32::from(humming_spec::tiles::PERSISTENT_BLOCK_K) * bits / 8;
    let layout = if bits == 4 {
        BoxLayout::Plain
    } else {
        BoxLayout::Swizzle128
    };
    encode(
        name,
        "B",
        driver::encode_boxes(
            b,
            TmaElement::Byte,
            [row, rows],
            row,
            [stage_bytes, u32::from(block_n)],
            layout,
        ),
    )
}

impl<A: Element, C: Element> Launcher<'_, A, C> {
    /// A persistent `moe_indexed` launch, after `launch_moe`'s checks and plan (its tile's block M is
    /// the routing's): A's rows quantized by slot into `l.grid_rows` rows of codes (each block of
    /// block M rows one expert's; or the codes `l.codes` given so), then one launch of at most one
    /// CTA per SM over the blocks in use (read on the device), without K splits.
    pub(super) fn launch_moe_persistent(
        &self,
        plan: &LaunchPlan,
        a_ptr: u64,
        w: &DeviceWeights,
        (bias_ptr, c_ptr, ldc): (u64, u64, usize),
        l: &MoeLaunch,
    ) -> Result<()> {
        let g = self.gemm;
        let stream = &g.stream;
        let (n, k) = (w.n, w.k);
        let t = &g.tiles[plan.tile_index];
        let tile = plan.tile;
        let bits = g.spec.b.bits();
        if w.b_expert != n * humming_spec::layout::k_major_row_bytes(bits, k) {
            return Err(invalid(
                "weights",
                "the experts' K-major weights are not stacked one after the other",
            ));
        }
        let rows = w.experts * n;
        if rows > i32::MAX as usize || l.grid_rows > i32::MAX as usize {
            return Err(invalid(
                "weights",
                "E * N or the routing's slots are 2^31 or more",
            ));
        }
        let wp = w.ptrs(stream);
        let b_map = weight_map(&g.name, wp.b, bits, k, rows, tile.block_n)?;
        let (q_ptr, s_ptr, scale_stride) = match l.codes {
            Some(codes) => codes,
            None => g.quantize_gathered_into_workspace(
                a_ptr,
                l.a_rows,
                k,
                GatherRows {
                    rows: l.route,
                    used: l.route_slots,
                    top_k: l.top_k,
                    out_rows: l.grid_rows,
                    glu: false,
                },
            )?,
        };
        let a_map = encode(
            &g.name,
            "A",
            driver::encode_boxes(
                q_ptr,
                TmaElement::Byte,
                [k, l.grid_rows],
                k,
                [128, tile.block_m as u32],
                BoxLayout::Swizzle128,
            ),
        )?;
        // 16-byte rows of C: the staged boxes' 16-byte stores; otherwise stores from registers.
        let boxed = ldc.is_multiple_of(8) && c_ptr.is_multiple_of(16);
        let params = GemmParams {
            a_map,
            b_map,
            a: q_ptr,
            b: wp.b,
            scales: wp.scales,
            channel: wp.channel,
            bias: bias_ptr,
            c: c_ptr,
            m: l.a_rows as i32,
            n: n as i32,
            k: k as i32,
            lda: k as i32,
            ldc: ldc as i32,
            splits: 1,
            flags: flag(plan.early_trigger, FLAG_EARLY_TRIGGER)
                | flag(boxed, FLAG_TMA_STORE_C)
                | flag(l.gathered_c, FLAG_GATHERED_C),
            a_scales: s_ptr,
            a_scale_stride: scale_stride as i32,
            raster: PERSISTENT_RASTER,
            a_rows: l.grid_rows as i32,
            ..l.params(w)
        };
        let tiles = humming_spec::tiles::output_tiles(&tile, l.grid_rows, n);
        let cfg = LaunchConfig {
            grid_dim: (tiles.min(g.device.sms).max(1) as u32, 1, 1),
            block_dim: (tile.threads(), 1, 1),
            shared_mem_bytes: t.smem,
        };
        // SAFETY: the kernel reads the gathered codes [grid_rows, K] and their scales (written above),
        // the routing's `grid_rows` slot ids, its expert per block and its slots in use, the E experts'
        // K-major weights, f32 scales, channel factors and bias, as uploaded; it writes the rows of C
        // of valid slot ids (below tokens * top_k, C's length checked by the caller), columns < N.
        unsafe { driver::launch(stream, &t.func, cfg, &params, plan.programmatic, 1) }.map_err(
            |e| Error::Driver {
                context: format!("launching {} ({})", g.name, tile),
                source: e,
            },
        )
    }

    /// The launches of a dense GEMM of `m` rows on persistent tiles, after its checks and its plan.
    pub(super) fn launch_persistent(
        &self,
        plan: &LaunchPlan,
        a_in: &ActInput,
        m: usize,
        w: &DeviceWeights,
        (bias_ptr, c_ptr, ldc): (u64, u64, usize),
    ) -> Result<()> {
        let g = self.gemm;
        let stream = &g.stream;
        let (n, k, lda) = (w.n, w.k, a_in.lda);
        let t = &g.tiles[plan.tile_index];
        let tile = plan.tile;
        let wp = w.ptrs(stream);
        let (ws_ptr, tickets_ptr) = g.workspace_ptrs(plan)?;
        let bm = tile.block_m as usize;
        let encode = |what: &str, r| encode(&g.name, what, r);
        let b_map = weight_map(&g.name, wp.b, g.spec.b.bits(), k, n, tile.block_n)?;
        // TMA stores need 16-byte aligned rows of C; otherwise the kernel stores from registers.
        let tma_c = ldc.is_multiple_of(8) && c_ptr.is_multiple_of(16);
        let rows_per_launch = persistent_rows_per_launch(&tile, n, plan.splits);
        let mut row = 0usize;
        while row < m {
            let rows = rows_per_launch.min(m - row);
            let a_rows = a_in.ptr + (row * lda) as u64;
            let c_rows = c_ptr + (row * ldc * 2) as u64;
            let a_map = encode(
                "A",
                driver::encode_boxes(
                    a_rows,
                    TmaElement::Byte,
                    [k, rows],
                    lda,
                    [128, bm as u32],
                    BoxLayout::Swizzle128,
                ),
            )?;
            let c_map = if tma_c {
                let box_rows = bm.min(64) as u32;
                encode(
                    "C",
                    driver::encode_boxes(
                        c_rows,
                        TmaElement::Half,
                        [n, rows],
                        ldc * 2,
                        [64, box_rows],
                        BoxLayout::Swizzle128,
                    ),
                )?
            } else {
                [0; 16]
            };
            let params = GemmParams {
                a_map,
                b_map,
                c_map,
                a: a_rows,
                b: wp.b,
                scales: wp.scales,
                channel: wp.channel,
                bias: bias_ptr,
                c: c_rows,
                workspace: ws_ptr,
                locks: tickets_ptr,
                m: rows as i32,
                n: n as i32,
                k: k as i32,
                lda: lda as i32,
                ldc: ldc as i32,
                splits: plan.splits as i32,
                flags: flag(plan.early_trigger, FLAG_EARLY_TRIGGER) | flag(tma_c, FLAG_TMA_STORE_C),
                experts: 1,
                top_k: 1,
                a_scales: a_in.scales + (row * a_in.scale_stride * 4) as u64,
                a_scale_stride: a_in.scale_stride as i32,
                raster: PERSISTENT_RASTER,
                ..GemmParams::default()
            };
            let tiles = humming_spec::tiles::output_tiles(&tile, rows, n);
            let cfg = LaunchConfig {
                grid_dim: (
                    tiles.saturating_mul(plan.splits).min(g.device.sms).max(1) as u32,
                    1,
                    1,
                ),
                block_dim: (tile.threads(), 1, 1),
                shared_mem_bytes: t.smem,
            };
            // SAFETY: the kernel reads A[rows, lda] codes and their scales, the K-major weights, block
            // scales, channel factors and bias, and writes C[rows, ldc] for columns < N only (the C map's
            // dims are rows x N) and the split-K workspace and tickets sized by the plan; every length
            // and alignment was checked by the caller. `params` outlives the call.
            unsafe { driver::launch(stream, &t.func, cfg, &params, plan.programmatic, 1) }
                .map_err(|e| Error::Driver {
                    context: format!("launching {} ({})", g.name, tile),
                    source: e,
                })?;
            row += rows;
        }
        Ok(())
    }
}
