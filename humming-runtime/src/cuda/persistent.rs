//! Launches of the persistent (`wgmma_ss`) tiles: the three TMA tensor maps (A's codes, the K-major
//! weight codes, C), the tile raster, and a grid of at most one CTA per SM (`cuda/humming/persistent.cuh`).

use super::driver::{self, BoxLayout, TmaElement};
use super::gemm::{ActInput, DeviceWeights, Launcher, flag};
use super::plan::{LaunchPlan, persistent_rows_per_launch};
use crate::error::{Error, Result};
use crate::kernel::Element;
use cudarc::driver::LaunchConfig;
use humming_spec::abi::{FLAG_EARLY_TRIGGER, FLAG_TMA_STORE_C, GemmParams};

/// Row tiles per band of the persistent tile raster (`PersistentTiles` in `scheduler.cuh`): the tiles
/// running at once then span 8 row tiles and about SMs / 8 weight tiles (8 and 16 measured alike).
pub const PERSISTENT_RASTER: i32 = 8;

impl<A: Element, C: Element> Launcher<'_, A, C> {
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
        let encode =
            |what: &str, r: std::result::Result<[u64; 16], cudarc::driver::DriverError>| {
                r.map_err(|e| Error::Driver {
                    context: format!("encoding the TMA tensor map of {what} for {}", g.name),
                    source: e,
                })
            };
        // 8-bit codes: rows of K bytes in the 128-byte swizzle; 4-bit: 64 bytes per 128 codes, plain,
        // as the kernel's loads read them (WeightLayout::KMajor). A box is one stage of codes.
        let bits = g.spec.b.bits();
        let row = humming_spec::layout::k_major_row_bytes(bits, k);
        let stage_bytes = u32::from(humming_spec::tiles::PERSISTENT_BLOCK_K) * bits / 8;
        let layout = if bits == 4 {
            BoxLayout::Plain
        } else {
            BoxLayout::Swizzle128
        };
        let b_map = encode(
            "B",
            driver::encode_boxes(
                wp.b,
                TmaElement::Byte,
                [row, n],
                row,
                [stage_bytes, u32::from(tile.block_n)],
                layout,
            ),
        )?;
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
