//! Refusals of compressed-tensors, DeepSeek FP8 and ModelOpt NVFP4 folders: each is a typed error
//! naming the tensor or the setting. Each case copies a fixture folder to a temporary one and
//! breaks one thing.

mod folders;

use folders::{copy_fixture, edit_json, edit_tensors};
use humming_import::{Error, QuantizedCheckpoint};
use safetensors::Dtype;
use serde_json::{Value, json};
use std::path::Path;

const Q: &str = "model.layers.0.self_attn.q_proj";
const K: &str = "model.layers.0.self_attn.k_proj";
const DOWN: &str = "model.layers.0.mlp.down_proj";

fn layer_err(dir: &Path, prefix: &str) -> Error {
    let ckpt = QuantizedCheckpoint::open(dir).unwrap();
    ckpt.layer(prefix).unwrap_err()
}

fn edit_group(dir: &Path, group: &str, edit: impl FnOnce(&mut Value)) {
    edit_json(dir, "config.json", |v| {
        edit(&mut v["quantization_config"]["config_groups"][group]);
    });
}

fn open_err(dir: &Path) -> Error {
    QuantizedCheckpoint::open(dir).unwrap_err()
}

#[test]
fn unsupported_formats_strategies_and_status() {
    let dir = copy_fixture("ct-pack", "format");
    edit_group(&dir, "group_0", |g| {
        g["format"] = "sparse-24-bitmask".into()
    });
    let e = open_err(&dir);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, value, .. }
            if field == "config_groups.group_0.format" && value == "sparse-24-bitmask"),
        "{e}"
    );
    edit_group(&dir, "group_0", |g| {
        g["format"] = "pack-quantized".into();
        g["weights"]["strategy"] = "tensor".into();
    });
    let e = open_err(&dir);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. }
            if field == "config_groups.group_0.weights.strategy"),
        "{e}"
    );
    edit_group(&dir, "group_0", |g| {
        g["weights"]["strategy"] = "group".into();
        g["weights"]["type"] = "float".into();
    });
    let e = open_err(&dir);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. }
            if field == "config_groups.group_0.weights.type"),
        "{e}"
    );
    edit_group(&dir, "group_0", |g| g["weights"]["type"] = "int".into());
    edit_json(&dir, "config.json", |v| {
        v["quantization_config"]["quantization_status"] = "frozen".into();
    });
    let e = open_err(&dir);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "quantization_status"),
        "{e}"
    );

    let nv = copy_fixture("ct-nvfp4", "group16");
    edit_group(&nv, "group_0", |g| g["weights"]["group_size"] = 32.into());
    let e = open_err(&nv);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. }
            if field == "config_groups.group_0.weights.strategy"),
        "{e}"
    );

    let mo = copy_fixture("modelopt-nvfp4", "algo");
    edit_json(&mo, "hf_quant_config.json", |v| {
        v["quantization"]["quant_algo"] = "FP8".into();
    });
    let e = open_err(&mo);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, value, .. }
            if field == "quant_algo" && value == "FP8"),
        "{e}"
    );

    let fp8 = copy_fixture("fp8-block", "fmt");
    edit_json(&fp8, "config.json", |v| {
        v["quantization_config"]["fmt"] = "e5m2".into();
    });
    let e = open_err(&fp8);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "fmt"),
        "{e}"
    );
}

