//! Meaning of a declaration: from the span-carrying tree to a [`KernelSpec`], with every rule of the
//! format matrix checked and each error pointing at the offending token.
//!
//! The rules follow the Humming reference design (dtype compatibility, scale and zero-point rules,
//! tile-shape rules; see `ARCHITECTURE.md`). Two levels are checked:
//! - the **model**: is this a meaningful quantized GEMM at all ([`check_model`]);
//! - the **generator**: can this version of the code generator emit a kernel for it
//!   ([`check_generator`]); e.g. 4-bit activations are valid in the model but not generated yet.

use crate::dtype::DType;
use crate::model::*;
use crate::parse::Declaration;
use proc_macro2::Span;

mod interpret;
mod model_rules;
mod tile_rules;

use interpret::activation_of;
pub use interpret::interpret;
use tile_rules::{check_persistent_tile, check_tile_occupancy, check_tile_smem, check_wgmma_tile};

/// Collects errors so that all of them are reported at once (the serde `Ctxt` habit).
#[derive(Default)]
pub struct Errors {
    list: Vec<syn::Error>,
}

impl Errors {
    /// Records an error at `span`.
    pub fn push(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.list.push(syn::Error::new(span, msg));
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Number of errors recorded so far.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// All errors combined into one, or `Ok`.
    pub fn finish(self) -> syn::Result<()> {
        let mut it = self.list.into_iter();
        match it.next() {
            None => Ok(()),
            Some(mut first) => {
                for e in it {
                    first.combine(e);
                }
                Err(first)
            }
        }
    }
}

/// Where each part of a spec came from, for error spans. Parts not written by the user point at the
/// kernel's name.
#[derive(Clone, Debug)]
pub struct SpecSpans {
    /// The kernel name.
    pub name: Span,
    /// `a` value.
    pub a: Span,
    /// `b` value.
    pub b: Span,
    /// `c` value.
    pub c: Span,
    /// Scale granularity token (`group`, `channel`, ...).
    pub scale: Span,
    /// Scale dtype token.
    pub scale_dtype: Span,
    /// Group size literal (a block scale's K extent).
    pub group: Span,
    /// A block scale's N extent literal.
    pub block_n: Span,
    /// Secondary scale.
    pub scale2: Span,
    /// Secondary scale dtype token.
    pub scale2_dtype: Span,
    /// Zero point.
    pub zero_point: Span,
    /// Layout.
    pub layout: Span,
    /// `bias` value.
    pub bias: Span,
    /// Epilogue.
    pub epilogue: Span,
    /// Each arch token.
    pub archs: Vec<(Arch, Span)>,
    /// Each tile.
    pub tiles: Vec<TileSpans>,
}

/// Where the parts of one tile configuration came from. Parts not written point at the `tile` name.
#[derive(Clone, Copy, Debug)]
pub struct TileSpans {
    /// The `tile` name, for errors about the tile as a whole.
    pub tile: Span,
    /// The extents of `block = (M, N, K)`.
    pub block: [Span; 3],
    /// The extents of `warp = (M, N, K)`.
    pub warp: [Span; 3],
    /// The `stages` value.
    pub stages: Span,
    /// The `mma` value (the `tile` name when not written).
    pub mma: Span,
    /// The `ctas_per_sm` value (the `tile` name when not written).
    pub ctas: Span,
}

impl SpecSpans {
    /// Every span at `s` (for specs built without source).
    pub fn all(s: Span) -> SpecSpans {
        SpecSpans {
            name: s,
            a: s,
            b: s,
            c: s,
            scale: s,
            scale_dtype: s,
            group: s,
            block_n: s,
            scale2: s,
            scale2_dtype: s,
            zero_point: s,
            layout: s,
            bias: s,
            epilogue: s,
            archs: Vec::new(),
            tiles: Vec::new(),
        }
    }
}

/// Turns a parsed declaration into a spec, checking the model and the generator's rules.
/// Returns every error found, combined.
pub fn validate(decl: &Declaration) -> syn::Result<KernelSpec> {
    let mut errs = Errors::default();
    // An activation type of the model that this generator cannot emit yet is said first and alone:
    // fixing the other fields would not make the declaration buildable.
    if let Some((a, span)) = activation_of(decl)
        && !a.is_16bit_float()
        && !crate::layout::is_8bit_activation(a)
        && is_model_activation(a)
    {
        return Err(syn::Error::new(
            span,
            format!(
                "kernels for `{a}` activations are not generated yet (this version generates f16, bf16, e4m3, e5m2 and i8 activations)"
            ),
        ));
    }
    let (spec, spans) = interpret(decl, &mut errs);
    if let Some(spec) = spec {
        if errs.is_empty() {
            check_model(&spec, &spans, &mut errs);
        }
        if errs.is_empty() {
            check_generator(&spec, &spans, &mut errs);
        }
        errs.finish()?;
        return Ok(spec);
    }
    errs.finish()?;
    Err(syn::Error::new(
        decl.name.span(),
        "invalid kernel declaration",
    ))
}

/// The activation (A) dtypes of the model: f16, bf16, i8, i4, e4m3, e5m2, e2m1.
pub fn is_model_activation(a: DType) -> bool {
    matches!(a, DType::F16 | DType::BF16 | DType::SInt { bits: 8 | 4 })
        || a == DType::E4M3
        || a == DType::E5M2
        || a == DType::E2M1
}

/// Minimum arch an activation dtype needs (tensor-core support for the MMA operand type).
pub fn min_arch_for(a: DType) -> Option<Arch> {
    match a {
        DType::F16 | DType::SInt { bits: 8 } => Some(Arch::Sm75),
        DType::BF16 | DType::SInt { bits: 4 } => Some(Arch::Sm80),
        DType::Float { exp: 4, man: 3 } | DType::Float { exp: 5, man: 2 } => Some(Arch::Sm89),
        DType::Float { exp: 2, man: 1 } => Some(Arch::Sm100a),
        _ => None,
    }
}

/// The model's rules: is this a meaningful quantized GEMM? (Independent of what the generator emits.)
/// The rules are [`model_rules::MODEL_RULES`], applied in their order.
pub fn check_model(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    for (_, rule) in model_rules::MODEL_RULES {
        if rule(spec, sp, errs) == model_rules::Flow::Stop {
            return;
        }
    }
}

/// The formats the generator emits for 8-bit activations (`e4m3`, `e5m2`, `i8`): every layout and
/// epilogue; 4-bit integer weights (`u4` with or without a zero point, `i4`), `i8` weights under `i8`,
/// `e4m3` weights under `e4m3`, and float weights `eXmY` of another code under float codes (e.g. MXFP4
/// x e4m3); channel and tensor scales (any dtype, with a secondary scale), group scales of at least 32
/// of C's dtype (any dtype on float weights); a scale per row of A (per token or one static scale). Their tiles are
/// checked with the others' in [`check_generator`].
fn check_formats_8bit(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    let (a, b, c) = (spec.a, spec.b, spec.c);
    let not_yet = |what: String| format!("{what} with `{a}` activations is not generated yet");
    // Float weights under float codes (not in A's own code) are dequantized to C's dtype as under 16-bit
    // activations (layout::act8_on_16bit_mma), with their scales of any dtype.
    let float_on_16bit =
        crate::layout::is_float_weight(b) && crate::layout::act8_on_16bit_mma(spec);
    let weights_ok = match b {
        DType::UInt { bits: 4 } | DType::SInt { bits: 4 } => true,
        DType::SInt { bits: 8 } => a == DType::SInt { bits: 8 },
        _ => (b == a && a.is_float()) || float_on_16bit,
    };
    if !weights_ok {
        errs.push(sp.b, not_yet(format!("`{b}` weights")));
    }
    match spec.scale.granularity {
        ScaleGranularity::Channel | ScaleGranularity::Tensor => {}
        ScaleGranularity::Group { size } => {
            if spec.scale.dtype != c && !float_on_16bit {
                errs.push(
                    sp.scale_dtype,
                    not_yet(format!(
                        "a group scale of `{}` (declare it in C's dtype `{c}`)",
                        spec.scale.dtype
                    )),
                );
            } else if size < 32 {
                errs.push(sp.group, not_yet(format!("a group of {size}")));
            }
        }
        ScaleGranularity::Block { k, .. } => {
            // W8A8 FP8 with 1 x k activation groups (layout::act_scale_group); a slice of a warp
            // (64 deep) lies in one group.
            if !a.is_float() {
                errs.push(
                    sp.scale,
                    not_yet(
                        "a block scale (W8A8 FP8 only: `b` the e4m3 or e5m2 code of `a`)"
                            .to_string(),
                    ),
                );
            } else if b != a {
                errs.push(
                    sp.scale,
                    format!("block scales with `{a}` activations are W8A8 FP8 (`b: {a}`); on `{b}` weights they are not generated yet"),
                );
            } else if k < 64 {
                errs.push(sp.group, not_yet(format!("a block K extent of {k}")));
            }
        }
    }
    if let Some(s2) = spec.scale2
        && matches!(s2.granularity, ScaleGranularity::Group { .. })
    {
        errs.push(sp.scale2, not_yet("a two-level group scale".to_string()));
    }
}

impl TileSpans {
    /// Every span at `s` (for tiles built without source).
    pub fn all(s: Span) -> TileSpans {
        TileSpans {
            tile: s,
            block: [s; 3],
            warp: [s; 3],
            stages: s,
            mma: s,
            ctas: s,
        }
    }
}

/// What this version of the code generator can emit: f16/bf16 activations; integer weights of 1..=8
/// bits and float weights `eXmY` (every one the model admits); every scale kind and dtype the model
/// admits, with a secondary scale; zero points with scales of A's dtype on integer codes; the dense
/// and MoE layouts and the SiLU-GLU epilogues (the latter two on `mma.sync` tiles, the GLU without a
/// bias); sm_80 and newer, tiles of the `mma.sync` kernel (warp tile N = K = 64, warp M 8, 16, 32, 48
/// or 64) and, for sm_90a, of the `wgmma` kernel (see `check_wgmma_tile`).
pub fn check_generator(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    let act8 = crate::layout::is_8bit_activation(spec.a);
    if act8 {
        check_formats_8bit(spec, sp, errs);
    } else if !spec.a.is_16bit_float() {
        errs.push(sp.a, format!("kernels for `{}` activations are not generated yet (this version generates f16, bf16, e4m3, e5m2 and i8 activations)", spec.a));
        return;
    } else {
        check_formats_16bit(spec, sp, errs);
    }
    check_targets_and_tiles(spec, sp, errs, act8);
}

/// The formats the generator emits for 16-bit activations beyond the model's rules: zero points only
/// on integer codes with scales of A's dtype (or K-quants' two-level offsets), no bias with SiLU-GLU.
fn check_formats_16bit(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    let two_level_offset =
        spec.zero_point == ZeroPoint::FloatOffset && spec.scale.dtype.is_integer();
    if spec.zero_point != ZeroPoint::None && !two_level_offset {
        if spec.b.is_float() {
            errs.push(sp.zero_point, format!("a zero point on `{}` (sign-magnitude) weights is not generated yet; use `u{}` codes", spec.b, spec.b.bits()));
        } else if spec.scale.dtype != spec.a {
            errs.push(sp.scale_dtype, format!("a zero point with `{}` scales is not generated yet; use `{}` scales with a zero point, or drop `zero_point`", spec.scale.dtype, spec.a));
        }
    }
    if spec.epilogue.is_glu() && spec.bias {
        errs.push(
            sp.bias,
            format!(
                "`bias: true` with the `{}` epilogue is not generated yet (the gate and the up projection would each need theirs); drop `bias`",
                spec.epilogue.name()
            ),
        );
    }
}

/// The targets and declared tiles every generated kernel shares (8-bit activations: `mma.sync` warps of
/// 8 or 16 rows, and `wgmma` tiles only for `tiles::act8_wgmma_allowed`).
fn check_targets_and_tiles(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors, act8: bool) {
    for (arch, span) in &sp.archs {
        if arch.capability() < 80 {
            errs.push(*span, format!("the generated kernel needs sm_80 or newer (cp.async, bf16 MMA); `{}` is not supported", arch.name()));
        }
    }
    let tiles = spec.tiles.as_slice();
    if !tiles.is_empty()
        && crate::tiles::wgmma_allowed(spec)
        && tiles.iter().all(|t| t.mma != Mma::Sync)
    {
        // Such a kernel has nothing to run anywhere but on sm_90a.
        for arch in spec.archs.iter().filter(|&a| a != Arch::Sm90a) {
            let written = sp.archs.iter().find(|(a, _)| *a == arch);
            let (at, whose) = match written {
                Some((_, s)) => (*s, format!("`{}`", arch.name())),
                None => (sp.name, format!("`{}` (a default target)", arch.name())),
            };
            errs.push(
                at,
                format!(
                    "every tile of this kernel is `mma = wgmma` or `wgmma_ss`, which run on sm_90a only: {whose} would get no usable tile; set `arch: [sm_90a]` or add an mma.sync tile"
                ),
            );
        }
    }
    for (i, t) in tiles.iter().enumerate() {
        let span = sp.tiles.get(i).copied().unwrap_or(TileSpans::all(sp.name));
        let before = errs.len();
        if t.persistent() {
            check_persistent_tile(spec, t, &span, errs);
            continue;
        }
        if act8 && t.mma == Mma::Wgmma && !crate::tiles::act8_wgmma_allowed(spec) {
            errs.push(
                span.mma,
                format!("a `wgmma` tile with `{}` activations is not generated yet but for dense W8A8 FP8 (weights in A's code) under channel or tensor scales and dense W4A8 FP8 (u4 / i4 under e4m3; channel, tensor or group scales of 64 or more); use mma.sync tiles", spec.a),
            );
            continue;
        }
        if act8 && t.mma == Mma::Wgmma && !crate::tiles::act8_wgmma_tile_fits(spec, t) {
            errs.push(
                span.block[0],
                format!(
                    "a W4A8 `wgmma` tile keeps two accumulator sets (each group's sums are promoted): block M / 2 x warp N / 16 must be at most 64; found {} x {}",
                    t.block_m / 2,
                    t.warp_n / 16
                ),
            );
            continue;
        }
        if act8 && t.mma == Mma::Sync && t.warp_m > 16 && !crate::layout::act8_on_16bit_mma(spec) {
            errs.push(
                span.warp[0],
                format!(
                    "`{}` activations with `{}` weights run on mma.sync warp tiles of M = 8 or 16; found M = {}",
                    spec.a,
                    spec.b,
                    t.warp_m
                ),
            );
            continue;
        }
        if t.mma == Mma::Wgmma && !crate::tiles::wgmma_allowed(spec) {
            errs.push(
                span.mma,
                format!(
                    "the `{}` epilogue pairs channels of one thread's accumulators, which `mma = wgmma` tiles do not hold together: use `mma.sync` tiles",
                    spec.epilogue.name()
                ),
            );
            continue;
        }
        if t.mma == Mma::Wgmma && spec.layout.is_moe() && t.producer_warpgroup() {
            errs.push(
                span.ctas,
                format!(
                    "the `{}` layout gathers the rows of A with cp.async, so its wgmma tiles have no producer warpgroup (which issues TMA copies): declare `ctas_per_sm = 2` (or more than 8 warps)",
                    spec.layout.name()
                ),
            );
            continue;
        }
        if t.mma == Mma::Wgmma {
            check_wgmma_tile(spec, t, &span, errs);
            if errs.len() == before {
                check_tile_occupancy(spec, t, &span, errs);
            }
            continue;
        }
        if t.warp_n != 64 || t.warp_k != 64 {
            let at = if t.warp_n != 64 {
                span.warp[1]
            } else {
                span.warp[2]
            };
            errs.push(at, format!("the mma.sync kernel uses warp tiles of N = 64 and K = 64; found N = {}, K = {}", t.warp_n, t.warp_k));
        }
        if !(t.warp_m == 8 || (t.warp_m % 16 == 0 && t.warp_m <= 64)) {
            errs.push(
                span.warp[0],
                format!(
                    "the mma.sync kernel needs warp M in 8, 16, 32, 48, 64; found {}",
                    t.warp_m
                ),
            );
        }
        if t.stages > 6 {
            errs.push(
                span.stages,
                format!(
                    "the mma.sync kernel supports 2 to 6 stages; found {}",
                    t.stages
                ),
            );
        }
        check_tile_smem(crate::resources::smem_bytes(spec, t), &span, errs);
        if errs.len() == before {
            check_tile_occupancy(spec, t, &span, errs);
        }
    }
}
