//! The real Gemma-3-270M Q4_K_M GGUF file (quantized by llama.cpp, not by us), when present:
//! `$HUMMING_GEMMA3_GGUF`, else the path `scripts/fetch-gemma3.sh` assembles it at. llama.cpp's
//! Q4_K_M mixes legacy blocks (Q5_0, Q8_0) with K-quants (Q4_K, Q6_K): the K-quants can only be used
//! where K is a multiple of 256, so the projections reading the 640-wide hidden state stay legacy.

use humming_import::{
    GgmlType, GgufFile, LinearKind, LlamaParams, TwoLevel, gemma3_gguf_path, ggml_dequantize,
    to_quantized,
};
use std::collections::BTreeMap;
use std::time::Instant;

fn open(test: &str) -> Option<GgufFile> {
    let path = gemma3_gguf_path();
    if !path.exists() {
        println!("skipped: {test} (model file absent; run scripts/fetch-gemma3.sh)");
        return None;
    }
    Some(GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// The block projections, `(block, kind, type, (N, K))`, in file order.
fn linear_layers(file: &GgufFile) -> Vec<(usize, LinearKind, GgmlType, (usize, usize))> {
    file.tensors()
        .iter()
        .filter_map(|t| match LinearKind::parse(&t.name)? {
            (Some(b), kind) => Some((b, kind, t.ggml_type, t.matrix_nk().unwrap())),
            (None, _) => None,
        })
        .collect()
}

#[test]
fn gemma3_table_and_metadata() {
    let Some(file) = open("gemma3_table_and_metadata") else {
        return;
    };
    assert_eq!(file.version(), 3);
    assert_eq!(file.architecture().unwrap(), "gemma3");
    assert_eq!(file.tensors().len(), 236);
    let mut all = BTreeMap::new();
    for t in file.tensors() {
        *all.entry(t.ggml_type.to_string()).or_insert(0) += 1;
    }
    assert_eq!(
        all,
        BTreeMap::from([
            ("F32".to_owned(), 109),
            ("Q4_K".to_owned(), 27),
            ("Q5_0".to_owned(), 81),
            ("Q6_K".to_owned(), 9),
            ("Q8_0".to_owned(), 10),
        ])
    );
    let emb = file.tensor_info("token_embd.weight").unwrap();
    assert_eq!(
        (emb.ggml_type, emb.matrix_nk()),
        (GgmlType::Q8_0, Some((262144, 640)))
    );
    assert!(file.tensor_info("output.weight").is_none(), "tied LM head");

    let layers = linear_layers(&file);
    assert_eq!(layers.len(), 126);
    let mut by_kind: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for &(b, kind, ty, nk) in &layers {
        assert!(b < 18);
        let want_nk = match kind {
            LinearKind::AttnQ => (1024, 640),
            LinearKind::AttnK | LinearKind::AttnV => (256, 640),
            LinearKind::AttnOutput => (640, 1024),
            LinearKind::FfnGate | LinearKind::FfnUp => (2048, 640),
            LinearKind::FfnDown => (640, 2048),
            other => panic!("{other} in a block"),
        };
        assert_eq!(nk, want_nk, "blk.{b}.{kind}");
        *by_kind
            .entry(kind.to_string())
            .or_default()
            .entry(ty.to_string())
            .or_default() += 1;
        // K-quants only where K is whole super-blocks (640 is 2.5 x 256).
        if matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K) {
            assert_eq!(nk.1 % 256, 0, "blk.{b}.{kind}");
        }
    }
    let m = |v: &[(&str, usize)]| -> BTreeMap<String, usize> {
        v.iter().map(|&(t, c)| (t.to_owned(), c)).collect()
    };
    let want: BTreeMap<String, BTreeMap<String, usize>> = [
        ("attn_q", m(&[("Q5_0", 18)])),
        ("attn_k", m(&[("Q5_0", 18)])),
        ("attn_v", m(&[("Q5_0", 9), ("Q8_0", 9)])),
        ("attn_output", m(&[("Q4_K", 18)])),
        ("ffn_gate", m(&[("Q5_0", 18)])),
        ("ffn_up", m(&[("Q5_0", 18)])),
        ("ffn_down", m(&[("Q4_K", 9), ("Q6_K", 9)])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(by_kind, want);
    // llama.cpp's Q4_K_M gives more bits to the first and last eighth of the blocks and every third
    // one between: there attn_v is Q8_0 (else Q5_0) and ffn_down Q6_K (else Q4_K).
    let blocks_with = |kind: LinearKind, ty: GgmlType| -> Vec<usize> {
        layers
            .iter()
            .filter(|l| l.1 == kind && l.2 == ty)
            .map(|l| l.0)
            .collect()
    };
    let more_bits = vec![0, 1, 4, 7, 10, 13, 15, 16, 17];
    assert_eq!(blocks_with(LinearKind::AttnV, GgmlType::Q8_0), more_bits);
    assert_eq!(blocks_with(LinearKind::FfnDown, GgmlType::Q6_K), more_bits);
    let mut totals = BTreeMap::new();
    for &(_, _, ty, _) in &layers {
        *totals.entry(ty.to_string()).or_insert(0) += 1;
    }
    assert_eq!(
        totals,
        m(&[("Q4_K", 27), ("Q5_0", 81), ("Q6_K", 9), ("Q8_0", 9)])
    );

    // The generic `{arch}.*` keys read as for llama (the Gemma-specific ones are there too).
    let p = LlamaParams::from_gguf(&file).unwrap();
    assert_eq!(
        (
            p.architecture.as_str(),
            p.block_count,
            p.embedding_length,
            p.feed_forward_length,
            p.head_count,
            p.head_count_kv
        ),
        ("gemma3", 18, 640, 2048, 4, 1)
    );
    assert_eq!((p.rms_norm_eps as f32, p.rope_freq_base), (1e-6, 1e6));
    assert_eq!(
        (p.context_length, p.vocab_size),
        (Some(32768), Some(262144))
    );
    assert_eq!(file.get_usize("gemma3.attention.key_length").unwrap(), 256);
    assert_eq!(
        file.get_usize("gemma3.attention.sliding_window").unwrap(),
        512
    );
    for b in 0..18 {
        for norm in [
            "attn_norm",
            "attn_q_norm",
            "attn_k_norm",
            "post_attention_norm",
            "ffn_norm",
            "post_ffw_norm",
        ] {
            let v = file.tensor_f32(&format!("blk.{b}.{norm}.weight")).unwrap();
            let want = if norm.starts_with("attn_") && norm != "attn_norm" {
                256
            } else {
                640
            };
            assert_eq!(v.len(), want, "blk.{b}.{norm}");
            assert!(v.iter().all(|x| x.is_finite()));
        }
    }
    assert_eq!(file.tensor_f32("output_norm.weight").unwrap().len(), 640);
}

#[test]
fn gemma3_k_quants_decode_bit_exact() {
    let Some(file) = open("gemma3_k_quants_decode_bit_exact") else {
        return;
    };
    let start = Instant::now();
    let tensors: Vec<_> = file
        .iter_tensors()
        .filter(|t| matches!(t.ggml_type(), GgmlType::Q4_K | GgmlType::Q6_K))
        .collect();
    assert_eq!(tensors.len(), 36);
    // Two threads (the CI machine has two cores), each taking every other tensor.
    let results: Vec<(usize, usize, i16, i16)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|part| {
                let tensors = &tensors;
                s.spawn(move || {
                    let mut out = Vec::new();
                    for t in tensors.iter().skip(part).step_by(2) {
                        let (n, k) = t.info().matrix_nk().unwrap();
                        let two = TwoLevel::from_tensor(t).unwrap_or_else(|e| panic!("{e}"));
                        assert_eq!((two.n, two.k, two.ty), (n, k, t.ggml_type()));
                        let ggml = ggml_dequantize(t.ggml_type(), t.bytes(), n * k).unwrap();
                        let ours = two.dequantize();
                        if let Some(i) =
                            (0..n * k).find(|&i| ours[i].to_bits() != ggml[i].to_bits())
                        {
                            panic!(
                                "{} ({}) element ({}, {}): two-level {:e}, ggml {:e}",
                                t.name(),
                                t.ggml_type(),
                                i / k,
                                i % k,
                                ours[i],
                                ggml[i]
                            );
                        }
                        assert!(ggml.iter().all(|v| v.is_finite()), "{}", t.name());
                        let lo = *two.scales.iter().min().unwrap();
                        let hi = *two.scales.iter().max().unwrap();
                        out.push((n * k, usize::from(t.ggml_type() == GgmlType::Q6_K), lo, hi));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let weights: usize = results.iter().map(|r| r.0).sum();
    // 18 attn_output (640 x 1024), 18 ffn_down (640 x 2048).
    assert_eq!(weights, 18 * 640 * 1024 + 18 * 640 * 2048);
    let range = |q6: usize| {
        let r = results.iter().filter(|r| r.1 == q6);
        (
            r.clone().map(|r| r.2).min().unwrap(),
            r.map(|r| r.3).max().unwrap(),
        )
    };
    println!(
        "decoded and compared {} K-quant tensors ({weights} weights) in {:.1?}; group scales Q4_K {:?}, Q6_K {:?}",
        results.len(),
        start.elapsed(),
        range(0),
        range(1)
    );
}

/// Converts the `kinds` projections of `blocks` with `to_quantized` and checks that the exact f64
/// dequantization, rounded to f32, is ggml's f32 value bit for bit; returns how many of each type.
fn convert_bit_exact(
    file: &GgufFile,
    blocks: &[usize],
    kinds: &[LinearKind],
) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for b in blocks {
        for kind in kinds {
            let t = file.tensor(&format!("blk.{b}.{kind}.weight")).unwrap();
            let (n, k) = t.info().matrix_nk().unwrap();
            let w = to_quantized(&t).unwrap_or_else(|e| panic!("{e}"));
            let ggml = ggml_dequantize(t.ggml_type(), t.bytes(), n * k).unwrap();
            for (i, (&a, &g)) in w.dequantize().iter().zip(&ggml).enumerate() {
                assert_eq!(
                    (a as f32).to_bits(),
                    g.to_bits(),
                    "{} element {i}: ours {a:e}, ggml {g:e}",
                    t.name()
                );
            }
            *seen.entry(t.ggml_type().to_string()).or_insert(0) += 1;
        }
    }
    seen
}

#[test]
fn gemma3_legacy_layers_convert_bit_exact() {
    let Some(file) = open("gemma3_legacy_layers_convert_bit_exact") else {
        return;
    };
    // The legacy (Q5_0, Q8_0) projections of a block with Q8_0 attn_v and of one with Q5_0 attn_v:
    // the lossless conversion against ggml, as for SmolLM2's Q4_1 (the whole model takes long in a
    // debug build).
    let start = Instant::now();
    let seen = convert_bit_exact(
        &file,
        &[0, 2],
        &[
            LinearKind::AttnQ,
            LinearKind::AttnK,
            LinearKind::AttnV,
            LinearKind::FfnGate,
            LinearKind::FfnUp,
        ],
    );
    assert_eq!(
        seen,
        BTreeMap::from([("Q5_0".to_owned(), 9), ("Q8_0".to_owned(), 1)])
    );
    println!(
        "converted and compared 10 legacy tensors in {:.1?}",
        start.elapsed()
    );
}

#[test]
fn gemma3_k_quant_layers_convert_bit_exact() {
    let Some(file) = open("gemma3_k_quant_layers_convert_bit_exact") else {
        return;
    };
    // The K-quant projections (Q4_K attn_output / ffn_down, Q6_K ffn_down) of two blocks, through the
    // two-level conversion.
    let start = Instant::now();
    let seen = convert_bit_exact(
        &file,
        &[0, 2],
        &[LinearKind::AttnOutput, LinearKind::FfnDown],
    );
    assert_eq!(
        seen,
        BTreeMap::from([("Q4_K".to_owned(), 3), ("Q6_K".to_owned(), 1)])
    );
    println!(
        "converted and compared 4 K-quant tensors in {:.1?}",
        start.elapsed()
    );
}
