//! The GGUF reader on files written by the test's own writer: metadata of every type, versions 2
//! and 3, alignments, the tensor table and data, and malformed files.

mod common;

use common::{GgufWriter, put_str};
use humming_import::{Error, GgmlType, GgufFile, LlamaParams, MetaValue};

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn sample(version: u32, alignment: Option<u64>) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.version = version;
    if let Some(a) = alignment {
        w.alignment = a;
        w.write_alignment = true;
    }
    w.kv("general.architecture", MetaValue::String("llama".into()))
        .kv("llama.block_count", MetaValue::U32(2))
        .kv("llama.embedding_length", MetaValue::U64(96))
        .kv("llama.feed_forward_length", MetaValue::I32(160))
        .kv("llama.attention.head_count", MetaValue::U16(6))
        .kv("llama.attention.head_count_kv", MetaValue::U8(2))
        .kv("llama.rope.freq_base", MetaValue::F32(100000.0))
        .kv(
            "llama.attention.layer_norm_rms_epsilon",
            MetaValue::F32(1e-5),
        )
        .kv("t.i8", MetaValue::I8(-5))
        .kv("t.i16", MetaValue::I16(-300))
        .kv("t.i64", MetaValue::I64(-1 << 40))
        .kv("t.u64big", MetaValue::U64(u64::MAX))
        .kv("t.f64", MetaValue::F64(0.1))
        .kv("t.bool", MetaValue::Bool(true))
        .kv("t.utf8", MetaValue::String("héllo ▁world".into()))
        .kv("t.empty", MetaValue::String(String::new()))
        .kv(
            "tokenizer.ggml.tokens",
            MetaValue::Array(vec![
                MetaValue::String("<s>".into()),
                MetaValue::String("a".into()),
            ]),
        )
        .kv(
            "t.nested",
            MetaValue::Array(vec![
                MetaValue::Array(vec![MetaValue::I32(1)]),
                MetaValue::Array(vec![]),
            ]),
        )
        .kv("t.empty_array", MetaValue::Array(vec![]));
    w.tensor(
        "norm",
        GgmlType::F32,
        &[5],
        f32_bytes(&[1.0, -2.0, 0.5, 3.25, -0.0]),
    );
    let h: Vec<u8> = [1.0f32, 0.333, -65504.0, 6e-8]
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    w.tensor("half", GgmlType::F16, &[2, 2], h);
    w.tensor("q", GgmlType::Q8_0, &[64, 3, 1, 1], vec![0u8; 34 * 2 * 3]);
    w.tensor("raw", GgmlType::I8, &[7], vec![1, 2, 3, 4, 5, 6, 7]);
    w
}

