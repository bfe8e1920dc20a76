//! compressed-tensors settings (`quant_method: "compressed-tensors"`): the config groups, each
//! with its targets, weight scheme and storage format, and the `ignore` list.
//!
//! Read as the package (0.20) writes them: `config_groups.<name>.targets`, `.weights`
//! (`num_bits`, `type` int / float, `symmetric`, `strategy`, `group_size`, `block_structure`),
//! `.format` or else the top-level `format`, and `.input_activations` (W8A8 schemes). Every scheme
//! that is read is checked against its format here, so that a layer's tensors are the only thing
//! left to check.
//!
//! `input_activations` (absent or `null`: weight-only) are read only in the forms a kernel takes
//! exactly: 8-bit, symmetric, `dynamic: true`, with `strategy: "token"` over FP8 tensor or channel
//! weights (`type: "float"`, `float-quantized`) or over int8 symmetric channel weights
//! (`type: "int"`, `pack-quantized` with 8 bits), or `strategy: "group"` with `group_size` equal to
//! the K extent of FP8 block weights. Anything else (static or asymmetric activations, other widths,
//! strategies or weight schemes) is [`Error::UnsupportedQuant`] on
//! `config_groups.<group>.input_activations.<field>`: the activations are never dropped silently
//! (`QuantizedCheckpoint::open_weight_only` drops them on request, before this reader).
//!
//! A layer's group is chosen by its targets: a target equal to the layer's name first, then a
//! `re:` pattern matching from the start of the name, then the class `Linear` (every quantized
//! layer is one); two groups matching at the same rank are an error naming both.

use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// The storage formats that are read.
pub const CT_FORMATS: &str =
    "pack-quantized, float-quantized, nvfp4-pack-quantized, mxfp4-pack-quantized";

/// A compressed-tensors storage format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtFormat {
    /// Integers of 2 to 8 bits packed into int32 `weight_packed` (32 codes in `num_bits` words).
    PackQuantized,
    /// FP8 e4m3 `weight`.
    FloatQuantized,
    /// Two e2m1 codes a byte, e4m3 scales per 16, f32 `weight_global_scale`.
    Nvfp4PackQuantized,
    /// Two e2m1 codes a byte, e8m0 exponents per 32.
    Mxfp4PackQuantized,
}

impl CtFormat {
    /// The format's name in the settings.
    pub fn name(self) -> &'static str {
        match self {
            CtFormat::PackQuantized => "pack-quantized",
            CtFormat::FloatQuantized => "float-quantized",
            CtFormat::Nvfp4PackQuantized => "nvfp4-pack-quantized",
            CtFormat::Mxfp4PackQuantized => "mxfp4-pack-quantized",
        }
    }
}

/// How the weights' scales are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtStrategy {
    /// One scale.
    Tensor,
    /// One scale per output channel.
    Channel,
    /// One scale per output channel and `group_size` inputs.
    Group(usize),
    /// One scale per `[N extent, K extent]` block.
    Block([usize; 2]),
    /// Group scales under a per-tensor global scale (NVFP4).
    TensorGroup(usize),
}

/// One config group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtGroup {
    /// Its key in `config_groups`.
    pub name: String,
    /// Its targets (layer names, `re:` patterns, module classes).
    pub targets: Vec<String>,
    /// Its storage format.
    pub format: CtFormat,
    /// Bits per weight.
    pub num_bits: u32,
    /// Symmetric (no zero points).
    pub symmetric: bool,
    /// The scale layout.
    pub strategy: CtStrategy,
    /// Its `input_activations`, `None` for a weight-only scheme.
    pub act: Option<CtAct>,
}

/// The dynamic 8-bit activation quantization of a W8A8 group (symmetric, scales computed per
/// token or per `1 x group` at run time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtAct {
    /// FP8 e4m3, one scale per token (row of A).
    Fp8Token,
    /// FP8 e4m3, one scale per `1 x group` slice of a row (block weights of that K extent).
    Fp8Group(usize),
    /// int8, one scale per token.
    Int8Token,
}

