//! Imports real model weights into humming.
//!
//! - [`gguf`]: a reader of GGUF files (ggml / llama.cpp): header v2/v3, metadata of every type,
//!   the tensor table, raw tensor bytes and F32/F16/BF16 tensors as `Vec<f32>`; memory-mapped.
//! - [`convert`]: lossless conversion of GGUF's Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weight tensors into
//!   [`QuantizedWeights`] (`[N, K]`, one f16 scale group per 32-weight block), for `f16` kernels.
//! - [`ggml`]: ggml's own f32 dequantization of those blocks and of the K-quants (Q2_K..Q6_K) and
//!   IQ4_NL / IQ4_XS, the independent oracle of the conversion and of the two-level decode (they
//!   agree bit for bit).
//! - [`kquant`]: lossless decode of K-quant and IQ4 tensors into their two levels ([`TwoLevel`]:
//!   codes, integer group scales and mins, f16 super-block factors).
//! - [`checkpoint`]: plain safetensors checkpoints (F32/F16/BF16), quantized on load with
//!   [`QuantizedWeights::quantize`].
//! - [`quantized`]: quantized safetensors checkpoint folders ([`QuantizedCheckpoint`]): the
//!   settings ([`QuantConfig`], [`CompressedConfig`]), the shards, each GPTQ, AWQ,
//!   compressed-tensors, DeepSeek FP8 or ModelOpt NVFP4 layer listed and unpacked into exact
//!   [`QuantizedWeights`] with its `gemm!` descriptor ([`gptq`], [`compressed`] and [`fp8_nvfp4`]
//!   have the layouts).
//! - [`llama`]: walking a llama-family model: which tensors are linear layers and of which kind,
//!   all of them converted, the norm vectors and the attention geometry ([`LlamaModel`]).
//! - [`model`]: the real test models (SmolLM2-135M-Instruct GGUF Q4_1, Gemma-3-270M GGUF Q4_K_M)
//!   and llama hyper-parameters.
//!
//! ```no_run
//! use humming_import::{GgufFile, to_quantized};
//! let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let layers = file.get_usize("llama.block_count")?;
//! let w = to_quantized(&file.tensor("blk.0.attn_q.weight")?)?; // [N, K] = [576, 576], u4 + f16 offsets
//! assert_eq!((w.n(), w.k(), layers), (576, 576, 30));
//! # Ok::<(), humming_import::Error>(())
//! ```

#![warn(missing_docs)]

mod bytes;
pub mod checkpoint;
pub mod compressed;
pub mod compressed_config;
pub mod convert;
pub mod error;
pub mod fp8_nvfp4;
pub mod ggml;
mod ggml_type;
pub mod gguf;
pub mod gptq;
pub mod kquant;
pub mod llama;
pub mod model;
pub mod quant_config;
pub mod quantized;

pub use checkpoint::{SafetensorsFile, SafetensorsInfo};
pub use compressed_config::{CompressedConfig, CtFormat, CtGroup, CtStrategy};
pub use convert::{check_declaration, from_two_level, spec_for, to_quantized, to_quantized_as};
pub use error::{Error, Result};
pub use ggml::ggml_dequantize;
pub use gguf::{GgmlType, GgufFile, GgufTensor, MetaValue, TensorInfo};
pub use humming_runtime::{QuantizedWeights, ZeroPoints};
pub use kquant::{Levels, TwoLevel, TwoLevelLayout};
pub use llama::{LinearKind, LinearLayer, LlamaModel};
pub use model::{LlamaParams, gemma3_gguf_path, model_dir, smollm2_gguf_path};
pub use quant_config::{GptqFormat, QuantConfig, QuantMethod};
pub use quantized::{ImportedLayer, QuantLayerInfo, QuantizedCheckpoint};