#[test]
fn reads_metadata_of_every_type() {
    for version in [2, 3] {
        for alignment in [None, Some(1), Some(64), Some(256)] {
            let file = GgufFile::from_bytes(sample(version, alignment).to_bytes()).unwrap();
            assert_eq!(file.version(), version);
            assert_eq!(file.alignment(), alignment.unwrap_or(32));
            assert_eq!(file.data_offset() % file.alignment(), 0);
            assert_eq!(file.architecture().unwrap(), "llama");
            assert_eq!(file.get_usize("llama.block_count").unwrap(), 2);
            assert_eq!(file.get_u64("llama.embedding_length").unwrap(), 96);
            assert_eq!(file.get_u64("llama.feed_forward_length").unwrap(), 160);
            assert_eq!(file.get_i64("t.i8").unwrap(), -5);
            assert_eq!(file.get_i64("t.i16").unwrap(), -300);
            assert_eq!(file.get_i64("t.i64").unwrap(), -1 << 40);
            assert_eq!(file.get_u64("t.u64big").unwrap(), u64::MAX);
            assert_eq!(file.get_f64("t.f64").unwrap(), 0.1);
            assert_eq!(file.get_f64("llama.rope.freq_base").unwrap(), 100000.0);
            assert_eq!(file.get_f64("llama.block_count").unwrap(), 2.0);
            assert!(file.get_bool("t.bool").unwrap());
            assert_eq!(file.get_str("t.utf8").unwrap(), "héllo ▁world");
            assert_eq!(file.get_str("t.empty").unwrap(), "");
            let toks = file
                .get("tokenizer.ggml.tokens")
                .unwrap()
                .as_array()
                .unwrap();
            assert_eq!(
                toks.iter().map(|t| t.as_str().unwrap()).collect::<Vec<_>>(),
                ["<s>", "a"]
            );
            let nested = file.get("t.nested").unwrap().as_array().unwrap();
            assert_eq!(nested[0], MetaValue::Array(vec![MetaValue::I32(1)]));
            assert_eq!(file.get("t.empty_array"), Some(&MetaValue::Array(vec![])));
            let keys: Vec<&str> = file.metadata().iter().map(|(k, _)| k.as_str()).collect();
            let first = if alignment.is_some() { 1 } else { 0 };
            assert_eq!(
                &keys[first..first + 2],
                ["general.architecture", "llama.block_count"]
            );

            let p = LlamaParams::from_gguf(&file).unwrap();
            assert_eq!(
                (
                    p.block_count,
                    p.embedding_length,
                    p.feed_forward_length,
                    p.head_count,
                    p.head_count_kv
                ),
                (2, 96, 160, 6, 2)
            );
            assert_eq!((p.rope_freq_base, p.rms_norm_eps as f32), (100000.0, 1e-5));
            assert_eq!((p.context_length, p.vocab_size), (None, Some(2)));
        }
    }
}

#[test]
fn metadata_errors_are_typed() {
    let file = GgufFile::from_bytes(sample(3, None).to_bytes()).unwrap();
    assert!(matches!(file.get_u64("nope"), Err(Error::MissingKey { key }) if key == "nope"));
    let e = file.get_u64("t.i8").unwrap_err();
    assert!(
        matches!(&e, Error::MetadataType { key, .. } if key == "t.i8"),
        "{e}"
    );
    assert!(e.to_string().contains("i8 -5"), "{e}");
    assert!(matches!(
        file.get_str("llama.block_count"),
        Err(Error::MetadataType { .. })
    ));
    assert!(matches!(
        file.get_f64("t.utf8"),
        Err(Error::MetadataType { .. })
    ));
    assert!(matches!(
        file.get_bool("t.i8"),
        Err(Error::MetadataType { .. })
    ));
    assert!(matches!(
        file.get_i64("t.u64big"),
        Err(Error::MetadataType { .. })
    ));
    let mut w = GgufWriter::new();
    w.kv("general.architecture", MetaValue::String("llama".into()));
    let e = LlamaParams::from_gguf(&GgufFile::from_bytes(w.to_bytes()).unwrap()).unwrap_err();
    assert!(
        matches!(&e, Error::MissingKey { key } if key == "llama.attention.head_count"),
        "{e}"
    );
}