impl CtGroup {
    /// A short description, e.g. `compressed-tensors pack-quantized int4 g128 asym`.
    pub fn describe(&self) -> String {
        let strategy = match self.strategy {
            CtStrategy::Tensor => "tensor".to_owned(),
            CtStrategy::Channel => "channel".to_owned(),
            CtStrategy::Group(g) | CtStrategy::TensorGroup(g) => format!("g{g}"),
            CtStrategy::Block([bn, bk]) => format!("block {bn}x{bk}"),
        };
        let kind = match self.format {
            CtFormat::PackQuantized => format!(
                "int{} {strategy} {}",
                self.num_bits,
                if self.symmetric { "sym" } else { "asym" }
            ),
            CtFormat::FloatQuantized => format!("fp8 e4m3 {strategy}"),
            CtFormat::Nvfp4PackQuantized | CtFormat::Mxfp4PackQuantized => String::new(),
        };
        let act = match self.act {
            None => String::new(),
            Some(CtAct::Fp8Token) => ", fp8 dynamic per-token activations".to_owned(),
            Some(CtAct::Fp8Group(g)) => format!(", fp8 dynamic 1x{g} activations"),
            Some(CtAct::Int8Token) => ", int8 dynamic per-token activations".to_owned(),
        };
        let text = format!("compressed-tensors {} {kind}", self.format.name());
        format!("{}{act}", text.trim_end())
    }
}

/// The compressed-tensors settings of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressedConfig {
    /// The config groups, in key order.
    pub groups: Vec<CtGroup>,
    /// Layers left unquantized (names or `re:` patterns).
    pub ignore: Vec<String>,
}

