//! The error type of humming-import.

use crate::gguf::GgmlType;
use humming_spec::DType;

/// Everything that can go wrong while reading a model file or converting one of its tensors.
///
/// Every variant that concerns one tensor or one metadata key names it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened, read or memory-mapped.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid GGUF file (bad magic, unsupported version, truncated or inconsistent
    /// header, metadata or tensor table). `offset` is the byte offset in the file where the problem
    /// was found.
    #[error("invalid GGUF file at byte {offset}: {msg}")]
    Format {
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        msg: String,
    },
    /// No tensor of this name in the file.
    #[error("no tensor named `{name}` in the file")]
    MissingTensor {
        /// The name asked for.
        name: String,
    },
    /// No metadata key of this name in the file.
    #[error("no metadata key `{key}` in the file")]
    MissingKey {
        /// The key asked for.
        key: String,
    },
    /// The metadata value has a type that cannot be read as the type asked for.
    #[error("metadata key `{key}` holds {found}, which cannot be read as {expected}")]
    MetadataType {
        /// The key.
        key: String,
        /// What the caller asked for (`a string`, `an unsigned integer`, ...).
        expected: &'static str,
        /// What the file holds (`u32 4`, `string "llama"`, ...).
        found: String,
    },
    /// The tensor's GGML type cannot be used for what was asked: converted to quantized weights
    /// (supported: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), dequantized (also F32, F16, BF16, the K-quants
    /// Q2_K..Q6_K, IQ4_NL, IQ4_XS), decoded into two levels (Q2_K..Q6_K, IQ4_NL, IQ4_XS) or read as
    /// floats (F32, F16, BF16).
    #[error(
        "tensor `{tensor}` has GGML type {ty}, which is not supported here; supported: {supported}"
    )]
    UnsupportedTensorType {
        /// The tensor's name (empty when a raw buffer was given without a name).
        tensor: String,
        /// Its type.
        ty: GgmlType,
        /// The types that are supported for this operation.
        supported: &'static str,
    },
    /// The activation dtype asked for cannot carry the GGUF block scales exactly. Only `f16` is
    /// supported: GGUF's legacy blocks store f16 scales, and `bf16` would round them.
    #[error(
        "tensor `{tensor}`: activation dtype `{dtype}` is not supported for GGUF blocks; use f16 (GGUF scales are f16, {dtype} would round them)"
    )]
    UnsupportedActivation {
        /// The tensor's name.
        tensor: String,
        /// The dtype asked for.
        dtype: DType,
    },
    /// The tensor's shape does not fit the operation (not a matrix, byte length not matching the
    /// element count, ...).
    #[error("tensor `{tensor}`: {msg}")]
    Shape {
        /// The tensor's name (empty when a raw buffer was given without a name).
        tensor: String,
        /// What is wrong.
        msg: String,
    },
    /// The weights do not make whole blocks of their type: `len` weights along a row (K of an
    /// `[N, K]` matrix, or all of a flat buffer) are not a multiple of the block (32, or 256 for the
    /// K-quants and IQ4_XS). ggml cannot store such a row in that type at all.
    #[error(
        "tensor `{tensor}`: {len} weights along K are not a multiple of the {ty} block of {block}"
    )]
    BlockMultiple {
        /// The tensor's name (empty when a raw buffer was given without a name).
        tensor: String,
        /// Its type.
        ty: GgmlType,
        /// The row length (or element count) found.
        len: usize,
        /// Weights per block of `ty`.
        block: usize,
    },
    /// The byte buffer does not hold exactly the blocks of the weights it should hold.
    #[error(
        "tensor `{tensor}`: {n_elements} weights of {ty} take {expected} bytes, found {found} bytes"
    )]
    ByteCount {
        /// The tensor's name (empty when a raw buffer was given without a name).
        tensor: String,
        /// Its type.
        ty: GgmlType,
        /// The number of weights.
        n_elements: usize,
        /// The bytes they take (saturated at `usize::MAX`).
        expected: usize,
        /// The bytes given.
        found: usize,
    },
    /// The quantized parts read from the tensor were rejected by
    /// [`humming_runtime::QuantizedWeights::from_parts`] or
    /// [`humming_runtime::QuantizedWeights::quantize`] (for example an infinite or NaN block scale).
    #[error("tensor `{tensor}`: {source}")]
    Weights {
        /// The tensor's name.
        tensor: String,
        /// The runtime's error.
        #[source]
        source: humming_runtime::Error,
    },
    /// The tensors of a model file do not make the model asked for (a projection past the last
    /// block, shapes that do not match the hyper-parameters).
    #[error("the model's tensors do not fit its hyper-parameters: {msg}")]
    Model {
        /// What is wrong.
        msg: String,
    },
    /// A `gemm!` kernel is declared for other weights than those the conversion of a GGML type
    /// produces (see [`crate::convert::check_declaration`]).
    #[error(
        "kernel {kernel} is declared as `{declared}`, but {ty} tensors convert to `{converted}`: fix its gemm! declaration"
    )]
    Declaration {
        /// The kernel's name.
        kernel: String,
        /// Its declared descriptor.
        declared: String,
        /// The GGML type it is meant to run.
        ty: GgmlType,
        /// The descriptor of the converted weights ([`crate::spec_for`]).
        converted: String,
    },
    /// A kernel descriptor could not be parsed.
    #[error("invalid kernel descriptor `{spec}`: {source}")]
    Spec {
        /// The descriptor text.
        spec: String,
        /// Why it was rejected.
        #[source]
        source: humming_runtime::spec::SpecError,
    },
    /// The safetensors file is invalid, or a tensor in it is.
    #[error("safetensors error in {context}: {source}")]
    Safetensors {
        /// The file or tensor concerned.
        context: String,
        /// The safetensors crate's error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// A JSON file of a model folder (`config.json`, `quantize_config.json`, the shard index) is
    /// not valid JSON.
    #[error("invalid JSON in {path}: {source}")]
    Json {
        /// The file.
        path: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A model folder cannot be read as one checkpoint: no safetensors shard, an index naming a
    /// file or tensor that is not there, a tensor in two shards.
    #[error("model folder {path}: {msg}")]
    Folder {
        /// The folder or file concerned.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A quantization setting is missing or malformed.
    #[error("{file}: quantization setting `{field}`: {msg}")]
    QuantConfig {
        /// The settings file.
        file: String,
        /// The key.
        field: String,
        /// What is wrong.
        msg: String,
    },
    /// A quantization setting names a method or value that is not read (yet).
    #[error(
        "{file}: quantization setting `{field}` = {value} is not supported; supported: {supported}"
    )]
    UnsupportedQuant {
        /// The settings file.
        file: String,
        /// The key (`quant_method`, `bits`, `checkpoint_format`, `version`, ...).
        field: String,
        /// Its value.
        value: String,
        /// What is supported.
        supported: &'static str,
    },
    /// A tensor that a quantized layer needs is absent from every shard.
    #[error("quantized layer `{layer}`: no `{field}` tensor (`{tensor}`) in the checkpoint")]
    MissingQuantTensor {
        /// The layer's prefix.
        layer: String,
        /// The tensor's role (`qweight`, `qzeros`, `scales`, `g_idx`).
        field: &'static str,
        /// The full name looked for.
        tensor: String,
    },
    /// A tensor of a quantized layer has the wrong element type.
    #[error("tensor `{tensor}` ({field}) has dtype {found}; expected {expected}")]
    QuantDtype {
        /// The tensor's name.
        tensor: String,
        /// Its role.
        field: &'static str,
        /// What was found.
        found: String,
        /// What is read.
        expected: &'static str,
    },
    /// A tensor's shape disagrees with the settings and the layer's other tensors.
    #[error("tensor `{tensor}` ({field}) has shape {found:?}; expected {expected} ({why})")]
    QuantShape {
        /// The tensor's name.
        tensor: String,
        /// Its role.
        field: &'static str,
        /// Its shape.
        found: Vec<usize>,
        /// The shape the settings and the other tensors imply.
        expected: String,
        /// Where that expectation comes from (which settings, which tensor).
        why: String,
    },
    /// A tensor's values contradict the settings (a symmetric layer with other zero points, act-order
    /// groups of the wrong size, an unsorted `g_idx` without `desc_act`).
    #[error("tensor `{tensor}` ({field}): {msg}")]
    QuantValue {
        /// The tensor's name.
        tensor: String,
        /// Its role.
        field: &'static str,
        /// What is wrong.
        msg: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
