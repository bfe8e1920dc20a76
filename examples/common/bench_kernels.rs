//! The kernels of the benchmark (`examples/bench.rs`): their declarations and the names `--kernels`
//! picks them by.

use clap::ValueEnum;
use humming::spec::KernelSpec;

humming::gemm! {
    /// W4A16, the side-by-side with humming-kernels' "uint4" (symmetric, group 128, fp16).
    pub kernel W4A16 { a: f16, b: i4, scale: group(128, f16) }

    /// The bf16 twin of `W4A16`.
    pub kernel W4A16Bf16 { a: bf16, b: i4, scale: group(128, bf16) }

    /// Unsigned 4-bit codes without a zero point (`w = s · q`): the same bytes as `W4A16`.
    pub kernel W4A16U4 { a: f16, b: u4, scale: group(128, f16) }

    /// FP8 weight-only (W8A16): e4m3 weights, one f16 scale per output channel (humming-kernels'
    /// "float8e4m3" with a channel scale).
    pub kernel W8A16E4m3 { a: f16, b: e4m3, scale: channel(f16) }

    /// MXFP4 (OCP Microscaling): e2m1 weights, a ue8m0 (power of two) scale per 32 along K.
    pub kernel Mxfp4 { a: f16, b: e2m1, scale: group(32, ue8m0) }

    /// NVFP4: e2m1 weights, an e4m3 scale per 16 along K and one f32 tensor scale.
    pub kernel Nvfp4 { a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32) }

    /// MXFP8: e4m3 weights, a ue8m0 scale per 32 along K.
    pub kernel Mxfp8 { a: f16, b: e4m3, scale: group(32, ue8m0) }

    /// MXFP6: e2m3 weights, a ue8m0 scale per 32 along K.
    pub kernel Mxfp6 { a: f16, b: e2m3, scale: group(32, ue8m0) }

    /// W4A8 FP8: e4m3 activations (quantized per token by the runtime), symmetric 4-bit weights,
    /// group 128 (humming-kernels' "w4a8_uint4g128_fp8e4m3_tok").
    pub kernel W4A8 { a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a] }

    /// W4A8 INT8: i8 activations per token, symmetric 4-bit weights, group 128 ("w4a8_uint4g128_int8_tok").
    pub kernel W4A8Int8 { a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a] }

    /// W8A8 FP8: e4m3 weights with a channel scale, e4m3 activations per token ("w8a8_fp8e4m3_channel_tok").
    pub kernel W8A8Fp8 { a: e4m3, b: e4m3, c: f16, scale: channel(f32), arch: [sm_90a] }

    /// W8A8 FP8 DeepSeek-V3 style: 128 x 128 weight blocks, activations per 1 x 128 group
    /// ("w8a8_fp8e4m3_block128x128_g128").
    pub kernel W8A8Fp8Block { a: e4m3, b: e4m3, c: f16, scale: block(128, 128, f32), arch: [sm_90a] }

    /// W8A8 FP8 on the persistent kernel's tiles (`humming_spec::tiles::persistent_tiles`).
    pub kernel W8A8Fp8Ss { a: e4m3, b: e4m3, c: f16, scale: channel(f32), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 6, mma = wgmma_ss),
        tile(block = (128, 256, 128), stages = 4, mma = wgmma_ss)] }

    /// W8A8 FP8 128 x 128 blocks on the persistent kernel's tiles.
    pub kernel W8A8Fp8BlockSs { a: e4m3, b: e4m3, c: f16, scale: block(128, 128, f32), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 7, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 5, mma = wgmma_ss)] }

    /// W4A8 FP8 (i4 g128) on the persistent kernel's tiles.
    pub kernel W4A8Ss { a: e4m3, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 7, mma = wgmma_ss)] }

    /// W4A8 INT8 (i4 g128) on the persistent kernel's tiles.
    pub kernel W4A8Int8Ss { a: i8, b: i4, c: f16, scale: group(128, f16), arch: [sm_90a], tiles: [
        tile(block = (16, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (64, 128, 128), stages = 8, mma = wgmma_ss),
        tile(block = (128, 128, 128), stages = 7, mma = wgmma_ss)] }

    /// GGUF Q4_K: 4-bit codes, 6-bit integer scales and mins per 32 along K under f16 factors per
    /// 256 (`d · sc · q − dmin · m`). humming-kernels has no counterpart.
    pub kernel Q4K { a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float }
}

