//! Refusals of quantized checkpoint folders: each is a typed error naming the tensor or the
//! setting. Each case copies a fixture folder to a temporary one and breaks one thing.

mod folders;

use folders::{copy_fixture, edit_json, edit_quant_config, edit_tensors, fixture_path};
use humming_import::{Error, QuantizedCheckpoint};
use safetensors::Dtype;
use std::path::Path;

const K: &str = "model.layers.0.self_attn.k_proj";

fn layer_err(dir: &Path, prefix: &str) -> Error {
    let ckpt = QuantizedCheckpoint::open(dir).unwrap();
    ckpt.layer(prefix).unwrap_err()
}

#[test]
fn unknown_method_and_unsupported_settings() {
    let dir = copy_fixture("gptq-v1", "method");
    edit_quant_config(&dir, "quant_method", "bitsandbytes".into());
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, value, .. } if field == "quant_method" && value == "bitsandbytes"),
        "{e}"
    );
    assert!(e.to_string().contains("supported: gptq, awq"), "{e}");

    edit_quant_config(&dir, "quant_method", "gptq".into());
    edit_quant_config(&dir, "checkpoint_format", "marlin".into());
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "checkpoint_format"),
        "{e}"
    );

    edit_quant_config(&dir, "checkpoint_format", "gptq".into());
    edit_quant_config(&dir, "dynamic", serde_json::json!({"-:.*k_proj.*": {}}));
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "dynamic"),
        "{e}"
    );
    edit_quant_config(&dir, "dynamic", serde_json::json!({}));
    QuantizedCheckpoint::open(&dir).unwrap();
    edit_quant_config(&dir, "bits", 5.into());
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "bits"),
        "{e}"
    );

    edit_quant_config(&dir, "bits", "four".into());
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::QuantConfig { field, .. } if field == "bits"),
        "{e}"
    );

    edit_quant_config(&dir, "bits", 4.into());
    edit_json(&dir, "config.json", |v| {
        v["quantization_config"]
            .as_object_mut()
            .unwrap()
            .remove("group_size");
    });
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::QuantConfig { field, .. } if field == "group_size"),
        "{e}"
    );

    let awq = copy_fixture("awq-g64", "version");
    edit_quant_config(&awq, "version", "gemv".into());
    let e = QuantizedCheckpoint::open(&awq).unwrap_err();
    assert!(
        matches!(&e, Error::UnsupportedQuant { field, .. } if field == "version"),
        "{e}"
    );

    let plain = copy_fixture("gptq-v1", "plain");
    edit_json(&plain, "config.json", |v| {
        v.as_object_mut().unwrap().remove("quantization_config");
    });
    let e = QuantizedCheckpoint::open(&plain).unwrap_err();
    assert!(
        matches!(&e, Error::QuantConfig { field, .. } if field == "quantization_config"),
        "{e}"
    );
}

