//! Runtime of humming: quantized weights and their packed kernel layout, the f64 CPU reference, and
//! loading and launching the kernels that `gemm!` generates (through cudarc).

#![warn(missing_docs)]

pub mod act_quant;
pub mod cuda;
pub mod error;
pub mod kernel;
pub mod moe;
pub mod pack;
pub mod quant;
mod quantize;
pub mod reference;

pub use error::{Error, Result};
pub use humming_spec as spec;
pub use kernel::{Element, GemmKernel};
pub use pack::PackedWeights;
pub use quant::{QuantizedWeights, ZeroPoints};
pub use reference::{reference_gemm, reference_gemm_elements, relative_error};
