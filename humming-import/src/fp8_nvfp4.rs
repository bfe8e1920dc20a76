//! DeepSeek-style FP8 and NVIDIA ModelOpt NVFP4 layers unpacked into
//! [`QuantizedWeights`](crate::QuantizedWeights) without loss, with the descriptor of the kernel
//! that runs them.
//!
//! | method | tensors | value | descriptor |
//! |--------|---------|-------|------------|
//! | `fp8` with `weight_block_size: [bn, bk]` (absent: `[128, 128]`) | `weight` F8_E4M3 `[N, K]`, `weight_scale_inv` f32 (`scale_fmt: "ue8m0"`: F8_E8M0) `[ceil(N / bn), ceil(K / bk)]` | `fp8 * scale_inv` | `a: bf16, b: e4m3, scale: block(bn, bk, f32)` |
//! | `fp8` with `weight_block_size: null` | `weight`, `weight_scale_inv` f32 `[]` or `[1]` | `fp8 * scale_inv` | `a: bf16, b: e4m3, scale: tensor(f32)` |
//! | `modelopt` NVFP4 | `weight` uint8 `[N, K / 2]` (element `2 i` in the low nibble of byte `i`), `weight_scale` F8_E4M3 `[N, K / 16]`, `weight_scale_2` f32 `[]` or `[1]` | `fp4 * weight_scale * weight_scale_2` | `a: bf16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)` |
//!
//! N and K come from `weight`'s shape (ModelOpt: its packed shape, two codes a byte); the scale
//! tensors must agree. The block descriptor's extents must be ones the kernels take (powers of
//! two, `bn` at least 64), else the descriptor is refused ([`crate::Error::Spec`]).

use crate::compressed::{Parts, Plan, block_scales, fp4_codes_and_scales, nibbles, scalar_f32};
use crate::error::Result;
use crate::gptq::{check_dtype, matrix};
use crate::quant_config::QuantMethod;
use crate::quantized::QuantizedCheckpoint;
use humming_runtime::ZeroPoints;
use safetensors::Dtype;

/// Checks a DeepSeek FP8 or ModelOpt NVFP4 layer and, with `values`, unpacks it.
pub(crate) fn read(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    values: bool,
) -> Result<(Plan, Option<Parts>)> {
    let cfg = ckpt.config();
    let format = cfg.describe();
    if cfg.method == QuantMethod::ModelOptNvfp4 {
        let (pk, pk_data) = ckpt.required(prefix, "weight")?;
        let (sc, sc_data) = ckpt.required(prefix, "weight_scale")?;
        let (s2, s2_data) = ckpt.required(prefix, "weight_scale_2")?;
        let scale2 = scalar_f32(&s2, s2_data, "weight_scale_2")?;
        let (n, k, scales) = fp4_codes_and_scales(&pk, &sc, sc_data, "weight", true)?;
        let plan = Plan {
            n,
            k,
            bytes: pk_data.len() + sc_data.len() + s2_data.len(),
            format,
            spec_text: "a: bf16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)".to_owned(),
        };
        let parts = values.then(|| (nibbles(pk_data), scales, vec![scale2], ZeroPoints::None));
        return Ok((plan, parts));
    }
    let (w, w_data) = ckpt.required(prefix, "weight")?;
    let (sc, sc_data) = ckpt.required(prefix, "weight_scale_inv")?;
    check_dtype(&w, "weight", &[Dtype::F8_E4M3], "F8_E4M3")?;
    let [n, k] = matrix(&w, "weight")?;
    let (spec_text, scales) = match cfg.weight_block_size {
        Some([bn, bk]) => {
            let from = format!(
                "N = {n}, K = {k} from weight and weight_block_size [{bn}, {bk}] in {}",
                cfg.file
            );
            let (dtype, name) = if cfg.ue8m0_scales {
                (Dtype::F8_E8M0, "F8_E8M0 (scale_fmt ue8m0)")
            } else {
                (Dtype::F32, "F32 (scale_fmt float)")
            };
            check_dtype(&sc, "weight_scale_inv", &[dtype], name)?;
            let s = block_scales(&sc, sc_data, n, k, [bn, bk], from)?;
            (
                format!("a: bf16, b: e4m3, scale: block({bn}, {bk}, f32)"),
                s,
            )
        }
        None => {
            check_dtype(&sc, "weight_scale_inv", &[Dtype::F32], "F32")?;
            let s = scalar_f32(&sc, sc_data, "weight_scale_inv")?;
            ("a: bf16, b: e4m3, scale: tensor(f32)".to_owned(), vec![s])
        }
    };
    let plan = Plan {
        n,
        k,
        bytes: w_data.len() + sc_data.len(),
        format,
        spec_text,
    };
    let parts = values.then(|| (w_data.to_vec(), scales, Vec::new(), ZeroPoints::None));
    Ok((plan, parts))
}
