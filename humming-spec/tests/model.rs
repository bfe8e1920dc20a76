//! The model's contract: canonical descriptors, stable hashes, validation rules, generated CUDA.

use humming_spec::abi::PRODUCER_REGISTERS;
use humming_spec::codegen::{entry_name, generate_cuda};
use humming_spec::resources::{consumer_registers, min_blocks_per_sm, smem_bytes};
use humming_spec::tiles::tiles_of;
use humming_spec::{DType, KernelSpec, Mma, ScaleGranularity, TileConfig, ZeroPoint};

mod spec_common;
use spec_common::{err, spec};

/// Golden hashes: a change here changes every artifact name and cache key, so it must be deliberate
/// (bump the `humming.gemm.v1` tag of the canonical text when the meaning of a field changes).
#[test]
fn golden_hashes() {
    let cases = [
        (
            "a: f16, b: u4, scale: group(128, f16)",
            "humming.gemm.v1 a=f16 b=u4 c=f16 scale=group128:f16 scale2=none zero_point=none bias=false layout=dense epilogue=none arch=sm_80,sm_90a tiles=default",
        ),
        (
            "a: bf16, b: i8, scale: channel",
            "humming.gemm.v1 a=bf16 b=i8 c=bf16 scale=channel:bf16 scale2=none zero_point=none bias=false layout=dense epilogue=none arch=sm_80,sm_90a tiles=default",
        ),
        (
            "a: f16, b: u4, scale: group(32), zero_point: float, bias: true, epilogue: silu, arch: [sm_90a]",
            "humming.gemm.v1 a=f16 b=u4 c=f16 scale=group32:f16 scale2=none zero_point=float bias=true layout=dense epilogue=silu arch=sm_90a tiles=default",
        ),
    ];
    let want = [
        "7f15f91b7f7147cac5f3ce02594fcb44d69b9ff5cc63e87f0db12e353f438150",
        "3bc516943a570ffcff6a6a60984f3bdcbc29b855cc87666de08fa86408c9b3b1",
        "5c9861a24bb4f2fdcbd019c353da31db07d53643cad54f7090f03bc113cf34dc",
    ];
    for ((fields, canonical), want) in cases.into_iter().zip(want) {
        let s = spec(fields);
        assert_eq!(s.canonical(), canonical);
        assert_eq!(humming_spec::hex(&s.hash()), want, "{fields}");
        assert_eq!(s.hash_hex(), want[..32]);
    }
}

/// Same meaning, same descriptor and hash, whatever the spelling, order or defaults written out.
#[test]
fn canonicalization() {
    let base = spec("a: f16, b: u4, scale: group(128, f16), zero_point: int");
    for same in [
        "b: u4, a: f16, zero_point: int, scale: group(128, f16)",
        "a: e5m10, b: uint4, scale: group(128), zero_point: int",
        "a: f16, c: f16, b: u4, scale: group(128, e5m10), zero_point: int, bias: false",
        "a: f16, b: u4, scale: group(128, f16), zero_point: int, layout: dense, epilogue: none",
        "a: f16, b: u4, scale: group(128, f16), zero_point: int, arch: [sm_90a, sm_80]",
    ] {
        let s = spec(same);
        assert_eq!(s, base, "{same}");
        assert_eq!(s.hash(), base.hash(), "{same}");
    }
    assert_eq!(
        spec("a: bf16, b: int8"),
        spec("a: bf16, b: i8, scale: channel(bf16), c: bf16")
    );
}

/// Different meaning, different hash: every field takes part.
#[test]
fn every_field_changes_the_hash() {
    let base = spec("a: f16, b: u4, scale: group(128), zero_point: int");
    let variants = [
        "a: bf16, b: u4, scale: group(128), zero_point: int",
        "a: f16, b: u5, scale: group(128), zero_point: int",
        "a: f16, b: u4, scale: group(64), zero_point: int",
        "a: f16, b: u4, scale: channel, zero_point: int",
        "a: f16, b: u4, scale: group(128), zero_point: float",
        "a: f16, b: u4, scale: group(128)",
        "a: f16, b: u4, scale: group(128), zero_point: int, bias: true",
        "a: f16, b: u4, scale: group(128), zero_point: int, epilogue: relu",
        "a: f16, b: u4, scale: group(128), zero_point: int, arch: [sm_90a]",
        "a: f16, b: u4, scale: group(128), zero_point: int, tiles: [tile(block = (16, 128, 128))]",
    ];
    let mut seen = vec![base.hash()];
    for v in variants {
        let h = spec(v).hash();
        assert!(!seen.contains(&h), "{v} collides");
        seen.push(h);
    }
}

