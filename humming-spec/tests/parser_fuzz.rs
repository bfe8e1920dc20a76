//! Fuzzing the `gemm!` front end: random token streams and mutations of valid declarations must never
//! make `parse_kernels` panic (a panic in the proc macro is an unhelpful "proc macro panicked" error).
//! For declarations that do validate, the rest of the pipeline the macro runs (canonical text, hash,
//! CUDA generation, descriptor tokens) must not panic either.

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use proptest::prelude::*;
use quote::quote;

/// Valid declarations (bodies of `gemm!`) that the mutations start from.
const SEEDS: &[&str] = &[
    "/// Doc.\npub kernel W4A16 { a: f16, b: u4, scale: group(128), zero_point: int, bias: true }",
    "pub(crate) kernel W8 { a: bf16, b: i8 }",
    "kernel Q4_1 { a: f16, b: u4, scale: group(32, f16), zero_point: float, epilogue: silu }",
    "kernel T { a: f16, b: u3, c: f16, scale: channel(f16), arch: [sm_80, sm_90a], \
     tiles: [tile(block = (16, 128, 128), warp = (16, 64, 64), stages = 4), \
     tile(block = (64, 256, 64), warp = (64, 64, 64), stages = 3)] }",
    "kernel A { a: bf16, b: u8, zero_point: int, layout: dense, epilogue: gelu_tanh } \
     pub kernel B { a: f16, b: i2, scale: channel }",
    "kernel F { a: e4m3, b: e4m3, c: bf16, scale: block(128, 128, f32), scale2: tensor(f32), arch: [sm_90a] }",
];

/// One lexeme of a flattened token stream: a delimiter or a leaf token's text.
#[derive(Clone, Debug)]
enum Lex {
    Open(Delimiter),
    Close(Delimiter),
    Leaf(String),
}

fn flatten(ts: TokenStream, out: &mut Vec<Lex>) {
    for tt in ts {
        match tt {
            TokenTree::Group(g) if g.delimiter() != Delimiter::None => {
                out.push(Lex::Open(g.delimiter()));
                flatten(g.stream(), out);
                out.push(Lex::Close(g.delimiter()));
            }
            TokenTree::Group(g) => flatten(g.stream(), out),
            other => out.push(Lex::Leaf(other.to_string())),
        }
    }
}

/// Joins lexemes back into source text, dropping unmatched closers and closing what is left open, so
/// that the text always lexes.
fn render(lexes: &[Lex]) -> String {
    let delims = |d: Delimiter| match d {
        Delimiter::Parenthesis => ("(", ")"),
        Delimiter::Brace => ("{", "}"),
        Delimiter::Bracket => ("[", "]"),
        Delimiter::None => ("", ""),
    };
    let mut s = String::new();
    let mut stack = Vec::new();
    for l in lexes {
        match l {
            Lex::Open(d) => {
                stack.push(*d);
                s.push_str(delims(*d).0);
            }
            Lex::Close(d) => {
                if stack.last() == Some(d) {
                    stack.pop();
                    s.push_str(delims(*d).1);
                }
            }
            Lex::Leaf(t) => s.push_str(t),
        }
        s.push(' ');
    }
    while let Some(d) = stack.pop() {
        s.push_str(delims(d).1);
    }
    s
}

const WORDS: &[&str] = &[
    "kernel",
    "pub",
    "crate",
    "a",
    "b",
    "c",
    "scale",
    "scale2",
    "zero_point",
    "bias",
    "layout",
    "epilogue",
    "arch",
    "tiles",
    "f16",
    "bf16",
    "f32",
    "u0",
    "u1",
    "u4",
    "u8",
    "u9",
    "i1",
    "i4",
    "i8",
    "i12",
    "e4m3",
    "e5m2",
    "e2m1",
    "e0m3",
    "ue8m0",
    "u255",
    "u256",
    "int",
    "float",
    "none",
    "group",
    "channel",
    "block",
    "tensor",
    "tile",
    "warp",
    "stages",
    "dense",
    "moe_indexed",
    "silu",
    "relu",
    "gelu_tanh",
    "sm_75",
    "sm_80",
    "sm_90a",
    "sm_120a",
    "true",
    "false",
    "fn",
    "self",
    "r#type",
    "_",
    "K",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(WORDS).prop_map(String::from),
        1 => "[a-z_][a-z0-9_]{0,6}".prop_filter("an identifier", |s| s != "_" && s.parse::<TokenStream>().is_ok()),
    ]
}

