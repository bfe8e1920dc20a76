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

pub mod abi;
pub mod cache;
pub mod codegen;
pub mod dtype;
pub mod layout;
pub mod lowered;
pub mod model;
pub mod parse;
pub mod resources;
pub mod tiles;
pub mod tokens;
pub mod validate;

pub use dtype::DType;
pub use lowered::Lowered;
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

/// Why a descriptor written or built outside `gemm!` was rejected ([`check_spec`],
/// [`parse_kernel_str`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The text is not the fields of one kernel (a tokenizer or parser error).
    #[error("{0}")]
    Syntax(String),
    /// The text holds no kernel, or more than one.
    #[error("expected exactly one kernel, found {0}")]
    KernelCount(usize),
    /// The descriptor breaks one or more rules of `gemm!`: every message, in field order.
    #[error("{}", .0.join("; "))]
    Rules(Vec<String>),
}

fn rule_errors(e: syn::Error) -> SpecError {
    SpecError::Rules(e.into_iter().map(|e| e.to_string()).collect())
}

/// Checks a descriptor built or edited in code (its fields are public) against every rule that
/// `gemm!` applies: formats, scales, zero points, tiles, shared memory and registers, epilogue.
pub fn check_spec(spec: &KernelSpec) -> Result<(), SpecError> {
    let spans = validate::SpecSpans::all(proc_macro2::Span::call_site());
    let mut errs = validate::Errors::default();
    validate::check_model(spec, &spans, &mut errs);
    validate::check_generator(spec, &spans, &mut errs);
    errs.finish().map_err(rule_errors)
}

/// Parses the fields of one kernel, as written inside `kernel Name { ... }`, e.g.
/// `"a: bf16, b: u4, scale: group(64), zero_point: int"`. For descriptors built at run time.
pub fn parse_kernel_str(fields: &str) -> Result<KernelSpec, SpecError> {
    let src = format!("kernel K {{ {fields} }}");
    let tokens: TokenStream = src.parse().map_err(|e| SpecError::Syntax(format!("{e}")))?;
    let mut kernels = parse_kernels(tokens).map_err(|e| SpecError::Syntax(e.to_string()))?;
    match (kernels.pop(), kernels.len()) {
        (Some(k), 0) => k.spec.map_err(rule_errors),
        (last, rest) => Err(SpecError::KernelCount(rest + usize::from(last.is_some()))),
    }
}
