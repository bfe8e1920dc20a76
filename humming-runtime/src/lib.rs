//! Runtime of humming: quantized weights and their packed kernel layout, the f64 CPU reference, and
//! loading and launching the kernels that `gemm!` generates (through cudarc).

#![warn(missing_docs)]

pub mod error;
pub mod kernel;
pub mod quant;

pub use error::{Error, Result};
pub use kernel::{Element, GemmKernel};
pub use humming_spec as spec;
