//! compressed-tensors, DeepSeek FP8 and ModelOpt NVFP4 checkpoint folders (`tests/fixtures/`,
//! written by `make_compressed.py` from SmolLM2-135M weights: the compressed-tensors ones by that
//! package itself, the ModelOpt one by ModelOpt's `NVFP4QTensor`, the DeepSeek FP8 ones by
//! transformers' `Fp8Quantize`): every layer unpacked equals the oracle (the package's own decompression),
//! our exact values rounded once to the oracle's dtype, bit for bit.

use humming_import::{QuantizedCheckpoint, QuantizedWeights, ZeroPoints};
use humming_spec::parse_kernel_str;
use safetensors::Dtype;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The oracle's values and its dtype (the package returns bf16 or f16 where it computes in it).
fn oracle(ckpt: &QuantizedCheckpoint, prefix: &str) -> (Vec<f64>, Dtype) {
    let (info, data) = ckpt.tensor_bytes(&format!("{prefix}.oracle")).unwrap();
    let v = match info.dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect(),
        d => panic!("oracle dtype {d:?}"),
    };
    (v, info.dtype)
}

/// `x` rounded (to nearest, ties to even) to `dtype`.
fn round_to(x: f64, dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => f64::from(x as f32),
        Dtype::BF16 => half::bf16::from_f64(x).to_f64(),
        Dtype::F16 => half::f16::from_f64(x).to_f64(),
        d => panic!("{d:?}"),
    }
}

/// Opens `folder`, checks its listing, and checks every layer against its oracle bit for bit
/// (our exact values rounded once to the oracle's dtype).
fn check_folder(folder: &str, expected: &[(&str, usize, usize, &str)]) -> QuantizedCheckpoint {
    let ckpt = QuantizedCheckpoint::open(fixture(folder)).unwrap();
    let layers = ckpt.layers().unwrap();
    let listed: Vec<_> = layers
        .iter()
        .map(|l| (l.prefix.as_str(), l.n, l.k, l.spec_text.as_str()))
        .collect();
    assert_eq!(listed, expected, "{folder}");
    for info in &layers {
        let layer = ckpt.layer(&info.prefix).unwrap();
        assert_eq!((layer.weights.n(), layer.weights.k()), (info.n, info.k));
        assert_eq!(layer.spec_text, info.spec_text);
        assert_eq!(layer.spec(), &parse_kernel_str(&layer.spec_text).unwrap());
        assert!(layer.k_perm.is_none());
        assert!(info.bytes > 0);
        let got = layer.dequantize_unpermuted();
        let (want, dtype) = oracle(&ckpt, &info.prefix);
        assert_eq!(got.len(), want.len());
        let bad = got
            .iter()
            .zip(&want)
            .position(|(&g, &w)| round_to(g, dtype) != w);
        assert!(
            bad.is_none(),
            "{folder} {}: weight {:?} = {} but the oracle has {}",
            info.prefix,
            bad.map(|i| (i / info.k, i % info.k)),
            got[bad.unwrap()],
            want[bad.unwrap()]
        );
        // The square layer is not symmetric, so that the transposed reading would have failed.
        if info.n == info.k {
            let n = info.n;
            assert!((0..n * n).any(|i| want[i] != want[(i % n) * n + i / n]));
        }
    }
    ckpt
}

const Q: &str = "model.layers.0.self_attn.q_proj";
const K: &str = "model.layers.0.self_attn.k_proj";

#[test]
fn pack_quantized_int4_groups_with_zero_points_and_int8_channels() {
    let asym = "a: bf16, b: u4, scale: group(32, bf16), zero_point: int";
    let down = "model.layers.0.mlp.down_proj";
    let ckpt = check_folder(
        "ct-pack",
        &[
            (down, 64, 128, "a: bf16, b: i8, scale: channel(bf16)"),
            (K, 64, 256, asym),
            (Q, 128, 128, asym),
        ],
    );
    let infos = ckpt.layers().unwrap();
    assert_eq!(
        infos[1].format,
        "compressed-tensors pack-quantized int4 g32 asym"
    );
    assert_eq!(
        infos[0].format,
        "compressed-tensors pack-quantized int8 channel sym"
    );
    // Zero points, packed along N, come out per column: not all alike within a word's eight.
    let q = ckpt.layer(Q).unwrap();
    let ZeroPoints::Integer(z) = q.weights.zeros() else {
        panic!("integer zero points expected");
    };
    assert!(z[..8].iter().any(|&v| v != z[0]));
}

