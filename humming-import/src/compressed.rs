//! compressed-tensors layers unpacked into [`QuantizedWeights`](crate::QuantizedWeights) without
//! loss, and the descriptor of the kernel that runs them. The layouts are those of
//! compressed-tensors 0.20's compressors:
//!
//! | format | tensors | content |
//! |--------|---------|---------|
//! | `pack-quantized` | `weight_packed` int32 `[N, ceil(K * b / 32)]`, `weight_shape` `[N, K]`, `weight_scale` f16 / bf16 `[N, ceil(K / G)]` (channel: `[N, 1]`), `weight_zero_point` int32 `[ceil(N * b / 32), groups]` (asymmetric only) | row `n`'s codes along K as a little-endian bit stream (code `k` at bit `k * b`), each stored as `q + 2^(b-1)` for the signed `q`; zero points the same way, packed along N (dim 0) |
//! | `float-quantized` | `weight` F8_E4M3 `[N, K]`, `weight_scale` `[1]` (tensor), `[N, 1]` (channel) or `[ceil(N / bn), ceil(K / bk)]` (block) | |
//! | `nvfp4-pack-quantized` | `weight_packed` uint8 `[N, K / 2]`, `weight_scale` F8_E4M3 `[N, K / 16]`, `weight_global_scale` f32 `[1]` | e2m1 codes, element `2 i` in the low nibble of byte `i`, `2 i + 1` in the high one |
//! | `mxfp4-pack-quantized` | `weight_packed` uint8 `[N, K / 2]`, `weight_scale` uint8 `[N, K / 32]` | the same nibbles; scales e8m0 exponents, `2^(e - 127)` |
//!
//! Weight values: `scale * (q - z)` (integers), `scale * fp` (floats); NVFP4 `fp * (scale / g)`
//! with `g` the global scale. Descriptors (A is the 16-bit scale dtype, else bf16):
//! - `pack-quantized`: `b: i<b>, scale: group(G, A)` or `channel(A)` (symmetric: the signed code
//!   as a `b`-bit pattern); asymmetric `b: u<b>, ..., zero_point: int` with the stored unsigned
//!   codes and zero points;
//! - `float-quantized`: `b: e4m3, scale: tensor(f32)`, `channel(A)` (f16 / bf16 scales: f32
//!   channel scales have no exact descriptor and are refused), `block(bn, bk, f32)`;
//! - `nvfp4-pack-quantized`: `b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)`, `scale2` =
//!   `1 / g` rounded to f32. This one factor is not exact unless `g` is a power of two: the
//!   package divides each e4m3 scale by `g` in f32, and no descriptor divides; the weights then
//!   differ from the package's by the f32 rounding of `1 / g` (one part in 2^24);
//! - `mxfp4-pack-quantized`: `b: e2m1, scale: group(32, ue8m0)`.
//!
//! W8A8 groups (`input_activations` read by [`crate::compressed_config`]) take the 8-bit-activation
//! descriptors, with C in A's place: FP8 per-token over `float-quantized` tensor / channel weights
//! `a: e4m3, b: e4m3, c: A, scale: tensor(f32)` / `channel(A)` (f32 channel scales are exact here:
//! `channel(f32)`, C bf16); FP8 `1 x bk` groups over block weights `a: e4m3, b: e4m3, c: A, scale:
//! block(bn, bk, f32)`, both `arch: [sm_89, sm_90a]`; int8 per-token over `pack-quantized` int8
//! symmetric channel weights `a: i8, b: i8, c: A, scale: channel(A)`. The weights are read as for
//! the weight-only schemes.
//!
//! A `weight_g_idx` (written for GPTQ's `actorder: "group"` by compressed-tensors before 0.20,
//! which removed it) is accepted only when it is `k / G`; an act-order one is refused by name.

use crate::checkpoint::SafetensorsInfo;
use crate::compressed_config::{CtAct, CtFormat, CtGroup, CtStrategy};
use crate::error::{Error, Result};
use crate::gptq::{check_dtype, floats, matrix, shape_err, stream, words};
use crate::quantized::QuantizedCheckpoint;
use humming_runtime::ZeroPoints;
use humming_spec::DType;
use safetensors::Dtype;

/// A layer's checked geometry, format and descriptor.
pub(crate) struct Plan {
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) bytes: usize,
    pub(crate) format: String,
    pub(crate) spec_text: String,
}