#[test]
fn reads_tensor_table_and_data() {
    for (version, alignment) in [(2, None), (3, Some(64)), (3, Some(1))] {
        let file = GgufFile::from_bytes(sample(version, alignment).to_bytes()).unwrap();
        let names: Vec<&str> = file.tensors().iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["norm", "half", "q", "raw"]);
        let q = file.tensor_info("q").unwrap();
        assert_eq!(
            (q.ggml_type, q.dims.as_slice(), q.n_elements(), q.n_bytes),
            (GgmlType::Q8_0, &[64, 3, 1, 1][..], 192, Some(204))
        );
        assert_eq!(q.matrix_nk(), Some((3, 64)));
        assert_eq!(file.tensor_info("norm").unwrap().matrix_nk(), Some((1, 5)));
        assert_eq!(
            file.tensor_f32("norm").unwrap(),
            [1.0, -2.0, 0.5, 3.25, -0.0]
        );
        let want: Vec<f32> = [1.0f32, 0.333, -65504.0, 6e-8]
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect();
        assert_eq!(file.tensor_f32("half").unwrap(), want);
        assert_eq!(file.tensor_bytes("raw").unwrap(), [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(file.tensor_bytes("q").unwrap().len(), 204);
        for t in file.tensors() {
            assert_eq!(t.offset % file.alignment(), 0);
        }
        assert_eq!(file.iter_tensors().count(), 4);
        assert!(
            matches!(file.tensor("nope"), Err(Error::MissingTensor { name }) if name == "nope")
        );
        assert!(matches!(
            file.tensor_f32("raw"),
            Err(Error::UnsupportedTensorType {
                ty: GgmlType::I8,
                ..
            })
        ));
    }
}

#[test]
fn opens_files_from_disk() {
    let path =
        std::env::temp_dir().join(format!("humming-import-test-{}.gguf", std::process::id()));
    std::fs::write(&path, sample(3, None).to_bytes()).unwrap();
    let file = GgufFile::open(&path);
    std::fs::remove_file(&path).unwrap();
    let file = file.unwrap();
    assert_eq!(file.tensor_f32("norm").unwrap()[1], -2.0);
    let e = GgufFile::open("/nonexistent/x.gguf").unwrap_err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path == "/nonexistent/x.gguf"),
        "{e}"
    );
}

#[test]
fn unknown_tensor_types_are_listed_but_not_read() {
    let mut w = GgufWriter::new();
    w.tensors.push(("future".into(), 99, vec![32], vec![]));
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    let t = &file.tensors()[0];
    assert_eq!((t.ggml_type, t.n_bytes), (GgmlType::Other(99), None));
    assert_eq!(GgmlType::from_raw(99).raw(), 99);
    assert!(matches!(
        file.tensor("future"),
        Err(Error::UnsupportedTensorType {
            ty: GgmlType::Other(99),
            ..
        })
    ));
}

#[test]
fn type_numbers_round_trip() {
    for raw in 0..64 {
        let t = GgmlType::from_raw(raw);
        assert_eq!(t.raw(), raw);
        assert_eq!(
            t.block_layout().is_some(),
            !matches!(t, GgmlType::Other(_)),
            "{t}"
        );
    }
    assert_eq!(GgmlType::Q4_1.block_layout(), Some((32, 20)));
    assert_eq!(GgmlType::Q6_K.bytes_for(512), Some(420));
    assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
}

fn format_error(bytes: Vec<u8>) -> String {
    match GgufFile::from_bytes(bytes) {
        Err(Error::Format { msg, offset }) => format!("{offset}: {msg}"),
        Err(other) => panic!("expected a format error, got {other}"),
        Ok(_) => panic!("expected a format error, got a file"),
    }
}