fn int() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (0u64..300).prop_map(|n| n.to_string()),
        2 => proptest::sample::select(&[1u64, 2, 7, 8, 16, 32, 64, 65, 128, 256, 1024, 65535, 65536, 4294967295, 4294967296][..])
            .prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => Just("99999999999999999999999999".to_string()),
        1 => (0u32..200, proptest::sample::select(&["u8", "u32", "i64", "usize", "f32"][..]))
            .prop_map(|(n, s)| format!("{n}{s}")),
        1 => Just("0x10".to_string()),
        1 => Just("1.5".to_string()),
    ]
}

fn lex() -> impl Strategy<Value = Lex> {
    let delim = proptest::sample::select(
        &[Delimiter::Parenthesis, Delimiter::Brace, Delimiter::Bracket][..],
    );
    prop_oneof![
        6 => word().prop_map(Lex::Leaf),
        3 => int().prop_map(Lex::Leaf),
        4 => proptest::sample::select(&[":", ",", "=", "#", "!", "-", ";", "::", "..", "/", "*"][..])
            .prop_map(|p| Lex::Leaf(p.to_string())),
        1 => Just(Lex::Leaf("\"text\"".to_string())),
        1 => Just(Lex::Leaf("/// doc\n".to_string())),
        2 => delim.clone().prop_map(Lex::Open),
        2 => delim.prop_map(Lex::Close),
    ]
}

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Replace(usize, Lex),
    Insert(usize, Lex),
    /// Replaces an identifier with another word, or an integer with another integer.
    Retype(usize, String, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = any::<usize>();
    prop_oneof![
        1 => i.prop_map(Mutation::Delete),
        1 => i.prop_map(Mutation::Duplicate),
        1 => (i, i).prop_map(|(a, b)| Mutation::Swap(a, b)),
        1 => (i, lex()).prop_map(|(a, l)| Mutation::Replace(a, l)),
        1 => (i, lex()).prop_map(|(a, l)| Mutation::Insert(a, l)),
        2 => (i, word(), int()).prop_map(|(a, w, n)| Mutation::Retype(a, w, n)),
    ]
}

fn apply(lexes: &mut Vec<Lex>, m: &Mutation) {
    if lexes.is_empty() {
        return;
    }
    let n = lexes.len();
    match m {
        Mutation::Delete(i) => {
            lexes.remove(i % n);
        }
        Mutation::Duplicate(i) => {
            let l = lexes[i % n].clone();
            lexes.insert(i % n, l);
        }
        Mutation::Swap(a, b) => lexes.swap(a % n, b % n),
        Mutation::Replace(i, l) => lexes[i % n] = l.clone(),
        Mutation::Insert(i, l) => lexes.insert(i % (n + 1), l.clone()),
        Mutation::Retype(i, w, int) => {
            if let Lex::Leaf(t) = &mut lexes[i % n] {
                let first = t.chars().next().unwrap_or(' ');
                if first.is_ascii_digit() {
                    *t = int.clone();
                } else if first.is_alphabetic() || first == '_' {
                    *t = w.clone();
                }
            }
        }
    }
}

/// Runs the macro's whole front end on `src`; panics are the failures.
fn run(src: &str) {
    let Ok(tokens) = src.parse::<TokenStream>() else {
        return;
    };
    if let Ok(kernels) = humming_spec::parse_kernels(tokens) {
        for k in kernels {
            if let Ok(spec) = k.spec {
                let _ = spec.canonical();
                let _ = spec.hash_hex();
                let cuda = humming_spec::codegen::generate_cuda(&spec);
                assert!(cuda.contains(&humming_spec::codegen::entry_name(&spec, 0)));
                let _ = humming_spec::tokens::spec_tokens(&spec, &quote!(::humming));
                // A valid spec means the same thing when written back in canonical form.
                let again = humming_spec::parse_kernel_str(&fields_of(&spec))
                    .expect("canonical form validates");
                assert_eq!(again, spec);
            }
        }
    }
}