/// The kernels `--kernels` can pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kernel {
    /// `a: f16, b: i4, scale: group(128, f16)` (the main one).
    W4a16,
    /// `a: bf16, b: i4, scale: group(128, bf16)`.
    W4a16Bf16,
    /// `a: f16, b: u4, scale: group(128, f16)`.
    W4a16U4,
    /// `a: f16, b: e4m3, scale: channel(f16)` (humming-kernels' "float8e4m3", channel scale).
    #[value(name = "w8a16_e4m3")]
    W8a16E4m3,
    /// `a: f16, b: e2m1, scale: group(32, ue8m0)`.
    #[value(name = "mxfp4")]
    Mxfp4,
    /// `a: f16, b: e2m1, scale: group(16, e4m3), scale2: tensor(f32)`.
    #[value(name = "nvfp4")]
    Nvfp4,
    /// `a: f16, b: e4m3, scale: group(32, ue8m0)`.
    #[value(name = "mxfp8")]
    Mxfp8,
    /// `a: f16, b: e2m3, scale: group(32, ue8m0)`.
    #[value(name = "mxfp6")]
    Mxfp6,
    /// GGUF Q4_K: `a: f16, b: u4, scale: group(32, u6), scale2: group(256, f16), zero_point: float`
    /// (no humming-kernels counterpart).
    #[value(name = "q4_k")]
    Q4K,
    /// `a: e4m3, b: i4, c: f16, scale: group(128, f16)` (W4A8 FP8).
    #[value(name = "w4a8")]
    W4a8,
    /// `a: i8, b: i4, c: f16, scale: group(128, f16)` (W4A8 INT8).
    #[value(name = "w4a8_int8")]
    W4a8Int8,
    /// `a: e4m3, b: e4m3, c: f16, scale: channel(f32)` (W8A8 FP8).
    #[value(name = "w8a8_fp8")]
    W8a8Fp8,
    /// `a: e4m3, b: e4m3, c: f16, scale: block(128, 128, f32)` (W8A8 FP8, 1 x 128 activation groups).
    #[value(name = "w8a8_fp8_block")]
    W8a8Fp8Block,
    /// W8A8 FP8 (channel) on the persistent `wgmma_ss` tiles.
    #[value(name = "w8a8_fp8_ss")]
    W8a8Fp8Ss,
    /// W8A8 FP8 (128 x 128 blocks) on the persistent `wgmma_ss` tiles.
    #[value(name = "w8a8_fp8_block_ss")]
    W8a8Fp8BlockSs,
    /// W4A8 FP8 on the persistent tiles.
    #[value(name = "w4a8_ss")]
    W4a8Ss,
    /// W4A8 INT8 on the persistent tiles.
    #[value(name = "w4a8_int8_ss")]
    W4a8Int8Ss,
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::W4a16 => "w4a16",
            Kernel::W4a16Bf16 => "w4a16-bf16",
            Kernel::W4a16U4 => "w4a16-u4",
            Kernel::W8a16E4m3 => "w8a16_e4m3",
            Kernel::Mxfp4 => "mxfp4",
            Kernel::Nvfp4 => "nvfp4",
            Kernel::Mxfp8 => "mxfp8",
            Kernel::Mxfp6 => "mxfp6",
            Kernel::Q4K => "q4_k",
            Kernel::W4a8 => "w4a8",
            Kernel::W4a8Int8 => "w4a8_int8",
            Kernel::W8a8Fp8 => "w8a8_fp8",
            Kernel::W8a8Fp8Block => "w8a8_fp8_block",
            Kernel::W8a8Fp8Ss => "w8a8_fp8_ss",
            Kernel::W8a8Fp8BlockSs => "w8a8_fp8_block_ss",
            Kernel::W4a8Ss => "w4a8_ss",
            Kernel::W4a8Int8Ss => "w4a8_int8_ss",
        }
    }
    pub fn spec(self) -> KernelSpec {
        match self {
            Kernel::W4a16 => W4A16::DESCRIPTOR,
            Kernel::W4a16Bf16 => W4A16Bf16::DESCRIPTOR,
            Kernel::W4a16U4 => W4A16U4::DESCRIPTOR,
            Kernel::W8a16E4m3 => W8A16E4m3::DESCRIPTOR,
            Kernel::Mxfp4 => Mxfp4::DESCRIPTOR,
            Kernel::Nvfp4 => Nvfp4::DESCRIPTOR,
            Kernel::Mxfp8 => Mxfp8::DESCRIPTOR,
            Kernel::Mxfp6 => Mxfp6::DESCRIPTOR,
            Kernel::Q4K => Q4K::DESCRIPTOR,
            Kernel::W4a8 => W4A8::DESCRIPTOR,
            Kernel::W4a8Int8 => W4A8Int8::DESCRIPTOR,
            Kernel::W8a8Fp8 => W8A8Fp8::DESCRIPTOR,
            Kernel::W8a8Fp8Block => W8A8Fp8Block::DESCRIPTOR,
            Kernel::W8a8Fp8Ss => W8A8Fp8Ss::DESCRIPTOR,
            Kernel::W8a8Fp8BlockSs => W8A8Fp8BlockSs::DESCRIPTOR,
            Kernel::W4a8Ss => W4A8Ss::DESCRIPTOR,
            Kernel::W4a8Int8Ss => W4A8Int8Ss::DESCRIPTOR,
        }
    }
}
