//! What a `gemm!` declaration expands to, as seen by the runtime.

use humming_spec::{DType, KernelSpec};

/// An element type of A or C: `half::f16` or `half::bf16`.
///
/// Sealed: the kernels exist for these two types only.
pub trait Element:
    Copy
    + Send
    + Sync
    + Default
    + std::fmt::Debug
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + 'static
    + private::Sealed
{
    /// The matching dtype of the model.
    const DTYPE: DType;
    /// Converts from f32, rounding to nearest even.
    fn from_f32(v: f32) -> Self;
    /// Converts to f64 exactly.
    fn to_f64(self) -> f64;
    /// The raw 16 bits.
    fn to_bits(self) -> u16;
    /// From raw bits.
    fn from_bits(bits: u16) -> Self;
}

mod private {
    pub trait Sealed {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn from_f32(v: f32) -> Self {
        half::f16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn to_bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        half::f16::from_bits(bits)
    }
}

impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn from_f32(v: f32) -> Self {
        half::bf16::from_f32(v)
    }
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn to_bits(self) -> u16 {
        self.to_bits()
    }
    fn from_bits(bits: u16) -> Self {
        half::bf16::from_bits(bits)
    }
}

/// A kernel declared with `gemm!`. The macro implements this for the type it generates; users call
/// [`crate::cuda::Gemm::load`] with it.
pub trait GemmKernel: 'static {
    /// Element type of the A a launch takes: the activation dtype, or for 8-bit activations (`e4m3`,
    /// `e5m2`, `i8`, quantized by the runtime) C's 16-bit dtype.
    type A: Element;
    /// Element type of C (output).
    type C: Element;
    /// The kernel's name as declared.
    const NAME: &'static str;
    /// The validated, canonical descriptor.
    const DESCRIPTOR: KernelSpec;
    /// SHA-256 of the canonical descriptor (equals `DESCRIPTOR.hash()`).
    const HASH: [u8; 32];
    /// The generated CUDA source (needs the headers of [`humming_spec::codegen::headers`]).
    const CUDA_SOURCE: &'static str;
    /// The fatbin compiled by NVCC at build time, or empty when no NVCC was available (the runtime
    /// then compiles [`GemmKernel::CUDA_SOURCE`] with NVRTC).
    const IMAGE: &'static [u8];
}
