//! Code the examples share, kept out of their files so that each reads as a use of humming:
//!
//! - [`timing`]: copy bandwidth, CUDA-event timing, CUDA-graph replay over rotated buffers;
//! - [`table`]: fixed-width text tables;
//! - [`plot`]: SVG charts of time against M;
//! - [`host`]: seeded random matrices and parallel quantization;
//! - [`device`]: rotating copies of packed weights, cuBLAS on unquantized weights; [`lt_fp8`]:
//!   cuBLASLt FP8, the anchor of 8-bit activations;
//! - [`bench_kernels`]: the benchmark's kernels; [`bench_report`]: its JSON, table and charts; [`bench_merge`]: its merge with
//!   humming-kernels;
//! - [`moe_report`]: the MoE benchmark's JSON and table, and its merge with humming-kernels;
//! - [`gguf_tokenizer`]: a `tokenizers` tokenizer from a GGUF file's vocabulary;
//! - [`layer_sweep`]: the forward pass of a real model's layers, launched one by one and as one
//!   CUDA graph (`smollm2`, `gemma3`);
//! - [`llama_block`]: llama's host steps (RMSNorm, RoPE, attention, SiLU-GLU) and the check of one
//!   block end to end;
//! - the rest of what the real-model examples (`smollm2`, `gemma3`) share: [`model_cli`] (batch
//!   sizes, the model file, GPU or CPU path, exit status), [`bench_tokens`] (the activations' text and
//!   tokens), [`layer_inputs`] (each layer's activation rows), [`ggml_check`] (a layer on the CPU
//!   against ggml's dequantization), [`gguf_kernels`] (a kernel per GGML type), [`layer_measure`]
//!   (every layer checked and timed on the GPU), [`layer_times`] and [`layer_errors`] (their tables).

// Each example uses a part of these modules.
#![allow(dead_code)]

pub mod bench_kernels;
pub mod bench_merge;
pub mod bench_report;
pub mod bench_tokens;
pub mod ckpt_writer;
pub mod device;
pub mod ggml_check;
pub mod gguf_kernels;
pub mod gguf_tokenizer;
pub mod host;
pub mod layer_errors;
pub mod layer_inputs;
pub mod layer_measure;
pub mod layer_sweep;
pub mod layer_times;
pub mod llama_block;
pub mod lt_fp8;
pub mod model_cli;
pub mod moe_report;
pub mod plot;
pub mod table;
pub mod timing;
