//! What a valid `gemm!` expands to. Needs the package's build script (`humming_build::build()`) to
//! have compiled these declarations into `$OUT_DIR/humming/<hash>.fatbin`.

use humming::GemmKernel;
use humming::half::{bf16, f16};
use humming::spec::{DType, Epilogue, KernelSpec, Layout, ScaleGranularity, ZeroPoint};

humming::gemm! {
    /// GPTQ-style W4A16 with a bias.
    pub kernel W4A16G128 { a: f16, b: u4, scale: group(128), zero_point: int, bias: true }

    pub(crate) kernel W8A16 { a: bf16, b: i8, scale: channel }
}

/// Compiles only if `K::A` and `K::C` are `A` and `C`.
fn elements<K: GemmKernel<A = A, C = C>, A, C>() {}

fn check_common<K: GemmKernel>(fields: &str) {
    let spec: KernelSpec = K::DESCRIPTOR;
    // The emitted descriptor is exactly what the parser builds from the same fields.
    assert_eq!(spec, humming::spec::parse_kernel_str(fields).unwrap());
    assert_eq!(K::HASH, spec.hash());
    assert_eq!(K::CUDA_SOURCE, humming::spec::codegen::generate_cuda(&spec));
    for i in 0..humming::spec::tiles::tiles_of(&spec).len() {
        assert!(K::CUDA_SOURCE.contains(&humming::spec::codegen::entry_name(&spec, i)));
    }
}

#[test]
fn w4a16_group_zero_point_bias() {
    elements::<W4A16G128, f16, f16>();
    assert_eq!(W4A16G128::NAME, "W4A16G128");
    let d = W4A16G128::DESCRIPTOR;
    assert_eq!(
        (d.a, d.b, d.c),
        (DType::F16, DType::UInt { bits: 4 }, DType::F16)
    );
    assert_eq!(d.scale.dtype, DType::F16);
    assert_eq!(d.scale.granularity, ScaleGranularity::Group { size: 128 });
    assert_eq!(d.scale2, None);
    assert_eq!(d.zero_point, ZeroPoint::Integer);
    assert!(d.bias);
    assert_eq!(d.layout, Layout::Dense);
    assert_eq!(d.epilogue, Epilogue::None);
    assert_eq!(d.archs, humming::spec::ArchSet::DEFAULT);
    assert_eq!(d.tiles.len, 0);
    check_common::<W4A16G128>("a: f16, b: u4, scale: group(128), zero_point: int, bias: true");
    // The inherent consts and the trait's agree.
    assert_eq!(W4A16G128::HASH, <W4A16G128 as GemmKernel>::HASH);
    assert_eq!(W4A16G128::IMAGE, <W4A16G128 as GemmKernel>::IMAGE);
}

#[test]
fn w8a16_channel() {
    elements::<W8A16, bf16, bf16>();
    assert_eq!(W8A16::NAME, "W8A16");
    let d = W8A16::DESCRIPTOR;
    assert_eq!(
        (d.a, d.b, d.c),
        (DType::BF16, DType::SInt { bits: 8 }, DType::BF16)
    );
    assert_eq!(d.scale.granularity, ScaleGranularity::Channel);
    assert_eq!(d.scale.dtype, DType::BF16);
    assert_eq!(d.zero_point, ZeroPoint::None);
    assert!(!d.bias);
    check_common::<W8A16>("a: bf16, b: i8, scale: channel");
    assert_ne!(W8A16::HASH, W4A16G128::HASH);
}

#[test]
fn generated_type_is_a_plain_value() {
    let k = W4A16G128;
    let copy = k;
    assert_eq!(k, copy);
    assert_eq!(format!("{k:?}"), "W4A16G128");
    fn default_of<T: Default>() -> T {
        T::default()
    }
    assert_eq!(default_of::<W8A16>(), W8A16);
}
