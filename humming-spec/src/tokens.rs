//! A [`KernelSpec`] as Rust tokens: the `const` expression the `gemm!` macro emits for a kernel's
//! descriptor.
//!
//! Every field is written out (no `..Default::default()`), and the destructuring below is exhaustive,
//! so that a field or variant added to the model is a compile error here rather than a silently
//! wrong descriptor.

use crate::dtype::DType;
use crate::model::*;
use proc_macro2::{Literal, TokenStream};
use quote::quote;

/// The tokens of a `const` expression that builds `spec` through `#krate::spec::...`, e.g.
/// `::humming::spec::KernelSpec { a: ::humming::spec::DType::F16, b: ..., ... }`.
///
/// `krate` is the path of the crate that re-exports this one as `spec` (`::humming` for users of the
/// facade).
pub fn spec_tokens(spec: &KernelSpec, krate: &TokenStream) -> TokenStream {
    let KernelSpec {
        a,
        b,
        c,
        scale,
        scale2,
        zero_point,
        bias,
        layout,
        epilogue,
        archs,
        tiles,
    } = *spec;
    let p = quote!(#krate::spec);
    let a = dtype_tokens(a, &p);
    let b = dtype_tokens(b, &p);
    let c = dtype_tokens(c, &p);
    let scale = scale_tokens(&scale, &p);
    let scale2 = match scale2 {
        Some(s) => {
            let s = scale_tokens(&s, &p);
            quote!(::core::option::Option::Some(#s))
        }
        None => quote!(::core::option::Option::None),
    };
    let zero_point = match zero_point {
        ZeroPoint::None => quote!(#p::ZeroPoint::None),
        ZeroPoint::Integer => quote!(#p::ZeroPoint::Integer),
        ZeroPoint::FloatOffset => quote!(#p::ZeroPoint::FloatOffset),
    };
    let layout = match layout {
        Layout::Dense => quote!(#p::Layout::Dense),
        Layout::MoeIndexed => quote!(#p::Layout::MoeIndexed),
        Layout::MoeGroupedContiguous => quote!(#p::Layout::MoeGroupedContiguous),
        Layout::MoeGroupedMasked => quote!(#p::Layout::MoeGroupedMasked),
    };
    let epilogue = match epilogue {
        Epilogue::None => quote!(#p::Epilogue::None),
        Epilogue::Relu => quote!(#p::Epilogue::Relu),
        Epilogue::Silu => quote!(#p::Epilogue::Silu),
        Epilogue::Gelu => quote!(#p::Epilogue::Gelu),
        Epilogue::GeluTanh => quote!(#p::Epilogue::GeluTanh),
        Epilogue::SiluGlu => quote!(#p::Epilogue::SiluGlu),
        Epilogue::SiluGluInterleaved => quote!(#p::Epilogue::SiluGluInterleaved),
    };
    let ArchSet(arch_bits) = archs;
    let arch_bits = Literal::u16_unsuffixed(arch_bits);
    let TileList { len, items } = tiles;
    let len = Literal::u8_unsuffixed(len);
    let items = items.iter().map(|t| tile_tokens(t, &p));
    quote! {
        #p::KernelSpec {
            a: #a,
            b: #b,
            c: #c,
            scale: #scale,
            scale2: #scale2,
            zero_point: #zero_point,
            bias: #bias,
            layout: #layout,
            epilogue: #epilogue,
            archs: #p::ArchSet(#arch_bits),
            tiles: #p::TileList { len: #len, items: [#(#items),*] },
        }
    }
}

/// The tokens of a `const` expression for one dtype, through the path `p` of this crate.
pub fn dtype_tokens(d: DType, p: &TokenStream) -> TokenStream {
    match d {
        DType::F16 => quote!(#p::DType::F16),
        DType::BF16 => quote!(#p::DType::BF16),
        DType::F32 => quote!(#p::DType::F32),
        DType::UInt { bits } => {
            let bits = Literal::u8_unsuffixed(bits);
            quote!(#p::DType::UInt { bits: #bits })
        }
        DType::SInt { bits } => {
            let bits = Literal::u8_unsuffixed(bits);
            quote!(#p::DType::SInt { bits: #bits })
        }
        DType::Float { exp, man } => {
            let (exp, man) = (Literal::u8_unsuffixed(exp), Literal::u8_unsuffixed(man));
            quote!(#p::DType::Float { exp: #exp, man: #man })
        }
        DType::UE8M0 => quote!(#p::DType::UE8M0),
    }
}

fn scale_tokens(s: &Scale, p: &TokenStream) -> TokenStream {
    let Scale { dtype, granularity } = *s;
    let dtype = dtype_tokens(dtype, p);
    let granularity = match granularity {
        ScaleGranularity::Channel => quote!(#p::ScaleGranularity::Channel),
        ScaleGranularity::Group { size } => {
            let size = Literal::u32_unsuffixed(size);
            quote!(#p::ScaleGranularity::Group { size: #size })
        }
        ScaleGranularity::Block { n, k } => {
            let (n, k) = (Literal::u32_unsuffixed(n), Literal::u32_unsuffixed(k));
            quote!(#p::ScaleGranularity::Block { n: #n, k: #k })
        }
        ScaleGranularity::Tensor => quote!(#p::ScaleGranularity::Tensor),
    };
    quote!(#p::Scale { dtype: #dtype, granularity: #granularity })
}

fn tile_tokens(t: &TileConfig, p: &TokenStream) -> TokenStream {
    let TileConfig {
        block_m,
        block_n,
        block_k,
        warp_m,
        warp_n,
        warp_k,
        stages,
        mma,
        ctas_per_sm,
    } = *t;
    let [block_m, block_n, block_k, warp_m, warp_n, warp_k] =
        [block_m, block_n, block_k, warp_m, warp_n, warp_k].map(Literal::u16_unsuffixed);
    let stages = Literal::u8_unsuffixed(stages);
    let ctas_per_sm = Literal::u8_unsuffixed(ctas_per_sm);
    let mma = match mma {
        crate::model::Mma::Sync => quote!(#p::Mma::Sync),
        crate::model::Mma::Wgmma => quote!(#p::Mma::Wgmma),
        crate::model::Mma::WgmmaSs => quote!(#p::Mma::WgmmaSs),
    };
    quote! {
        #p::TileConfig {
            block_m: #block_m,
            block_n: #block_n,
            block_k: #block_k,
            warp_m: #warp_m,
            warp_n: #warp_n,
            warp_k: #warp_k,
            stages: #stages,
            mma: #mma,
            ctas_per_sm: #ctas_per_sm,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn krate() -> TokenStream {
        quote!(::humming)
    }

    /// Collapses the spacing `TokenStream::to_string` puts between tokens, for readable assertions.
    fn text(ts: &TokenStream) -> String {
        ts.to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("")
    }

    #[test]
    fn every_field_is_written() {
        let spec = crate::parse_kernel_str(
            "a: f16, b: u4, scale: group(128, f16), zero_point: int, bias: true, epilogue: silu, \
             arch: [sm_80, sm_90a], tiles: [tile(block = (16, 128, 64), warp = (16, 64, 64), stages = 4), \
             tile(block = (64, 256, 128), mma = wgmma, ctas_per_sm = 1)]",
        )
        .unwrap();
        let s = text(&spec_tokens(&spec, &krate()));
        assert!(s.starts_with("::humming::spec::KernelSpec{"), "{s}");
        for part in [
            "a:::humming::spec::DType::F16,",
            "b:::humming::spec::DType::UInt{bits:4},",
            "c:::humming::spec::DType::F16,",
            "scale:::humming::spec::Scale{dtype:::humming::spec::DType::F16,granularity:::humming::spec::ScaleGranularity::Group{size:128}},",
            "scale2:::core::option::Option::None,",
            "zero_point:::humming::spec::ZeroPoint::Integer,",
            "bias:true,",
            "layout:::humming::spec::Layout::Dense,",
            "epilogue:::humming::spec::Epilogue::Silu,",
            &format!("archs:::humming::spec::ArchSet({}),", spec.archs.0),
            "tiles:::humming::spec::TileList{len:2,items:[::humming::spec::TileConfig{block_m:16,block_n:128,block_k:64,warp_m:16,warp_n:64,warp_k:64,stages:4,mma:::humming::spec::Mma::Sync,ctas_per_sm:0,},",
            "::humming::spec::TileConfig{block_m:64,block_n:256,block_k:128,warp_m:64,warp_n:64,warp_k:64,stages:4,mma:::humming::spec::Mma::Wgmma,ctas_per_sm:1,},",
        ] {
            assert!(s.contains(part), "missing `{part}` in {s}");
        }
        // All MAX_TILES entries are written, the unused ones zeroed.
        assert_eq!(s.matches("::humming::spec::TileConfig{").count(), MAX_TILES);
        assert_eq!(s.matches("block_m:0,").count(), MAX_TILES - 2);
    }

    #[test]
    fn every_variant_is_written() {
        let p = quote!(crate::spec);
        let cases = [
            (DType::BF16, "crate::spec::DType::BF16"),
            (DType::F32, "crate::spec::DType::F32"),
            (DType::SInt { bits: 8 }, "crate::spec::DType::SInt{bits:8}"),
            (DType::E4M3, "crate::spec::DType::Float{exp:4,man:3}"),
            (DType::UE8M0, "crate::spec::DType::UE8M0"),
        ];
        for (d, want) in cases {
            assert_eq!(text(&dtype_tokens(d, &p)), want);
        }
        let spec = KernelSpec {
            a: DType::E4M3,
            b: DType::E2M1,
            c: DType::BF16,
            scale: Scale {
                dtype: DType::F32,
                granularity: ScaleGranularity::Block { n: 128, k: 128 },
            },
            scale2: Some(Scale {
                dtype: DType::F32,
                granularity: ScaleGranularity::Tensor,
            }),
            zero_point: ZeroPoint::FloatOffset,
            bias: false,
            layout: Layout::MoeGroupedMasked,
            epilogue: Epilogue::GeluTanh,
            archs: ArchSet(0b1010_0000),
            tiles: TileList::EMPTY,
        };
        let s = text(&spec_tokens(&spec, &quote!(::humming)));
        for part in [
            "granularity:::humming::spec::ScaleGranularity::Block{n:128,k:128}",
            "scale2:::core::option::Option::Some(::humming::spec::Scale{dtype:::humming::spec::DType::F32,granularity:::humming::spec::ScaleGranularity::Tensor})",
            "zero_point:::humming::spec::ZeroPoint::FloatOffset",
            "bias:false",
            "layout:::humming::spec::Layout::MoeGroupedMasked",
            "epilogue:::humming::spec::Epilogue::GeluTanh",
            "archs:::humming::spec::ArchSet(160)",
            "tiles:::humming::spec::TileList{len:0,",
        ] {
            assert!(s.contains(part), "missing `{part}` in {s}");
        }
    }

    #[test]
    fn tokens_parse_as_an_expression() {
        let spec = crate::parse_kernel_str("a: bf16, b: i8").unwrap();
        let e: syn::Expr = syn::parse2(spec_tokens(&spec, &krate())).expect("a Rust expression");
        assert!(matches!(e, syn::Expr::Struct(_)));
    }
}