#[test]
fn targets_that_choose_no_group_or_two_and_ignored_layers() {
    let dir = copy_fixture("ct-pack", "targets");
    edit_group(&dir, "group_1", |g| {
        g["targets"] = json!(["re:.*nothing.*"])
    });
    let e = layer_err(&dir, DOWN);
    assert!(
        matches!(&e, Error::QuantConfig { field, msg, .. }
            if field == "config_groups" && msg.contains(DOWN)),
        "{e}"
    );
    edit_group(&dir, "group_0", |g| g["targets"] = json!(["Linear"]));
    edit_group(&dir, "group_1", |g| g["targets"] = json!(["Linear"]));
    let e = layer_err(&dir, DOWN);
    assert!(
        matches!(&e, Error::QuantConfig { field, msg, .. }
            if field == "config_groups" && msg.contains("group_0") && msg.contains("group_1")),
        "{e}"
    );
    // A layer's own name outranks the class.
    edit_group(&dir, "group_1", |g| g["targets"] = json!([DOWN]));
    let ckpt = QuantizedCheckpoint::open(&dir).unwrap();
    assert_eq!(
        ckpt.layer_info(DOWN).unwrap().spec_text,
        "a: bf16, b: i8, scale: channel(bf16)"
    );
    edit_json(&dir, "config.json", |v| {
        v["quantization_config"]["ignore"] = json!(["lm_head", "re:.*down_proj"]);
    });
    let e = layer_err(&dir, DOWN);
    assert!(
        matches!(&e, Error::QuantConfig { field, .. } if field == "ignore"),
        "{e}"
    );
}

#[test]
fn missing_tensors() {
    for (folder, prefix, field) in [
        ("ct-pack", K, "weight_zero_point"),
        ("ct-pack", K, "weight_shape"),
        ("ct-nvfp4", Q, "weight_global_scale"),
        ("modelopt-nvfp4", Q, "weight_scale_2"),
        ("fp8-block", Q, "weight"),
    ] {
        let dir = copy_fixture(folder, &format!("missing-{field}"));
        edit_tensors(&dir, |t| {
            t.remove(&format!("{prefix}.{field}")).unwrap();
        });
        let e = layer_err(&dir, prefix);
        assert!(
            matches!(&e, Error::MissingQuantTensor { layer, field: f, .. }
                if layer == prefix && *f == field),
            "{folder} {field}: {e}"
        );
    }
}

#[test]
fn shapes_that_contradict_the_settings_square_layers_included() {
    // weight_shape read the other way round: the packed rows no longer match.
    let dir = copy_fixture("ct-pack", "shape");
    edit_tensors(&dir, |t| {
        let data = &mut t.get_mut(&format!("{K}.weight_shape")).unwrap().2;
        data.clear();
        data.extend(256i64.to_le_bytes());
        data.extend(64i64.to_le_bytes());
    });
    let e = layer_err(&dir, K);
    assert!(
        matches!(&e, Error::QuantShape { field, .. } if *field == "weight_packed"),
        "{e}"
    );
    // The square layer's group scales stored transposed, [groups, N]: refused, not reinterpreted.
    let dir = copy_fixture("ct-pack", "square");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight_scale")).unwrap().1 = vec![4, 128];
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantShape { tensor, field, expected, .. }
            if tensor.ends_with("q_proj.weight_scale") && *field == "weight_scale" && expected == "[128, 4]"),
        "{e}"
    );
    // Zero points packed along K instead of N.
    let dir = copy_fixture("ct-pack", "zp");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight_zero_point")).unwrap().1 = vec![4, 16];
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantShape { field, .. } if *field == "weight_zero_point"),
        "{e}"
    );
    // DeepSeek block scales transposed.
    let dir = copy_fixture("fp8-block", "blocks");
    let gate = "model.layers.1.mlp.gate_proj";
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{gate}.weight_scale_inv")).unwrap().1 = vec![2, 1];
    });
    let e = layer_err(&dir, gate);
    assert!(
        matches!(&e, Error::QuantShape { field, .. } if *field == "weight_scale_inv"),
        "{e}"
    );
}

