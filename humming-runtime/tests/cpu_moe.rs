//! The MoE reference and the SiLU-GLU order on the CPU: each layout's rows against the dense
//! reference of the expert they are routed to, its argument errors, and the packing of gated weights.

use humming_runtime::moe::{MoeRows, reference_moe, route_capacity, route_indexed};
use humming_runtime::quant::QuantizedWeights;
use humming_runtime::reference::reference_gemm;
use humming_runtime::spec::{self, KernelSpec};
use humming_runtime::{Error, PackedWeights};

mod gpu_common;
use gpu_common::Rng;

fn parse(fields: &str) -> KernelSpec {
    spec::parse_kernel_str(fields).unwrap_or_else(|e| panic!("{fields}: {e}"))
}

fn weights(rng: &mut Rng, sp: &KernelSpec, n: usize, k: usize) -> QuantizedWeights {
    let w: Vec<f32> = (0..n * k).map(|_| 0.1 * rng.uniform()).collect();
    QuantizedWeights::quantize(sp, n, k, &w).expect("quantize")
}

/// The same weights under the dense twin of a MoE spec.
fn dense_twin(w: &QuantizedWeights) -> QuantizedWeights {
    let mut sp = *w.spec();
    sp.layout = spec::Layout::Dense;
    let scales = w.scales().to_vec();
    QuantizedWeights::from_parts(
        &sp,
        w.n(),
        w.k(),
        w.codes().to_vec(),
        scales,
        w.zeros().clone(),
    )
    .expect("dense twin")
}

fn arg_of(e: Error) -> &'static str {
    match e {
        Error::InvalidArgument { arg, .. } => arg,
        other => panic!("expected InvalidArgument, got {other}"),
    }
}

#[test]
fn every_layout_row_is_its_experts_dense_product() {
    let mut rng = Rng::new(7);
    let (n, k, e) = (128, 128, 4);
    for (layout, epi) in [
        ("moe_indexed", "silu_glu"),
        ("moe_grouped_contiguous", "none"),
        ("moe_grouped_masked", "silu_glu_interleaved"),
    ] {
        let sp = parse(&format!(
            "a: f16, b: u4, scale: group(64), layout: {layout}, epilogue: {epi}"
        ));
        let experts: Vec<QuantizedWeights> = (0..e).map(|_| weights(&mut rng, &sp, n, k)).collect();
        let (ids, offsets, counts) = ([2, 0, -1, 3, 3, 1], [0, 1, 1, 3, 5], [1, 0, 2, 1]);
        let (a_rows, rows) = match layout {
            "moe_indexed" => (
                3,
                MoeRows::Indexed {
                    topk_ids: &ids,
                    top_k: 2,
                    weights: None,
                },
            ),
            "moe_grouped_contiguous" => (6, MoeRows::Contiguous { offsets: &offsets }),
            _ => (
                8,
                MoeRows::Masked {
                    counts: &counts,
                    max_m: 2,
                },
            ),
        };
        let a: Vec<f64> = (0..a_rows * k).map(|_| f64::from(rng.uniform())).collect();
        let r = reference_moe(&experts, &a, a_rows, &rows, None).expect("reference");
        let sources = rows.sources(a_rows, e).expect("sources");
        assert_eq!(r.written.len(), sources.len());
        assert!(r.written.iter().any(|w| !w) && r.written.iter().any(|w| *w));
        for (row, src) in sources.iter().enumerate() {
            let Some((ex, ar)) = *src else {
                assert!(
                    r.c[row * r.columns..(row + 1) * r.columns]
                        .iter()
                        .all(|&v| v == 0.0)
                );
                continue;
            };
            let dense =
                reference_gemm(&dense_twin(&experts[ex]), &a[ar * k..(ar + 1) * k], 1, None)
                    .expect("dense");
            assert_eq!(dense.len(), r.columns, "{layout}");
            assert_eq!(
                &r.c[row * r.columns..(row + 1) * r.columns],
                &dense[..],
                "{layout} row {row}"
            );
        }
    }
}