#[test]
fn model_values() {
    let s = spec("a: bf16, b: i3, scale: group(32)");
    assert_eq!(s.a, DType::BF16);
    assert_eq!(s.b, DType::SInt { bits: 3 });
    assert_eq!(s.c, DType::BF16);
    assert_eq!(s.scale.granularity, ScaleGranularity::Group { size: 32 });
    assert_eq!(s.scale.dtype, DType::BF16);
    assert_eq!(s.zero_point, ZeroPoint::None);
    assert_eq!(s.group_size(), Some(32));
}

/// An omitted `wgmma` warp: one warpgroup along N (block N / 4 channels per warp), or two (block N / 8)
/// where one would keep more than 128 accumulators per thread.
#[test]
fn omitted_wgmma_warp() {
    let warp = |block: &str| {
        let s = spec(&format!(
            "a: f16, b: i4, arch: [sm_90a], tiles: [tile(block = {block}, mma = wgmma)]"
        ));
        let t = s.tiles.as_slice()[0];
        (t.warp_m, t.warp_n, t.warp_k)
    };
    assert_eq!(warp("(128, 128, 64)"), (128, 32, 64));
    assert_eq!(warp("(64, 256, 128)"), (64, 64, 64));
    assert_eq!(warp("(256, 128, 64)"), (256, 16, 64));
    assert_eq!(warp("(128, 256, 64)"), (128, 32, 64));
    // Neither fits: the one-warpgroup warp (128 channels), rejected.
    assert!(
        err("a: f16, b: i4, arch: [sm_90a], tiles: [tile(block = (256, 512, 64), mma = wgmma)]")
            .contains("found (256, 128, 64)")
    );
}

