//! GPTQ and AWQ checkpoint folders (`tests/fixtures/`, written by `make_gptq_awq.py` from
//! SmolLM2-135M weights): every layer unpacked equals the script's own dequantization (`.oracle`)
//! exactly, and the cases of public bug reports hold.

use humming_import::{QuantizedCheckpoint, ZeroPoints};
use humming_spec::parse_kernel_str;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn oracle(ckpt: &QuantizedCheckpoint, prefix: &str) -> Vec<f64> {
    let (info, data) = ckpt.tensor_bytes(&format!("{prefix}.oracle")).unwrap();
    assert_eq!(info.dtype, safetensors::Dtype::F32);
    data.chunks_exact(4)
        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect()
}

/// Opens `folder`, checks its listing, and checks every layer against its oracle bit for bit.
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
        assert!(info.bytes > 0);
        let got = layer.dequantize_unpermuted();
        let want = oracle(&ckpt, &info.prefix);
        assert_eq!(got.len(), want.len());
        let bad = got.iter().zip(&want).position(|(g, w)| g != w);
        assert!(
            bad.is_none(),
            "{folder} {}: weight {:?} = {} but the oracle has {}",
            info.prefix,
            bad.map(|i| (i / info.k, i % info.k)),
            got[bad.unwrap()],
            want[bad.unwrap()]
        );
    }
    ckpt
}

const Q: &str = "model.layers.0.self_attn.q_proj";
const K: &str = "model.layers.0.self_attn.k_proj";
const ASYM4_G32: &str = "a: f16, b: u4, scale: group(32, f16), zero_point: int";

#[test]
fn gptq_v1_and_v2_zero_points_0_and_15_give_the_same_weights() {
    let expected = [(K, 64, 256, ASYM4_G32), (Q, 128, 128, ASYM4_G32)];
    let v1 = check_folder("gptq-v1", &expected);
    let v2 = check_folder("gptq-v2", &expected);
    assert_eq!(v1.config().describe(), "GPTQ 4-bit g32 asym v1");
    assert_eq!(v2.config().describe(), "GPTQ 4-bit g32 asym v2");
    for prefix in [K, Q] {
        assert_eq!(v1.layer(prefix).unwrap(), v2.layer(prefix).unwrap());
    }
    // The script forced group 0 of columns 0..8 to zero point 0 and of 8..16 to 15; v1 stores
    // them as 15 and 14, which must not carry into their neighbours.
    let k = v1.layer(K).unwrap();
    let ZeroPoints::Integer(z) = k.weights.zeros() else {
        panic!("integer zero points expected");
    };
    assert_eq!(
        &z[..16],
        &[0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15, 15, 15, 15, 15]
    );
    assert!(z[16..64].iter().any(|&z| z != 0 && z != 15));
    // The stored v1 word really holds 15 in the nibbles of zero point 0.
    let (_, raw) = v1.tensor_bytes(&format!("{K}.qzeros")).unwrap();
    assert_eq!(
        u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
        0xFFFF_FFFF
    );
    assert_eq!(
        u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]),
        0xEEEE_EEEE
    );
}

#[test]
fn square_layers_read_the_right_way_round() {
    let ckpt = QuantizedCheckpoint::open(fixture("gptq-v1")).unwrap();
    let w = oracle(&ckpt, Q);
    let n = 128;
    let transposed = (0..n * n)
        .filter(|&i| w[i] != w[(i % n) * n + i / n])
        .count();
    assert!(
        transposed > n * n / 2,
        "the square fixture is not symmetric"
    );
    // check_folder compared the unpacked square layer with the oracle exactly; this checks that
    // the transposed reading would have failed, for GPTQ and for AWQ.
    let got = ckpt.layer(Q).unwrap().dequantize_unpermuted();
    assert_eq!(got, w);
    let awq = QuantizedCheckpoint::open(fixture("awq")).unwrap();
    let p = "model.layers.1.self_attn.q_proj";
    let (w, got) = (
        oracle(&awq, p),
        awq.layer(p).unwrap().dequantize_unpermuted(),
    );
    assert_eq!(got, w);
    assert!((0..n * n).any(|i| w[i] != w[(i % n) * n + i / n]));
}

