//! CUDA code generation: a thin, readable instantiation of the reusable headers in `cuda/humming/`.
//!
//! Each kernel becomes one `.cu` file holding one `extern "C"` entry point per tile configuration,
//! named `humming_<hash>_t<i>` (see [`entry_name`]). Everything the kernel needs to know at compile time
//! (dtypes, weight width, zero point kind, group size, bias, epilogue, tile shape) is a template argument;
//! M, N, K and the pointers are run-time [`GemmParams`](../../humming_runtime) fields.

use crate::dtype::DType;
use crate::layout::is_float_weight;
use crate::lowered::Lowered;
use crate::model::*;
use crate::resources::{
    atomic_split_k, consumer_registers, min_blocks_per_sm, smem_bytes, staged_epilogue,
};
use std::fmt::Write;

/// Version of the generator; part of every build cache key.
pub const GENERATOR_VERSION: &str = "humming-codegen-10";

/// The CUDA headers a generated source includes, as `(relative path, contents)`: the reusable
/// components of `cuda/humming/` and `humming/abi.cuh`, generated from [`crate::abi`]. The build helper
/// writes them next to the generated sources; the runtime hands them to NVRTC.
pub fn headers() -> &'static [(&'static str, String)] {
    static ALL: std::sync::LazyLock<Vec<(&'static str, String)>> = std::sync::LazyLock::new(|| {
        std::iter::once(("humming/abi.cuh", crate::abi::header()))
            .chain(HEADERS.iter().map(|&(p, c)| (p, c.to_string())))
            .collect()
    });
    &ALL
}

const HEADERS: &[(&str, &str)] = &[
    (
        "humming/common.cuh",
        include_str!("../../cuda/humming/common.cuh"),
    ),
    (
        "humming/ptx.cuh",
        include_str!("../../cuda/humming/ptx.cuh"),
    ),
    (
        "humming/dequant.cuh",
        include_str!("../../cuda/humming/dequant.cuh"),
    ),
    (
        "humming/mma.cuh",
        include_str!("../../cuda/humming/mma.cuh"),
    ),
    (
        "humming/wgmma.cuh",
        include_str!("../../cuda/humming/wgmma.cuh"),
    ),
    (
        "humming/wgmma8.cuh",
        include_str!("../../cuda/humming/wgmma8.cuh"),
    ),
    (
        "humming/wgmma_ss.cuh",
        include_str!("../../cuda/humming/wgmma_ss.cuh"),
    ),
    (
        "humming/loader.cuh",
        include_str!("../../cuda/humming/loader.cuh"),
    ),
    (
        "humming/operand.cuh",
        include_str!("../../cuda/humming/operand.cuh"),
    ),
    (
        "humming/traits.cuh",
        include_str!("../../cuda/humming/traits.cuh"),
    ),
    (
        "humming/scheduler.cuh",
        include_str!("../../cuda/humming/scheduler.cuh"),
    ),
    (
        "humming/pipeline.cuh",
        include_str!("../../cuda/humming/pipeline.cuh"),
    ),
    (
        "humming/mainloop_sync.cuh",
        include_str!("../../cuda/humming/mainloop_sync.cuh"),
    ),
    (
        "humming/mainloop_sync8.cuh",
        include_str!("../../cuda/humming/mainloop_sync8.cuh"),
    ),
    (
        "humming/act_quant.cuh",
        include_str!("../../cuda/humming/act_quant.cuh"),
    ),
    (
        "humming/mainloop_wgmma.cuh",
        include_str!("../../cuda/humming/mainloop_wgmma.cuh"),
    ),
    (
        "humming/mainloop_wgmma8.cuh",
        include_str!("../../cuda/humming/mainloop_wgmma8.cuh"),
    ),
    (
        "humming/mainloop.cuh",
        include_str!("../../cuda/humming/mainloop.cuh"),
    ),
    (
        "humming/atomic.cuh",
        include_str!("../../cuda/humming/atomic.cuh"),
    ),
    (
        "humming/epilogue.cuh",
        include_str!("../../cuda/humming/epilogue.cuh"),
    ),
    (
        "humming/reduction.cuh",
        include_str!("../../cuda/humming/reduction.cuh"),
    ),
    (
        "humming/rows.cuh",
        include_str!("../../cuda/humming/rows.cuh"),
    ),
    (
        "humming/gemm.cuh",
        include_str!("../../cuda/humming/gemm.cuh"),
    ),
    (
        "humming/persistent.cuh",
        include_str!("../../cuda/humming/persistent.cuh"),
    ),
    (
        "humming/moe_route.cuh",
        include_str!("../../cuda/humming/moe_route.cuh"),
    ),
];

