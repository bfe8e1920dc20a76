//! Meaning of a declaration: from the span-carrying tree to a [`KernelSpec`], with every rule of the
//! format matrix checked and each error pointing at the offending token.
//!
//! The rules follow the Humming reference design (dtype compatibility, scale and zero-point rules,
//! tile-shape rules; see `ARCHITECTURE.md`). Two levels are checked:
//! - the **model**: is this a meaningful quantized GEMM at all ([`check_model`]);
//! - the **generator**: can this version of the code generator emit a kernel for it
//!   ([`check_generator`]); e.g. FP8 activations are valid in the model but not generated yet.

use crate::dtype::DType;
use crate::model::*;
use crate::parse::{Arg, Declaration, Value};
use proc_macro2::Span;

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
            archs: Vec::new(),
            tiles: Vec::new(),
        }
    }
}

const FIELDS: &str = "a, b, c, scale, scale2, zero_point, bias, layout, epilogue, arch, tiles";

/// Turns a parsed declaration into a spec, checking the model and the generator's rules.
/// Returns every error found, combined.
pub fn validate(decl: &Declaration) -> syn::Result<KernelSpec> {
    let mut errs = Errors::default();
    // An activation type of the model that this generator cannot emit yet is said first and alone:
    // fixing the other fields would not make the declaration buildable.
    if let Some((a, span)) = activation_of(decl)
        && !a.is_16bit_float()
        && is_model_activation(a)
    {
        return Err(syn::Error::new(
            span,
            format!(
                "kernels for `{a}` activations are not generated yet (this version generates f16 and bf16 activations)"
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

/// The activation dtype as written, if the `a` field is a readable dtype name.
fn activation_of(decl: &Declaration) -> Option<(DType, Span)> {
    decl.fields
        .iter()
        .find(|f| f.key == "a")
        .and_then(|f| match &f.value {
            Value::Ident(i) => DType::parse(&i.to_string()).map(|d| (d, i.span())),
            _ => None,
        })
}

fn dtype_of(v: &Value, what: &str, errs: &mut Errors) -> Option<(DType, Span)> {
    match v {
        Value::Ident(i) => match DType::parse(&i.to_string()) {
            Some(d) => Some((d, i.span())),
            None => {
                errs.push(
                    i.span(),
                    format!(
                        "unknown {what} dtype `{i}`; expected f16, bf16, f32, uN (N = 1..=8), iN (N = 2..=8), eXmY (e4m3, e5m2, e2m1, ...) or ue8m0"
                    ),
                );
                None
            }
        },
        other => {
            errs.push(
                other.span(),
                format!(
                    "expected a {what} dtype such as `f16` or `u4`, found {}",
                    other.describe()
                ),
            );
            None
        }
    }
}

fn int_of(v: &Value, what: &str, errs: &mut Errors) -> Option<(u32, Span)> {
    match v {
        Value::Int(l) => match l.base10_parse::<u32>() {
            Ok(n) if l.suffix().is_empty() => Some((n, l.span())),
            Ok(_) => {
                errs.push(
                    l.span(),
                    format!("{what} takes a plain integer without a type suffix"),
                );
                None
            }
            Err(_) => {
                errs.push(
                    l.span(),
                    format!("{what} must be an integer between 0 and {}", u32::MAX),
                );
                None
            }
        },
        other => {
            errs.push(
                other.span(),
                format!("{what} must be an integer, found {}", other.describe()),
            );
            None
        }
    }
}

fn ident_of<'a>(
    v: &'a Value,
    what: &str,
    allowed: &str,
    errs: &mut Errors,
) -> Option<&'a syn::Ident> {
    match v {
        Value::Ident(i) => Some(i),
        other => {
            errs.push(
                other.span(),
                format!(
                    "{what} must be one of {allowed}, found {}",
                    other.describe()
                ),
            );
            None
        }
    }
}

fn positional<'a>(args: &'a [Arg], call: &syn::Ident, errs: &mut Errors) -> Vec<&'a Value> {
    let mut out = Vec::new();
    for a in args {
        match a {
            Arg::Positional(v) => out.push(v),
            Arg::Named(n, _) => errs.push(
                n.span(),
                format!("`{call}(..)` takes positional arguments only"),
            ),
        }
    }
    out
}

fn parse_scale(
    v: &Value,
    a: Option<DType>,
    spans: &mut SpecSpans,
    errs: &mut Errors,
) -> Option<Scale> {
    let allowed = "`channel(dtype)`, `group(G, dtype)`, `block(N, K, f32)` or `tensor(f32)`";
    let default_dtype = a.filter(|d| d.is_16bit_float());
    let (call, args) = match v {
        Value::Call(c, args, _) => (c, args.as_slice()),
        Value::Ident(i) => (i, &[][..]),
        other => {
            errs.push(
                other.span(),
                format!("expected a scale: {allowed}, found {}", other.describe()),
            );
            return None;
        }
    };
    spans.scale = call.span();
    spans.scale_dtype = call.span();
    let pos = positional(args, call, errs);
    if pos.len() != args.len() {
        return None;
    }
    let (nints, kind) = match call.to_string().as_str() {
        "channel" => (0, 0),
        "group" => (1, 1),
        "block" => (2, 2),
        "tensor" => (0, 3),
        other => {
            errs.push(
                call.span(),
                format!("unknown scale granularity `{other}`; expected {allowed}"),
            );
            return None;
        }
    };
    if pos.len() < nints || pos.len() > nints + 1 {
        let want = match kind {
            0 => "`channel(f16)` (dtype optional)",
            1 => "`group(128, f16)`: a group size and an optional dtype",
            2 => "`block(128, 128, f32)`: N and K extents and an optional dtype",
            _ => "`tensor(f32)` (dtype optional)",
        };
        errs.push(
            call.span(),
            format!("wrong number of arguments; expected {want}"),
        );
        return None;
    }
    let mut ints = Vec::new();
    for v in &pos[..nints] {
        let (n, s) = int_of(v, "a scale extent", errs)?;
        ints.push((n, s));
    }
    let dtype = if let Some(v) = pos.get(nints) {
        let (d, s) = dtype_of(v, "scale", errs)?;
        spans.scale_dtype = s;
        d
    } else if kind >= 2 {
        DType::F32
    } else if let Some(d) = default_dtype {
        d
    } else {
        errs.push(
            call.span(),
            "give the scale dtype explicitly, e.g. `channel(f32)`, when `a` is not f16 or bf16",
        );
        return None;
    };
    let granularity = match kind {
        0 => ScaleGranularity::Channel,
        1 => {
            spans.group = ints[0].1;
            ScaleGranularity::Group { size: ints[0].0 }
        }
        2 => {
            spans.group = ints[1].1;
            spans.block_n = ints[0].1;
            ScaleGranularity::Block {
                n: ints[0].0,
                k: ints[1].0,
            }
        }
        _ => ScaleGranularity::Tensor,
    };
    Some(Scale { dtype, granularity })
}

fn parse_tile(v: &Value, errs: &mut Errors) -> Option<(TileConfig, TileSpans)> {
    let usage = "`tile(block = (M, N, K), warp = (M, N, K), stages = S, mma = sync | wgmma, ctas_per_sm = C)`";
    let Value::Call(call, args, _) = v else {
        errs.push(
            v.span(),
            format!("expected {usage}, found {}", v.describe()),
        );
        return None;
    };
    if call != "tile" {
        errs.push(call.span(), format!("expected {usage}"));
        return None;
    }
    let (mut block, mut warp, mut stages, mut mma) = (None, None, None, None);
    let mut ctas = None;
    let mut spans = TileSpans {
        tile: call.span(),
        block: [call.span(); 3],
        warp: [call.span(); 3],
        stages: call.span(),
        mma: call.span(),
        ctas: call.span(),
    };
    let triple = |v: &Value, errs: &mut Errors| -> Option<([u16; 3], [Span; 3])> {
        let Value::Tuple(items, span) = v else {
            errs.push(
                v.span(),
                format!("expected a tuple `(M, N, K)`, found {}", v.describe()),
            );
            return None;
        };
        if items.len() != 3 {
            errs.push(*span, "expected three extents `(M, N, K)`");
            return None;
        }
        let mut out = [0u16; 3];
        let mut spans = [*span; 3];
        for ((o, sp), it) in out.iter_mut().zip(&mut spans).zip(items) {
            let (n, s) = int_of(it, "a tile extent", errs)?;
            *sp = s;
            match u16::try_from(n) {
                Ok(n) if n > 0 => *o = n,
                _ => {
                    errs.push(s, "tile extents must be between 1 and 65535");
                    return None;
                }
            }
        }
        Some((out, spans))
    };
    for a in args {
        let Arg::Named(name, val) = a else {
            errs.push(call.span(), format!("tile arguments are named: {usage}"));
            return None;
        };
        let slot_dup = |set: bool, errs: &mut Errors| {
            if set {
                errs.push(name.span(), format!("duplicate tile argument `{name}`"));
            }
        };
        match name.to_string().as_str() {
            "block" => {
                slot_dup(block.is_some(), errs);
                let (b, s) = triple(val, errs)?;
                block = Some(b);
                spans.block = s;
            }
            "warp" => {
                slot_dup(warp.is_some(), errs);
                let (w, s) = triple(val, errs)?;
                warp = Some(w);
                spans.warp = s;
            }
            "stages" => {
                slot_dup(stages.is_some(), errs);
                let (n, s) = int_of(val, "stages", errs)?;
                spans.stages = s;
                match u8::try_from(n) {
                    Ok(n) => stages = Some(n),
                    Err(_) => {
                        errs.push(s, "stages must be between 2 and 8");
                        return None;
                    }
                }
            }
            "mma" => {
                slot_dup(mma.is_some(), errs);
                let allowed = "`sync` or `wgmma`";
                let i = ident_of(val, "mma", allowed, errs)?;
                spans.mma = i.span();
                mma = Some(match i.to_string().as_str() {
                    "sync" => Mma::Sync,
                    "wgmma" => Mma::Wgmma,
                    other => {
                        errs.push(
                            i.span(),
                            format!("unknown mma `{other}`; expected {allowed}"),
                        );
                        return None;
                    }
                });
            }
            "ctas_per_sm" => {
                slot_dup(ctas.is_some(), errs);
                let (n, s) = int_of(val, "ctas_per_sm", errs)?;
                spans.ctas = s;
                match u8::try_from(n) {
                    Ok(n @ 1..=4) => ctas = Some(n),
                    _ => {
                        errs.push(s, "ctas_per_sm must be between 1 and 4");
                        return None;
                    }
                }
            }
            other => {
                errs.push(
                    name.span(),
                    format!("unknown tile argument `{other}`; expected block, warp, stages, mma or ctas_per_sm"),
                );
                return None;
            }
        }
    }
    let Some(block) = block else {
        errs.push(
            call.span(),
            format!("missing `block = (M, N, K)` in {usage}"),
        );
        return None;
    };
    // Omitted warp: (block M, 64, 64), or for wgmma (block M, block N / 4, 64): one warpgroup along
    // N; two (block N / 8) where one would keep more than 128 f32 accumulators per thread (block M x
    // warp N > 4096) and two would not, e.g. (256, 128, 64) -> warp (256, 16, 64).
    let warp = warp.unwrap_or(if mma == Some(Mma::Wgmma) {
        let one = (block[1] / 4).max(1);
        let two = (block[1] / 8).max(1);
        let fits = |wn: u16| block[0] as u32 * wn as u32 <= WGMMA_MAX_M_X_WARP_N;
        [
            block[0],
            if !fits(one) && fits(two) { two } else { one },
            64,
        ]
    } else {
        [block[0], 64, 64]
    });
    let tile = TileConfig {
        block_m: block[0],
        block_n: block[1],
        block_k: block[2],
        warp_m: warp[0],
        warp_n: warp[1],
        warp_k: warp[2],
        stages: stages.unwrap_or(4),
        mma: mma.unwrap_or_default(),
        ctas_per_sm: ctas.unwrap_or(0),
    };
    Some((tile, spans))
}

/// Reads the fields of a declaration into a spec (without checking the rules between fields).
/// Returns `None` when a required part is missing or unreadable; errors go into `errs`.
pub fn interpret(decl: &Declaration, errs: &mut Errors) -> (Option<KernelSpec>, SpecSpans) {
    let mut spans = SpecSpans::all(decl.name.span());
    let mut seen: Vec<String> = Vec::new();
    let (mut a, mut b, mut c) = (None, None, None);
    let mut scale_v = None;
    let mut scale2_v = None;
    let mut zero_point = ZeroPoint::None;
    let mut bias = false;
    let mut layout = Layout::Dense;
    let mut epilogue = Epilogue::None;
    let mut archs = ArchSet::default();
    let mut tiles = TileList::EMPTY;
    let mut broken = false;

    for attr in &decl.attrs {
        if !attr.path().is_ident("doc")
            && !attr.path().is_ident("allow")
            && !attr.path().is_ident("cfg")
        {
            errs.push(
                attr.path()
                    .get_ident()
                    .map(|i| i.span())
                    .unwrap_or(decl.name.span()),
                "only doc comments, `#[allow]` and `#[cfg]` may be put on a kernel",
            );
        }
    }

    for f in &decl.fields {
        let key = f.key.to_string();
        if seen.contains(&key) {
            errs.push(f.key.span(), format!("duplicate field `{key}`"));
            continue;
        }
        seen.push(key.clone());
        let v = &f.value;
        match key.as_str() {
            "a" => match dtype_of(v, "activation", errs) {
                Some((d, s)) => {
                    a = Some(d);
                    spans.a = s;
                }
                None => broken = true,
            },
            "b" => match dtype_of(v, "weight", errs) {
                Some((d, s)) => {
                    b = Some(d);
                    spans.b = s;
                }
                None => broken = true,
            },
            "c" => match dtype_of(v, "output", errs) {
                Some((d, s)) => {
                    c = Some(d);
                    spans.c = s;
                }
                None => broken = true,
            },
            "scale" => scale_v = Some(v),
            "scale2" => scale2_v = Some(v),
            "zero_point" => {
                if let Some(i) = ident_of(v, "zero_point", "`none`, `int` or `float`", errs) {
                    spans.zero_point = i.span();
                    zero_point = match i.to_string().as_str() {
                        "none" => ZeroPoint::None,
                        "int" => ZeroPoint::Integer,
                        "float" => ZeroPoint::FloatOffset,
                        other => {
                            errs.push(i.span(), format!("unknown zero point `{other}`; expected `none`, `int` (GPTQ/AWQ integer zero point) or `float` (GGUF Q4_1-style additive offset)"));
                            ZeroPoint::None
                        }
                    };
                }
            }
            "bias" => match v {
                Value::Bool(lb) => bias = lb.value,
                other => errs.push(
                    other.span(),
                    format!("bias must be `true` or `false`, found {}", other.describe()),
                ),
            },
            "layout" => {
                if let Some(i) = ident_of(
                    v,
                    "layout",
                    "dense, moe_indexed, moe_grouped_contiguous, moe_grouped_masked",
                    errs,
                ) {
                    spans.layout = i.span();
                    layout = match i.to_string().as_str() {
                        "dense" => Layout::Dense,
                        "moe_indexed" => Layout::MoeIndexed,
                        "moe_grouped_contiguous" => Layout::MoeGroupedContiguous,
                        "moe_grouped_masked" => Layout::MoeGroupedMasked,
                        other => {
                            errs.push(i.span(), format!("unknown layout `{other}`; expected dense, moe_indexed, moe_grouped_contiguous or moe_grouped_masked"));
                            Layout::Dense
                        }
                    };
                }
            }
            "epilogue" => {
                if let Some(i) = ident_of(v, "epilogue", "none, relu, silu, gelu, gelu_tanh", errs)
                {
                    epilogue = match i.to_string().as_str() {
                        "none" => Epilogue::None,
                        "relu" => Epilogue::Relu,
                        "silu" => Epilogue::Silu,
                        "gelu" => Epilogue::Gelu,
                        "gelu_tanh" => Epilogue::GeluTanh,
                        other => {
                            errs.push(i.span(), format!("unknown epilogue `{other}`; expected none, relu, silu, gelu or gelu_tanh"));
                            Epilogue::None
                        }
                    };
                }
            }
            "arch" => {
                let items: Vec<&Value> = match v {
                    Value::List(items, _) => items.iter().collect(),
                    other => vec![other],
                };
                if items.is_empty() {
                    errs.push(
                        v.span(),
                        "arch list is empty; name at least one target such as `sm_90a`",
                    );
                }
                for it in items {
                    let Some(i) = ident_of(
                        it,
                        "an arch",
                        "sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, sm_120a",
                        errs,
                    ) else {
                        continue;
                    };
                    match Arch::parse(&i.to_string()) {
                        Some(arch) => {
                            if !archs.insert(arch) {
                                errs.push(i.span(), format!("duplicate arch `{i}`"));
                            }
                            spans.archs.push((arch, i.span()));
                        }
                        None => errs.push(
                            i.span(),
                            format!("unknown arch `{i}`; expected sm_75, sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a or sm_120a"),
                        ),
                    }
                }
            }
            "tiles" => {
                let items: Vec<&Value> = match v {
                    Value::List(items, _) => items.iter().collect(),
                    other => vec![other],
                };
                if items.len() > MAX_TILES {
                    errs.push(
                        v.span(),
                        format!("at most {MAX_TILES} tile configurations per kernel"),
                    );
                }
                for it in items {
                    if let Some((t, t_spans)) = parse_tile(it, errs) {
                        if tiles.as_slice().contains(&t) {
                            errs.push(it.span(), "duplicate tile configuration");
                        } else if tiles.push(t) {
                            spans.tiles.push(t_spans);
                        }
                    }
                }
            }
            other => {
                errs.push(
                    f.key.span(),
                    format!("unknown field `{other}`; expected one of: {FIELDS}"),
                );
            }
        }
    }

    if a.is_none() && !seen.iter().any(|k| k == "a") {
        errs.push(
            decl.name.span(),
            "missing field `a` (the activation dtype: `a: f16` or `a: bf16`)",
        );
    }
    if b.is_none() && !seen.iter().any(|k| k == "b") {
        errs.push(
            decl.name.span(),
            "missing field `b` (the weight dtype, e.g. `b: u4`)",
        );
    }
    let scale = match scale_v {
        Some(v) => parse_scale(v, a, &mut spans, errs),
        None => a.filter(|d| d.is_16bit_float()).map(|d| Scale {
            dtype: d,
            granularity: ScaleGranularity::Channel,
        }),
    };
    let scale2 = match scale2_v {
        Some(v) => {
            let mut s2 = spans.clone();
            let r = parse_scale(v, a, &mut s2, errs);
            spans.scale2 = s2.scale;
            spans.scale2_dtype = s2.scale_dtype;
            r.map(Some)
        }
        None => Some(None),
    };
    if archs.is_empty() {
        archs = ArchSet::DEFAULT;
    }
    let (Some(a), Some(b), false) = (a, b, broken) else {
        return (None, spans);
    };
    let c = match c {
        Some(c) => c,
        None if a.is_16bit_float() => a,
        None => {
            errs.push(decl.name.span(), "missing field `c` (the output dtype, f16 or bf16); it defaults to `a` only when `a` is f16 or bf16");
            return (None, spans);
        }
    };
    let Some(scale) = scale else {
        if scale_v.is_none() {
            errs.push(
                decl.name.span(),
                "missing field `scale`, e.g. `scale: group(128, f32)`",
            );
        }
        return (None, spans);
    };
    let Some(scale2) = scale2 else {
        return (None, spans);
    };
    (
        Some(KernelSpec {
            a,
            b,
            c,
            scale,
            scale2,
            zero_point,
            bias,
            layout,
            epilogue,
            archs,
            tiles,
        }),
        spans,
    )
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

/// The type the weights are dequantized into before the MMA (for 16-bit and integer activations: A's
/// type; FP8 activations: A's type).
fn mma_b(a: DType) -> DType {
    a
}

/// The model's rules: is this a meaningful quantized GEMM? (Independent of what the generator emits.)
pub fn check_model(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    let (a, b, c) = (spec.a, spec.b, spec.c);
    // Activation.
    if !is_model_activation(a) {
        errs.push(
            sp.a,
            format!(
                "`{a}` is not an activation dtype; expected f16, bf16, e4m3, e5m2, e2m1, i8 or i4"
            ),
        );
        return;
    }
    // Output.
    if !c.is_16bit_float() {
        errs.push(
            sp.c,
            format!("output dtype `{c}` is not supported; expected f16 or bf16"),
        );
    } else if a.is_16bit_float() && c != a {
        errs.push(
            sp.c,
            format!("with 16-bit activations the output dtype must equal `a` ({a}); found `{c}`"),
        );
    } else if a == DType::E5M2 && c != DType::BF16 {
        errs.push(sp.c, "e5m2 activations need a bf16 output");
    }
    // Weight.
    match b {
        DType::UInt { bits } | DType::SInt { bits } if !(1..=8).contains(&bits) => {
            errs.push(
                sp.b,
                format!("weight width {bits} bits is outside 1..=8; use u1..u8 or i2..i8"),
            );
            return;
        }
        DType::SInt { bits: 1 } => {
            errs.push(sp.b, "a signed 1-bit weight has no positive value; use `u1` (with `zero_point: float` for any two values per group) or `i2`");
            return;
        }
        DType::UE8M0 => {
            errs.push(sp.b, "`ue8m0` is a scale-only type (it has no sign and no mantissa); it cannot be a weight");
            return;
        }
        DType::F16 | DType::BF16 | DType::F32 => {
            errs.push(sp.b, format!("`{b}` weights are not quantized; use a weight of at most 8 bits (u4, i8, e4m3, e2m1, ...)"));
            return;
        }
        _ => {}
    }
    if b.bits() > a.bits() {
        errs.push(
            sp.b,
            format!(
                "weight width {} bits exceeds the activation width {} bits",
                b.bits(),
                a.bits()
            ),
        );
    }
    let mma = mma_b(a);
    if a.is_float() {
        match b {
            DType::UInt { bits } | DType::SInt { bits } => {
                let room = mma.mantissa_bits()
                    + if spec.zero_point == ZeroPoint::Integer {
                        1
                    } else {
                        2
                    };
                if bits as u32 > room {
                    errs.push(sp.b, format!("{bits}-bit integer weights do not fit exactly in `{a}` (at most {room} bits{})", if spec.zero_point == ZeroPoint::Integer { " with a zero point" } else { "" }));
                }
            }
            DType::Float { exp, man } => {
                let fits = if exp == 0 {
                    man as u32 <= mma.mantissa_bits() + 1
                } else {
                    exp as u32 <= mma.exponent_bits() && man as u32 <= mma.mantissa_bits()
                };
                if !fits {
                    errs.push(sp.b, format!("`{b}` weights do not convert exactly to `{a}` (exponent or mantissa too wide)"));
                }
            }
            _ => {}
        }
    } else if let DType::Float { exp, .. } = b {
        let e0_with_i8 = exp == 0 && a == DType::SInt { bits: 8 } && b.bits() < 8;
        let mxfp4 = b == DType::E2M1 && spec.scale.dtype == DType::UE8M0;
        if !(e0_with_i8 || mxfp4) {
            errs.push(sp.b, format!("float weights `{b}` need float activations (or e0mY weights with i8 activations, or MXFP4 with ue8m0 scales)"));
        }
    }
    // Zero point.
    match spec.zero_point {
        ZeroPoint::None => {}
        ZeroPoint::Integer => {
            if b.is_float() {
                errs.push(sp.zero_point, format!("a zero point needs integer weights; `{b}` is a float type (drop `zero_point`)"));
            } else if b.is_signed() {
                errs.push(
                    sp.zero_point,
                    format!(
                        "an integer zero point needs unsigned codes; use `u{}` instead of `{b}`",
                        b.bits()
                    ),
                );
            } else if a.is_integer() && b.bits() >= a.bits() {
                errs.push(
                    sp.zero_point,
                    format!(
                        "with `{a}` activations a zero point needs weights narrower than {} bits",
                        a.bits()
                    ),
                );
            }
            if !matches!(
                spec.scale.granularity,
                ScaleGranularity::Channel | ScaleGranularity::Group { .. }
            ) {
                errs.push(
                    sp.zero_point,
                    "a zero point needs a channel or group scale (it shares the scale's groups)",
                );
            }
        }
        ZeroPoint::FloatOffset => {
            if !a.is_16bit_float() {
                errs.push(
                    sp.zero_point,
                    "a float zero point (additive offset) needs f16 or bf16 activations",
                );
            } else if !(matches!(b, DType::UInt { .. }) || matches!(b, DType::Float { exp: 0, .. }))
            {
                errs.push(
                    sp.zero_point,
                    format!(
                        "a float zero point needs unsigned integer codes (e.g. `u4`); found `{b}`"
                    ),
                );
            }
            if !matches!(
                spec.scale.granularity,
                ScaleGranularity::Channel | ScaleGranularity::Group { .. }
            ) {
                errs.push(sp.zero_point, "a float zero point needs a channel or group scale (it shares the scale's groups)");
            }
        }
    }
    // Scale.
    let sd = spec.scale.dtype;
    let min_group = crate::layout::min_group_size(a);
    match spec.scale.granularity {
        ScaleGranularity::Channel | ScaleGranularity::Group { .. } if sd.is_integer() => {
            // Two-level integer scales (GGUF K-quants): small integer sub-group scales under a
            // float factor per super-group.
            let two_level = matches!(spec.scale.granularity, ScaleGranularity::Group { .. })
                && matches!(
                    spec.scale2.map(|s| s.granularity),
                    Some(ScaleGranularity::Group { .. })
                );
            if !two_level {
                errs.push(sp.scale_dtype, format!("an integer scale `{sd}` is a sub-group scale under a float factor per super-group; declare both, e.g. `scale: group(32, {sd}), scale2: group(256, f16)` (GGUF K-quants)"));
            } else if !(2..=8).contains(&sd.bits()) || sd == (DType::SInt { bits: 1 }) {
                errs.push(
                    sp.scale_dtype,
                    format!("integer scales are 2 to 8 bits wide; found `{sd}`"),
                );
            }
            if let ScaleGranularity::Group { size } = spec.scale.granularity
                && let Err(e) = crate::layout::check_group_size(size, a)
            {
                errs.push(sp.group, e.to_string());
            }
        }
        ScaleGranularity::Channel | ScaleGranularity::Group { .. } => {
            let ok = matches!(sd, DType::F16 | DType::BF16 | DType::UE8M0)
                || sd == DType::E4M3
                || sd == DType::E5M2
                || (sd == DType::F32 && !a.is_16bit_float());
            if !ok {
                errs.push(sp.scale_dtype, format!("scale dtype `{sd}` is not allowed here; expected f16, bf16, e4m3, e5m2 or ue8m0 (f32 only with 8/4-bit activations)"));
            } else if a.is_16bit_float() && sd.is_16bit_float() && sd != a {
                errs.push(
                    sp.scale_dtype,
                    format!("a 16-bit scale must have the activation's dtype `{a}`; found `{sd}`"),
                );
            } else if sd == DType::UE8M0
                && !matches!(spec.scale.granularity, ScaleGranularity::Group { .. })
            {
                errs.push(
                    sp.scale_dtype,
                    "ue8m0 scales are per group (MX block scaling), e.g. `group(32, ue8m0)`",
                );
            }
            if let ScaleGranularity::Group { size } = spec.scale.granularity
                && let Err(e) = crate::layout::check_group_size(size, a)
            {
                errs.push(sp.group, e.to_string());
            }
        }
        ScaleGranularity::Block { n, k } => {
            if sd != DType::F32 {
                errs.push(
                    sp.scale_dtype,
                    format!("block scales are f32; found `{sd}`"),
                );
            }
            if !n.is_power_of_two() || n < 64 {
                errs.push(
                    sp.block_n,
                    format!("block scale N extent {n} must be a power of two of at least 64"),
                );
            }
            if !k.is_power_of_two() || k < min_group {
                errs.push(
                    sp.group,
                    format!(
                        "block scale K extent {k} must be a power of two of at least {min_group}"
                    ),
                );
            }
        }
        ScaleGranularity::Tensor => {
            if sd != DType::F32 {
                errs.push(
                    sp.scale_dtype,
                    format!("a tensor scale is f32; found `{sd}`"),
                );
            }
        }
    }
    if let Some(s2) = spec.scale2
        && let ScaleGranularity::Group { size: g2 } = s2.granularity
    {
        let g = spec.group_size().unwrap_or(0);
        if !sd.is_integer() || g == 0 {
            errs.push(sp.scale2, "a secondary group scale is the super-group factor of integer sub-group scales (GGUF K-quants), e.g. `scale: group(32, u6), scale2: group(256, f16)`");
        } else if !g2.is_power_of_two() || g2 <= g {
            errs.push(sp.scale2, format!("the super-group {g2} must be a power of two larger than the group {g} (e.g. 256 over 32 or 16)"));
        } else if !matches!(s2.dtype, DType::F16 | DType::BF16 | DType::F32) {
            errs.push(
                sp.scale2_dtype,
                format!(
                    "a super-group factor is f16, bf16 or f32; found `{}`",
                    s2.dtype
                ),
            );
        }
    } else if let Some(s2) = spec.scale2 {
        let ok = matches!(
            (spec.scale.granularity, s2.granularity),
            (
                ScaleGranularity::Group { .. },
                ScaleGranularity::Channel | ScaleGranularity::Tensor
            ) | (ScaleGranularity::Channel, ScaleGranularity::Tensor)
        );
        if sd.is_integer() {
            // Reported with the primary scale.
        } else if !ok {
            errs.push(sp.scale2, "a secondary scale is per channel or per tensor, on top of a group scale (or per tensor on top of a channel scale)");
        } else if s2.dtype != DType::F32 {
            errs.push(
                sp.scale2_dtype,
                format!("a secondary scale is f32; found `{}`", s2.dtype),
            );
        }
    }
    // Arch.
    if let Some(need) = min_arch_for(a) {
        for (arch, span) in &sp.archs {
            if arch.capability() < need.capability() {
                errs.push(
                    *span,
                    format!(
                        "`{a}` activations need {} or newer; `{}` is too old",
                        need.name(),
                        arch.name()
                    ),
                );
            }
        }
        if sp.archs.is_empty() {
            for arch in spec.archs.iter() {
                if arch.capability() < need.capability() {
                    errs.push(sp.a, format!("`{a}` activations need {} or newer, but the default targets include {}; set `arch: [..]`", need.name(), arch.name()));
                }
            }
        }
    }
    // Tiles.
    for (i, t) in spec.tiles.as_slice().iter().enumerate() {
        let span = sp.tiles.get(i).copied().unwrap_or(TileSpans::all(sp.name));
        check_tile(t, a, &span, errs);
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

fn check_tile(t: &TileConfig, a: DType, sp: &TileSpans, errs: &mut Errors) {
    if t.mma == Mma::Wgmma {
        // Its own, stricter rules, with messages that name them (check_wgmma_tile).
        return;
    }
    let dims = [
        (t.block_m, t.warp_m, "M"),
        (t.block_n, t.warp_n, "N"),
        (t.block_k, t.warp_k, "K"),
    ];
    for (i, (b, w, name)) in dims.into_iter().enumerate() {
        if b % w != 0 {
            errs.push(
                sp.block[i],
                format!("block {name} ({b}) must be a multiple of warp {name} ({w})"),
            );
            return;
        }
        if !(b / w).is_power_of_two() {
            errs.push(
                sp.block[i],
                format!(
                    "block {name} / warp {name} = {} must be a power of two",
                    b / w
                ),
            );
        }
    }
    for (v, name, span) in [
        (t.block_n, "block N", sp.block[1]),
        (t.block_k, "block K", sp.block[2]),
        (t.warp_n, "warp N", sp.warp[1]),
        (t.warp_k, "warp K", sp.warp[2]),
    ] {
        if !v.is_power_of_two() {
            errs.push(span, format!("{name} ({v}) must be a power of two"));
        }
    }
    if !t.warp_n.is_multiple_of(16) || t.warp_n > 64 {
        errs.push(
            sp.warp[1],
            format!(
                "warp N ({}) must be a multiple of 16 and at most 64",
                t.warp_n
            ),
        );
    }
    let (min_n, min_k) = match a.bits() {
        16 => (32, 32),
        8 => (16, 64),
        _ => (16, 128),
    };
    if t.warp_n < min_n || t.warp_k < min_k {
        let span = if t.warp_n < min_n {
            sp.warp[1]
        } else {
            sp.warp[2]
        };
        errs.push(span, format!("with {}-bit activations the warp tile needs N >= {min_n} and K >= {min_k}; found N = {}, K = {}", a.bits(), t.warp_n, t.warp_k));
    }
    if t.block_m > 256 {
        errs.push(
            sp.block[0],
            format!("block M ({}) must be at most 256", t.block_m),
        );
    }
    if !t.warp_m.is_multiple_of(8) {
        errs.push(
            sp.warp[0],
            format!("warp M ({}) must be a multiple of 8", t.warp_m),
        );
    }
    if (t.block_k as u32) * a.bits() < 512 {
        errs.push(
            sp.block[2],
            format!(
                "block K ({}) x {} bits must be at least 512 bits (64-byte rows of A)",
                t.block_k,
                a.bits()
            ),
        );
    }
    // In u64: `TileConfig::threads` (u32) overflows for absurd tiles such as warp (1, 1, 1).
    let threads = [
        (t.block_m, t.warp_m),
        (t.block_n, t.warp_n),
        (t.block_k, t.warp_k),
    ]
    .iter()
    .map(|&(b, w)| (b / w) as u64)
    .product::<u64>()
        * 32;
    if threads > 1024 {
        errs.push(
            sp.tile,
            format!("this tile needs {threads} threads per CTA; at most 1024"),
        );
    }
    if !(2..=8).contains(&t.stages) {
        errs.push(
            sp.stages,
            format!("stages ({}) must be between 2 and 8", t.stages),
        );
    }
}

/// The most `block_m x warp_n` of a `wgmma` tile: each thread keeps `block_m * warp_n / 32` f32
/// accumulators, at most 128 (the default warp N of `parse_tile` and `check_wgmma_tile` both obey it).
const WGMMA_MAX_M_X_WARP_N: u32 = 4096;

/// Rules of a `wgmma` tile: one or two warpgroups (four warps each) along N per 64 of `block_k` (one
/// or two); every warp covers all `block_m` rows and `warp_n` = 64 channels (one packed unit), 32
/// (half a unit) or 16 (a quarter: block M up to 256), so `block_n = 4 * warp_n` or `8 * warp_n` (two warpgroups share each A tile); `block_m` a multiple of 8 with `block_m * warp_n <= 4096`
/// (each thread keeps `block_m * warp_n / 32` f32 accumulators, at most 128); 3 to 6 stages (a stage
/// is refilled two steps after it was read, while the last `wgmma` on it may still run); the
/// declaration's `arch` must include `sm_90a`, the only target with `wgmma`.
fn check_wgmma_tile(spec: &KernelSpec, t: &TileConfig, span: &TileSpans, errs: &mut Errors) {
    let mut ok = true;
    if !spec.archs.contains(Arch::Sm90a) {
        errs.push(
            span.mma,
            "`mma = wgmma` needs `sm_90a` in `arch` (wgmma exists on sm_90a only)",
        );
    }
    if t.warp_m != t.block_m || !matches!(t.warp_n, 16 | 32 | 64) || t.warp_k != 64 {
        let at = if t.warp_m != t.block_m {
            span.warp[0]
        } else if !matches!(t.warp_n, 16 | 32 | 64) {
            span.warp[1]
        } else {
            span.warp[2]
        };
        errs.push(
            at,
            format!(
                "in a wgmma tile every warp covers all block M rows, 64, 32 or 16 channels and 64 of K: warp must be ({}, 64, 32 or 16, 64), found ({}, {}, {})",
                t.block_m, t.warp_m, t.warp_n, t.warp_k
            ),
        );
        return;
    }
    if t.block_n != 4 * t.warp_n && t.block_n != 8 * t.warp_n {
        ok = false;
        errs.push(
            span.block[1],
            format!(
                "a wgmma tile has one or two warpgroups of four warps along N: block N must be {} or {} (4 or 8 x warp N), found {}",
                4 * t.warp_n,
                8 * t.warp_n,
                t.block_n
            ),
        );
    }
    if !matches!(t.block_k, 64 | 128) {
        ok = false;
        errs.push(
            span.block[2],
            format!(
                "a wgmma tile has one warpgroup per 64 of block K, one or two: block K must be 64 or 128, found {}",
                t.block_k
            ),
        );
    }
    if !t.block_m.is_multiple_of(8) || t.block_m as u32 * t.warp_n as u32 > WGMMA_MAX_M_X_WARP_N {
        ok = false;
        errs.push(
            span.block[0],
            format!(
                "a wgmma tile needs block M a multiple of 8 and at most {} with warp N = {} (block M x warp N / 32 f32 accumulators per thread, at most 128); found {}",
                WGMMA_MAX_M_X_WARP_N / t.warp_n as u32,
                t.warp_n,
                t.block_m
            ),
        );
    }
    if !(3..=6).contains(&t.stages) {
        errs.push(
            span.stages,
            format!("a wgmma tile needs 3 to 6 stages; found {}", t.stages),
        );
    }
    // Shared memory only for a tile that passed the rules above (their extents bound the sizes).
    let smem = if ok {
        crate::resources::smem_bytes(spec, t)
    } else {
        0
    };
    check_tile_smem(smem, span, errs);
}

/// `ctas_per_sm` (when given, on a tile that passed every other rule): the registers it leaves each
/// thread, `65536 / (threads * ctas_per_sm)` (for a tile with a producer warpgroup, what the
/// warpgroup hands the compute warps: [`crate::resources::consumer_registers`]), must cover the tile's
/// accumulators and working set ([`crate::resources::min_registers`]), and that many CTAs must fit the shared memory of one
/// multiprocessor of every target ([`crate::resources::ctas_fit`]).
fn check_tile_occupancy(spec: &KernelSpec, t: &TileConfig, span: &TileSpans, errs: &mut Errors) {
    if t.ctas_per_sm == 0 {
        return;
    }
    let c = t.ctas_per_sm as u32;
    // With a producer warpgroup the compute warps get the registers it gives back (setmaxnreg).
    let regs = if t.producer_warpgroup() {
        crate::resources::consumer_registers(spec, t)
    } else {
        65536 / (t.threads().max(1) * c)
    };
    let need = crate::resources::min_registers(t);
    if regs < need {
        errs.push(
            span.ctas,
            format!(
                "ctas_per_sm = {c} leaves {regs} registers per thread ({} threads per CTA); this tile needs at least {need}",
                t.threads()
            ),
        );
    }
    if let Err(per_sm) = crate::resources::ctas_fit(spec, t) {
        errs.push(
            span.ctas,
            format!(
                "ctas_per_sm = {c}: {c} CTAs of {} bytes of shared memory (plus {} static and 1 KiB reserved each) exceed the {per_sm} bytes of a multiprocessor of this kernel's targets",
                crate::resources::smem_bytes(spec, t),
                crate::abi::STATIC_SMEM_BYTES
            ),
        );
    }
}

/// A tile's dynamic shared memory (`smem` bytes, from [`crate::resources::smem_bytes`]) must fit one
/// CTA's limit beside the kernel's static shared memory.
fn check_tile_smem(smem: u32, span: &TileSpans, errs: &mut Errors) {
    if smem > crate::resources::MAX_TILE_SMEM_BYTES {
        errs.push(
            span.tile,
            format!(
                "this tile needs {smem} bytes of shared memory; at most {} (227 KiB less {} of static shared memory)",
                crate::resources::MAX_TILE_SMEM_BYTES,
                crate::abi::STATIC_SMEM_BYTES
            ),
        );
    }
}

/// What this version of the code generator can emit: f16/bf16 activations; integer weights of 1..=8
/// bits and float weights `eXmY` (every one the model admits); every scale kind and dtype the model
/// admits, with a secondary scale; zero points with scales of A's dtype on integer codes; dense
/// layout, sm_80 and newer, tiles of the `mma.sync` kernel (warp tile N = K = 64, warp M 8, 16, 32, 48
/// or 64) and, for sm_90a, of the `wgmma` kernel (see `check_wgmma_tile`).
pub fn check_generator(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) {
    if !spec.a.is_16bit_float() {
        errs.push(sp.a, format!("kernels for `{}` activations are not generated yet (this version generates f16 and bf16 activations)", spec.a));
        return;
    }
    let two_level_offset =
        spec.zero_point == ZeroPoint::FloatOffset && spec.scale.dtype.is_integer();
    if spec.zero_point != ZeroPoint::None && !two_level_offset {
        if spec.b.is_float() {
            errs.push(sp.zero_point, format!("a zero point on `{}` (sign-magnitude) weights is not generated yet; use `u{}` codes", spec.b, spec.b.bits()));
        } else if spec.scale.dtype != spec.a {
            errs.push(sp.scale_dtype, format!("a zero point with `{}` scales is not generated yet; use `{}` scales with a zero point, or drop `zero_point`", spec.scale.dtype, spec.a));
        }
    }
    if spec.layout != Layout::Dense {
        errs.push(
            sp.layout,
            format!(
                "the `{}` layout is not generated yet (this version generates `dense`)",
                spec.layout.name()
            ),
        );
    }
    for (arch, span) in &sp.archs {
        if arch.capability() < 80 {
            errs.push(*span, format!("the generated kernel needs sm_80 or newer (cp.async, bf16 MMA); `{}` is not supported", arch.name()));
        }
    }
    let tiles = spec.tiles.as_slice();
    if !tiles.is_empty() && tiles.iter().all(|t| t.mma == Mma::Wgmma) {
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
                    "every tile of this kernel is `mma = wgmma`, which runs on sm_90a only: {whose} would get no usable tile; set `arch: [sm_90a]` or add an mma.sync tile"
                ),
            );
        }
    }
    for (i, t) in tiles.iter().enumerate() {
        let span = sp.tiles.get(i).copied().unwrap_or(TileSpans::all(sp.name));
        let before = errs.len();
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
