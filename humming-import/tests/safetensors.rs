//! Plain safetensors checkpoints: listing, reading as f32, and quantizing on load.

use humming_import::{Error, QuantizedWeights, SafetensorsFile};
use humming_spec::parse_kernel_str;
use safetensors::{Dtype, serialize, tensor::TensorView};

fn weights(n: usize, k: usize, seed: u32) -> Vec<f32> {
    (0..n * k)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn checkpoint() -> Vec<u8> {
    let q: Vec<u8> = weights(6, 64, 1)
        .iter()
        .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
        .collect();
    let o: Vec<u8> = weights(3, 128, 2)
        .iter()
        .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
        .collect();
    let f: Vec<u8> = weights(5, 96, 3)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let norm: Vec<u8> = [1f32; 64].iter().flat_map(|v| v.to_le_bytes()).collect();
    let ids: Vec<u8> = vec![7; 8 * 4];
    let tensors = vec![
        (
            "model.layers.0.self_attn.q_proj.weight",
            TensorView::new(Dtype::BF16, vec![6, 64], &q).unwrap(),
        ),
        (
            "model.layers.0.self_attn.o_proj.weight",
            TensorView::new(Dtype::F16, vec![3, 128], &o).unwrap(),
        ),
        (
            "lm_head.weight",
            TensorView::new(Dtype::F32, vec![5, 96], &f).unwrap(),
        ),
        (
            "model.norm.weight",
            TensorView::new(Dtype::F32, vec![64], &norm).unwrap(),
        ),
        (
            "ids",
            TensorView::new(Dtype::I32, vec![2, 4], &ids).unwrap(),
        ),
    ];
    serialize(tensors, None).unwrap()
}

#[test]
fn lists_and_reads_tensors() {
    let file = SafetensorsFile::from_bytes(checkpoint()).unwrap();
    assert_eq!(file.tensors().len(), 5);
    let mats: Vec<(String, Vec<usize>)> = file
        .matrices()
        .into_iter()
        .map(|t| (t.name, t.shape))
        .collect();
    let mut names: Vec<&str> = mats.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "lm_head.weight",
            "model.layers.0.self_attn.o_proj.weight",
            "model.layers.0.self_attn.q_proj.weight"
        ]
    );
    let (shape, v) = file
        .tensor_f32("model.layers.0.self_attn.q_proj.weight")
        .unwrap();
    assert_eq!(shape, [6, 64]);
    let want: Vec<f32> = weights(6, 64, 1)
        .iter()
        .map(|&x| half::bf16::from_f32(x).to_f32())
        .collect();
    assert_eq!(v, want);
    let (_, v) = file.tensor_f32("lm_head.weight").unwrap();
    assert_eq!(v, weights(5, 96, 3));
    assert!(matches!(
        file.tensor_f32("nope"),
        Err(Error::MissingTensor { .. })
    ));
    assert!(matches!(file.tensor_f32("ids"), Err(Error::Shape { tensor, .. }) if tensor == "ids"));
}

#[test]
fn quantizes_named_matrices() {
    let path = std::env::temp_dir().join(format!(
        "humming-import-test-{}.safetensors",
        std::process::id()
    ));
    std::fs::write(&path, checkpoint()).unwrap();
    let file = SafetensorsFile::open(&path);
    std::fs::remove_file(&path).unwrap();
    let file = file.unwrap();
    for (spec_text, name) in [
        (
            "a: bf16, b: u4, scale: group(32, bf16), zero_point: int",
            "model.layers.0.self_attn.q_proj.weight",
        ),
        (
            "a: f16, b: i4, scale: group(64, f16)",
            "model.layers.0.self_attn.o_proj.weight",
        ),
        (
            "a: f16, b: u4, scale: group(32, f16), zero_point: float",
            "lm_head.weight",
        ),
        ("a: f16, b: i8, scale: channel(f16)", "lm_head.weight"),
    ] {
        let spec = parse_kernel_str(spec_text).unwrap();
        let w = file.quantize(name, &spec).unwrap();
        let (shape, values) = file.tensor_f32(name).unwrap();
        assert_eq!((w.n(), w.k()), (shape[0], shape[1]));
        assert_eq!(
            w,
            QuantizedWeights::quantize(&spec, shape[0], shape[1], &values).unwrap()
        );
        // Round-to-nearest: every weight within a scale of its dequantized value.
        let deq = w.dequantize();
        let max_err = deq
            .iter()
            .zip(&values)
            .map(|(&a, &b)| (a - f64::from(b)).abs())
            .fold(0.0, f64::max);
        let max_scale = w
            .scales()
            .iter()
            .map(|s| f64::from(s.abs()))
            .fold(0.0, f64::max);
        assert!(
            max_err <= max_scale,
            "{name} {spec_text}: error {max_err} > scale {max_scale}"
        );
    }
    let spec = parse_kernel_str("a: f16, b: u4, scale: group(32, f16)").unwrap();
    let e = file.quantize("model.norm.weight", &spec).unwrap_err();
    assert!(
        matches!(&e, Error::Shape { tensor, .. } if tensor == "model.norm.weight"),
        "{e}"
    );
}

#[test]
fn invalid_files_are_errors() {
    let e = SafetensorsFile::from_bytes(vec![1, 2, 3]).unwrap_err();
    assert!(matches!(e, Error::Safetensors { .. }), "{e}");
    let mut b = checkpoint();
    b.pop();
    assert!(matches!(
        SafetensorsFile::from_bytes(b),
        Err(Error::Safetensors { .. })
    ));
    assert!(matches!(
        SafetensorsFile::open("/nonexistent/x.safetensors"),
        Err(Error::Io { .. })
    ));
}