/// Validation rules, by message (the span side is covered by the trybuild UI tests).
#[test]
fn validation_rules() {
    let cases = [
        ("a: f16, b: u9", "outside 1..=8"),
        ("a: f16, b: u0", "outside 1..=8"),
        ("a: f16, b: u4, scale: group(96)", "not a power of two"),
        ("a: f16, b: u4, scale: group(8)", "below the minimum 16"),
        (
            "a: f16, b: e4m3, scale: channel, zero_point: int",
            "needs integer weights",
        ),
        ("a: f16, b: i4, zero_point: int", "unsigned codes"),
        (
            "a: f16, b: u4, scale: group(128, bf16)",
            "activation's dtype",
        ),
        ("a: f16, b: u4, c: bf16", "must equal `a`"),
        ("a: bf16, b: u4, arch: [sm_75]", "sm_80 or newer"),
        ("a: f16, b: u4, foo: 1", "unknown field `foo`"),
        ("a: f16, b: u4, b: u3", "duplicate field `b`"),
        ("b: u4", "missing field `a`"),
        ("a: f16", "missing field `b`"),
        ("a: f16, b: ue8m0", "scale-only"),
        (
            "a: f16, b: u4, tiles: [tile(block = (16, 96, 64))]",
            "multiple of warp N",
        ),
        (
            "a: f16, b: u4, tiles: [tile(block = (16, 192, 64))]",
            "power of two",
        ),
        (
            "a: f16, b: u4, tiles: [tile(block = (16, 128, 16), warp = (16, 64, 16))]",
            "512 bits",
        ),
        (
            "a: f16, b: u4, tiles: [tile(block = (16, 128, 64), stages = 1)]",
            "stages",
        ),
        (
            "a: i4, b: i4, c: bf16, scale: channel(f32), arch: [sm_90a]",
            "not generated yet",
        ),
        (
            "a: e4m3, b: i4, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]",
            "not generated yet",
        ),
        (
            "a: i8, b: i8, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]",
            "W8A8 FP8 only",
        ),
        (
            "a: e4m3, b: e4m3, c: bf16, scale: channel(f32)",
            "set `arch: [sm_89, sm_90a]`",
        ),
        (
            "a: e4m3, b: e4m3, c: bf16, scale: block(128, 32, f32), arch: [sm_90a]",
            "a block K extent of 32",
        ),
        (
            "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [tile(block = (128, 128, 128), stages = 4, mma = wgmma)]",
            "two accumulator sets",
        ),
        (
            "a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [tile(block = (64, 128, 128), stages = 4, mma = wgmma)]",
            "not generated yet",
        ),
        (
            "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [tile(block = (128, 128, 128), stages = 4, mma = wgmma)]",
            "two accumulator sets",
        ),
        (
            "a: i8, b: u4, c: f16, scale: group(128, f16), tiles: [tile(block = (64, 128, 128), warp = (32, 64, 64))]",
            "M = 8 or 16",
        ),
        (
            "a: e5m2, b: u4, c: bf16, scale: channel(f32), arch: [sm_90a]",
            "for unsigned codes",
        ),
        (
            "a: f16, b: u4, layout: moe_indexed, arch: [sm_90a], tiles: [tile(block = (64, 128, 128), stages = 4, mma = wgmma)]",
            "no producer warpgroup",
        ),
        (
            "a: f16, b: u4, epilogue: silu_glu, arch: [sm_90a], tiles: [tile(block = (64, 128, 128), stages = 4, mma = wgmma)]",
            "pairs channels",
        ),
        (
            "a: f16, b: u4, bias: true, epilogue: silu_glu",
            "not generated yet",
        ),
        // wgmma warps of 16 channels reach 256 rows; 32 channels stop at 128 (128 accumulators).
        (
            "a: f16, b: u4, arch: [sm_90a], tiles: [tile(block = (256, 256, 64), warp = (256, 32, 64), mma = wgmma)]",
            "at most 128 with warp N = 32",
        ),
        (
            "a: f16, b: u4, arch: [sm_90a], tiles: [tile(block = (256, 64, 64), warp = (256, 8, 64), mma = wgmma)]",
            "64, 32 or 16 channels",
        ),
        // ctas_per_sm on tiles that fail other rules: their errors, no overflow panic.
        (
            "a: f16, b: u4, arch: [sm_90a], tiles: [tile(block = (4096, 4096, 4096), warp = (4096, 64, 64), mma = wgmma, ctas_per_sm = 2)]",
            "wgmma",
        ),
        (
            "a: f16, b: u4, tiles: [tile(block = (65535, 65535, 65535), stages = 255, ctas_per_sm = 2)]",
            "multiple of warp N",
        ),
        // The smallest multiprocessor of the targets counts: two CTAs of ~75 KiB fit sm_90 and
        // sm_80 (164 KiB), not sm_86 (100 KiB).
        (
            "a: f16, b: u4, scale: group(128), arch: [sm_86], tiles: [tile(block = (16, 128, 256), warp = (16, 64, 64), stages = 3, ctas_per_sm = 2)]",
            "102400 bytes",
        ),
        // The 8-row tile of 8 warps: three CTAs per SM leave 85 registers (it needs 80), four 64.
        (
            "a: f16, b: u4, scale: group(128), arch: [sm_90a], tiles: [tile(block = (8, 128, 256), warp = (8, 64, 64), stages = 2, ctas_per_sm = 4)]",
            "leaves 64 registers per thread (256 threads per CTA); this tile needs at least 80",
        ),
        // Three CTAs of ~62 KiB fit sm_90's 228 KiB, not sm_80's 164 KiB.
        (
            "a: f16, b: u4, scale: group(128), arch: [sm_80, sm_90a], tiles: [tile(block = (8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 3)]",
            "167936 bytes",
        ),
    ];
    let three = spec(
        "a: f16, b: u4, scale: group(128), arch: [sm_90a], tiles: [tile(block = (8, 128, 256), warp = (8, 64, 64), stages = 3, ctas_per_sm = 3)]",
    );
    assert_eq!(tiles_of(&three)[0].ctas_per_sm, 3);
    for (fields, needle) in cases {
        let e = err(fields);
        assert!(
            e.contains(needle),
            "{fields}: `{e}` does not mention `{needle}`"
        );
    }
}

