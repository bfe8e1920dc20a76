//! The `gemm!` proc macro of humming. Use it through the `humming` crate (`humming::gemm!`): the
//! expansion names items by the path `::humming`.
//!
//! The macro is thin. `humming-spec` parses and validates the declarations and builds the canonical
//! descriptor, its hash and the CUDA source. This crate turns each kernel into a unit struct that
//! implements `humming::GemmKernel`, and points the struct at the fatbin the build script
//! (`humming_build::build()`) compiled into `$OUT_DIR/humming/<hash>.fatbin`.
//!
//! Errors are reported with the spans of the offending tokens. A kernel that does not validate still
//! gets a stub type of the same name (thiserror's fallback habit), so that uses of the name do not add
//! follow-on errors to the real one.

use humming_spec::parse::Declaration;
use humming_spec::validate::{Errors, interpret};
use humming_spec::{DType, KernelSpec, ParsedKernel};
use proc_macro2::{Literal, TokenStream};
use quote::quote;
use std::path::{Path, PathBuf};
use syn::Attribute;
use syn::ext::IdentExt;

/// Declares quantized GEMM kernels. See the `humming` crate for the syntax and the generated items.
#[proc_macro]
pub fn gemm(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let out_dir = std::env::var_os("OUT_DIR").map(PathBuf::from);
    expand(input.into(), out_dir.as_deref()).into()
}

/// The path the expansion names the facade by.
fn krate() -> TokenStream {
    quote!(::humming)
}

/// Where a kernel's compiled image comes from.
enum Image {
    /// `include_bytes!` of the fatbin the build script wrote.
    Fatbin(String),
    /// No image: an error explains why (or another kernel of the invocation failed validation, so the
    /// crate does not compile anyway and the missing artifact is not worth a second error).
    Missing(Option<syn::Error>),
}

/// The whole expansion of one invocation. `out_dir` is the `OUT_DIR` the crate is compiled with.
fn expand(input: TokenStream, out_dir: Option<&Path>) -> TokenStream {
    let kernels = match humming_spec::parse_kernels(input) {
        Ok(k) => k,
        Err(e) => return e.to_compile_error(),
    };
    let names: Vec<String> = kernels
        .iter()
        .map(|k| k.decl.name.unraw().to_string())
        .collect();
    let duplicate = |i: usize| names[..i].contains(&names[i]);
    let any_invalid = kernels
        .iter()
        .enumerate()
        .any(|(i, k)| k.spec.is_err() || duplicate(i));
    let mut out = TokenStream::new();
    for (i, ParsedKernel { decl, spec }) in kernels.iter().enumerate() {
        if duplicate(i) {
            let msg = format!(
                "the kernel `{}` is declared twice in this `gemm!`; give each kernel its own name",
                names[i]
            );
            out.extend(syn::Error::new(decl.name.span(), msg).to_compile_error());
            continue;
        }
        match spec {
            Ok(spec) => {
                let image = if any_invalid {
                    Image::Missing(None)
                } else {
                    locate_image(decl, spec, out_dir)
                };
                out.extend(expand_kernel(decl, spec, image));
            }
            Err(e) => {
                out.extend(e.to_compile_error());
                out.extend(stub(decl));
            }
        }
    }
    out
}

/// Checks that the build script compiled this kernel, and says how to fix it if not.
fn locate_image(decl: &Declaration, spec: &KernelSpec, out_dir: Option<&Path>) -> Image {
    let file = format!("{}.fatbin", spec.hash_hex());
    let name = &decl.name;
    let Some(out_dir) = out_dir else {
        let msg = format!(
            "`{name}` needs the fatbin the build script compiles, but this crate has no build script \
             (OUT_DIR is not set); add a `build.rs` with `fn main() {{ humming_build::build(); }}` \
             and humming-build to `[build-dependencies]` in Cargo.toml, from the same place as \
             humming (e.g. `humming-build = {{ path = \"<humming>/humming-build\" }}`)"
        );
        return Image::Missing(Some(syn::Error::new(name.span(), msg)));
    };
    if !out_dir.join("humming").join(&file).is_file() {
        let msg = format!(
            "the build script did not compile `{name}` (no `humming/{file}` in OUT_DIR); make sure \
             build.rs calls `humming_build::build()`, and write the `gemm!` directly in a source file \
             of this package: the build script does not see declarations produced by other macros"
        );
        return Image::Missing(Some(syn::Error::new(name.span(), msg)));
    }
    Image::Fatbin(file)
}