/// Codes `[N, K]`, scales in the descriptor's layout, secondary scales, zero points.
pub(crate) type Parts = (Vec<u8>, Vec<f32>, Vec<f32>, ZeroPoints);

/// Checks a compressed-tensors layer and, with `values`, unpacks it.
pub(crate) fn read(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    values: bool,
) -> Result<(Plan, Option<Parts>)> {
    let cfg = ckpt.config();
    let ct = cfg
        .compressed
        .as_ref()
        .expect("compressed-tensors settings");
    let group = ct.group_of(prefix, &cfg.file)?;
    if ct.ignored(prefix) {
        return Err(Error::QuantConfig {
            file: cfg.file.clone(),
            field: "ignore".to_owned(),
            msg: format!("names layer `{prefix}`, which has quantized tensors"),
        });
    }
    match group.format {
        CtFormat::PackQuantized => pack_quantized(ckpt, prefix, group, values),
        CtFormat::FloatQuantized => float_quantized(ckpt, prefix, group, values),
        CtFormat::Nvfp4PackQuantized | CtFormat::Mxfp4PackQuantized => {
            fp4(ckpt, prefix, group, values)
        }
    }
}

/// The 16-bit dtype of a scale tensor (`F16` or `BF16`), as the activation dtype.
fn half_dtype(
    info: &SafetensorsInfo,
    field: &'static str,
    expected: &'static str,
) -> Result<DType> {
    check_dtype(info, field, &[Dtype::F16, Dtype::BF16], expected)?;
    Ok(if info.dtype == Dtype::F16 {
        DType::F16
    } else {
        DType::BF16
    })
}

fn pack_quantized(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    g: &CtGroup,
    values: bool,
) -> Result<(Plan, Option<Parts>)> {
    let bits = g.num_bits;
    let (pk, pk_data) = ckpt.required(prefix, "weight_packed")?;
    let (ws, ws_data) = ckpt.required(prefix, "weight_shape")?;
    let (sc, sc_data) = ckpt.required(prefix, "weight_scale")?;
    check_dtype(&pk, "weight_packed", &[Dtype::I32], "I32")?;
    check_dtype(&ws, "weight_shape", &[Dtype::I64, Dtype::I32], "I64 or I32")?;
    let act = half_dtype(&sc, "weight_scale", "F16 or BF16 (A's dtype)")?;
    let dims: Vec<i64> = if ws.dtype == Dtype::I64 {
        ws_data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    } else {
        words(ws_data)
            .into_iter()
            .map(|w| i64::from(w as i32))
            .collect()
    };
    let (n, k) = match dims[..] {
        [n, k] if n > 0 && k > 0 => (n as usize, k as usize),
        _ => {
            return Err(Error::QuantValue {
                tensor: ws.name.clone(),
                field: "weight_shape",
                msg: format!("expected [N, K], two positive integers, found {dims:?}"),
            });
        }
    };
    let from = format!("N = {n}, K = {k} from weight_shape and num_bits = {bits}");
    let words_per_row = (k * bits as usize).div_ceil(32);
    if pk.shape != [n, words_per_row] {
        let expected = format!("[{n}, {words_per_row}]");
        return Err(shape_err(&pk, "weight_packed", expected, from));
    }
    let groups = match g.strategy {
        CtStrategy::Group(size) => k.div_ceil(size),
        _ => 1,
    };
    if sc.shape != [n, groups] {
        return Err(shape_err(
            &sc,
            "weight_scale",
            format!("[{n}, {groups}]"),
            from,
        ));
    }
    let mut bytes = pk_data.len() + ws_data.len() + sc_data.len();
    let zp = if g.symmetric {
        None
    } else {
        let (zp, zp_data) = ckpt.required(prefix, "weight_zero_point")?;
        check_dtype(&zp, "weight_zero_point", &[Dtype::I32], "I32")?;
        let rows = (n * bits as usize).div_ceil(32);
        if zp.shape != [rows, groups] {
            let expected = format!("[{rows}, {groups}], packed along N");
            return Err(shape_err(&zp, "weight_zero_point", expected, from));
        }
        bytes += zp_data.len();
        Some(zp_data)
    };
    if let Some((gi, gi_data)) = ckpt.part(prefix, "weight_g_idx")? {
        check_dtype(&gi, "weight_g_idx", &[Dtype::I32, Dtype::I64], "I32 or I64")?;
        if gi.shape != [k] {
            return Err(shape_err(&gi, "weight_g_idx", format!("[{k}]"), from));
        }
        let size = match g.strategy {
            CtStrategy::Group(size) => size,
            _ => k,
        };
        let idx: Vec<i64> = if gi.dtype == Dtype::I32 {
            words(gi_data)
                .into_iter()
                .map(|w| i64::from(w as i32))
                .collect()
        } else {
            gi_data
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect()
        };
        if let Some(j) = (0..k).find(|&j| idx[j] != (j / size) as i64) {
            return Err(Error::QuantValue {
                tensor: gi.name.clone(),
                field: "weight_g_idx",
                msg: format!(
                    "weight_g_idx[{j}] = {} is not k / group_size = {}: act-order groups are not read for compressed-tensors",
                    idx[j],
                    j / size
                ),
            });
        }
        bytes += gi_data.len();
    }
    let scale = match g.strategy {
        CtStrategy::Group(size) => format!("group({size}, {act})"),
        _ => format!("channel({act})"),
    };
    let spec_text = if g.act == Some(CtAct::Int8Token) {
        // Checked by the config: 8 bits, symmetric, channel scales.
        format!("a: i8, b: i8, c: {act}, scale: {scale}")
    } else if g.symmetric {
        format!("a: {act}, b: i{bits}, scale: {scale}")
    } else {
        format!("a: {act}, b: u{bits}, scale: {scale}, zero_point: int")
    };
    let plan = Plan {
        n,
        k,
        bytes,
        format: g.describe(),
        spec_text,
    };
    if !values {
        return Ok((plan, None));
    }
    let packed = words(pk_data);
    let half = 1u8 << (bits - 1);
    let mut codes = vec![0u8; n * k];
    for (row, out) in codes.chunks_exact_mut(k).enumerate() {
        let row_words = &packed[row * words_per_row..(row + 1) * words_per_row];
        for (kk, c) in out.iter_mut().enumerate() {
            let u = stream(row_words, 1, 0, kk, bits) as u8;
            *c = if g.symmetric { u ^ half } else { u };
        }
    }
    let scales = transpose(&floats(sc_data, act), n, groups);
    let zeros = match zp {
        None => ZeroPoints::None,
        Some(data) => {
            let zw = words(data);
            let mut z = vec![0u8; groups * n];
            for (gi, out) in z.chunks_exact_mut(n).enumerate() {
                for (col, v) in out.iter_mut().enumerate() {
                    *v = stream(&zw, groups, gi, col, bits) as u8;
                }
            }
            ZeroPoints::Integer(z)
        }
    };
    Ok((plan, Some((codes, scales, Vec::new(), zeros))))
}