/// Block-scaled W8A8 FP8 takes activation groups of the block's K extent and promotes; on sm_90a its
/// default tiles are the persistent catalogue, and so are W4A8's (group scales, promoted per stage,
/// without activation groups); W4A8's register-operand `wgmma` tiles, where declared, keep both
/// accumulator sets within the registers. Per-row kernels have no activation groups.
#[test]
fn activation_groups_of_block_scales() {
    use humming_spec::layout::act_scale_group;
    use humming_spec::tiles::{
        act8_wgmma_promotes, act8_wgmma_tile_fits, act8_wgmma_tiles, persistent_tiles,
    };
    let block = spec("a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]");
    assert_eq!(act_scale_group(&block), 128);
    assert!(act8_wgmma_promotes(&block));
    let of = |s: &KernelSpec, mma: Mma| -> Vec<TileConfig> {
        tiles_of(s).into_iter().filter(|t| t.mma == mma).collect()
    };
    assert_eq!(of(&block, Mma::WgmmaSs), persistent_tiles(&block));
    assert!(of(&block, Mma::Wgmma).is_empty());
    for fields in [
        "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
        "a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
    ] {
        let w4a8 = spec(fields);
        assert_eq!(act_scale_group(&w4a8), 0, "{fields}");
        assert_eq!(of(&w4a8, Mma::WgmmaSs), persistent_tiles(&w4a8), "{fields}");
        assert!(of(&w4a8, Mma::Wgmma).is_empty(), "{fields}");
    }
    // Both accumulator sets of W4A8's promoted persistent tiles fit the rule's 128 registers.
    let w4a8 = spec("a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]");
    for t in persistent_tiles(&w4a8) {
        assert!(
            humming_spec::tiles::persistent_accumulators(&t, true) <= 128,
            "{t}"
        );
    }
    assert!(act8_wgmma_tile_fits(&w4a8, &act8_wgmma_tiles(&w4a8)[0]));
    for per_row in [
        "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_90a]",
        "a: f16, b: e4m3, scale: block(128, 128, f32)",
    ] {
        assert_eq!(act_scale_group(&spec(per_row)), 0, "{per_row}");
    }
}

/// The default tile compiled for two CTAs per SM (the 16-row `mma.sync` tile) is left out where two
/// CTAs' shared memory does not fit (8-bit weights; float offsets with sm_80's 164 KiB), and kept for
/// 4-bit weights on sm_80 + sm_90a.
#[test]
fn default_two_cta_tiles_only_where_they_fit() {
    let two = |fields: &str| -> Vec<(u16, Mma)> {
        tiles_of(&spec(fields))
            .iter()
            .filter(|t| t.ctas_per_sm == 2)
            .map(|t| (t.block_m, t.mma))
            .collect()
    };
    assert_eq!(two("a: f16, b: u4, scale: group(128)"), [(16, Mma::Sync)]);
    assert_eq!(
        two("a: f16, b: u4, scale: group(128), arch: [sm_80]"),
        [(16, Mma::Sync)]
    );
    assert_eq!(
        two("a: f16, b: u4, scale: group(32), zero_point: float"),
        []
    );
    assert_eq!(two("a: f16, b: u8, scale: group(32)"), []);
}

