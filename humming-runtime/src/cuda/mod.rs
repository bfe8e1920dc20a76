//! Loading and launching generated kernels on a GPU (cudarc).
//!
//! ```no_run
//! # use humming_runtime::*;
//! # fn demo<K: GemmKernel<A = half::f16, C = half::f16>>(w: &quant::QuantizedWeights) -> Result<()> {
//! let stream = cuda::default_stream(0)?;             // or your own cudarc stream
//! let gemm = cuda::Gemm::load::<K>(&stream)?;        // A and C come from the kernel
//! let weights = gemm.upload(w)?;                     // packed into the kernel layout, on the GPU
//! let m = 16;
//! let a = stream.clone_htod(&vec![half::f16::ONE; m * w.k()]).map_err(cuda::driver_err("upload A"))?;
//! let mut c = stream.alloc_zeros::<half::f16>(m * w.n()).map_err(cuda::driver_err("alloc C"))?;
//! gemm.run(&a, m, &weights, None, &mut c)?;
//! # Ok(()) }
//! ```
//!
//! Modules: [`plan`] decides each launch on the host (pure functions, [`LaunchPlan`]); `driver`
//! holds every raw CUDA driver and NVRTC call; `nvrtc` the run-time compilation and its cache;
//! [`Gemm`] and [`Launcher`] are the public API.

mod act8;
mod driver;
mod gemm;
mod moe;
mod moe_layer;
mod nvrtc;
mod options;
mod persistent;
pub mod plan;
mod weights;
mod workspace;

pub use act8::DeviceActivations;
pub use driver::{default_stream, driver_err, driver_present};
pub use gemm::{DeviceWeights, Gemm, Launcher, ModuleSource};
pub use moe::Routing;
pub use moe_layer::{MoeLayer, MoeLayerBuffers};
pub use nvrtc::nvrtc_compile;
pub use options::{DependentTrigger, LaunchOptions, Reduction, SplitK};
pub use plan::{KReduction, LaunchPlan, TileInfo};
