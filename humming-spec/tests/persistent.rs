//! The persistent kernel's tiles (`mma = wgmma_ss`): the catalogue against the declaration rules, the
//! ping-pong form, and the launch choice.

use humming_spec::Mma;
use humming_spec::codegen::{entry_name, generate_cuda};
use humming_spec::resources::{consumer_registers, min_blocks_per_sm, smem_bytes};

mod spec_common;
use spec_common::{err, spec};

const SS_CHANNEL: &str = "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a]";
const SS_BLOCK: &str = "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]";

/// The persistent catalogue: each tile declared alone passes the rules (its omitted warp is two
/// consumer warpgroups), fits a CTA, and its generated entry asserts the Rust model's sizes.
#[test]
fn persistent_tiles_pass_the_declaration_rules() {
    use humming_spec::tiles::{persistent_allowed, persistent_tiles};
    for fields in [
        SS_CHANNEL,
        SS_BLOCK,
        "a: e5m2, b: e5m2, c: bf16, scale: tensor(f32), bias: true, epilogue: relu, arch: [sm_90a]",
        "a: i8, b: i8, c: bf16, scale: channel(f32), arch: [sm_90a]",
        "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
        "a: i8, b: i4, c: bf16, scale: group(128, bf16), arch: [sm_90a]",
        "a: e4m3, b: u4, c: f16, scale: channel(f32), bias: true, arch: [sm_90a]",
        "a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_indexed, arch: [sm_90a]",
        "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), layout: moe_indexed, arch: [sm_90a]",
        "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), layout: moe_indexed, arch: [sm_90a]",
    ] {
        let base = spec(fields);
        assert!(persistent_allowed(&base), "{fields}");
        for t in persistent_tiles(&base) {
            let declared = format!(
                "{fields}, tiles: [tile(block = ({}, {}, {}), stages = {}, mma = wgmma_ss)]",
                t.block_m, t.block_n, t.block_k, t.stages
            );
            let s = spec(&declared);
            assert_eq!(s.tiles.as_slice(), &[t], "{declared}");
            assert_eq!((t.threads(), min_blocks_per_sm(&s, &t)), (384, 1));
            assert_eq!(consumer_registers(&s, &t), 232);
            assert!(smem_bytes(&s, &t) <= humming_spec::resources::MAX_TILE_SMEM_BYTES);
            let cu = generate_cuda(&s);
            assert!(cu.contains("#include \"humming/persistent.cuh\""));
            assert!(cu.contains(&format!(
                "static_assert(Tile0::kSmemBytes == {}u",
                smem_bytes(&s, &t)
            )));
            assert!(cu.contains(&format!("{}(const __grid_constant__", entry_name(&s, 0))));
        }
    }
    for other in [
        "a: f16, b: u4, scale: group(128, f16)",
        "a: e4m3, b: i4, c: f16, scale: group(64, f16), arch: [sm_90a]",
        "a: e5m2, b: i4, c: bf16, scale: group(128, bf16), arch: [sm_90a]",
        "a: i8, b: u4, c: bf16, scale: group(128, bf16), zero_point: int, arch: [sm_90a]",
        "a: e4m3, b: e4m3, c: bf16, scale: block(128, 64, f32), arch: [sm_90a]",
        "a: e4m3, b: i4, c: f16, scale: group(128, f16), layout: moe_grouped_contiguous, arch: [sm_90a]",
        "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), layout: moe_grouped_masked, arch: [sm_90a]",
        "a: e4m3, b: i4, c: f16, scale: group(128, f16), epilogue: silu_glu, layout: moe_indexed, arch: [sm_90a]",
    ] {
        assert!(!persistent_allowed(&spec(other)), "{other}");
    }
    // The refusals' words name the same block K extent as the rule.
    assert!(humming_spec::tiles::PERSISTENT_FORMS.contains(&format!(
        "K extent {}",
        humming_spec::tiles::PERSISTENT_BLOCK_K
    )));
    let s = spec(&format!(
        "{SS_CHANNEL}, tiles: [tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss)]"
    ));
    assert!(
        s.canonical()
            .ends_with("tiles=b16x128x128w16x64x128s8wgmma_ss")
    );
    assert_eq!(s.tiles.as_slice()[0].mma, Mma::WgmmaSs);
}