/// The targets of an FP8-activation descriptor: e4m3 activations need sm_89 or newer.
const FP8_ARCH: &str = ", arch: [sm_89, sm_90a]";

fn float_quantized(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    g: &CtGroup,
    values: bool,
) -> Result<(Plan, Option<Parts>)> {
    let (w, w_data) = ckpt.required(prefix, "weight")?;
    let (sc, sc_data) = ckpt.required(prefix, "weight_scale")?;
    check_dtype(&w, "weight", &[Dtype::F8_E4M3], "F8_E4M3")?;
    let [n, k] = matrix(&w, "weight")?;
    let from = format!("N = {n}, K = {k} from weight and strategy {:?}", g.strategy);
    let (spec_text, scales) = match g.strategy {
        CtStrategy::Tensor => {
            if sc.shape.iter().product::<usize>() != 1 || sc.shape.len() > 1 {
                return Err(shape_err(&sc, "weight_scale", "[1] or []".into(), from));
            }
            let act = scale_act(&sc)?;
            let s = scale_values(&sc, sc_data)?;
            let text = if g.act.is_some() {
                format!("a: e4m3, b: e4m3, c: {act}, scale: tensor(f32){FP8_ARCH}")
            } else {
                format!("a: {act}, b: e4m3, scale: tensor(f32)")
            };
            (text, s)
        }
        CtStrategy::Channel => {
            if sc.shape != [n, 1] {
                return Err(shape_err(&sc, "weight_scale", format!("[{n}, 1]"), from));
            }
            if g.act.is_some() {
                // Under e4m3 activations the channel scales may be f32 (C is bf16 then).
                let c = scale_act(&sc)?;
                let dt = if sc.dtype == Dtype::F32 {
                    DType::F32
                } else {
                    c
                };
                let s = scale_values(&sc, sc_data)?;
                (
                    format!("a: e4m3, b: e4m3, c: {c}, scale: channel({dt}){FP8_ARCH}"),
                    s,
                )
            } else {
                let act = half_dtype(
                    &sc,
                    "weight_scale",
                    "F16 or BF16 (channel scales in A's dtype; f32 channel scales have no exact descriptor)",
                )?;
                let s = floats(sc_data, act);
                (format!("a: {act}, b: e4m3, scale: channel({act})"), s)
            }
        }
        CtStrategy::Block([bn, bk]) => {
            let s = block_scales(&sc, sc_data, n, k, [bn, bk], from)?;
            let act = scale_act(&sc)?;
            let text = if g.act.is_some() {
                format!("a: e4m3, b: e4m3, c: {act}, scale: block({bn}, {bk}, f32){FP8_ARCH}")
            } else {
                format!("a: {act}, b: e4m3, scale: block({bn}, {bk}, f32)")
            };
            (text, s)
        }
        CtStrategy::Group(_) | CtStrategy::TensorGroup(_) => unreachable!("checked by the config"),
    };
    let plan = Plan {
        n,
        k,
        bytes: w_data.len() + sc_data.len(),
        format: g.describe(),
        spec_text,
    };
    let parts = values.then(|| (w_data.to_vec(), scales, Vec::new(), ZeroPoints::None));
    Ok((plan, parts))
}