/// Producer warpgroups: every default `wgmma` tile of W4A16 g128 but the ones declared for two CTAs
/// per SM has one (128 more threads); the compute warps' budget is what the launch gives the CTA minus
/// the producer's PRODUCER_REGISTERS per thread (a pool `setmaxnreg.inc` must find: more would hang the
/// kernel), in multiples of 8 and at least what the tile needs; `mma.sync` tiles have none.
#[test]
fn producer_warpgroup_registers() {
    let s = spec("a: f16, b: i4, scale: group(128)");
    let got: Vec<(String, u32, u32, u32)> = tiles_of(&s)
        .iter()
        .map(|t| {
            (
                t.to_string(),
                t.threads(),
                min_blocks_per_sm(&s, t),
                consumer_registers(&s, t),
            )
        })
        .collect();
    let want = [
        ("b8x128x256w8x64x64s3", 256, 2, 0),
        ("b16x128x256w16x64x64s3", 256, 1, 0),
        ("b16x128x256w16x64x64s3c2", 256, 2, 0),
        ("b32x128x128w32x64x64s4", 128, 3, 0),
        ("b64x128x128w32x64x64s4", 256, 1, 0),
        ("b32x256x128w32x64x64s4wgmma", 384, 1, 240),
        ("b32x128x128w32x32x64s4wgmma", 384, 2, 104),
        ("b64x128x128w64x32x64s4wgmma", 384, 1, 240),
        ("b64x256x128w64x64x64s4wgmma", 384, 1, 240),
        ("b128x128x128w128x32x64s4wgmma", 384, 1, 240),
        ("b128x128x64w128x32x64s4wgmma", 256, 2, 232),
        ("b256x128x64w256x16x64s4wgmma", 384, 1, 240),
    ];
    let want: Vec<(String, u32, u32, u32)> = want
        .iter()
        .map(|&(t, n, c, r)| (t.to_string(), n, c, r))
        .collect();
    assert_eq!(got, want);
    for t in tiles_of(&s).iter().filter(|t| t.producer_warpgroup()) {
        let c = min_blocks_per_sm(&s, t);
        let launch = 65536 / (t.threads() * c) / 8 * 8;
        let r = consumer_registers(&s, t);
        assert_eq!(t.threads(), t.compute_threads() + 128, "{t}");
        assert!(
            t.compute_threads() * r + 128 * PRODUCER_REGISTERS <= t.threads() * launch,
            "{t}: the compute warps' {r} registers exceed the pool"
        );
        assert!(
            r.is_multiple_of(8) && r >= humming_spec::resources::min_registers(t),
            "{t}: {r}"
        );
    }
    // Declared for two CTAs per SM: no producer warpgroup.
    let two = spec(
        "a: f16, b: i4, scale: group(128), arch: [sm_90a], tiles: [tile(block = (64, 128, 128), warp = (64, 32, 64), stages = 4, mma = wgmma, ctas_per_sm = 2)]",
    );
    let t = tiles_of(&two)[0];
    assert!(!t.producer_warpgroup());
    assert_eq!((t.threads(), consumer_registers(&two, &t)), (256, 0));
    // 16 compute warps: none either (the warpgroup would leave them 112 registers instead of 128),
    // so one CTA per SM still passes the register rule.
    let wide = spec(
        "a: f16, b: i4, scale: group(128), arch: [sm_90a], tiles: [tile(block = (64, 256, 128), warp = (64, 32, 64), stages = 4, mma = wgmma, ctas_per_sm = 1)]",
    );
    let t = tiles_of(&wide)[0];
    assert!(!t.producer_warpgroup());
    assert_eq!((t.threads(), consumer_registers(&wide, &t)), (512, 0));
}

/// Every default tile a kernel is compiled with, declared explicitly in `tiles: [...]` for the same
/// format, passes the declaration rules (the GPU tests declare them one at a time): the defaults
/// keep no tile a user could not write.
#[test]
fn default_tiles_pass_the_declaration_rules() {
    let formats = [
        "a: f16, b: u4, scale: group(128)",
        "a: f16, b: u4, scale: group(128), zero_point: int",
        "a: bf16, b: u4, scale: group(32), zero_point: float",
        "a: f16, b: i4, scale: channel, bias: true",
        "a: bf16, b: u3, scale: group(64), zero_point: float",
        "a: f16, b: u2, scale: channel, zero_point: int",
        "a: f16, b: u8, scale: group(32)",
        "a: bf16, b: u1, scale: group(128)",
        "a: f16, b: i4, scale: group(128), layout: moe_indexed",
        "a: bf16, b: u4, scale: group(128), zero_point: int, layout: moe_grouped_contiguous",
        "a: f16, b: e2m1, scale: group(32, ue8m0), layout: moe_grouped_masked",
    ];
    for format in formats {
        for archs in [", arch: [sm_90a]", ", arch: [sm_80, sm_90a]", ""] {
            for t in tiles_of(&spec(&format!("{format}{archs}"))) {
                let mut tile = format!(
                    "tile(block = ({}, {}, {}), warp = ({}, {}, {}), stages = {}",
                    t.block_m, t.block_n, t.block_k, t.warp_m, t.warp_n, t.warp_k, t.stages
                );
                if t.mma == Mma::Wgmma {
                    tile.push_str(", mma = wgmma");
                }
                if t.ctas_per_sm != 0 {
                    tile.push_str(&format!(", ctas_per_sm = {}", t.ctas_per_sm));
                }
                // A kernel whose only tile is wgmma targets sm_90a alone (a rule of gemm!).
                let arch = if t.mma == Mma::Wgmma {
                    ", arch: [sm_90a]"
                } else {
                    archs
                };
                let declared = spec(&format!("{format}{arch}, tiles: [{tile})]"));
                assert_eq!(tiles_of(&declared), [t], "{format}{arch}");
            }
        }
    }
}