/// The name of the entry point of tile configuration `index`.
pub fn entry_name(spec: &KernelSpec, index: usize) -> String {
    format!("humming_{}_t{index}", spec.hash_hex())
}

/// The name of the input quantization of a kernel with 8-bit activations (`ActQuantParams`, one CTA of
/// `ACT_QUANT_THREADS` per row).
pub fn quant_entry_name(spec: &KernelSpec) -> String {
    format!("humming_{}_quant", spec.hash_hex())
}

/// The name of the routing helper of a `moe_indexed` kernel (`RouteParams`, one CTA of
/// `ROUTE_THREADS`).
pub fn route_entry_name(spec: &KernelSpec) -> String {
    format!("humming_{}_route", spec.hash_hex())
}

/// The name of the combine helper of a `moe_indexed` kernel (`CombineParams`).
pub fn combine_entry_name(spec: &KernelSpec) -> String {
    format!("humming_{}_combine", spec.hash_hex())
}

fn cuda_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "humming::f16",
        DType::BF16 => "humming::bf16",
        _ => "void",
    }
}

fn zp_kind(z: ZeroPoint) -> &'static str {
    match z {
        ZeroPoint::None => "humming::ZeroPointKind::kNone",
        ZeroPoint::Integer => "humming::ZeroPointKind::kInteger",
        ZeroPoint::FloatOffset => "humming::ZeroPointKind::kFloatOffset",
    }
}

fn epilogue_kind(e: Epilogue) -> &'static str {
    match e {
        Epilogue::None => "humming::EpilogueKind::kNone",
        Epilogue::Relu => "humming::EpilogueKind::kRelu",
        Epilogue::Silu => "humming::EpilogueKind::kSilu",
        Epilogue::Gelu => "humming::EpilogueKind::kGelu",
        Epilogue::GeluTanh => "humming::EpilogueKind::kGeluTanh",
        // (Halves and interleaved differ in the packed order only: humming_spec::layout::glu_source.)
        Epilogue::SiluGlu | Epilogue::SiluGluInterleaved => "humming::EpilogueKind::kSiluGlu",
    }
}

/// The row policy of a kernel (`cuda/humming/rows.cuh`).
fn row_policy(layout: Layout) -> &'static str {
    match layout {
        Layout::Dense => "humming::DenseRows",
        Layout::MoeIndexed => "humming::IndexedRows",
        Layout::MoeGroupedContiguous => "humming::GroupedContiguousRows",
        Layout::MoeGroupedMasked => "humming::GroupedMaskedRows",
    }
}

/// The code tag of 8-bit activations (`cuda/humming/common.cuh`).
fn code_tag(a: DType) -> &'static str {
    match a {
        DType::E4M3 => "humming::CodeE4M3",
        DType::E5M2 => "humming::CodeE5M2",
        _ => "humming::CodeS8",
    }
}

/// The activation operand policy of a kernel (`cuda/humming/operand.cuh`): float codes with integer
/// weights take the 16-bit mma.sync main loop on A converted in registers (`Act8Wide`); s8 codes and
/// float weights in A's code take the 8-bit mma (`Act8`).
fn activation_policy(l: &Lowered) -> String {
    let spec = &l.spec;
    if l.act8 {
        let policy = if l.act8_on_16bit_mma {
            "Act8Wide"
        } else {
            "Act8"
        };
        format!(
            "humming::{policy}<{}, {}>",
            cuda_dtype(spec.c),
            code_tag(spec.a)
        )
    } else {
        format!("humming::Act16<{}>", cuda_dtype(spec.a))
    }
}

