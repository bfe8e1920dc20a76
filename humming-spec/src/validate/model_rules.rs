//! The model's rules (is this a meaningful quantized GEMM, whatever the generator emits), one named
//! rule each, in the order [`MODEL_RULES`] lists and [`super::check_model`] applies them; a rule that
//! makes the rest meaningless stops them.

use super::tile_rules::check_tile;
use super::{Errors, SpecSpans, TileSpans, is_model_activation, min_arch_for};
use crate::dtype::DType;
use crate::model::*;

/// Whether the rules after one go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    Go,
    Stop,
}

type Rule = fn(&KernelSpec, &SpecSpans, &mut Errors) -> Flow;

/// The model's rules, by name, in order.
pub(super) const MODEL_RULES: &[(&str, Rule)] = &[
    ("activation dtype", activation),
    ("output dtype", output),
    ("weight dtype", weight_dtype),
    ("weights exact in the activations' type", weight_fits),
    ("zero point", zero_point),
    ("primary scale", primary_scale),
    ("secondary scale", secondary_scale),
    ("targets of the activation dtype", targets),
    ("tile shapes", tile_shapes),
];

/// The type the weights are dequantized into before the MMA: A's.
fn mma_b(a: DType) -> DType {
    a
}

/// The activation dtype is one the model knows (f16, bf16, e4m3, e5m2, e2m1, i8, i4).
fn activation(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let a = spec.a;
    if !is_model_activation(a) {
        errs.push(
            sp.a,
            format!(
                "`{a}` is not an activation dtype; expected f16, bf16, e4m3, e5m2, e2m1, i8 or i4"
            ),
        );
        return Flow::Stop;
    }
    Flow::Go
}

/// C is f16 or bf16: equal to A for 16-bit activations, bf16 under e5m2.
fn output(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let (a, c) = (spec.a, spec.c);
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
    Flow::Go
}

/// The weight is a quantized type of 1 to 8 bits that can hold a value (not ue8m0, not a 16-bit float).
fn weight_dtype(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let b = spec.b;
    match b {
        DType::UInt { bits } | DType::SInt { bits } if !(1..=8).contains(&bits) => {
            errs.push(
                sp.b,
                format!("weight width {bits} bits is outside 1..=8; use u1..u8 or i2..i8"),
            );
            return Flow::Stop;
        }
        DType::SInt { bits: 1 } => {
            errs.push(sp.b, "a signed 1-bit weight has no positive value; use `u1` (with `zero_point: float` for any two values per group) or `i2`");
            return Flow::Stop;
        }
        DType::UE8M0 => {
            errs.push(sp.b, "`ue8m0` is a scale-only type (it has no sign and no mantissa); it cannot be a weight");
            return Flow::Stop;
        }
        DType::F16 | DType::BF16 | DType::F32 => {
            errs.push(sp.b, format!("`{b}` weights are not quantized; use a weight of at most 8 bits (u4, i8, e4m3, e2m1, ...)"));
            return Flow::Stop;
        }
        _ => {}
    }
    Flow::Go
}

/// Weights no wider than A convert exactly to the type the MMA multiplies; float weights need float activations (or the e0mY / MXFP4 exceptions).
fn weight_fits(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let (a, b) = (spec.a, spec.b);
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
                // Signed codes have magnitudes up to 2^(bits - 1) (a power of two at the top): one
                // bit more than the significand; unsigned codes, and codes minus a zero point, need
                // every bit in the significand.
                let signed = matches!(b, DType::SInt { .. });
                let room = mma.mantissa_bits() + if signed { 2 } else { 1 };
                if bits as u32 > room {
                    errs.push(sp.b, format!("{bits}-bit integer weights do not fit exactly in `{a}` (at most {room} bits{})", if signed { "" } else if spec.zero_point == ZeroPoint::Integer { " with a zero point" } else { " for unsigned codes" }));
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
    Flow::Go
}

/// Zero points: integer ones on unsigned codes, float offsets under 16-bit activations, both sharing a channel or group scale.
fn zero_point(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let (a, b) = (spec.a, spec.b);
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
    Flow::Go
}

/// The primary scale: its dtype for its granularity, the group size rule, block extents.
fn primary_scale(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let a = spec.a;
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
    Flow::Go
}

/// A secondary scale: a super-group factor of integer sub-group scales, or an f32 factor per channel or tensor on top of a group (or channel) scale.
fn secondary_scale(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let sd = spec.scale.dtype;
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
    Flow::Go
}

/// The targets reach the activation dtype's minimum arch (FP8: sm_89).
fn targets(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let a = spec.a;
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
            // The default targets from `need` on, with `need` itself: what to declare instead.
            let mut fit = vec![need.name()];
            fit.extend(
                spec.archs
                    .iter()
                    .filter(|x| x.capability() > need.capability())
                    .map(|x| x.name()),
            );
            for arch in spec.archs.iter() {
                if arch.capability() < need.capability() {
                    errs.push(sp.a, format!("`{a}` activations need {} or newer, but the default targets include {}; set `arch: [{}]`", need.name(), arch.name(), fit.join(", ")));
                }
            }
        }
    }
    Flow::Go
}

/// Each declared tile's shape (the model's `mma.sync` rules; `wgmma` tiles have their own).
fn tile_shapes(spec: &KernelSpec, sp: &SpecSpans, errs: &mut Errors) -> Flow {
    let a = spec.a;
    for (i, t) in spec.tiles.as_slice().iter().enumerate() {
        let span = sp.tiles.get(i).copied().unwrap_or(TileSpans::all(sp.name));
        check_tile(t, a, &span, errs);
    }
    Flow::Go
}