#[test]
fn awq_zero_points_distinct_per_column_land_in_their_columns() {
    let p = "model.layers.1.self_attn.q_proj";
    let ckpt = check_folder("awq", &[(p, 128, 128, ASYM4_G32)]);
    assert_eq!(ckpt.config().describe(), "AWQ 4-bit g32 GEMM");
    let layer = ckpt.layer(p).unwrap();
    let ZeroPoints::Integer(z) = layer.weights.zeros() else {
        panic!("integer zero points expected");
    };
    // Within each word's 8 columns the zero points differ (the fixture shifts them per column),
    // so a wrong nibble order would put them in the wrong columns, and the oracle check above
    // would fail.
    for c in 0..16 {
        let mut pack = z[c * 8..c * 8 + 8].to_vec();
        pack.sort_unstable();
        pack.dedup();
        assert!(pack.len() > 4, "word {c}: {:?}", &z[c * 8..c * 8 + 8]);
    }
    // Column j's zero point is the nibble 4 * [0, 4, 1, 5, 2, 6, 3, 7][j % 8] of its word.
    let (_, raw) = ckpt.tensor_bytes(&format!("{p}.qzeros")).unwrap();
    let word = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]);
    for (j, nibble) in [0, 4, 1, 5, 2, 6, 3, 7].into_iter().enumerate() {
        assert_eq!(u32::from(z[j]), (word >> (4 * nibble)) & 0xF, "column {j}");
    }
    let up = "model.layers.1.mlp.up_proj";
    check_folder(
        "awq-g64",
        &[(
            up,
            128,
            256,
            "a: f16, b: u4, scale: group(64, f16), zero_point: int",
        )],
    );
}

#[test]
fn act_order_gives_the_product_of_the_unpermuted_weights() {
    let p = "model.layers.0.mlp.down_proj";
    let ckpt = check_folder(
        "gptq-act-order",
        &[(p, 64, 256, "a: f16, b: i4, scale: group(32, f16)")],
    );
    assert_eq!(ckpt.config().describe(), "GPTQ 4-bit g32 sym v1 act-order");
    let layer = ckpt.layer(p).unwrap();
    let perm = layer
        .k_perm
        .as_ref()
        .expect("an unsorted g_idx gives a permutation");
    let (n, k) = (64, 256);
    assert_ne!(perm, &(0..k).collect::<Vec<_>>());
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..k).collect::<Vec<_>>());
    // The unpermuted f64 reference: A · Wᵀ with the oracle's W in the checkpoint's K order.
    let m = 5;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let a: Vec<f32> = (0..m * k)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    let w = oracle(&ckpt, p);
    let wp = layer.weights.dequantize();
    // Ours: the runtime's f64 reference GEMM of the permuted weights and the gathered A.
    let ap: Vec<f64> = layer
        .permute_activations(&a)
        .into_iter()
        .map(f64::from)
        .collect();
    let c = humming_runtime::reference_gemm(&layer.weights, &ap, m, None).unwrap();
    for i in 0..m {
        for j in 0..n {
            let reference: f64 = (0..k)
                .map(|kk| f64::from(a[i * k + kk]) * w[j * k + kk])
                .sum();
            let ours = c[i * n + j];
            assert!(
                (ours - reference).abs() <= 1e-12 * reference.abs().max(1.0),
                "C[{i}, {j}]: {ours} vs {reference}"
            );
        }
    }
    // Without the permutation of A the product is wrong: the test is not vacuous.
    let unpermuted: f64 = (0..k).map(|kk| f64::from(a[kk]) * wp[kk]).sum();
    let reference: f64 = (0..k).map(|kk| f64::from(a[kk]) * w[kk]).sum();
    assert!((unpermuted - reference).abs() > 1e-6);
}

#[test]
fn gptq_widths_2_3_8_channel_and_old_quantize_config() {
    let v = "model.layers.0.self_attn.v_proj";
    let c = check_folder(
        "gptq-int8-channel",
        &[(
            v,
            64,
            128,
            "a: f16, b: u8, scale: channel(f16), zero_point: int",
        )],
    );
    assert_eq!(c.config().group_size, None);
    let o = "model.layers.0.self_attn.o_proj";
    let c = check_folder(
        "gptq-int3-old",
        &[(
            o,
            64,
            256,
            "a: f16, b: u3, scale: group(32, f16), zero_point: int",
        )],
    );
    assert!(c.config().file.ends_with("quantize_config.json"));
    let g = "model.layers.1.mlp.gate_proj";
    check_folder(
        "gptq-int2-sym",
        &[(g, 64, 128, "a: f16, b: i2, scale: group(32, f16)")],
    );
}

#[test]
fn every_layer_packs_into_the_kernel_layout_and_back() {
    for folder in [
        "gptq-v1",
        "gptq-v2",
        "gptq-act-order",
        "gptq-int8-channel",
        "gptq-int3-old",
        "gptq-int2-sym",
        "awq",
        "awq-g64",
    ] {
        let ckpt = QuantizedCheckpoint::open(fixture(folder)).unwrap();
        for prefix in ckpt.layer_prefixes() {
            let layer = ckpt.layer(&prefix).unwrap();
            let packed = layer.weights.pack().unwrap();
            let back = packed.unpack(layer.spec()).unwrap();
            assert_eq!(back, layer.weights, "{folder} {prefix}");
        }
    }
}
