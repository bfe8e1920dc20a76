//! The real SmolLM2-135M-Instruct Q4_1 GGUF file (quantized by llama.cpp, not by us), when present:
//! `$HUMMING_SMOLLM2_GGUF`, else the path `scripts/fetch-smollm2.sh` downloads to.

use humming_import::{
    GgmlType, GgufFile, LlamaParams, ZeroPoints, ggml_dequantize, smollm2_gguf_path, to_quantized,
};
use std::collections::BTreeMap;
use std::time::Instant;

fn open(test: &str) -> Option<GgufFile> {
    let path = smollm2_gguf_path();
    if !path.exists() {
        println!("skipped: {test} (model file absent; run scripts/fetch-smollm2.sh)");
        return None;
    }
    Some(GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

#[test]
fn smollm2_table_and_metadata() {
    let Some(file) = open("smollm2_table_and_metadata") else {
        return;
    };
    assert_eq!(file.version(), 3);
    assert_eq!(file.tensors().len(), 272);
    let mut counts = BTreeMap::new();
    for t in file.tensors() {
        *counts.entry(t.ggml_type.to_string()).or_insert(0) += 1;
    }
    assert_eq!(counts.get("Q4_1"), Some(&210));
    assert_eq!(counts.get("Q8_0"), Some(&1));
    assert_eq!(counts.get("F32"), Some(&61));
    let emb = file.tensor_info("token_embd.weight").unwrap();
    assert_eq!(
        (emb.ggml_type, emb.matrix_nk()),
        (GgmlType::Q8_0, Some((49152, 576)))
    );
    let shapes = [
        ("attn_q", (576, 576)),
        ("attn_k", (192, 576)),
        ("attn_v", (192, 576)),
        ("attn_output", (576, 576)),
        ("ffn_gate", (1536, 576)),
        ("ffn_up", (1536, 576)),
        ("ffn_down", (576, 1536)),
    ];
    for b in 0..30 {
        for (p, nk) in shapes {
            let t = file.tensor_info(&format!("blk.{b}.{p}.weight")).unwrap();
            assert_eq!(
                (t.ggml_type, t.matrix_nk()),
                (GgmlType::Q4_1, Some(nk)),
                "blk.{b}.{p}"
            );
        }
        let norm = file
            .tensor_f32(&format!("blk.{b}.attn_norm.weight"))
            .unwrap();
        assert_eq!(norm.len(), 576);
        assert!(norm.iter().all(|v| v.is_finite()));
    }
    assert_eq!(file.tensor_f32("output_norm.weight").unwrap().len(), 576);
    let p = LlamaParams::from_gguf(&file).unwrap();
    assert_eq!(p.architecture, "llama");
    assert_eq!(
        (
            p.block_count,
            p.embedding_length,
            p.feed_forward_length,
            p.head_count,
            p.head_count_kv
        ),
        (30, 576, 1536, 9, 3)
    );
    assert_eq!((p.rope_freq_base, p.rms_norm_eps as f32), (100000.0, 1e-5));
    assert_eq!((p.context_length, p.vocab_size), (Some(8192), Some(49152)));
}

#[test]
fn smollm2_all_q4_1_tensors_convert_bit_exact() {
    let Some(file) = open("smollm2_all_q4_1_tensors_convert_bit_exact") else {
        return;
    };
    let start = Instant::now();
    let mut converted = 0;
    let mut elements = 0usize;
    for t in file
        .iter_tensors()
        .filter(|t| t.ggml_type() == GgmlType::Q4_1)
    {
        let w = to_quantized(&t).unwrap_or_else(|e| panic!("{e}"));
        let (n, k) = t.info().matrix_nk().unwrap();
        assert_eq!((w.n(), w.k(), w.groups()), (n, k, k / 32));
        assert!(matches!(w.zeros(), ZeroPoints::Float(_)));
        let ggml = ggml_dequantize(t.ggml_type(), t.bytes(), n * k).unwrap();
        let ours = w.dequantize();
        for (i, (&a, &b)) in ours.iter().zip(&ggml).enumerate() {
            assert_eq!(
                (a as f32).to_bits(),
                b.to_bits(),
                "{} element {i}: ours {a:e}, ggml {b:e}",
                t.name()
            );
        }
        converted += 1;
        elements += n * k;
    }
    assert_eq!(converted, 210);
    println!(
        "converted and compared {converted} Q4_1 tensors ({elements} weights) in {:.1?}",
        start.elapsed()
    );
}

#[test]
fn smollm2_token_embedding_q8_0_bit_exact() {
    let Some(file) = open("smollm2_token_embedding_q8_0_bit_exact") else {
        return;
    };
    let t = file.tensor("token_embd.weight").unwrap();
    let w = to_quantized(&t).unwrap();
    assert_eq!((w.n(), w.k()), (49152, 576));
    assert_eq!(w.spec().b, humming_spec::DType::SInt { bits: 8 });
    // Every element of a spread of rows (the whole table takes long in a debug build).
    let ggml = ggml_dequantize(t.ggml_type(), t.bytes(), w.n() * w.k()).unwrap();
    for row in (0..w.n()).step_by(97).chain([w.n() - 1]) {
        for col in 0..w.k() {
            let ours = w.dequantize_value(row, col) as f32;
            assert_eq!(
                ours.to_bits(),
                ggml[row * w.k() + col].to_bits(),
                "row {row} col {col}"
            );
        }
    }
}