#[test]
fn pack_quantized_f16_symmetric_groups_and_asymmetric_channels_on_a_ragged_k() {
    check_folder(
        "ct-pack-f16",
        &[
            (
                "model.layers.0.self_attn.o_proj",
                64,
                128,
                "a: f16, b: i4, scale: group(64, f16)",
            ),
            (
                "model.layers.1.mlp.up_proj",
                64,
                96,
                "a: f16, b: u8, scale: channel(f16), zero_point: int",
            ),
        ],
    );
}

#[test]
fn float_quantized_fp8_tensor_channel_and_block_scales() {
    let ckpt = check_folder(
        "ct-fp8",
        &[
            (K, 64, 256, "a: bf16, b: e4m3, scale: channel(bf16)"),
            (Q, 128, 128, "a: bf16, b: e4m3, scale: tensor(f32)"),
            (
                "model.layers.1.mlp.gate_proj",
                192,
                320,
                "a: bf16, b: e4m3, scale: block(128, 128, f32)",
            ),
        ],
    );
    // Block scales [ceil(N / 128), ceil(K / 128)] = [2, 3] in the file; [3, 2] (K blocks by N
    // blocks) in the weights.
    let gate = ckpt.layer("model.layers.1.mlp.gate_proj").unwrap();
    assert_eq!(gate.weights.scales().len(), 6);
    assert_eq!(gate.weights.groups(), 3);
}

#[test]
fn w8a8_preset_schemes_get_8bit_activation_descriptors() {
    // The package's FP8_DYNAMIC, FP8_BLOCK and W8A8 presets: their `input_activations` choose
    // the W8A8 descriptors; the weights are read as for the weight-only schemes.
    let ckpt = check_folder(
        "ct-w8a8",
        &[
            (
                "model.layers.0.mlp.down_proj",
                64,
                128,
                "a: i8, b: i8, c: bf16, scale: channel(bf16)",
            ),
            (
                "model.layers.0.self_attn.o_proj",
                64,
                128,
                "a: e4m3, b: e4m3, c: bf16, scale: channel(bf16), arch: [sm_89, sm_90a]",
            ),
            (
                "model.layers.1.mlp.gate_proj",
                192,
                192,
                "a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), arch: [sm_89, sm_90a]",
            ),
        ],
    );
    let formats: Vec<String> = ckpt
        .layers()
        .unwrap()
        .into_iter()
        .map(|l| l.format)
        .collect();
    assert_eq!(
        formats,
        [
            "compressed-tensors pack-quantized int8 channel sym, int8 dynamic per-token activations",
            "compressed-tensors float-quantized fp8 e4m3 channel, fp8 dynamic per-token activations",
            "compressed-tensors float-quantized fp8 e4m3 block 128x128, fp8 dynamic 1x128 activations",
        ]
    );
}

#[test]
fn nvfp4_and_mxfp4() {
    let nv = "a: bf16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)";
    let ckpt = check_folder("ct-nvfp4", &[(K, 64, 256, nv), (Q, 128, 128, nv)]);
    // scale2 is 1 / weight_global_scale (the package divides by it).
    let (_, gs) = ckpt
        .tensor_bytes(&format!("{Q}.weight_global_scale"))
        .unwrap();
    let g = f32::from_le_bytes(gs.try_into().unwrap());
    let q = ckpt.layer(Q).unwrap();
    assert_eq!(q.weights.scale2(), &[(1.0 / f64::from(g)) as f32]);
    let mx = "a: bf16, b: e2m1, scale: group(32, ue8m0)";
    check_folder("ct-mxfp4", &[(K, 64, 256, mx), (Q, 128, 128, mx)]);
}

#[test]
fn deepseek_fp8_blocks_and_modelopt_nvfp4() {
    let gate = "model.layers.1.mlp.gate_proj";
    let block = "a: bf16, b: e4m3, scale: block(128, 128, f32)";
    let ckpt = check_folder(
        "fp8-block",
        &[(Q, 128, 128, block), (gate, 128, 256, block)],
    );
    assert_eq!(ckpt.config().describe(), "FP8 e4m3 block 128x128");
    // scale_fmt ue8m0: e8m0 block scales, powers of two, exact in the f32 block descriptor.
    let ckpt = check_folder("fp8-block-ue8m0", &[(gate, 128, 256, block)]);
    assert!(ckpt.config().ue8m0_scales);
    let layer = ckpt.layer(gate).unwrap();
    assert!(
        layer
            .weights
            .scales()
            .iter()
            .all(|s| s.to_bits() & 0x7F_FFFF == 0)
    );
    let nv = "a: bf16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)";
    let ckpt = check_folder("modelopt-nvfp4", &[(K, 64, 256, nv), (Q, 128, 128, nv)]);
    assert_eq!(ckpt.config().describe(), "ModelOpt NVFP4");
    assert!(ckpt.config().file.ends_with("hf_quant_config.json"));
}