/// The weight policy of a kernel (`cuda/humming/dequant.cuh`): float codes `eXmY` by moving their bit
/// fields, integer codes (and the `e0mY` sign-magnitude integers, stored as signed codes) by the
/// magic-number path (or, under 8-bit activations, to the activations' code); float codes in the
/// 8-bit activations' own type as they are.
fn weight_policy(l: &Lowered) -> String {
    let spec = &l.spec;
    if l.act8 && spec.b == spec.a && spec.a.is_float() {
        // W8A8 FP8: the codes are the mma's operand as they are.
        return "humming::NativeWeights<Quant>".to_string();
    }
    match spec.b {
        DType::Float { exp, man } if is_float_weight(spec.b) => {
            match l.float4_sign_bits {
                // The sign bit of each slot, slot j at bits 4j (the placement the packer uses).
                Some(bits) => {
                    let packed = bits
                        .iter()
                        .enumerate()
                        .fold(0u32, |acc, (j, b)| acc | b << (4 * j));
                    format!("humming::FloatWeights<Quant, {exp}, {man}, {packed:#06x}u>")
                }
                None => format!("humming::FloatWeights<Quant, {exp}, {man}>"),
            }
        }
        _ => "humming::IntWeights<Quant>".to_string(),
    }
}

/// The entry point of persistent tile `i` (`cuda/humming/persistent.cuh`), with `static_assert`s that
/// the CUDA side computes the resource model's shared memory and threads.
fn persistent_entry(s: &mut String, spec: &KernelSpec, t: &TileConfig, i: usize) {
    let smem = smem_bytes(spec, t);
    let _ = writeln!(
        s,
        "// tile {i}: {t}, {} threads, {smem} bytes of shared memory (persistent)",
        t.threads()
    );
    let _ = writeln!(
        s,
        "using Tile{i} = humming::Persistent<Quant, humming::PersistentTile<{}, {}, {}, {}>, {}, {}>;",
        t.block_m,
        t.block_n,
        t.warp_n,
        t.stages,
        code_tag(spec.a),
        row_policy(spec.layout)
    );
    let _ = writeln!(
        s,
        "static_assert(Tile{i}::kSmemBytes == {smem}u, \"shared memory disagrees with the Rust resource model\");"
    );
    let _ = writeln!(
        s,
        "static_assert(Tile{i}::kLaunchThreads == {}, \"threads disagree with the Rust resource model\");",
        t.threads()
    );
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__({}, 1)\n{}(const __grid_constant__ humming::GemmParams params) {{\n  Tile{i}::run(params);\n}}",
        t.threads(),
        entry_name(spec, i)
    );
}