/// The spec's fields as `gemm!` source.
fn fields_of(spec: &humming_spec::KernelSpec) -> String {
    use humming_spec::{ScaleGranularity, ZeroPoint};
    let scale = |s: &humming_spec::Scale| match s.granularity {
        ScaleGranularity::Channel => format!("channel({})", s.dtype),
        ScaleGranularity::Group { size } => format!("group({size}, {})", s.dtype),
        ScaleGranularity::Block { n, k } => format!("block({n}, {k}, {})", s.dtype),
        ScaleGranularity::Tensor => format!("tensor({})", s.dtype),
    };
    let zp = match spec.zero_point {
        ZeroPoint::None => "none",
        ZeroPoint::Integer => "int",
        ZeroPoint::FloatOffset => "float",
    };
    let archs: Vec<&str> = spec.archs.iter().map(|a| a.name()).collect();
    let tiles: Vec<String> = spec
        .tiles
        .as_slice()
        .iter()
        .map(|t| {
            format!(
                "tile(block = ({}, {}, {}), warp = ({}, {}, {}), stages = {})",
                t.block_m, t.block_n, t.block_k, t.warp_m, t.warp_n, t.warp_k, t.stages
            )
        })
        .collect();
    let mut s = format!(
        "a: {}, b: {}, c: {}, scale: {}, zero_point: {zp}, bias: {}, layout: {}, epilogue: {}, arch: [{}], tiles: [{}]",
        spec.a,
        spec.b,
        spec.c,
        scale(&spec.scale),
        spec.bias,
        spec.layout.name(),
        spec.epilogue.name(),
        archs.join(", "),
        tiles.join(", ")
    );
    if let Some(s2) = &spec.scale2 {
        s.push_str(&format!(", scale2: {}", scale(s2)));
    }
    s
}

#[test]
fn seeds_are_valid() {
    for seed in SEEDS {
        let kernels = humming_spec::parse_kernels(seed.parse().unwrap())
            .unwrap_or_else(|e| panic!("{seed}: {e}"));
        for k in kernels {
            // The last seed is a model-valid declaration the generator rejects; all others validate.
            if !seed.contains("e4m3") {
                k.spec.unwrap_or_else(|e| panic!("{seed}: {e}"));
            }
        }
        run(seed);
    }
}

fn dtype() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&["f16", "bf16", "f32", "e4m3", "e5m2", "e2m1", "e0m3", "ue8m0", "i8", "i4"][..])
            .prop_map(String::from),
        3 => (proptest::sample::select(&["u", "i"][..]), 0u8..12).prop_map(|(k, b)| format!("{k}{b}")),
        1 => (0u8..9, 0u8..9).prop_map(|(e, m)| format!("e{e}m{m}")),
    ]
}

fn extent() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(&[1u32, 2, 4, 8, 16, 32, 64][..]).prop_map(|n| n.to_string()),
        3 => proptest::sample::select(&[1u32, 8, 16, 32, 48, 64, 128, 256, 512, 1024, 4096, 32768, 65535, 65536][..])
            .prop_map(|n| n.to_string()),
        1 => int(),
    ]
}