/// The attributes of the declaration that go on the generated struct, and the `#[cfg]`s among them,
/// which also go on every generated impl. Other attributes are rejected by validation; the stub of an
/// invalid kernel drops them so that e.g. a user `#[derive]` does not add conflicting impls.
fn split_attrs(decl: &Declaration) -> (Vec<&Attribute>, Vec<&Attribute>) {
    let keep: Vec<&Attribute> = decl
        .attrs
        .iter()
        .filter(|a| {
            a.path().is_ident("doc") || a.path().is_ident("allow") || a.path().is_ident("cfg")
        })
        .collect();
    let cfgs = keep
        .iter()
        .copied()
        .filter(|a| a.path().is_ident("cfg"))
        .collect();
    (keep, cfgs)
}

/// The Rust element type of A or C.
/// The dtype of the A a launch takes: the spec's `a`, or for 8-bit activations (which the runtime
/// quantizes) C's 16-bit dtype.
fn input_dtype(spec: &humming_spec::KernelSpec) -> DType {
    if humming_spec::layout::is_8bit_activation(spec.a) {
        spec.c
    } else {
        spec.a
    }
}

fn element(d: DType) -> TokenStream {
    let k = krate();
    match d {
        DType::BF16 => quote!(#k::half::bf16),
        _ => quote!(#k::half::f16),
    }
}

fn hash_tokens(hash: &[u8; 32]) -> TokenStream {
    let bytes = hash.iter().map(|b| Literal::u8_unsuffixed(*b));
    quote!([#(#bytes),*])
}

/// The struct, its inherent consts and its `GemmKernel` impl.
struct Items<'a> {
    decl: &'a Declaration,
    /// Doc paragraph appended to the user's doc comment.
    doc: String,
    a: TokenStream,
    c: TokenStream,
    descriptor: TokenStream,
    hash: TokenStream,
    cuda_source: String,
    image: TokenStream,
    docs: [String; 4],
}

impl Items<'_> {
    fn tokens(self) -> TokenStream {
        let Items {
            decl,
            doc,
            a,
            c,
            descriptor,
            hash,
            cuda_source,
            image,
            docs,
        } = self;
        let k = krate();
        let (attrs, cfgs) = split_attrs(decl);
        let vis = &decl.vis;
        let name = &decl.name;
        let name_str = name.unraw().to_string();
        let has_doc = attrs.iter().any(|a| a.path().is_ident("doc"));
        let sep = has_doc.then(|| quote!(#[doc = ""]));
        let [d_desc, d_hash, d_src, d_image] = docs;
        quote! {
            #(#attrs)*
            #sep
            #[doc = #doc]
            #[derive(
                ::core::clone::Clone,
                ::core::marker::Copy,
                ::core::fmt::Debug,
                ::core::default::Default,
                ::core::cmp::PartialEq,
                ::core::cmp::Eq,
                ::core::hash::Hash
            )]
            #vis struct #name;

            #(#cfgs)*
            impl #name {
                #[doc = #d_desc]
                pub const DESCRIPTOR: #k::spec::KernelSpec = #descriptor;
                #[doc = #d_hash]
                pub const HASH: [u8; 32] = #hash;
                #[doc = #d_src]
                pub const CUDA_SOURCE: &'static str = #cuda_source;
                #[doc = #d_image]
                pub const IMAGE: &'static [u8] = #image;
            }

            #(#cfgs)*
            impl #k::GemmKernel for #name {
                type A = #a;
                type C = #c;
                const NAME: &'static str = #name_str;
                const DESCRIPTOR: #k::spec::KernelSpec = #name::DESCRIPTOR;
                const HASH: [u8; 32] = #name::HASH;
                const CUDA_SOURCE: &'static str = #name::CUDA_SOURCE;
                const IMAGE: &'static [u8] = #name::IMAGE;
            }
        }
    }
}