#[test]
fn routing_buffers_and_arguments_are_checked() {
    let mut rng = Rng::new(3);
    let sp = parse("a: f16, b: u4, scale: group(64), layout: moe_indexed");
    let experts: Vec<QuantizedWeights> = (0..2).map(|_| weights(&mut rng, &sp, 64, 64)).collect();
    let a = vec![0.5f64; 2 * 64];
    let bad_len = MoeRows::Indexed {
        topk_ids: &[0, 1, 1],
        top_k: 2,
        weights: None,
    };
    assert_eq!(
        arg_of(reference_moe(&experts, &a, 2, &bad_len, None).unwrap_err()),
        "topk_ids"
    );
    let ok = MoeRows::Indexed {
        topk_ids: &[0, 1, 1, 0],
        top_k: 2,
        weights: Some(&[1.0]),
    };
    assert_eq!(
        arg_of(reference_moe(&experts, &a, 2, &ok, None).unwrap_err()),
        "weights"
    );
    let wrong_layout = MoeRows::Contiguous {
        offsets: &[0, 1, 2],
    };
    assert_eq!(
        arg_of(reference_moe(&experts, &a, 2, &wrong_layout, None).unwrap_err()),
        "experts"
    );
    for offsets in [&[0, 2, 1][..], &[0, 1, 3], &[1, 1, 2], &[0, 2]] {
        let rows = MoeRows::Contiguous { offsets };
        assert_eq!(
            arg_of(rows.sources(2, 2).unwrap_err()),
            "offsets",
            "{offsets:?}"
        );
    }
    let masked = MoeRows::Masked {
        counts: &[1, 1],
        max_m: 3,
    };
    assert_eq!(arg_of(masked.sources(4, 2).unwrap_err()), "counts");
    assert_eq!(
        arg_of(reference_moe(&[], &a, 2, &ok, None).unwrap_err()),
        "experts"
    );
    // An expert with a NaN scale is refused when built, so it never reaches the stacked upload and
    // another expert's rows.
    let mut scales = experts[1].scales().to_vec();
    scales[3] = f32::NAN;
    let nan = QuantizedWeights::from_parts(
        &sp,
        64,
        64,
        experts[1].codes().to_vec(),
        scales,
        experts[1].zeros().clone(),
    );
    assert_eq!(arg_of(nan.map(|_| ()).unwrap_err()), "scales");
    // Capacity covers the worst case: every expert one choice, padded to a whole block.
    let ids: Vec<i32> = (0..64).collect();
    assert!(route_indexed(&ids, 64, 16).slots_used <= route_capacity(64, 64, 16));
}

#[test]
fn gated_weights_pack_in_kernel_order_and_unpack_back() {
    let mut rng = Rng::new(11);
    for epi in ["silu_glu", "silu_glu_interleaved"] {
        let sp = parse(&format!(
            "a: f16, b: u4, scale: group(64), zero_point: int, epilogue: {epi}"
        ));
        let w = weights(&mut rng, &sp, 128, 128);
        let packed: PackedWeights = w.pack().expect("pack");
        let back = packed.unpack(&sp).expect("unpack");
        assert_eq!(back.codes(), w.codes(), "{epi}");
        assert_eq!(back.scales(), w.scales(), "{epi}");
        // The plain order packs differently: the gated order moved the rows.
        let mut plain = sp;
        plain.epilogue = spec::Epilogue::None;
        let p2 = QuantizedWeights::from_parts(
            &plain,
            128,
            128,
            w.codes().to_vec(),
            w.scales().to_vec(),
            w.zeros().clone(),
        )
        .expect("plain")
        .pack()
        .expect("pack plain");
        assert_ne!(p2.b, packed.b, "{epi}");
    }
}
