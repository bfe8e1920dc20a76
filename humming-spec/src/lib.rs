//! The shared core of humming: the kernel model, the `gemm!` parser and validation, the canonical
//! descriptor and its stable hash, and CUDA code generation.
//!
//! Both the `gemm!` proc macro (`humming-macros`) and the build helper (`humming-build`) use this
//! crate, so they always agree on what a declaration means and on the file names derived from it.
//! The runtime uses it for run-time (NVRTC) compilation of descriptors built in code.
//!
//! ```
//! let spec = humming_spec::parse_kernel_str("a: f16, b: u4, scale: group(128, f16)").unwrap();
//! assert_eq!(spec.b.bits(), 4);
//! assert!(spec.canonical().starts_with("humming.gemm.v1 a=f16 b=u4 c=f16 scale=group128:f16"));
//! ```

#![warn(missing_docs)]

pub mod codegen;
pub mod dtype;
pub mod model;
pub mod parse;
pub mod tokens;
pub mod validate;

pub use dtype::DType;
pub use model::*;

use proc_macro2::TokenStream;

/// One parsed kernel of a `gemm!` invocation: its declaration (with spans) and its validated spec.
pub struct ParsedKernel {
    /// The declaration as written.
    pub decl: parse::Declaration,
    /// The spec, or every error found in the declaration.
    pub spec: syn::Result<KernelSpec>,
}

/// Parses and validates the body of a `gemm!` invocation.
///
/// Returns `Err` only if the token stream is not a list of kernel declarations at all; per-kernel
/// validation errors are in each [`ParsedKernel::spec`]. Never panics.
pub fn parse_kernels(tokens: TokenStream) -> syn::Result<Vec<ParsedKernel>> {
    let decls = parse::parse_declarations(tokens)?;
    Ok(decls
        .kernels
        .into_iter()
        .map(|decl| {
            let spec = validate::validate(&decl);
            ParsedKernel { decl, spec }
        })
        .collect())
}

/// Checks a descriptor built or edited in code (its fields are public) against every rule that
/// `gemm!` applies: formats, scales, zero points, tiles (`mma.sync`: warp M in 8, 16, 32, 48, 64,
/// warp N and K 64, 2 to 6 stages; `wgmma`: sm_90a, warp (block M, 64, 32 or 16, 64), block N = 4 or 8 x
/// warp N, block K 64 or 128, block M x warp N <= 4096, 3 to 6 stages; shared memory; `ctas_per_sm` 1 to 4
/// within the tile's registers and shared memory), epilogue. Errors
/// carry all messages, joined by "; ".
pub fn check_spec(spec: &KernelSpec) -> Result<(), String> {
    let spans = validate::SpecSpans::all(proc_macro2::Span::call_site());
    let mut errs = validate::Errors::default();
    validate::check_model(spec, &spans, &mut errs);
    validate::check_generator(spec, &spans, &mut errs);
    errs.finish().map_err(|e| {
        e.into_iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })
}

/// Parses the fields of one kernel, as written inside `kernel Name { ... }`, e.g.
/// `"a: bf16, b: u4, scale: group(64), zero_point: int"`. For descriptors built at run time.
///
/// Errors carry the message of the first problem found.
pub fn parse_kernel_str(fields: &str) -> Result<KernelSpec, String> {
    let src = format!("kernel K {{ {fields} }}");
    let tokens: TokenStream = src.parse().map_err(|e| format!("{e}"))?;
    let mut kernels = parse_kernels(tokens).map_err(|e| e.to_string())?;
    match kernels.pop() {
        Some(k) if kernels.is_empty() => k.spec.map_err(|e| {
            e.into_iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        }),
        _ => Err("expected exactly one kernel".into()),
    }
}