/// The persistent launch rule: the tile by M, the widest that fills the SMs, and K splits where the
/// output tiles are too few.
/// Ping-pong tiles (warp N = block N): the same two consumer warpgroups and registers as cooperative
/// ones, one block scale slot per stage instead of two, and the rules refuse any other warp N.
#[test]
fn persistent_ping_pong_tiles() {
    for (fields, bm, bn, stages) in [
        (SS_CHANNEL, 128, 128, 6),
        (SS_BLOCK, 128, 64, 7),
        (
            "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
            64,
            128,
            10,
        ),
    ] {
        let declared = format!(
            "{fields}, tiles: [tile(block = ({bm}, {bn}, 128), warp = ({bm}, {bn}, 128), stages = {stages}, mma = wgmma_ss)]"
        );
        let s = spec(&declared);
        let t = s.tiles.as_slice()[0];
        assert!(t.ping_pong(), "{declared}");
        assert_eq!((t.threads(), consumer_registers(&s, &t)), (384, 232));
        assert!(smem_bytes(&s, &t) <= humming_spec::resources::MAX_TILE_SMEM_BYTES);
        assert!(generate_cuda(&s).contains(&format!("PersistentTile<{bm}, {bn}, {bn}, {stages}>")));
        // The same block with the warp left out: cooperative.
        let cooperative = spec(&format!(
            "{fields}, tiles: [tile(block = ({bm}, {}, 128), stages = 3, mma = wgmma_ss)]",
            2 * bn
        ));
        assert!(!cooperative.tiles.as_slice()[0].ping_pong());
    }
    let refused = err(&format!(
        "{SS_CHANNEL}, tiles: [tile(block = (128, 384, 128), warp = (128, 128, 128), stages = 3, mma = wgmma_ss)]"
    ));
    assert!(
        refused.contains("take turns on tiles of their own"),
        "{refused}"
    );
}

#[test]
fn persistent_launch_choice() {
    use humming_spec::tiles::{persistent_tiles, select_persistent};
    for fields in [SS_CHANNEL, SS_BLOCK] {
        let tiles = persistent_tiles(&spec(fields));
        let pick = |m, n, k| {
            let c = select_persistent(&tiles, |t| *t, 132, (m, n, k), 16).expect("a tile");
            let t = tiles[c.index];
            (t.block_m, t.block_n, c.splits)
        };
        // 64 output tiles of 128 channels: two splits; 32: four; 224 fill the SMs.
        assert_eq!(pick(1, 8192, 8192), (16, 128, 2), "{fields}");
        assert_eq!(pick(0, 8192, 8192), (16, 128, 2), "{fields}");
        assert_eq!(pick(16, 4096, 14336), (16, 128, 4), "{fields}");
        assert_eq!(pick(16, 28672, 4096), (16, 128, 1), "{fields}");
        assert_eq!(pick(64, 8192, 8192), (64, 128, 2), "{fields}");
        // A short K caps the splits at one per 4 stages.
        assert_eq!(pick(1, 8192, 512), (16, 128, 1), "{fields}");
        assert_eq!(pick(1, 4096, 1024), (16, 128, 2), "{fields}");
        // More rows: the 128-row tiles.
        assert_eq!(pick(256, 4096, 14336), (128, 128, 2), "{fields}");
    }
    let tiles = persistent_tiles(&spec(SS_CHANNEL));
    let pick = |m, n| {
        let c = select_persistent(&tiles, |t| *t, 132, (m, n, 8192), 16).expect("a tile");
        (tiles[c.index].block_n, c.splits)
    };
    // 128 x 256 where its tiles fill 90% of the SMs, else 128 x 128.
    assert_eq!(pick(256, 8192), (128, 1));
    assert_eq!(pick(1024, 8192), (256, 1));
    assert_eq!(pick(1024, 4096), (256, 1));
    assert_eq!(pick(4096, 28672), (256, 1));
    assert!(
        select_persistent(
            &[] as &[humming_spec::TileConfig],
            |t| *t,
            132,
            (1, 64, 64),
            16
        )
        .is_none()
    );
}