impl CompressedConfig {
    /// Reads the settings object `obj` of `file`.
    ///
    /// # Errors
    /// [`Error::QuantConfig`] for a missing or malformed key, [`Error::UnsupportedQuant`] for a
    /// format, strategy, type or width not read, each naming the key (`config_groups.<group>...`).
    pub fn from_json(obj: &Map<String, Value>, file: &str) -> Result<Self> {
        let cfg = |field: &str, msg: String| Error::QuantConfig {
            file: file.to_owned(),
            field: field.to_owned(),
            msg,
        };
        let unsupported =
            |field: &str, value: String, supported: &'static str| Error::UnsupportedQuant {
                file: file.to_owned(),
                field: field.to_owned(),
                value,
                supported,
            };
        if let Some(s) = obj.get("quantization_status").and_then(Value::as_str)
            && s != "compressed"
        {
            return Err(unsupported(
                "quantization_status",
                s.to_owned(),
                "compressed (the packed tensors)",
            ));
        }
        let global = obj.get("format").and_then(Value::as_str);
        let groups_obj = obj
            .get("config_groups")
            .and_then(Value::as_object)
            .ok_or_else(|| cfg("config_groups", "missing, or not an object".to_owned()))?;
        let mut groups = Vec::new();
        for (name, g) in groups_obj {
            let key = |k: &str| format!("config_groups.{name}.{k}");
            let targets = strings(g.get("targets"))
                .ok_or_else(|| cfg(&key("targets"), "expected a list of strings".to_owned()))?;
            let format_name = match g.get("format").and_then(Value::as_str) {
                Some(f) => (f, key("format")),
                None => (
                    global
                        .ok_or_else(|| cfg("format", "missing (and the group has none)".into()))?,
                    "format".to_owned(),
                ),
            };
            let format = match format_name.0 {
                "pack-quantized" => CtFormat::PackQuantized,
                "float-quantized" => CtFormat::FloatQuantized,
                "nvfp4-pack-quantized" => CtFormat::Nvfp4PackQuantized,
                "mxfp4-pack-quantized" => CtFormat::Mxfp4PackQuantized,
                other => return Err(unsupported(&format_name.1, other.to_owned(), CT_FORMATS)),
            };
            let w = g
                .get("weights")
                .and_then(Value::as_object)
                .ok_or_else(|| cfg(&key("weights"), "missing, or not an object".to_owned()))?;
            let wkey = |k: &str| key(&format!("weights.{k}"));
            let num_bits =
                w.get("num_bits").and_then(Value::as_u64).ok_or_else(|| {
                    cfg(&wkey("num_bits"), "expected a positive integer".to_owned())
                })? as u32;
            let ty = w.get("type").and_then(Value::as_str).unwrap_or("int");
            let symmetric = w.get("symmetric").and_then(Value::as_bool).unwrap_or(true);
            let group_size = w.get("group_size").and_then(Value::as_i64);
            let strategy_name = w
                .get("strategy")
                .and_then(Value::as_str)
                .unwrap_or("tensor");
            let strategy = match (strategy_name, group_size) {
                ("tensor", _) => CtStrategy::Tensor,
                ("channel", _) => CtStrategy::Channel,
                ("group", Some(g)) if g > 0 => CtStrategy::Group(g as usize),
                ("tensor_group", Some(g)) if g > 0 => CtStrategy::TensorGroup(g as usize),
                ("group" | "tensor_group", _) => {
                    return Err(cfg(
                        &wkey("group_size"),
                        format!("expected a positive integer for strategy {strategy_name}"),
                    ));
                }
                ("block", _) => {
                    let dims: Vec<u64> = w
                        .get("block_structure")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default();
                    match dims[..] {
                        [bn, bk] if bn > 0 && bk > 0 => {
                            CtStrategy::Block([bn as usize, bk as usize])
                        }
                        _ => {
                            return Err(cfg(
                                &wkey("block_structure"),
                                "expected [N extent, K extent], two positive integers".into(),
                            ));
                        }
                    }
                }
                (other, _) => {
                    return Err(unsupported(
                        &wkey("strategy"),
                        other.to_owned(),
                        "tensor, channel, group, block, tensor_group",
                    ));
                }
            };
            let mut group = CtGroup {
                name: name.clone(),
                targets,
                format,
                num_bits,
                symmetric,
                strategy,
                act: None,
            };
            check_scheme(&group, ty, &wkey, &unsupported)?;
            group.act = match g.get("input_activations") {
                None | Some(Value::Null) => None,
                Some(Value::Object(a)) => Some(activations(
                    &group,
                    a,
                    &|k: &str| key(&format!("input_activations.{k}")),
                    &unsupported,
                )?),
                Some(_) => {
                    return Err(cfg(
                        &key("input_activations"),
                        "expected an object or null".to_owned(),
                    ));
                }
            };
            groups.push(group);
        }
        if groups.is_empty() {
            return Err(cfg("config_groups", "empty".to_owned()));
        }
        let ignore = match obj.get("ignore") {
            None | Some(Value::Null) => Vec::new(),
            v => strings(v).ok_or_else(|| cfg("ignore", "expected a list of strings".into()))?,
        };
        Ok(CompressedConfig { groups, ignore })
    }

    /// Whether layer `prefix` is in `ignore`.
    pub fn ignored(&self, prefix: &str) -> bool {
        self.ignore
            .iter()
            .any(|t| matches!(matches_target(t, prefix), Some(2 | 3)))
    }

    /// The group of layer `prefix` (see the module doc), from settings file `file`.
    ///
    /// # Errors
    /// [`Error::QuantConfig`] on `config_groups` when no group or two groups of the same rank
    /// target the layer.
    pub fn group_of(&self, prefix: &str, file: &str) -> Result<&CtGroup> {
        let ranked = self.groups.iter().filter_map(|g| {
            g.targets
                .iter()
                .filter_map(|t| matches_target(t, prefix))
                .max()
                .map(|r| (r, g))
        });
        let best = ranked.clone().map(|(r, _)| r).max();
        let mut top = ranked.filter(|(r, _)| Some(*r) == best).map(|(_, g)| g);
        let err = |msg: String| Error::QuantConfig {
            file: file.to_owned(),
            field: "config_groups".to_owned(),
            msg,
        };
        let first = top
            .next()
            .ok_or_else(|| err(format!("no group targets layer `{prefix}`")))?;
        if let Some(second) = top.next() {
            return Err(err(format!(
                "groups `{}` and `{}` both target layer `{prefix}`",
                first.name, second.name
            )));
        }
        Ok(first)
    }
}

/// The rank of target `t`'s match of layer `name`: 3 for the name itself, 2 for a matching `re:`
/// pattern (an invalid pattern matches nothing), 1 for the class `Linear`, `None` otherwise.
fn matches_target(t: &str, name: &str) -> Option<u8> {
    if t == name {
        return Some(3);
    }
    if let Some(p) = t.strip_prefix("re:") {
        let re = regex::Regex::new(&format!("^(?:{p})")).ok()?;
        return re.is_match(name).then_some(2);
    }
    (t == "Linear").then_some(1)
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_str().map(str::to_owned))
        .collect()
}