#[test]
fn dtypes_without_an_exact_descriptor_and_bad_values() {
    // FP8 channel scales in f32: no exact descriptor (channel scales are in A's dtype).
    let dir = copy_fixture("ct-fp8", "f32");
    edit_tensors(&dir, |t| {
        let (dtype, _, data) = t.get_mut(&format!("{K}.weight_scale")).unwrap();
        *dtype = Dtype::F32;
        *data = data
            .chunks_exact(2)
            .flat_map(|c| {
                half::bf16::from_le_bytes([c[0], c[1]])
                    .to_f32()
                    .to_le_bytes()
            })
            .collect();
    });
    let e = layer_err(&dir, K);
    assert!(
        matches!(&e, Error::QuantDtype { field, found, .. }
            if *field == "weight_scale" && found == "F32"),
        "{e}"
    );
    // MXFP4: the e8m0 code 255 is NaN.
    let dir = copy_fixture("ct-mxfp4", "nan");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight_scale")).unwrap().2[5] = 255;
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantValue { field, msg, .. }
            if *field == "weight_scale" && msg.contains("row 1 group 1")),
        "{e}"
    );
    // An e4m3 weight code that is NaN.
    let dir = copy_fixture("fp8-block", "nan");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight")).unwrap().2[3] = 0x7F;
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::Weights { tensor, .. } if tensor == Q),
        "{e}"
    );
    // Weights that are not FP8.
    let dir = copy_fixture("fp8-block", "dtype");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight")).unwrap().0 = Dtype::U8;
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantDtype { field, .. } if *field == "weight"),
        "{e}"
    );
    // A non-positive NVFP4 global scale.
    let dir = copy_fixture("ct-nvfp4", "global");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight_global_scale")).unwrap().2 = 0f32.to_le_bytes().to_vec();
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantValue { field, .. } if *field == "weight_global_scale"),
        "{e}"
    );
}

#[test]
fn act_order_through_compressed_tensors_is_refused_by_name() {
    let dir = copy_fixture("ct-pack", "gidx");
    edit_tensors(&dir, |t| {
        let g: Vec<u8> = (0..128i32)
            .map(|j| 3 - j / 32)
            .flat_map(i32::to_le_bytes)
            .collect();
        t.insert(format!("{Q}.weight_g_idx"), (Dtype::I32, vec![128], g));
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantValue { field, msg, .. }
            if *field == "weight_g_idx" && msg.contains("act-order")),
        "{e}"
    );
}

#[test]
fn fp8_settings_that_contradict_the_scales() {
    // scale_fmt ue8m0 with f32 scales.
    let dir = copy_fixture("fp8-block", "ue8m0");
    edit_json(&dir, "config.json", |v| {
        v["quantization_config"]["scale_fmt"] = "ue8m0".into();
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantDtype { field, found, .. }
            if *field == "weight_scale_inv" && found == "F32"),
        "{e}"
    );
    // weight_block_size null (one scale per tensor) with block scales [1, 1].
    edit_json(&dir, "config.json", |v| {
        v["quantization_config"]["scale_fmt"] = "float".into();
        v["quantization_config"]["weight_block_size"] = Value::Null;
    });
    let e = layer_err(&dir, Q);
    assert!(
        matches!(&e, Error::QuantShape { field, .. } if *field == "weight_scale_inv"),
        "{e}"
    );
    // ... which a one-element scale satisfies.
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{Q}.weight_scale_inv")).unwrap().1 = vec![1];
    });
    let ckpt = QuantizedCheckpoint::open(&dir).unwrap();
    let layer = ckpt.layer(Q).unwrap();
    assert_eq!(layer.spec_text, "a: bf16, b: e4m3, scale: tensor(f32)");
    assert_eq!(ckpt.config().describe(), "FP8 e4m3 per tensor");
}

