//! Quantized GEMM kernels declared in Rust, generated as CUDA, compiled ahead of time by NVCC.
//!
//! A [`gemm!`] invocation declares kernels. Each `kernel Name { ... }` becomes a unit struct `Name`
//! that implements [`GemmKernel`]: it carries the validated descriptor ([`spec::KernelSpec`]), its
//! SHA-256, the generated CUDA source and the fatbin NVCC compiled at build time. Every mistake in a
//! declaration is a compile error that points at the offending token.
//!
//! `C[M, N] = A[M, K] · Bᵀ`: A (activations) is row-major `[M, K]` in f16 or bf16, B (weights) is
//! `[N, K]` quantized to 1..=8 bits, C (output) is row-major `[M, N]` in A's dtype.
//!
//! # Setup
//!
//! The fatbins are compiled by a build script, which finds the `gemm!` invocations in the package's
//! sources (`src/`, `tests/`, `examples/`, `benches/`):
//!
//! ```toml
//! [dependencies]
//! humming = { path = "path/to/this/repo" }   # not published yet
//! cudarc = { version = "0.19.10", default-features = false, features = ["std", "driver", "nvrtc", "cublas", "f16", "cuda-13000"] }
//!
//! [build-dependencies]
//! humming-build = { path = "path/to/this/repo/humming-build" }
//! ```
//!
//! (README.md has the exact lines.)
//!
//! ```ignore
//! // build.rs
//! fn main() {
//!     humming_build::build();
//! }
//! ```
//!
//! Write `gemm!` directly in a source file: the build script does not see invocations produced by other
//! macros, and the macro then says so.
//!
//! # The supported forms, one declaration each
//!
//! The examples are `ignore`d: a doctest is compiled outside the package's build script, so no
//! fatbin exists for it (no `OUT_DIR`), and `gemm!` rightly reports that as an error.
//!
//! Activations in **f16**, 4-bit unsigned weights, a scale per group of 128 along K and an integer zero
//! point (GPTQ / AWQ asymmetric). The scale dtype defaults to A's:
//!
//! ```ignore
//! humming::gemm! {
//!     /// GPTQ-style W4A16.
//!     pub kernel W4A16G128 { a: f16, b: u4, scale: group(128), zero_point: int }
//! }
//! ```
//!
//! Activations in **bf16**; with no `scale` field the scale is per output channel:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W8A16 { a: bf16, b: i8 }
//! }
//! ```
//!
//! **Weight widths**: unsigned `u1` to `u8` and two's-complement `i2` to `i8` (`i1` has no positive
//! value). Widths that are not powers of two are stored as bit planes (`u3` = 2 + 1 bits):
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W1 { a: f16, b: u1 }
//!     pub kernel W3 { a: f16, b: u3, scale: group(64) }
//!     pub kernel W6 { a: bf16, b: i6 }
//!     pub kernel W8 { a: bf16, b: u8, zero_point: int }
//! }
//! ```
//!
//! A **channel scale** (one per output channel, applied to C in the epilogue), spelled out; its dtype
//! must be A's:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4Channel { a: f16, b: u4, scale: channel(f16) }
//! }
//! ```
//!
//! A **group scale**: the group size is a power of two of at least 16 (one MMA K step of 16-bit
//! activations):
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4G64 { a: bf16, b: u4, scale: group(64, bf16) }
//! }
//! ```
//!
//! An **integer zero point** per scale group, `w = s · (q - z)`, on unsigned weights:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel Awq { a: f16, b: u4, scale: group(128), zero_point: int }
//! }
//! ```
//!
//! A **float offset zero point** per scale group, `w = s · q + m`, as in GGUF `Q4_1` (blocks of 32):
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel Q4_1 { a: f16, b: u4, scale: group(32), zero_point: float }
//! }
//! ```
//!
//! **Float weights** `eXmY` (any signed minifloat of at most 8 bits whose exponent and mantissa fit A's
//! dtype; `e0mY` are sign-magnitude integers), and the **scale kinds and dtypes** of FP8, MX and NVFP4
//! checkpoints: channel, group, `block(N, K, f32)` and `tensor(f32)` scales in f16 / bf16 (A's dtype),
//! `e4m3`, `e5m2`, `ue8m0` (group only) or f32 (block and tensor), with an optional f32 secondary
//! scale per channel or per tensor (`scale2`) on top of a group scale:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel Fp8Channel { a: bf16, b: e4m3, scale: channel(bf16) }
//!     pub kernel Fp8Block { a: bf16, b: e4m3, scale: block(128, 128, f32) }
//!     pub kernel Mxfp4 { a: bf16, b: e2m1, scale: group(32, ue8m0) }
//!     pub kernel Nvfp4 { a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32) }
//!     pub kernel Mxfp6 { a: bf16, b: e3m2, scale: group(32, ue8m0) }
//! }
//! ```
//!
//! A **bias** per output channel, in C's dtype:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4Bias { a: f16, b: u4, scale: group(128), bias: true }
//! }
//! ```
//!
//! An **epilogue** function applied to C after scales and bias (`none`, `relu`, `silu`, `gelu`,
//! `gelu_tanh`):
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4Silu { a: bf16, b: u4, scale: group(128), epilogue: silu }
//! }
//! ```
//!
//! The **archs** to compile for (default `[sm_80, sm_90a]`; the generated kernel needs sm_80 or newer):
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4Ada { a: f16, b: u4, scale: group(128), arch: [sm_80, sm_89, sm_90a] }
//! }
//! ```
//!
//! Fixed **tiles** (at most 8) instead of the generator's defaults; the run time picks one by M:
//!
//! ```ignore
//! humming::gemm! {
//!     pub kernel W4Tiles {
//!         a: f16,
//!         b: u4,
//!         scale: group(128),
//!         tiles: [
//!             tile(block = (16, 128, 128), warp = (16, 64, 64), stages = 4),
//!             tile(block = (64, 256, 64), warp = (64, 64, 64), stages = 3),
//!         ],
//!     }
//! }
//! ```
//!
//! Everything together (every field written out, several of them set away from their defaults):
//!
//! ```ignore
//! humming::gemm! {
//!     /// Doc comments, `#[allow]` and `#[cfg]` carry over to the generated type.
//!     pub(crate) kernel Full {
//!         a: f16,
//!         b: u4,
//!         c: f16,
//!         scale: group(128, f16),
//!         zero_point: int,
//!         bias: true,
//!         layout: dense,
//!         epilogue: gelu,
//!         arch: [sm_80, sm_90a],
//!     }
//! }
//! ```
//!
//! The model ([`spec`]) also describes forms this version does not generate yet (FP8 and integer
//! activations, mixture-of-experts layouts, zero points with e4m3 / e5m2 / ue8m0 scales); `gemm!`
//! rejects them with a "not generated yet" error.
//!
//! # What a declaration expands to
//!
//! ```ignore
//! #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
//! pub struct W4A16G128;
//!
//! impl W4A16G128 {
//!     pub const DESCRIPTOR: humming::spec::KernelSpec = /* ... */;
//!     pub const HASH: [u8; 32] = /* SHA-256 of DESCRIPTOR.canonical() */;
//!     pub const CUDA_SOURCE: &'static str = /* the generated .cu */;
//!     pub const IMAGE: &'static [u8] = include_bytes!(/* $OUT_DIR/humming/<hash>.fatbin */);
//! }
//!
//! impl humming::GemmKernel for W4A16G128 {
//!     type A = humming::half::f16;
//!     type C = humming::half::f16;
//!     const NAME: &'static str = "W4A16G128";
//!     // DESCRIPTOR, HASH, CUDA_SOURCE and IMAGE as above.
//! }
//! ```

pub use humming_macros::gemm;
pub use humming_runtime::*;
pub use humming_spec as spec;

pub use half;

// `gemm!` names items by `::humming::...`; this makes that path work inside this crate too.
extern crate self as humming;

#[cfg(test)]
mod tests {
    /// The declarations in the crate docs above are `ignore`d by rustdoc; check here that every one
    /// of them validates.
    #[test]
    fn documented_declarations_validate() {
        let docs: String = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let mut count = 0;
        for block in docs.split("humming::gemm! {").skip(1) {
            let end = block
                .find("\n}")
                .expect("a closing brace at the start of a line");
            let kernels = crate::spec::parse_kernels(block[..end].parse().expect("lexes"))
                .unwrap_or_else(|e| panic!("{e}: {}", &block[..end]));
            for k in kernels {
                let spec = k.spec.unwrap_or_else(|e| panic!("{e}: {}", k.decl.name));
                assert!(!crate::spec::codegen::generate_cuda(&spec).is_empty());
                count += 1;
            }
        }
        assert!(count >= 14, "only {count} documented kernels found");
    }
}