/// Checks that a group's scheme is one its format stores and that is read here.
fn check_scheme(
    g: &CtGroup,
    ty: &str,
    wkey: &dyn Fn(&str) -> String,
    unsupported: &dyn Fn(&str, String, &'static str) -> Error,
) -> Result<()> {
    let want_float = g.format != CtFormat::PackQuantized;
    if ty != if want_float { "float" } else { "int" } {
        let expected = if want_float { "float" } else { "int" };
        return Err(unsupported(&wkey("type"), ty.to_owned(), expected));
    }
    let (bits_ok, bits_supported) = match g.format {
        CtFormat::PackQuantized => ((2..=8).contains(&g.num_bits), "2 to 8"),
        CtFormat::FloatQuantized => (g.num_bits == 8, "8 (e4m3)"),
        CtFormat::Nvfp4PackQuantized | CtFormat::Mxfp4PackQuantized => (g.num_bits == 4, "4"),
    };
    if !bits_ok {
        return Err(unsupported(
            &wkey("num_bits"),
            g.num_bits.to_string(),
            bits_supported,
        ));
    }
    if want_float && !g.symmetric {
        return Err(unsupported(&wkey("symmetric"), "false".into(), "true"));
    }
    let (ok, supported) = match (g.format, g.strategy) {
        (CtFormat::PackQuantized, CtStrategy::Group(_) | CtStrategy::Channel) => (true, ""),
        (CtFormat::PackQuantized, _) => (false, "group, channel"),
        (
            CtFormat::FloatQuantized,
            CtStrategy::Tensor | CtStrategy::Channel | CtStrategy::Block(_),
        ) => (true, ""),
        (CtFormat::FloatQuantized, _) => (false, "tensor, channel, block"),
        (CtFormat::Nvfp4PackQuantized, CtStrategy::TensorGroup(16)) => (true, ""),
        (CtFormat::Nvfp4PackQuantized, _) => (false, "tensor_group with group_size 16"),
        (CtFormat::Mxfp4PackQuantized, CtStrategy::Group(32)) => (true, ""),
        (CtFormat::Mxfp4PackQuantized, _) => (false, "group with group_size 32"),
    };
    if !ok {
        return Err(unsupported(
            &wkey("strategy"),
            format!("{:?}", g.strategy).to_lowercase(),
            supported,
        ));
    }
    Ok(())
}

/// Reads a group's `input_activations` (object `a`), refusing every form no kernel takes exactly.
fn activations(
    g: &CtGroup,
    a: &Map<String, Value>,
    akey: &dyn Fn(&str) -> String,
    unsupported: &dyn Fn(&str, String, &'static str) -> Error,
) -> Result<CtAct> {
    let show = |v: Option<&Value>| v.map_or_else(|| "(missing)".to_owned(), Value::to_string);
    let bits = a.get("num_bits");
    if bits.and_then(Value::as_u64) != Some(8) {
        return Err(unsupported(&akey("num_bits"), show(bits), "8"));
    }
    let ty = a.get("type").and_then(Value::as_str).unwrap_or("int");
    let float = match ty {
        "float" => true,
        "int" => false,
        other => return Err(unsupported(&akey("type"), other.to_owned(), "float, int")),
    };
    if a.get("symmetric").and_then(Value::as_bool) == Some(false) {
        return Err(unsupported(
            &akey("symmetric"),
            "false".to_owned(),
            "true (no activation zero points)",
        ));
    }
    let dynamic = a.get("dynamic");
    if dynamic != Some(&Value::Bool(true)) {
        return Err(unsupported(
            &akey("dynamic"),
            show(dynamic),
            "true (scales computed at run time; static input_scale tensors are not read)",
        ));
    }
    let strategy = a
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("tensor");
    let group_size = a.get("group_size").and_then(Value::as_i64);
    let weights_fit = if float {
        g.format == CtFormat::FloatQuantized
    } else {
        g.format == CtFormat::PackQuantized && g.num_bits == 8 && g.symmetric
    };
    if !weights_fit {
        return Err(unsupported(
            &akey("type"),
            format!("{ty} over {}", g.describe()),
            "float over float-quantized (fp8) weights, int over pack-quantized int8 symmetric weights",
        ));
    }
    match (float, strategy, g.strategy) {
        (true, "token", CtStrategy::Tensor | CtStrategy::Channel) => Ok(CtAct::Fp8Token),
        (true, "group", CtStrategy::Block([_, bk])) if group_size == Some(bk as i64) => {
            Ok(CtAct::Fp8Group(bk))
        }
        (true, "group", CtStrategy::Block(_)) => Err(unsupported(
            &akey("group_size"),
            show(a.get("group_size")),
            "the K extent of the weight blocks",
        )),
        (true, _, CtStrategy::Block(_)) => Err(unsupported(
            &akey("strategy"),
            strategy.to_owned(),
            "group (with block weights)",
        )),
        (true, _, _) => Err(unsupported(
            &akey("strategy"),
            strategy.to_owned(),
            "token (with tensor or channel weights)",
        )),
        (false, "token", CtStrategy::Channel) => Ok(CtAct::Int8Token),
        (false, "token", _) => Err(unsupported(
            &akey("strategy"),
            format!("token over {}", g.describe()),
            "token with channel int8 weights",
        )),
        (false, _, _) => Err(unsupported(
            &akey("strategy"),
            strategy.to_owned(),
            "token (with channel int8 weights)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: Value) -> Result<CompressedConfig> {
        CompressedConfig::from_json(v.as_object().unwrap(), "config.json")
    }

    #[test]
    fn targets_rank_name_then_pattern_then_class() {
        let w4 = json!({"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128});
        let c = config(json!({
            "format": "pack-quantized",
            "config_groups": {
                "a": {"targets": ["Linear"], "weights": w4},
                "b": {"targets": ["re:model\\.layers\\.\\d+\\.mlp\\."], "weights": w4},
                "c": {"targets": ["model.layers.0.mlp.up_proj"], "weights": w4},
            },
            "ignore": ["lm_head", "re:.*vision.*"],
        }))
        .unwrap();
        let group = |p: &str| c.group_of(p, "config.json").unwrap().name.clone();
        assert_eq!(group("model.layers.0.self_attn.q_proj"), "a");
        assert_eq!(group("model.layers.0.mlp.gate_proj"), "b");
        assert_eq!(group("model.layers.0.mlp.up_proj"), "c");
        // `re:` patterns match from the start of the name, as Python's re.match.
        assert_eq!(group("x.mlp.up_proj"), "a");
        assert!(c.ignored("lm_head") && c.ignored("model.vision.proj"));
        assert!(!c.ignored("model.layers.0.mlp.up_proj"));
        assert_eq!(
            c.groups[0].describe(),
            "compressed-tensors pack-quantized int4 g128 sym"
        );
    }

    #[test]
    fn schemes_checked_against_their_format() {
        let group = |w: Value, f: &str| {
            config(
                json!({"config_groups": {"g": {"targets": ["Linear"], "weights": w, "format": f}}}),
            )
        };
        let fp8_block = json!({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]});
        let c = group(fp8_block, "float-quantized").unwrap();
        assert_eq!(c.groups[0].strategy, CtStrategy::Block([128, 128]));
        let bad_block =
            json!({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128]});
        let e = group(bad_block, "float-quantized").unwrap_err();
        assert!(
            matches!(&e, Error::QuantConfig { field, .. } if field == "config_groups.g.weights.block_structure"),
            "{e}"
        );
        let int2 = json!({"num_bits": 1, "type": "int", "strategy": "channel"});
        let e = group(int2, "pack-quantized").unwrap_err();
        assert!(
            matches!(&e, Error::UnsupportedQuant { field, .. } if field == "config_groups.g.weights.num_bits"),
            "{e}"
        );
        let asym_fp4 = json!({"num_bits": 4, "type": "float", "symmetric": false, "strategy": "group", "group_size": 32});
        let e = group(asym_fp4, "mxfp4-pack-quantized").unwrap_err();
        assert!(
            matches!(&e, Error::UnsupportedQuant { field, .. } if field == "config_groups.g.weights.symmetric"),
            "{e}"
        );
        // No format anywhere.
        let e = config(
            json!({"config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4}}}}),
        )
        .unwrap_err();
        assert!(
            matches!(&e, Error::QuantConfig { field, .. } if field == "format"),
            "{e}"
        );
    }
}