fn fp4(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    g: &CtGroup,
    values: bool,
) -> Result<(Plan, Option<Parts>)> {
    let nv = g.format == CtFormat::Nvfp4PackQuantized;
    let (pk, pk_data) = ckpt.required(prefix, "weight_packed")?;
    let (sc, sc_data) = ckpt.required(prefix, "weight_scale")?;
    let mut bytes = pk_data.len() + sc_data.len();
    let scale2 = if nv {
        let (gs, gs_data) = ckpt.required(prefix, "weight_global_scale")?;
        let v = scalar_f32(&gs, gs_data, "weight_global_scale")?;
        bytes += gs_data.len();
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::QuantValue {
                tensor: gs.name.clone(),
                field: "weight_global_scale",
                msg: format!("{v} is not a positive finite global scale"),
            });
        }
        vec![(1.0 / f64::from(v)) as f32]
    } else {
        Vec::new()
    };
    let (n, k, scales) = fp4_codes_and_scales(&pk, &sc, sc_data, "weight_packed", nv)?;
    let spec_text = if nv {
        "a: bf16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)".to_owned()
    } else {
        "a: bf16, b: e2m1, scale: group(32, ue8m0)".to_owned()
    };
    let plan = Plan {
        n,
        k,
        bytes,
        format: g.describe(),
        spec_text,
    };
    let parts = values.then(|| (nibbles(pk_data), scales, scale2, ZeroPoints::None));
    Ok((plan, parts))
}

/// N, K and the scales (`[K / G, N]`) of a packed e2m1 layer: `packed` uint8 `[N, K / 2]` and
/// `scale` `[N, K / G]`, e4m3 with G = 16 (`nv`), else e8m0 exponents with G = 32.
pub(crate) fn fp4_codes_and_scales(
    pk: &SafetensorsInfo,
    sc: &SafetensorsInfo,
    sc_data: &[u8],
    packed_field: &'static str,
    nv: bool,
) -> Result<(usize, usize, Vec<f32>)> {
    check_dtype(pk, packed_field, &[Dtype::U8], "U8")?;
    let [n, half_k] = matrix(pk, packed_field)?;
    let k = 2 * half_k;
    let (size, scale_type, dtypes, dtype_names): (usize, DType, &[Dtype], &'static str) = if nv {
        (16, DType::E4M3, &[Dtype::F8_E4M3], "F8_E4M3")
    } else {
        (
            32,
            DType::UE8M0,
            &[Dtype::U8, Dtype::F8_E8M0],
            "U8 or F8_E8M0",
        )
    };
    check_dtype(sc, "weight_scale", dtypes, dtype_names)?;
    let groups = k.div_ceil(size);
    if sc.shape != [n, groups] {
        let from = format!(
            "N = {n}, K = {k} from {packed_field} {:?} (two codes a byte)",
            pk.shape
        );
        return Err(shape_err(
            sc,
            "weight_scale",
            format!("[{n}, {groups}]"),
            from,
        ));
    }
    let mut scales = Vec::with_capacity(n * groups);
    for (i, &b) in sc_data.iter().enumerate() {
        let v = scale_type
            .finite_value(u32::from(b))
            .ok_or_else(|| Error::QuantValue {
                tensor: sc.name.clone(),
                field: "weight_scale",
                msg: format!(
                    "scale of row {} group {} is code {b:#04x}, not a finite {scale_type}",
                    i / groups,
                    i % groups
                ),
            })?;
        scales.push(v as f32);
    }
    Ok((n, k, transpose(&scales, n, groups)))
}