/// One `key: value` field of a plausible declaration, values drawn near the rules' edges.
fn field() -> impl Strategy<Value = String> {
    let triple = || (extent(), extent(), extent()).prop_map(|(m, n, k)| format!("({m}, {n}, {k})"));
    let tile = (
        triple(),
        proptest::option::of(triple()),
        proptest::option::of(0u32..12),
    )
        .prop_map(|(b, w, s)| {
            let mut t = format!("tile(block = {b}");
            if let Some(w) = w {
                t += &format!(", warp = {w}");
            }
            if let Some(s) = s {
                t += &format!(", stages = {s}");
            }
            t + ")"
        });
    let scale = prop_oneof![
        (proptest::option::of(dtype())).prop_map(|d| format!("channel({})", d.unwrap_or_default())),
        (extent(), proptest::option::of(dtype())).prop_map(|(g, d)| format!(
            "group({g}{})",
            d.map(|d| format!(", {d}")).unwrap_or_default()
        )),
        (extent(), extent(), dtype()).prop_map(|(n, k, d)| format!("block({n}, {k}, {d})")),
        dtype().prop_map(|d| format!("tensor({d})")),
    ];
    let arch = proptest::sample::select(
        &[
            "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120a",
        ][..],
    );
    prop_oneof![
        2 => dtype().prop_map(|d| format!("a: {d}")),
        2 => dtype().prop_map(|d| format!("b: {d}")),
        1 => dtype().prop_map(|d| format!("c: {d}")),
        2 => scale.clone().prop_map(|s| format!("scale: {s}")),
        1 => scale.prop_map(|s| format!("scale2: {s}")),
        1 => proptest::sample::select(&["none", "int", "float"][..]).prop_map(|z| format!("zero_point: {z}")),
        1 => any::<bool>().prop_map(|b| format!("bias: {b}")),
        1 => proptest::sample::select(&["dense", "moe_indexed", "moe_grouped_masked"][..]).prop_map(|l| format!("layout: {l}")),
        1 => proptest::sample::select(&["none", "relu", "silu", "gelu", "gelu_tanh"][..]).prop_map(|e| format!("epilogue: {e}")),
        1 => proptest::collection::vec(arch, 0..4).prop_map(|a| format!("arch: [{}]", a.join(", "))),
        2 => proptest::collection::vec(tile, 0..10).prop_map(|t| format!("tiles: [{}]", t.join(", "))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_declarations_never_panic(
        seed in proptest::sample::select(SEEDS),
        mutations in proptest::collection::vec(mutation(), 1..6),
    ) {
        let mut lexes = Vec::new();
        flatten(seed.parse().unwrap(), &mut lexes);
        for m in &mutations {
            apply(&mut lexes, m);
        }
        run(&render(&lexes));
    }

    #[test]
    fn random_token_streams_never_panic(lexes in proptest::collection::vec(lex(), 0..40)) {
        run(&render(&lexes));
    }

    #[test]
    fn generated_declarations_never_panic(
        a in prop_oneof![3 => Just("f16".to_string()), 2 => Just("bf16".to_string()), 1 => dtype()],
        b in prop_oneof![3 => Just("u4".to_string()), 1 => dtype()],
        fields in proptest::collection::vec(field(), 0..6),
    ) {
        run(&format!("kernel K {{ a: {a}, b: {b}, {} }}", fields.join(", ")));
    }

    #[test]
    fn extreme_tiles_never_panic(
        a in proptest::sample::select(&["f16", "bf16"][..]),
        dims in proptest::array::uniform3((0u32..=16, 0u32..=16, 0u32..3)),
        stages in 0u32..10,
    ) {
        // Powers of two (or one less) from 1 to 65535 for the block, smaller ones for the warp.
        let e = |x: u32, odd: u32| ((1u32 << x.min(15)) - u32::from(odd == 2 && x > 0)).max(1);
        let block: Vec<String> = dims.iter().map(|&(x, _, o)| e(x, o).to_string()).collect();
        let warp: Vec<String> = dims.iter().map(|&(x, y, _)| e(x.min(y), 0).to_string()).collect();
        run(&format!(
            "kernel K {{ a: {a}, b: u4, tiles: [tile(block = ({}), warp = ({}), stages = {stages})] }}",
            block.join(", "),
            warp.join(", ")
        ));
    }

    #[test]
    fn random_fields_never_panic(fields in proptest::collection::vec((word(), lex(), lex(), lex()), 0..8)) {
        // `kernel K { key: v v v, ... }`: well-formed items with arbitrary values.
        let body: Vec<Lex> = fields
            .into_iter()
            .flat_map(|(k, v1, v2, v3)| [Lex::Leaf(k), Lex::Leaf(":".into()), v1, v2, v3, Lex::Leaf(",".into())])
            .collect();
        run(&format!("kernel K {{ {} }}", render(&body)));
    }
}
