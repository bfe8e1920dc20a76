//! Reading a declaration's fields into a [`KernelSpec`] and its spans, without the rules between
//! fields (those are [`super::check_model`] and [`super::check_generator`]).

use super::tile_rules::WGMMA_MAX_M_X_WARP_N;
use super::{Errors, SpecSpans, TileSpans};
use crate::dtype::DType;
use crate::model::*;
use crate::parse::{Arg, Declaration, Value};
use proc_macro2::Span;

const FIELDS: &str = "a, b, c, scale, scale2, zero_point, bias, layout, epilogue, arch, tiles";

/// The activation dtype as written, if the `a` field is a readable dtype name.
pub(super) fn activation_of(decl: &Declaration) -> Option<(DType, Span)> {
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
    let usage = "`tile(block = (M, N, K), warp = (M, N, K), stages = S, mma = sync | wgmma | wgmma_ss, ctas_per_sm = C)`";
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
                let allowed = "`sync`, `wgmma` or `wgmma_ss`";
                let i = ident_of(val, "mma", allowed, errs)?;
                spans.mma = i.span();
                mma = Some(match i.to_string().as_str() {
                    "sync" => Mma::Sync,
                    "wgmma" => Mma::Wgmma,
                    "wgmma_ss" => Mma::WgmmaSs,
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
    // wgmma_ss: (block M, block N / 2, block K), two consumer warpgroups.
    let warp = warp.unwrap_or(if mma == Some(Mma::WgmmaSs) {
        [block[0], (block[1] / 2).max(1), block[2]]
    } else if mma == Some(Mma::Wgmma) {
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
                Value::Bool(lb) => {
                    bias = lb.value;
                    spans.bias = lb.span();
                }
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
                if let Some(i) = ident_of(
                    v,
                    "epilogue",
                    "none, relu, silu, gelu, gelu_tanh, silu_glu, silu_glu_interleaved",
                    errs,
                ) {
                    spans.epilogue = i.span();
                    epilogue = match i.to_string().as_str() {
                        "none" => Epilogue::None,
                        "relu" => Epilogue::Relu,
                        "silu" => Epilogue::Silu,
                        "gelu" => Epilogue::Gelu,
                        "gelu_tanh" => Epilogue::GeluTanh,
                        "silu_glu" => Epilogue::SiluGlu,
                        "silu_glu_interleaved" => Epilogue::SiluGluInterleaved,
                        other => {
                            errs.push(i.span(), format!("unknown epilogue `{other}`; expected none, relu, silu, gelu, gelu_tanh, silu_glu or silu_glu_interleaved"));
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