/// `input_activations` no kernel takes exactly: each refusal names the group and the field.
#[test]
fn w8a8_activations_without_an_exact_kernel_are_refused_by_field() {
    let dir = copy_fixture("ct-w8a8", "act");
    let refused = |group: &str, edit: &dyn Fn(&mut Value), field: &str| {
        let original = {
            let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
            serde_json::from_str::<Value>(&text).unwrap()
        };
        edit_group(&dir, group, |g| edit(&mut g["input_activations"]));
        let e = open_err(&dir);
        let want = format!("config_groups.{group}.input_activations.{field}");
        assert!(
            matches!(&e, Error::UnsupportedQuant { field: f, .. } if *f == want),
            "{want}: {e}"
        );
        edit_json(&dir, "config.json", |v| *v = original);
    };
    // Static scales (an `input_scale` tensor from calibration).
    refused("fp8_dynamic", &|a| a["dynamic"] = false.into(), "dynamic");
    refused("w8a8_int8", &|a| a["dynamic"] = false.into(), "dynamic");
    // Asymmetric activations (zero points per token).
    refused("w8a8_int8", &|a| a["symmetric"] = false.into(), "symmetric");
    // Other strategies and widths.
    refused(
        "fp8_dynamic",
        &|a| a["strategy"] = "tensor".into(),
        "strategy",
    );
    refused("fp8_block", &|a| a["strategy"] = "token".into(), "strategy");
    refused("fp8_block", &|a| a["group_size"] = 64.into(), "group_size");
    refused("w8a8_int8", &|a| a["strategy"] = "group".into(), "strategy");
    refused("fp8_dynamic", &|a| a["num_bits"] = 4.into(), "num_bits");
    // Activations of another type than the weights.
    refused("fp8_dynamic", &|a| a["type"] = "int".into(), "type");
    refused("w8a8_int8", &|a| a["type"] = "float".into(), "type");
    // The unmodified folder opens.
    assert!(QuantizedCheckpoint::open(&dir).is_ok());
    // Weight-only on request: static activation scales are then ignored, and every layer gets the
    // weights' 16-bit-activation descriptor.
    edit_group(&dir, "fp8_dynamic", |g| {
        g["input_activations"]["dynamic"] = false.into()
    });
    assert!(QuantizedCheckpoint::open(&dir).is_err());
    let wo = QuantizedCheckpoint::open_weight_only(&dir).unwrap();
    let specs: Vec<String> = wo
        .layers()
        .unwrap()
        .into_iter()
        .map(|l| l.spec_text)
        .collect();
    assert_eq!(
        specs,
        [
            "a: bf16, b: i8, scale: channel(bf16)",
            "a: bf16, b: e4m3, scale: channel(bf16)",
            "a: bf16, b: e4m3, scale: block(128, 128, f32)",
        ]
    );

    // 8-bit activations over weights no W8A8 kernel takes (int4 groups).
    let pack = copy_fixture("ct-pack", "act4");
    edit_group(&pack, "group_0", |g| {
        g["input_activations"] = json!({"num_bits": 8, "type": "int", "symmetric": true,
            "strategy": "token", "dynamic": true});
    });
    let e = open_err(&pack);
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. }
            if field == "config_groups.group_0.input_activations.type"),
        "{e}"
    );
}

/// Under e4m3 activations FP8 channel scales stored in f32 are exact (`channel(f32)`), unlike the
/// weight-only descriptor, which takes channel scales in A's dtype.
#[test]
fn w8a8_fp8_channel_scales_in_f32() {
    const O: &str = "model.layers.0.self_attn.o_proj";
    let dir = copy_fixture("ct-w8a8", "f32scales");
    let before = QuantizedCheckpoint::open(&dir).unwrap().layer(O).unwrap();
    edit_tensors(&dir, |t| {
        let s = t.get_mut(&format!("{O}.weight_scale")).unwrap();
        assert_eq!(s.0, Dtype::BF16);
        let wide: Vec<u8> = s
            .2
            .chunks_exact(2)
            .flat_map(|c| {
                (f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16)).to_le_bytes()
            })
            .collect();
        s.0 = Dtype::F32;
        s.2 = wide;
    });
    let after = QuantizedCheckpoint::open(&dir).unwrap().layer(O).unwrap();
    assert_eq!(
        after.spec_text,
        "a: e4m3, b: e4m3, c: bf16, scale: channel(f32), arch: [sm_89, sm_90a]"
    );
    assert_eq!(after.weights.scales(), before.weights.scales());
    assert_eq!(after.weights.codes(), before.weights.codes());
}