/// Generates the `.cu` source of a kernel whose spec passed validation: the format, its activation and
/// weight policies, and one `extern "C"` entry point per tile, each with `static_assert`s that the
/// CUDA side computes the resource model's numbers.
pub fn generate_cuda(spec: &KernelSpec) -> String {
    let l = spec.lower();
    let mut s = String::new();
    let group = l.b_scale_group;
    let _ = writeln!(
        s,
        "// Generated by humming ({GENERATOR_VERSION}). Do not edit: change the gemm! declaration."
    );
    let _ = writeln!(s, "// descriptor: {}", spec.canonical());
    let _ = writeln!(s, "// sha256:     {}", hex(&spec.hash()));
    let _ = writeln!(s, "#include \"humming/gemm.cuh\"");
    let tiles = &l.tiles;
    if tiles.iter().any(TileConfig::persistent) {
        let _ = writeln!(s, "#include \"humming/persistent.cuh\"");
    }
    if l.act8 {
        let _ = writeln!(s, "#include \"humming/act_quant.cuh\"");
    }
    if spec.layout == Layout::MoeIndexed {
        let _ = writeln!(s, "#include \"humming/moe_route.cuh\"");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "namespace {{");
    let _ = writeln!(s, "using Quant = humming::QuantConfig<");
    let _ = writeln!(
        s,
        "    {},  // C and scale element type (A's too, for 16-bit activations)",
        cuda_dtype(l.grid_dtype)
    );
    let _ = writeln!(s, "    {},  // weight bits", spec.b.bits());
    let _ = writeln!(
        s,
        "    {},  // signed weights (stored offset-binary)",
        spec.b.is_signed()
    );
    let _ = writeln!(s, "    {},", zp_kind(spec.zero_point));
    let _ = writeln!(
        s,
        "    {group},  // K extent of a row of the scale grid on B (0: none or per channel)"
    );
    let _ = writeln!(
        s,
        "    {},  // scale applied to B in registers (else to C in the epilogue)",
        l.scale_on_b
    );
    let _ = writeln!(
        s,
        "    {},  // an f32 factor per channel multiplies C in the epilogue",
        l.channel_factor
    );
    let _ = writeln!(s, "    {},  // bias", spec.bias);
    let _ = writeln!(s, "    {},", epilogue_kind(spec.epilogue));
    let _ = writeln!(s, "    {},  // bytes of an element of A", l.a_bytes);
    let _ = writeln!(
        s,
        "    {},  // K extent of a group of activation scales (0: one per row)",
        l.act_scale_group
    );
    let _ = writeln!(
        s,
        "    {}>;  // N extent of a weight block scale (0: none)",
        l.block_n
    );
    let _ = writeln!(
        s,
        "using Act = {};  // the activation operand",
        activation_policy(&l)
    );
    let _ = writeln!(
        s,
        "using Weights = {};  // the weight dequantizer",
        weight_policy(&l)
    );
    if is_float_weight(spec.b) && !l.act8 {
        let _ = writeln!(
            s,
            "static_assert(Weights::kCarried == {}, \"the power of two the scales carry disagrees with humming_spec::layout::carried_shift\");",
            l.carried_shift
        );
    }
    let _ = writeln!(s, "template <class Tl>");
    let _ = writeln!(
        s,
        "using Kernel = humming::Gemm<Quant, Tl, Act, Weights, {}>;",
        row_policy(spec.layout)
    );
    let _ = writeln!(s, "}}  // namespace");
    for (i, t) in tiles.iter().enumerate() {
        let _ = writeln!(s);
        if t.persistent() {
            persistent_entry(&mut s, spec, t, i);
            continue;
        }
        let _ = writeln!(
            s,
            "// tile {i}: {t}, {} threads, {} bytes of shared memory",
            t.threads(),
            smem_bytes(spec, t)
        );
        let _ = writeln!(
            s,
            "using Tile{i} = humming::Tile<{}, {}, {}, {}, {}, {}, {}, {}, {}>;",
            t.block_m,
            t.block_n,
            t.block_k,
            t.warp_m,
            t.warp_n,
            t.warp_k,
            t.stages,
            t.mma == Mma::Wgmma,
            consumer_registers(spec, t)
        );
        // The runtime launches t.threads(); a kernel expecting another count would hang on its
        // mbarriers or in setmaxnreg.
        for (what, cuda, rust) in [
            (
                "shared memory",
                "kSmemBytes",
                format!("{}u", smem_bytes(spec, t)),
            ),
            (
                "staged epilogue",
                "kStaged",
                staged_epilogue(spec, t).to_string(),
            ),
            (
                "atomic split-K",
                "kAtomicC",
                atomic_split_k(spec, t).to_string(),
            ),
            ("threads", "kLaunchThreads", t.threads().to_string()),
        ] {
            let _ = writeln!(
                s,
                "static_assert(Kernel<Tile{i}>::{cuda} == {rust}, \"{what} disagrees with the Rust resource model\");"
            );
        }
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void __launch_bounds__({}, {})",
            t.threads(),
            min_blocks_per_sm(spec, t)
        );
        let _ = writeln!(
            s,
            "{}(const __grid_constant__ humming::GemmParams params) {{",
            entry_name(spec, i)
        );
        let _ = writeln!(s, "  Kernel<Tile{i}>::run(params);");
        let _ = writeln!(s, "}}");
    }
    if l.act8 {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "// The input quantization: 16-bit A to the kernel's codes and row (or group) scales."
        );
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void __launch_bounds__({})\n{}(const __grid_constant__ humming::ActQuantParams params) {{\n  humming::ActQuant<{}, {}>::run(params);\n}}",
            crate::abi::ACT_QUANT_THREADS,
            quant_entry_name(spec),
            cuda_dtype(spec.c),
            code_tag(spec.a)
        );
    }
    if spec.layout == Layout::MoeIndexed {
        let _ = writeln!(s);
        let _ = writeln!(
            s,
            "// The indexed layout's helpers: routing (one CTA) and the sum of each token's rows."
        );
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void __launch_bounds__({})\n{}(const __grid_constant__ humming::RouteParams params) {{\n  humming::moe_route(params);\n}}",
            crate::abi::ROUTE_THREADS,
            route_entry_name(spec)
        );
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void\n{}(const __grid_constant__ humming::CombineParams params) {{\n  humming::moe_combine<{}>(params);\n}}",
            combine_entry_name(spec),
            cuda_dtype(spec.c)
        );
    }
    s
}
