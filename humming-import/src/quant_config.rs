//! The quantization settings of a model folder: `config.json`'s `quantization_config`, or the
//! `quantize_config.json` of older GPTQ folders.
//!
//! Only what the unpacking needs is read, each key under the names its writers use (Hugging Face
//! `GPTQConfig` / `AwqConfig`, AutoGPTQ, GPTQModel, AutoAWQ); a key that is present with a value
//! outside the supported set is an error naming it, never ignored. Defaults are the writers'
//! documented ones: GPTQ `sym = true`, `desc_act = false`, `checkpoint_format = "gptq"`; AWQ
//! `zero_point = true`, `version = "gemm"`. compressed-tensors settings are read by
//! [`crate::compressed_config`]; DeepSeek FP8 (`quant_method: "fp8"`) and NVIDIA ModelOpt NVFP4
//! (`quant_method: "modelopt"`, or `hf_quant_config.json`'s `quantization`) here.

use crate::compressed_config::CompressedConfig;
use crate::error::{Error, Result};
use serde_json::{Map, Value};
use std::path::Path;

/// The quantization methods whose checkpoints are read.
pub const QUANT_METHODS: &str = "gptq, awq, compressed-tensors, fp8, modelopt";

/// A quantization method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantMethod {
    /// GPTQ (AutoGPTQ / GPTQModel packing).
    Gptq,
    /// AWQ, GEMM packing (AutoAWQ).
    Awq,
    /// compressed-tensors (`quant_method: "compressed-tensors"`): the schemes are in
    /// [`QuantConfig::compressed`].
    CompressedTensors,
    /// FP8 e4m3 weights with f32 `weight_scale_inv` (`quant_method: "fp8"`, DeepSeek-V3 style):
    /// per block of [`QuantConfig::weight_block_size`] (Hugging Face `FineGrainedFP8Config`:
    /// `[128, 128]` when the key is absent), or per tensor when it is `null`.
    Fp8,
    /// NVIDIA ModelOpt NVFP4 (`quant_method: "modelopt"`, `quant_algo: "NVFP4"`).
    ModelOptNvfp4,
}

/// How GPTQ stores its zero points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GptqFormat {
    /// `checkpoint_format: "gptq"`: each stored zero point is `(z - 1) mod 2^bits`.
    V1,
    /// `checkpoint_format: "gptq_v2"`: zero points stored as they are.
    V2,
}

/// The settings of a quantized checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantConfig {
    /// The file the settings came from (`config.json` or `quantize_config.json`).
    pub file: String,
    /// The method.
    pub method: QuantMethod,
    /// Bits per weight.
    pub bits: u32,
    /// Weights per scale group along K; `None` for one group over all of K (`group_size: -1`).
    pub group_size: Option<usize>,
    /// Symmetric (GPTQ `sym`; AWQ: `!zero_point`).
    pub sym: bool,
    /// GPTQ act-order (`desc_act`): groups follow `g_idx`, which need not be sorted.
    pub desc_act: bool,
    /// GPTQ zero-point convention (AWQ: [`GptqFormat::V2`], stored as they are).
    pub format: GptqFormat,
    /// The compressed-tensors settings (its methods only).
    pub compressed: Option<CompressedConfig>,
    /// FP8 `weight_block_size` `[N extent, K extent]` (`None`: one scale per tensor).
    pub weight_block_size: Option<[usize; 2]>,
    /// FP8 `scale_fmt: "ue8m0"`: the block scales are stored as e8m0 exponents (F8_E8M0), not
    /// f32.
    pub ue8m0_scales: bool,
}