/// Snapshot of the generated CUDA: the source must stay a readable, thin instantiation. Update
/// deliberately with `HUMMING_UPDATE_SNAPSHOTS=1 cargo test -p humming-spec --test model`.
#[test]
fn generated_cuda_snapshots() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let update = std::env::var("HUMMING_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1");
    for (name, fields) in [
        (
            "w4a16_g128_int_zp_bias",
            "a: f16, b: u4, scale: group(128), zero_point: int, bias: true",
        ),
        ("w8a16_bf16_channel", "a: bf16, b: i8, scale: channel"),
        (
            "w3a16_g32_float_offset_silu_tile",
            "a: f16, b: u3, scale: group(32), zero_point: float, epilogue: silu, arch: [sm_90a], tiles: [tile(block = (32, 128, 64), warp = (32, 64, 64), stages = 3)]",
        ),
        (
            "nvfp4_f16",
            "a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)",
        ),
        (
            "fp8_block_bf16",
            "a: bf16, b: e4m3, scale: block(128, 128, f32)",
        ),
        (
            "w4a8_e4m3_g128",
            "a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a]",
        ),
        (
            "w8a8_int8_channel",
            "a: i8, b: i8, c: bf16, scale: channel(f32), arch: [sm_80]",
        ),
        (
            "w4a8_int8_moe_glu",
            "a: i8, b: u4, c: bf16, scale: group(64, bf16), zero_point: int, epilogue: silu_glu, layout: moe_indexed, arch: [sm_90a]",
        ),
        (
            "w8a8_fp8_block",
            "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]",
        ),
        (
            "w8a8_fp8_block_persistent",
            "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss), tile(block = (128, 128, 128), stages = 5, mma = wgmma_ss)]",
        ),
    ] {
        let s = spec(fields);
        let cuda = generate_cuda(&s);
        for (i, t) in tiles_of(&s).iter().enumerate() {
            assert!(
                cuda.contains(&entry_name(&s, i)),
                "{name}: entry {i} missing"
            );
            assert!(
                cuda.contains(&format!("kSmemBytes == {}u", smem_bytes(&s, t))),
                "{name}: smem assert"
            );
        }
        let path = dir.join(format!("{name}.cu"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &cuda).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
            panic!(
                "{} is missing; run with HUMMING_UPDATE_SNAPSHOTS=1",
                path.display()
            )
        });
        assert_eq!(
            cuda,
            want,
            "{name}: generated CUDA differs from {}",
            path.display()
        );
    }
}