/// The e2m1 codes of bytes holding two each, the even element in the low nibble.
pub(crate) fn nibbles(data: &[u8]) -> Vec<u8> {
    data.iter().flat_map(|&b| [b & 0xF, b >> 4]).collect()
}

/// `[rows, cols]` row-major to `[cols, rows]`.
pub(crate) fn transpose<T: Copy>(v: &[T], rows: usize, cols: usize) -> Vec<T> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| v[r * cols + c]))
        .collect()
}

/// The activation dtype that goes with an f32 scale (tensor, block): f16 for f16 scales, else
/// bf16.
fn scale_act(sc: &SafetensorsInfo) -> Result<DType> {
    check_dtype(
        sc,
        "weight_scale",
        &[Dtype::F32, Dtype::BF16, Dtype::F16],
        "F32, BF16 or F16",
    )?;
    Ok(if sc.dtype == Dtype::F16 {
        DType::F16
    } else {
        DType::BF16
    })
}

/// The values of an F32 / BF16 / F16 / F8_E8M0 scale tensor, as f32 (exact).
pub(crate) fn scale_values(sc: &SafetensorsInfo, data: &[u8]) -> Result<Vec<f32>> {
    Ok(match sc.dtype {
        Dtype::F32 => words(data).into_iter().map(f32::from_bits).collect(),
        Dtype::F16 => floats(data, DType::F16),
        Dtype::BF16 => floats(data, DType::BF16),
        Dtype::F8_E8M0 => {
            let mut v = Vec::with_capacity(data.len());
            for (i, &b) in data.iter().enumerate() {
                let x =
                    DType::UE8M0
                        .finite_value(u32::from(b))
                        .ok_or_else(|| Error::QuantValue {
                            tensor: sc.name.clone(),
                            field: sc_field(sc),
                            msg: format!("scale {i} is code {b:#04x}, not a finite ue8m0"),
                        })?;
                v.push(x as f32);
            }
            v
        }
        _ => {
            return Err(Error::QuantDtype {
                tensor: sc.name.clone(),
                field: sc_field(sc),
                found: format!("{:?}", sc.dtype),
                expected: "F32, BF16 or F16",
            });
        }
    })
}

/// Block scales `[ceil(N / bn), ceil(K / bk)]` as the descriptor's `[ceil(K / bk), ceil(N / bn)]`.
pub(crate) fn block_scales(
    sc: &SafetensorsInfo,
    data: &[u8],
    n: usize,
    k: usize,
    [bn, bk]: [usize; 2],
    from: String,
) -> Result<Vec<f32>> {
    let (rows, cols) = (n.div_ceil(bn), k.div_ceil(bk));
    if sc.shape != [rows, cols] {
        return Err(shape_err(
            sc,
            sc_field(sc),
            format!("[{rows}, {cols}]"),
            from,
        ));
    }
    Ok(transpose(&scale_values(sc, data)?, rows, cols))
}

fn sc_field(sc: &SafetensorsInfo) -> &'static str {
    if sc.name.ends_with("weight_scale_inv") {
        "weight_scale_inv"
    } else {
        "weight_scale"
    }
}

/// A one-element f32 tensor (`[]` or `[1]`).
pub(crate) fn scalar_f32(info: &SafetensorsInfo, data: &[u8], field: &'static str) -> Result<f32> {
    check_dtype(info, field, &[Dtype::F32], "F32")?;
    if info.shape.len() > 1 || info.shape.iter().product::<usize>() != 1 {
        return Err(shape_err(
            info,
            field,
            "[] or [1]".into(),
            "one scale per tensor".into(),
        ));
    }
    Ok(f32::from_bits(words(data)[0]))
}