#[test]
fn every_layer_packs_into_the_kernel_layout_and_back() {
    for folder in [
        "ct-pack",
        "ct-pack-f16",
        "ct-fp8",
        "ct-w8a8",
        "ct-nvfp4",
        "ct-mxfp4",
        "fp8-block",
        "fp8-block-ue8m0",
        "modelopt-nvfp4",
    ] {
        let ckpt = QuantizedCheckpoint::open(fixture(folder)).unwrap();
        for prefix in ckpt.layer_prefixes() {
            let layer = ckpt.layer(&prefix).unwrap();
            if !layer.weights.k().is_multiple_of(64) {
                // The kernel layout takes whole 64-wide K tiles: the ragged layer is refused.
                let err = layer.weights.pack().unwrap_err();
                assert!(format!("{err:?}").contains(r#"arg: "k""#), "{err:?}");
                continue;
            }
            let packed = layer.weights.pack().unwrap();
            let w = &layer.weights;
            if w.spec().b.is_float() {
                // Unpacking is defined for integer weights. e4m3 codes are stored raw, so they go
                // through the layout as the same width's unsigned integers do; e2m1 codes are
                // stored re-encoded for the kernel's decode, in the same number of bytes.
                let twin_spec =
                    parse_kernel_str(&format!("a: bf16, b: u{}, scale: channel(bf16)", w.bits()))
                        .unwrap();
                let ones = vec![1.0; w.n()];
                let twin = QuantizedWeights::from_parts(
                    &twin_spec,
                    w.n(),
                    w.k(),
                    w.codes().to_vec(),
                    ones,
                    ZeroPoints::None,
                )
                .unwrap();
                let twin_packed = twin.pack().unwrap();
                assert_eq!(twin_packed.b.len(), packed.b.len(), "{folder} {prefix}");
                // Under 8-bit activations each k16 slab lists its codes in the mma's order
                // (`act8_k_order`), so the 16-bit twin's bytes match only for 16-bit A.
                if w.bits() == 8 && !layer.spec_text.starts_with("a: e4m3") {
                    assert!(twin_packed.b == packed.b, "{folder} {prefix}");
                    let back = twin_packed.unpack(&twin_spec).unwrap();
                    assert!(back.codes() == w.codes(), "{folder} {prefix}");
                }
                continue;
            }
            let back = packed.unpack(layer.spec()).unwrap();
            assert_eq!(back, layer.weights, "{folder} {prefix}");
        }
    }
}

/// The whole model written by `make_compressed.py --full` (every linear layer, six schemes), when
/// `$HUMMING_CT_FULL` names its folder.
#[test]
fn full_smollm2_folder_matches_the_package() {
    let Some(dir) = std::env::var_os("HUMMING_CT_FULL").filter(|d| !d.is_empty()) else {
        println!(
            "skipped: full_smollm2_folder_matches_the_package (set HUMMING_CT_FULL to the folder make_compressed.py --full writes)"
        );
        return;
    };
    let ckpt = QuantizedCheckpoint::open(PathBuf::from(dir)).unwrap();
    let layers = ckpt.layers().unwrap();
    assert_eq!(layers.len(), 210);
    let mut formats = std::collections::BTreeMap::new();
    for info in &layers {
        let layer = ckpt.layer(&info.prefix).unwrap();
        let got = layer.dequantize_unpermuted();
        let (want, dtype) = oracle(&ckpt, &info.prefix);
        let bad = got
            .iter()
            .zip(&want)
            .filter(|&(&g, &w)| round_to(g, dtype) != w)
            .count();
        assert_eq!(bad, 0, "{}: {bad} weights differ", info.prefix);
        *formats.entry(info.spec_text.clone()).or_insert(0) += 1;
    }
    for (spec, count) in &formats {
        println!("{count:>4} layers  {spec}");
    }
    assert_eq!(formats.len(), 6);
}