/// Rules of the model for forms the generator does not emit yet (the macro reports "not generated
/// yet" for them first), checked on specs built directly.
#[test]
fn model_rules_for_model_only_forms() {
    use humming_spec::validate::{Errors, SpecSpans, check_model};
    use humming_spec::{ArchSet, Epilogue, Layout, Scale, TileList};
    let base = KernelSpec {
        a: DType::SInt { bits: 8 },
        b: DType::UInt { bits: 4 },
        c: DType::F16,
        scale: Scale {
            dtype: DType::F32,
            granularity: ScaleGranularity::Channel,
        },
        scale2: None,
        zero_point: ZeroPoint::None,
        bias: false,
        layout: Layout::Dense,
        epilogue: Epilogue::None,
        archs: ArchSet::DEFAULT,
        tiles: TileList::EMPTY,
    };
    let check = |s: KernelSpec| -> String {
        let mut errs = Errors::default();
        check_model(
            &s,
            &SpecSpans::all(proc_macro2::Span::call_site()),
            &mut errs,
        );
        match errs.finish() {
            Ok(()) => String::new(),
            Err(e) => e.to_string(),
        }
    };
    assert_eq!(
        check(base),
        "",
        "W4A8 int with a channel f32 scale is a valid model form"
    );
    let i4 = KernelSpec {
        a: DType::SInt { bits: 4 },
        b: DType::UInt { bits: 8 },
        ..base
    };
    assert!(check(i4).contains("exceeds the activation width"));
    let zp = KernelSpec {
        zero_point: ZeroPoint::FloatOffset,
        ..base
    };
    assert!(check(zp).contains("needs f16 or bf16 activations"));
    let zp8 = KernelSpec {
        b: DType::UInt { bits: 8 },
        zero_point: ZeroPoint::Integer,
        ..base
    };
    assert!(check(zp8).contains("narrower than 8 bits"));
    let fp8 = KernelSpec {
        a: DType::E4M3,
        b: DType::E2M1,
        c: DType::BF16,
        ..base
    };
    assert!(check(fp8).contains("sm_89 or newer"), "{}", check(fp8));
    let e5m2 = KernelSpec {
        a: DType::E5M2,
        b: DType::E2M1,
        c: DType::F16,
        archs: ArchSet(0),
        ..base
    };
    assert!(check(e5m2).contains("bf16 output"));
    let block = KernelSpec {
        a: DType::E4M3,
        b: DType::E4M3,
        c: DType::BF16,
        scale: Scale {
            dtype: DType::F32,
            granularity: ScaleGranularity::Block { n: 128, k: 128 },
        },
        archs: ArchSet(0),
        ..base
    };
    assert_eq!(
        check(block),
        "",
        "DeepSeek-style FP8 block scales are a valid model form"
    );
    let block_zp = KernelSpec {
        b: DType::UInt { bits: 4 },
        zero_point: ZeroPoint::Integer,
        ..block
    };
    assert!(check(block_zp).contains("channel or group scale"));
}

/// Descriptors edited in code (their fields are public) go through the same rules as `gemm!`.
#[test]
fn check_spec_applies_the_declaration_rules() {
    let good = spec(
        "a: f16, b: i4, scale: group(128), tiles: [tile(block = (8, 128, 256), warp = (8, 64, 64), stages = 3)]",
    );
    assert_eq!(humming_spec::check_spec(&good), Ok(()));

    let mut bad_group = good;
    bad_group.scale.granularity = ScaleGranularity::Group { size: 100 };
    let e = humming_spec::check_spec(&bad_group).unwrap_err();
    let humming_spec::SpecError::Rules(rules) = &e else {
        panic!("expected a rule error, got {e:?}");
    };
    assert_eq!(rules.len(), 1, "{e}");
    assert!(rules[0].contains("100"), "{e}");

    let mut bad_warp = good;
    bad_warp.tiles.items[0].warp_m = 24;
    bad_warp.tiles.items[0].block_m = 24;
    let e = humming_spec::check_spec(&bad_warp).unwrap_err().to_string();
    assert!(e.contains("warp M in 8, 16, 32, 48, 64; found 24"), "{e}");

    let mut bad_stages = good;
    bad_stages.tiles.items[0].stages = 9;
    let e = humming_spec::check_spec(&bad_stages)
        .unwrap_err()
        .to_string();
    assert!(e.contains("stages"), "{e}");
}

/// Atomic split-K (`resources::atomic_split_k`, the CUDA side's `kAtomicC`): exactly the staged
/// `wgmma` tiles and the 8-row `mma.sync` tiles whose f32 tile fits, of kernels with f16 C, no bias
/// and no epilogue; never an `mma.sync` tile of more rows.
#[test]
fn atomic_split_k_only_on_staged_wgmma_and_8_row_tiles() {
    use humming_spec::resources::{atomic_split_k, staged_epilogue};
    let w4a16 = spec("a: f16, b: u4, scale: group(128), arch: [sm_90a]");
    let tiles = tiles_of(&w4a16);
    assert!(tiles.iter().any(|t| t.mma == Mma::Sync && t.block_m == 8));
    assert!(tiles.iter().any(|t| t.mma == Mma::Sync && t.block_m > 8));
    assert!(tiles.iter().any(|t| t.mma == Mma::Wgmma));
    for t in &tiles {
        let expected = if t.mma == Mma::Wgmma {
            staged_epilogue(&w4a16, t)
        } else {
            t.block_m == 8
        };
        assert_eq!(atomic_split_k(&w4a16, t), expected, "{t}");
    }
    assert!(tiles.iter().any(|t| atomic_split_k(&w4a16, t)));
    // An 8-row tile whose f32 tile (8 x (256 + 4) floats) does not fit its shared memory: no atomics
    // (the CUDA side's kAtomic8 asks the same; the generated source's static_assert compares them).
    let small = spec(
        "a: f16, b: u1, scale: channel, tiles: [tile(block = (8, 256, 64), warp = (8, 64, 64), stages = 2, mma = sync)]",
    );
    let t = &tiles_of(&small)[0];
    assert!(
        humming_spec::resources::smem_bytes(&small, t) < 8 * 260 * 4,
        "{t}"
    );
    assert!(!atomic_split_k(&small, t), "{t}");
    let roomy = spec(
        "a: f16, b: u4, scale: channel, tiles: [tile(block = (8, 256, 64), warp = (8, 64, 64), stages = 3, mma = sync)]",
    );
    assert!(atomic_split_k(&roomy, &tiles_of(&roomy)[0]));
    for other in [
        "a: bf16, b: u4, scale: group(128), arch: [sm_90a]",
        "a: f16, b: u4, scale: group(128), bias: true, arch: [sm_90a]",
        "a: f16, b: u4, scale: group(128), epilogue: silu, arch: [sm_90a]",
    ] {
        let s = spec(other);
        assert!(
            tiles_of(&s).iter().all(|t| !atomic_split_k(&s, t)),
            "{other}"
        );
    }
}