#[test]
fn bits_that_contradict_the_packed_shapes() {
    // 4-bit data declared as 8-bit: K from qweight halves, and g_idx (K entries) disagrees.
    let dir = copy_fixture("gptq-v1", "bits");
    edit_quant_config(&dir, "bits", 8.into());
    let ckpt = QuantizedCheckpoint::open(&dir).unwrap();
    let e = ckpt.layers().unwrap_err();
    let Error::QuantShape {
        tensor, field, why, ..
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(
        (tensor.as_str(), *field),
        (format!("{K}.g_idx").as_str(), "g_idx")
    );
    assert!(why.contains("bits = 8"), "{e}");

    // Without g_idx the scales (K / G rows) and qzeros (N * bits / 32 words) disagree.
    edit_tensors(&dir, |t| {
        t.retain(|name, _| !name.ends_with(".g_idx"));
    });
    let e = layer_err(&dir, K);
    assert!(
        matches!(
            &e,
            Error::QuantShape {
                field: "scales",
                ..
            }
        ),
        "{e}"
    );
    // A group size that contradicts the scales.
    let dir = copy_fixture("gptq-v1", "group");
    edit_quant_config(&dir, "group_size", 64.into());
    let e = layer_err(&dir, K);
    assert!(
        matches!(
            &e,
            Error::QuantShape {
                field: "scales",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn missing_tensors_dtypes_and_shapes() {
    let dir = copy_fixture("gptq-v1", "missing");
    edit_tensors(&dir, |t| {
        t.remove(&format!("{K}.scales"));
    });
    let e = layer_err(&dir, K);
    assert!(
        matches!(&e, Error::MissingQuantTensor { field: "scales", tensor, .. } if tensor == &format!("{K}.scales")),
        "{e}"
    );

    // Scales stored transposed ([N, groups]) for a layer whose shape would also fit them the
    // other way round is refused, not reinterpreted.
    let dir = copy_fixture("gptq-v1", "transposed");
    edit_tensors(&dir, |t| {
        let s = t.get_mut(&format!("{K}.scales")).unwrap();
        s.1 = vec![s.1[1], s.1[0]];
    });
    let e = layer_err(&dir, K);
    let Error::QuantShape {
        tensor,
        found,
        expected,
        ..
    } = &e
    else {
        panic!("{e}");
    };
    assert_eq!(tensor, &format!("{K}.scales"));
    assert_eq!(
        (found.as_slice(), expected.as_str()),
        ([64, 8].as_slice(), "[8, 64]")
    );

    let dir = copy_fixture("gptq-v1", "dtype");
    edit_tensors(&dir, |t| {
        t.get_mut(&format!("{K}.qweight")).unwrap().0 = Dtype::F32;
    });
    let e = layer_err(&dir, K);
    assert!(
        matches!(
            &e,
            Error::QuantDtype {
                field: "qweight",
                ..
            }
        ),
        "{e}"
    );

    let dir = copy_fixture("gptq-act-order", "gidx");
    edit_tensors(&dir, |t| {
        t.retain(|name, _| !name.ends_with(".g_idx"));
    });
    let e = layer_err(&dir, "model.layers.0.mlp.down_proj");
    assert!(
        matches!(&e, Error::MissingQuantTensor { field: "g_idx", .. }),
        "{e}"
    );
}

#[test]
fn values_that_contradict_the_settings() {
    // Asymmetric zero points under `sym: true`.
    let dir = copy_fixture("gptq-v1", "sym");
    edit_quant_config(&dir, "sym", true.into());
    let e = layer_err(&dir, K);
    assert!(
        matches!(&e, Error::QuantValue { field: "qzeros", tensor, .. } if tensor == &format!("{K}.qzeros")),
        "{e}"
    );
    // An unsorted g_idx under `desc_act: false`.
    let p = "model.layers.0.mlp.down_proj";
    let dir = copy_fixture("gptq-act-order", "desc");
    edit_quant_config(&dir, "desc_act", false.into());
    let e = layer_err(&dir, p);
    assert!(
        matches!(&e, Error::QuantValue { field: "g_idx", msg, .. } if msg.contains("desc_act is false")),
        "{e}"
    );
    // Act-order groups of the wrong size, and a group index out of range.
    for (case, value) in [("size", 0i32), ("range", 8)] {
        let dir = copy_fixture("gptq-act-order", case);
        edit_tensors(&dir, |t| {
            let g = t.get_mut(&format!("{p}.g_idx")).unwrap();
            let last = g.2.len() - 4;
            g.2[last..].copy_from_slice(&value.to_le_bytes());
        });
        let e = layer_err(&dir, p);
        assert!(
            matches!(&e, Error::QuantValue { field: "g_idx", .. }),
            "{e}"
        );
    }
}

#[test]
fn folders_that_are_not_one_checkpoint() {
    let dir = copy_fixture("awq", "index");
    edit_json(&dir, "model.safetensors.index.json", |v| {
        v["weight_map"]["model.norm.weight"] = "model-00003-of-00003.safetensors".into();
    });
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::Folder { msg, .. } if msg.contains("00003")),
        "{e}"
    );

    let dir = copy_fixture("gptq-v2", "empty");
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(matches!(&e, Error::Folder { .. }), "{e}");

    let dir = copy_fixture("gptq-v2", "twice");
    std::fs::copy(
        dir.join("model.safetensors"),
        dir.join("model-copy.safetensors"),
    )
    .unwrap();
    let e = QuantizedCheckpoint::open(&dir).unwrap_err();
    assert!(
        matches!(&e, Error::Folder { msg, .. } if msg.contains("in both")),
        "{e}"
    );
}

#[test]
fn bf16_scales_declare_bf16_kernels() {
    // The same layer with its f16 scales rounded to bf16: codes and zero points unchanged, the
    // descriptor (and A) bf16, the scales read as stored.
    let dir = copy_fixture("gptq-v2", "bf16");
    edit_tensors(&dir, |t| {
        let s = t.get_mut(&format!("{K}.scales")).unwrap();
        s.0 = Dtype::BF16;
        s.2 =
            s.2.chunks_exact(2)
                .flat_map(|c| {
                    let x = half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32();
                    half::bf16::from_f32(x).to_bits().to_le_bytes()
                })
                .collect();
    });
    let f16 = QuantizedCheckpoint::open(fixture_path("gptq-v2"))
        .unwrap()
        .layer(K)
        .unwrap();
    let bf16 = QuantizedCheckpoint::open(&dir).unwrap().layer(K).unwrap();
    assert_eq!(
        bf16.spec_text,
        "a: bf16, b: u4, scale: group(32, bf16), zero_point: int"
    );
    assert_eq!(bf16.weights.codes(), f16.weights.codes());
    assert_eq!(bf16.weights.zeros(), f16.weights.zeros());
    let rounded: Vec<f32> = f16
        .weights
        .scales()
        .iter()
        .map(|&s| half::bf16::from_f32(s).to_f32())
        .collect();
    assert_eq!(bf16.weights.scales(), rounded.as_slice());
}