/// The expansion of a valid kernel.
fn expand_kernel(decl: &Declaration, spec: &KernelSpec, image: Image) -> TokenStream {
    let canonical = spec.canonical();
    let hash = spec.hash();
    let entries: Vec<String> = (0..humming_spec::tiles::tiles_of(spec).len())
        .map(|i| format!("`{}`", humming_spec::codegen::entry_name(spec, i)))
        .collect();
    let (image, error, image_doc) = match image {
        Image::Fatbin(file) => {
            let rel = format!("/humming/{file}");
            (
                quote!(::core::include_bytes!(
                    ::core::concat!(::core::env!("OUT_DIR"), #rel)
                )),
                None,
                format!("The fatbin NVCC compiled at build time (`$OUT_DIR/humming/{file}`)."),
            )
        }
        Image::Missing(err) => (
            quote!(&[]),
            err,
            "Not compiled (see the error on the declaration).".to_string(),
        ),
    };
    let items = Items {
        decl,
        doc: format!("A quantized GEMM kernel declared with `humming::gemm!`: `{canonical}`."),
        a: element(input_dtype(spec)),
        c: element(spec.c),
        descriptor: humming_spec::tokens::spec_tokens(spec, &krate()),
        hash: hash_tokens(&hash),
        cuda_source: humming_spec::codegen::generate_cuda(spec),
        image,
        docs: [
            format!("The validated, canonical descriptor: `{canonical}`."),
            format!(
                "SHA-256 of the canonical descriptor (`{}`); equals `DESCRIPTOR.hash()`.",
                humming_spec::hex(&hash)
            ),
            format!(
                "The generated CUDA source, with one entry point per tile configuration ({}); it \
                 includes the headers of `humming::spec::codegen::headers`.",
                entries.join(", ")
            ),
            image_doc,
        ],
    };
    let mut out = items.tokens();
    if let Some(err) = error {
        out.extend(cfg_gated_error(decl, &err));
    }
    out
}

/// A `compile_error!` that disappears with the kernel when the kernel's `#[cfg]` is off.
fn cfg_gated_error(decl: &Declaration, err: &syn::Error) -> TokenStream {
    let (_, cfgs) = split_attrs(decl);
    let e = err.to_compile_error();
    if cfgs.is_empty() {
        e
    } else {
        quote!(#(#cfgs)* const _: () = { #e };)
    }
}

/// The stand-in for a kernel that failed validation: the same name, visibility and attributes, and
/// placeholder items, so that code using the name compiles without follow-on errors (the invocation
/// already failed). Refers to no build artifact.
fn stub(decl: &Declaration) -> TokenStream {
    // The best reading of the declaration, for the element types and the descriptor placeholder.
    let guess = interpret(decl, &mut Errors::default())
        .0
        .unwrap_or(KernelSpec {
            a: DType::F16,
            b: DType::UInt { bits: 4 },
            c: DType::F16,
            scale: humming_spec::Scale {
                dtype: DType::F16,
                granularity: humming_spec::ScaleGranularity::Channel,
            },
            scale2: None,
            zero_point: humming_spec::ZeroPoint::None,
            bias: false,
            layout: humming_spec::Layout::Dense,
            epilogue: humming_spec::Epilogue::None,
            archs: humming_spec::ArchSet::DEFAULT,
            tiles: humming_spec::TileList::EMPTY,
        });
    let placeholder =
        "Placeholder of a kernel whose declaration has errors (the crate does not compile).";
    Items {
        decl,
        doc: "A `humming::gemm!` kernel whose declaration has errors.".into(),
        a: element(guess.a),
        c: element(guess.c),
        descriptor: humming_spec::tokens::spec_tokens(&guess, &krate()),
        hash: quote!([0; 32]),
        cuda_source: String::new(),
        image: quote!(&[]),
        docs: [(); 4].map(|()| placeholder.to_string()),
    }
    .tokens()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(ts: &TokenStream) -> String {
        ts.to_string()
    }

    const GOOD: &str =
        "/// Doc.\npub kernel W4 { a: f16, b: u4, scale: group(128), zero_point: int, bias: true }";

    fn good_spec() -> KernelSpec {
        humming_spec::parse_kernel_str(
            "a: f16, b: u4, scale: group(128), zero_point: int, bias: true",
        )
        .unwrap()
    }

    #[test]
    fn valid_kernel_with_fatbin() {
        let dir = std::env::temp_dir().join(format!("humming-macros-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("humming")).unwrap();
        let spec = good_spec();
        std::fs::write(
            dir.join("humming")
                .join(format!("{}.fatbin", spec.hash_hex())),
            b"x",
        )
        .unwrap();
        let out = text(&expand(GOOD.parse().unwrap(), Some(&dir)));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!out.contains("compile_error"), "{out}");
        assert!(out.contains("pub struct W4"), "{out}");
        assert!(
            out.contains(&format!("\"/humming/{}.fatbin\"", spec.hash_hex())),
            "{out}"
        );
        assert!(
            out.contains("impl :: humming :: GemmKernel for W4"),
            "{out}"
        );
        assert!(out.contains("type A = :: humming :: half :: f16"), "{out}");
        assert!(out.contains("const NAME : & 'static str = \"W4\""), "{out}");
        assert!(
            out.contains(&humming_spec::codegen::entry_name(&spec, 0)),
            "{out}"
        );
    }

    #[test]
    fn no_out_dir_and_no_fatbin() {
        let out = text(&expand(GOOD.parse().unwrap(), None));
        assert!(out.contains("compile_error"), "{out}");
        assert!(out.contains("has no build script"), "{out}");
        assert!(!out.contains("OUT_DIR\")"), "{out}");
        let empty = std::env::temp_dir();
        let out = text(&expand(GOOD.parse().unwrap(), Some(&empty)));
        assert!(
            out.contains("the build script did not compile `W4`"),
            "{out}"
        );
        assert!(!out.contains("include_bytes"), "{out}");
    }

    #[test]
    fn invalid_kernel_gives_errors_and_stub() {
        let src = "pub kernel Good { a: f16, b: u4 } pub(crate) kernel Bad { a: bf16, b: u12 }";
        let out = text(&expand(src.parse().unwrap(), None));
        assert_eq!(out.matches("compile_error").count(), 1, "{out}");
        assert!(out.contains("outside 1..=8"), "{out}");
        assert!(out.contains("pub struct Good"), "{out}");
        assert!(out.contains("pub (crate) struct Bad"), "{out}");
        assert!(out.contains("type A = :: humming :: half :: bf16"), "{out}");
        assert!(!out.contains("OUT_DIR"), "{out}");
    }

    #[test]
    fn unparsable_input_gives_only_the_error() {
        let out = text(&expand("pub W4 { a: f16 }".parse().unwrap(), None));
        assert!(out.starts_with(":: core :: compile_error !"), "{out}");
        assert!(!out.contains("struct"), "{out}");
    }

    #[test]
    fn duplicate_names() {
        let out = text(&expand(
            "kernel K { a: f16, b: u4 } kernel K { a: f16, b: u8 }"
                .parse()
                .unwrap(),
            None,
        ));
        assert!(out.contains("declared twice"), "{out}");
        assert_eq!(out.matches("struct K").count(), 1, "{out}");
    }
}