#[test]
fn float4_sign_bits_place_every_sign_once() {
    use humming_spec::layout::float4_sign_bits;
    // f16, e2m1: fields move by 9, 6, 3, 0; slots 2 and 3 keep their signs where those shifts land.
    assert_eq!(
        float4_sign_bits(DType::F16, DType::E2M1),
        Some([13, 14, 12, 15])
    );
    assert_eq!(
        float4_sign_bits(DType::BF16, DType::E2M1),
        Some([13, 12, 15, 14])
    );
    for a in [DType::F16, DType::BF16] {
        for (exp, man) in [(1, 2), (2, 1), (3, 0)] {
            let bits = float4_sign_bits(a, DType::Float { exp, man }).unwrap();
            let mut sorted = bits;
            sorted.sort_unstable();
            assert_eq!(sorted, [12, 13, 14, 15], "{a} e{exp}m{man}: {bits:?}");
        }
        assert_eq!(float4_sign_bits(a, DType::E4M3), None);
        assert_eq!(float4_sign_bits(a, DType::Float { exp: 0, man: 3 }), None);
        assert_eq!(float4_sign_bits(a, DType::SInt { bits: 4 }), None);
    }
}

/// The MoE default tiles of a kernel for sm_80 and sm_90a: every one fits the smaller SM where it
/// runs (none is dropped), and the block Ms the routing chooses from are all there.
#[test]
fn moe_default_tiles_all_fit() {
    let sp = spec("a: f16, b: i4, scale: group(128), layout: moe_indexed");
    let got = tiles_of(&sp);
    assert_eq!(got, humming_spec::tiles::moe_default_tiles(sp.archs));
    let mut bms: Vec<u16> = got.iter().map(|t| t.block_m).collect();
    bms.sort_unstable();
    bms.dedup();
    assert_eq!(bms, [8, 16, 32, 64]);
}

/// The lowered spec holds the derived facts the generator and the packer read.
#[test]
fn lowered_facts() {
    let l = spec("a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_90a]").lower();
    assert!(l.act8 && l.scale_on_b && l.normalized_scales && l.channel_factor);
    assert_eq!(
        (l.a_bytes, l.b_scale_group, l.act_scale_group, l.block_n),
        (1, 128, 128, 128)
    );
    assert_eq!(l.grid_dtype, DType::BF16);
    assert_eq!(l.tiles, tiles_of(&l.spec));
    let w = spec("a: f16, b: e2m1, scale: group(32, ue8m0)").lower();
    assert!(!w.act8 && w.scale_on_b && w.float4_sign_bits.is_some());
    assert_eq!(
        (w.a_bytes, w.b_scale_group, w.act_scale_group, w.block_n),
        (2, 32, 0, 0)
    );
    assert_eq!((w.float_shift, w.carried_shift), (14, 14));
    let c = spec("a: bf16, b: i8, scale: channel").lower();
    assert!(!c.scale_on_b && c.channel_factor && c.float4_sign_bits.is_none());
}