#[test]
fn malformed_files_are_format_errors() {
    let good = sample(3, None).to_bytes();
    // Every truncation of the header, metadata and tensor table is caught; so is a cut data section.
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[4], vec![0; 16]);
    let small = w.to_bytes();
    for cut in 0..small.len() {
        format_error(small[..cut].to_vec());
    }
    for cut in [8, 24, 100, good.len() - 1] {
        format_error(good[..cut].to_vec());
    }
    let mut bad = good.clone();
    bad[0] = b'X';
    assert!(format_error(bad).contains("magic"));
    let mut v1 = good.clone();
    v1[4] = 1;
    assert!(format_error(v1).contains("version 1"));
    let mut v9 = good.clone();
    v9[4] = 9;
    assert!(format_error(v9).contains("version 9"));
    let mut be = good.clone();
    be[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(format_error(be).contains("big-endian"));
    // Counts far beyond the file.
    let mut huge = good.clone();
    huge[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    format_error(huge);
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    format_error(huge);

    let raw_kv = |key: &str, ty: u32, value: &[u8]| {
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&1u64.to_le_bytes());
        put_str(&mut b, key);
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(value);
        b
    };
    assert!(format_error(raw_kv("k", 13, &[0; 8])).contains("value type 13"));
    assert!(format_error(raw_kv("k", 7, &[2])).contains("bool"));
    let mut arr = 13u32.to_le_bytes().to_vec();
    arr.extend_from_slice(&1u64.to_le_bytes());
    assert!(format_error(raw_kv("k", 9, &arr)).contains("element type 13"));
    let mut arr = 4u32.to_le_bytes().to_vec();
    arr.extend_from_slice(&(u64::MAX / 2).to_le_bytes());
    format_error(raw_kv("k", 9, &arr));
    let mut s = u64::MAX.to_le_bytes().to_vec();
    s.push(b'x');
    assert!(format_error(raw_kv("k", 8, &s)).contains("string length"));
    assert!(
        format_error(raw_kv("general.alignment", 4, &48u32.to_le_bytes())).contains("power of two")
    );
    assert!(
        format_error(raw_kv("general.alignment", 4, &0u32.to_le_bytes())).contains("power of two")
    );
    assert!(
        format_error(raw_kv("general.alignment", 8, &{
            let mut v = 1u64.to_le_bytes().to_vec();
            v.push(b'7');
            v
        }))
        .contains("general.alignment")
    );
    let mut deep = Vec::new();
    for _ in 0..20 {
        deep.extend_from_slice(&9u32.to_le_bytes());
        deep.extend_from_slice(&1u64.to_le_bytes());
    }
    deep.extend_from_slice(&4u32.to_le_bytes());
    deep.extend_from_slice(&0u64.to_le_bytes());
    assert!(format_error(raw_kv("k", 9, &deep)).contains("nested"));

    let mut dup = GgufWriter::new();
    dup.kv("a", MetaValue::U8(1)).kv("a", MetaValue::U8(2));
    assert!(format_error(dup.to_bytes()).contains("duplicate metadata key `a`"));
    let mut dup = GgufWriter::new();
    dup.tensor("t", GgmlType::F32, &[1], vec![0; 4])
        .tensor("t", GgmlType::F32, &[1], vec![0; 4]);
    assert!(format_error(dup.to_bytes()).contains("duplicate tensor name `t`"));
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::Q4_0, &[48, 2], vec![0; 54]);
    assert!(format_error(w.to_bytes()).contains("not a multiple of the block size 32"));
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[1, 1, 1, 1, 1], vec![0; 4]);
    assert!(format_error(w.to_bytes()).contains("5 dimensions"));
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[u64::MAX, 2], vec![]);
    assert!(format_error(w.to_bytes()).contains("overflows"));
    // A tensor offset that is not aligned, and one past the end.
    let mut w = GgufWriter::new();
    w.tensor("t", GgmlType::F32, &[4], vec![0; 16]);
    let mut b = w.to_bytes();
    // Layout: header (24) + name (8 + 1) + n_dims (4) + dim (8) + type (4) + offset (8).
    let off_pos = 24 + 9 + 4 + 8 + 4;
    b[off_pos..off_pos + 8].copy_from_slice(&4u64.to_le_bytes());
    assert!(format_error(b.clone()).contains("not a multiple of the alignment"));
    b[off_pos..off_pos + 8].copy_from_slice(&32u64.to_le_bytes());
    assert!(format_error(b).contains("outside the data section"));
    // Non-UTF-8 key.
    let mut b = b"GGUF".to_vec();
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.push(0xFF);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(0);
    assert!(format_error(b).contains("UTF-8"));
}

#[test]
fn empty_file_is_an_error_not_a_panic() {
    format_error(Vec::new());
    let path =
        std::env::temp_dir().join(format!("humming-import-empty-{}.gguf", std::process::id()));
    std::fs::write(&path, b"").unwrap();
    let r = GgufFile::open(&path);
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(r, Err(Error::Format { .. })));
}