impl QuantConfig {
    /// Reads the settings of the model folder `dir`: `config.json`'s `quantization_config`, else
    /// `quantize_config.json` (whose `quant_method` may be absent: that file is GPTQ's).
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Json`]; [`Error::QuantConfig`] if neither holds settings or a key
    /// is missing or malformed; [`Error::UnsupportedQuant`] for a method or value not read here.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        Self::from_dir_as(dir, false)
    }

    /// As [`QuantConfig::from_dir`], but with `weight_only` every compressed-tensors group's
    /// `input_activations` are dropped first (see `QuantizedCheckpoint::open_weight_only`).
    pub(crate) fn from_dir_as(dir: &Path, weight_only: bool) -> Result<Self> {
        let config = dir.join("config.json");
        if config.is_file() {
            let json = read_json(&config)?;
            if let Some(q) = json.get("quantization_config") {
                let mut q = q.clone();
                if weight_only
                    && let Some(groups) = q
                        .get_mut("config_groups")
                        .and_then(serde_json::Value::as_object_mut)
                {
                    for g in groups.values_mut() {
                        if let Some(g) = g.as_object_mut() {
                            g.remove("input_activations");
                        }
                    }
                }
                return Self::from_json(&q, &config.display().to_string(), false);
            }
        }
        let modelopt = dir.join("hf_quant_config.json");
        if modelopt.is_file() {
            let json = read_json(&modelopt)?;
            let file = modelopt.display().to_string();
            let q = json.get("quantization").ok_or_else(|| Error::QuantConfig {
                file: file.clone(),
                field: "quantization".to_owned(),
                msg: "missing".to_owned(),
            })?;
            return Self::modelopt(&Keys::of(q, &file)?);
        }
        let old = dir.join("quantize_config.json");
        if old.is_file() {
            return Self::from_json(&read_json(&old)?, &old.display().to_string(), true);
        }
        Err(Error::QuantConfig {
            file: config.display().to_string(),
            field: "quantization_config".to_owned(),
            msg:
                "absent, and there is no quantize_config.json beside it: not a quantized checkpoint"
                    .to_owned(),
        })
    }

    /// Reads the settings from a `quantization_config` JSON object; `file` names it in errors.
    /// `gptq_file`: the object is a `quantize_config.json`, GPTQ when `quant_method` is absent.
    ///
    /// # Errors
    /// As [`QuantConfig::from_dir`].
    pub fn from_json(value: &Value, file: &str, gptq_file: bool) -> Result<Self> {
        let keys = Keys::of(value, file)?;
        let method = match keys.string("quant_method")? {
            None if gptq_file => "gptq".to_owned(),
            None => return Err(keys.missing("quant_method")),
            Some(m) => m.to_ascii_lowercase(),
        };
        match method.as_str() {
            "gptq" => Self::gptq(&keys),
            "awq" => Self::awq(&keys),
            "compressed-tensors" => Ok(QuantConfig {
                compressed: Some(CompressedConfig::from_json(keys.obj, file)?),
                ..Self::plain(&keys, QuantMethod::CompressedTensors, 0)
            }),
            "fp8" => Self::fp8(&keys),
            "modelopt" => Self::modelopt(&keys),
            _ => Err(Error::UnsupportedQuant {
                file: file.to_owned(),
                field: "quant_method".to_owned(),
                value: method,
                supported: QUANT_METHODS,
            }),
        }
    }

    fn gptq(keys: &Keys<'_>) -> Result<Self> {
        let bits = keys.uint("bits")?.ok_or_else(|| keys.missing("bits"))?;
        if !matches!(bits, 2 | 3 | 4 | 8) {
            return Err(keys.unsupported("bits", bits.to_string(), "2, 3, 4, 8"));
        }
        if let Some(d) = keys.obj.get("dynamic")
            && !(d.is_null() || d.as_object().is_some_and(Map::is_empty))
        {
            // GPTQModel's per-module overrides (other bits or group sizes for some layers).
            return Err(keys.unsupported(
                "dynamic",
                d.to_string(),
                "absent or empty (per-module overrides are not read)",
            ));
        }
        let format_key = if keys.obj.contains_key("checkpoint_format") {
            "checkpoint_format"
        } else {
            "format"
        };
        let format = match keys.string(format_key)?.as_deref() {
            None | Some("gptq") => GptqFormat::V1,
            Some("gptq_v2") => GptqFormat::V2,
            Some(other) => {
                return Err(keys.unsupported(format_key, other.to_owned(), "gptq, gptq_v2"));
            }
        };
        Ok(QuantConfig {
            file: keys.file.to_owned(),
            method: QuantMethod::Gptq,
            bits: bits as u32,
            group_size: keys.group_size(&["group_size"])?,
            sym: keys.bool("sym")?.unwrap_or(true),
            desc_act: keys.bool("desc_act")?.unwrap_or(false),
            format,
            compressed: None,
            weight_block_size: None,
            ue8m0_scales: false,
        })
    }

    fn awq(keys: &Keys<'_>) -> Result<Self> {
        let bits_key = if keys.obj.contains_key("bits") {
            "bits"
        } else {
            "w_bit"
        };
        let bits = keys.uint(bits_key)?.ok_or_else(|| keys.missing("bits"))?;
        if bits != 4 {
            return Err(keys.unsupported(bits_key, bits.to_string(), "4"));
        }
        if let Some(v) = keys.string("version")?
            && !v.eq_ignore_ascii_case("gemm")
        {
            return Err(keys.unsupported("version", v, "gemm"));
        }
        if keys.bool("zero_point")? == Some(false) {
            return Err(keys.unsupported("zero_point", "false".to_owned(), "true"));
        }
        Ok(QuantConfig {
            file: keys.file.to_owned(),
            method: QuantMethod::Awq,
            bits: 4,
            group_size: keys.group_size(&["group_size", "q_group_size"])?,
            sym: false,
            desc_act: false,
            format: GptqFormat::V2,
            compressed: None,
            weight_block_size: None,
            ue8m0_scales: false,
        })
    }

    /// Settings of a method whose GPTQ fields do not apply: symmetric, no groups.
    fn plain(keys: &Keys<'_>, method: QuantMethod, bits: u32) -> Self {
        QuantConfig {
            file: keys.file.to_owned(),
            method,
            bits,
            group_size: None,
            sym: true,
            desc_act: false,
            format: GptqFormat::V2,
            compressed: None,
            weight_block_size: None,
            ue8m0_scales: false,
        }
    }

    /// DeepSeek-style FP8 (Hugging Face `FineGrainedFP8Config`): `fmt` e4m3 (when present),
    /// `weight_block_size` `[N, K]` extents (absent: `[128, 128]`; `null`: per tensor),
    /// `scale_fmt` `float` (default) or `ue8m0`.
    fn fp8(keys: &Keys<'_>) -> Result<Self> {
        if let Some(f) = keys.string("fmt")?
            && f != "e4m3"
        {
            return Err(keys.unsupported("fmt", f, "e4m3"));
        }
        let ue8m0_scales = match keys.string("scale_fmt")?.as_deref() {
            None | Some("float") => false,
            Some("ue8m0") => true,
            Some(other) => {
                return Err(keys.unsupported("scale_fmt", other.to_owned(), "float, ue8m0"));
            }
        };
        let block = match keys.obj.get("weight_block_size") {
            None => Some([128, 128]),
            Some(Value::Null) => None,
            Some(v) => {
                let dims: Option<Vec<usize>> = v.as_array().map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_u64().filter(|&d| d > 0).map(|d| d as usize))
                        .collect()
                });
                match dims.as_deref() {
                    Some(&[bn, bk]) if v.as_array().is_some_and(|a| a.len() == 2) => Some([bn, bk]),
                    _ => {
                        return Err(keys.bad(
                            "weight_block_size",
                            "[N extent, K extent], two positive integers",
                            v,
                        ));
                    }
                }
            }
        };
        Ok(QuantConfig {
            weight_block_size: block,
            ue8m0_scales,
            ..Self::plain(keys, QuantMethod::Fp8, 8)
        })
    }

    /// ModelOpt: `quant_algo` NVFP4 (its group size, when present, 16).
    fn modelopt(keys: &Keys<'_>) -> Result<Self> {
        let algo = keys
            .string("quant_algo")?
            .ok_or_else(|| keys.missing("quant_algo"))?;
        if algo != "NVFP4" {
            return Err(keys.unsupported("quant_algo", algo, "NVFP4"));
        }
        if let Some(g) = keys.uint("group_size")?
            && g != 16
        {
            return Err(keys.unsupported("group_size", g.to_string(), "16 (NVFP4)"));
        }
        Ok(QuantConfig {
            group_size: Some(16),
            ..Self::plain(keys, QuantMethod::ModelOptNvfp4, 4)
        })
    }

    /// A short description, e.g. `GPTQ 4-bit g128 asym v1 act-order`.
    pub fn describe(&self) -> String {
        let group = self
            .group_size
            .map_or_else(|| "channel".to_owned(), |g| format!("g{g}"));
        match self.method {
            QuantMethod::Gptq => format!(
                "GPTQ {}-bit {group} {} {}{}",
                self.bits,
                if self.sym { "sym" } else { "asym" },
                if self.format == GptqFormat::V1 {
                    "v1"
                } else {
                    "v2"
                },
                if self.desc_act { " act-order" } else { "" }
            ),
            QuantMethod::Awq => format!("AWQ {}-bit {group} GEMM", self.bits),
            QuantMethod::CompressedTensors => "compressed-tensors".to_owned(),
            QuantMethod::Fp8 => match self.weight_block_size {
                Some([bn, bk]) => format!("FP8 e4m3 block {bn}x{bk}"),
                None => "FP8 e4m3 per tensor".to_owned(),
            },
            QuantMethod::ModelOptNvfp4 => "ModelOpt NVFP4".to_owned(),
        }
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| Error::Json {
        path: path.display().to_string(),
        source,
    })
}

/// Typed access to the keys of a settings object.
struct Keys<'a> {
    obj: &'a Map<String, Value>,
    file: &'a str,
}

impl<'a> Keys<'a> {
    fn of(value: &'a Value, file: &'a str) -> Result<Self> {
        let obj = value.as_object().ok_or_else(|| Error::QuantConfig {
            file: file.to_owned(),
            field: "quantization_config".to_owned(),
            msg: format!("expected a JSON object, found {value}"),
        })?;
        Ok(Keys { obj, file })
    }

    fn bad(&self, field: &str, expected: &str, v: &Value) -> Error {
        Error::QuantConfig {
            file: self.file.to_owned(),
            field: field.to_owned(),
            msg: format!("expected {expected}, found {v}"),
        }
    }

    fn missing(&self, field: &str) -> Error {
        Error::QuantConfig {
            file: self.file.to_owned(),
            field: field.to_owned(),
            msg: "missing".to_owned(),
        }
    }

    fn unsupported(&self, field: &str, value: String, supported: &'static str) -> Error {
        Error::UnsupportedQuant {
            file: self.file.to_owned(),
            field: field.to_owned(),
            value,
            supported,
        }
    }

    fn string(&self, field: &str) -> Result<Option<String>> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.bad(field, "a string", v)),
        }
    }

    fn bool(&self, field: &str) -> Result<Option<bool>> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.bad(field, "true or false", v)),
        }
    }

    fn int(&self, field: &str) -> Result<Option<i64>> {
        match self.obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.bad(field, "an integer", v)),
        }
    }

    fn uint(&self, field: &str) -> Result<Option<u64>> {
        match self.int(field)? {
            None => Ok(None),
            Some(i) if i > 0 => Ok(Some(i as u64)),
            Some(i) => Err(self.bad(field, "a positive integer", &Value::from(i))),
        }
    }

    /// The group size under the first of `fields` present: `-1` means one group over K.
    fn group_size(&self, fields: &[&str]) -> Result<Option<usize>> {
        let field = fields
            .iter()
            .copied()
            .find(|f| self.obj.contains_key(*f))
            .ok_or_else(|| self.missing(fields[0]))?;
        match self.int(field)? {
            Some(-1) => Ok(None),
            Some(g) if g > 0 => Ok(Some(g as usize)),
            Some(g) => Err(self.bad(field, "-1 or a positive integer", &Value::from(g))),
            None => Err(self.missing(field)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writers_key_names_and_defaults() {
        // AutoGPTQ's quantize_config.json of older folders: no quant_method, no checkpoint_format.
        let old = json!({"bits": 4, "group_size": 128, "desc_act": true, "sym": false});
        let c = QuantConfig::from_json(&old, "quantize_config.json", true).unwrap();
        assert_eq!(
            (c.method, c.bits, c.group_size, c.sym, c.desc_act, c.format),
            (QuantMethod::Gptq, 4, Some(128), false, true, GptqFormat::V1)
        );
        // ... which config.json must name.
        let e = QuantConfig::from_json(&old, "config.json", false).unwrap_err();
        assert!(matches!(&e, Error::QuantConfig { field, .. } if field == "quant_method"));
        // GPTQModel's older `format` key, and its v2.
        let v2 = json!({"quant_method": "GPTQ", "bits": 8, "group_size": -1, "format": "gptq_v2"});
        let c = QuantConfig::from_json(&v2, "config.json", false).unwrap();
        assert_eq!(
            (c.group_size, c.sym, c.format),
            (None, true, GptqFormat::V2)
        );
        assert_eq!(c.describe(), "GPTQ 8-bit channel sym v2");
        // AutoAWQ's own key names.
        let awq = json!({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM", "zero_point": true});
        let c = QuantConfig::from_json(&awq, "config.json", false).unwrap();
        assert_eq!(
            (c.method, c.bits, c.group_size),
            (QuantMethod::Awq, 4, Some(64))
        );
        let gemv = json!({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"});
        let e = QuantConfig::from_json(&gemv, "config.json", false).unwrap_err();
        assert!(matches!(&e, Error::UnsupportedQuant { field, .. } if field == "version"));
        // Hugging Face FineGrainedFP8Config: an absent block size is [128, 128], null per tensor.
        let fp8 = json!({"quant_method": "fp8", "activation_scheme": "dynamic"});
        let c = QuantConfig::from_json(&fp8, "config.json", false).unwrap();
        assert_eq!(
            (c.weight_block_size, c.ue8m0_scales),
            (Some([128, 128]), false)
        );
        let fp8 = json!({"quant_method": "fp8", "weight_block_size": null, "scale_fmt": "ue8m0"});
        let c = QuantConfig::from_json(&fp8, "config.json", false).unwrap();
        assert_eq!((c.weight_block_size, c.ue8m0_scales), (None, true));
        let fp8 = json!({"quant_method": "fp8", "weight_block_size": [128]});
        let e = QuantConfig::from_json(&fp8, "config.json", false).unwrap_err();
        assert!(matches!(&e, Error::QuantConfig { field, .. } if field == "weight_block_size"));
        // ModelOpt settings in config.json.
        let mo = json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16});
        let c = QuantConfig::from_json(&mo, "config.json", false).unwrap();
        assert_eq!(
            (c.method, c.group_size),
            (QuantMethod::ModelOptNvfp4, Some(16))
        );
        let mo = json!({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 32});
        let e = QuantConfig::from_json(&mo, "config.json", false).unwrap_err();
        assert!(matches!(&e, Error::UnsupportedQuant { field, .. } if field == "group_size"));
        let group0 = json!({"quant_method": "gptq", "bits": 4, "group_size": 0});
        let e = QuantConfig::from_json(&group0, "config.json", false).unwrap_err();
        assert!(matches!(&e, Error::QuantConfig { field, .. } if field == "group_size"));
    }
}
