//! Plain (unquantized) safetensors checkpoints: list their matrices and quantize one on load.
//!
//! Format (Hugging Face `safetensors`): a `u64` little-endian header length, a JSON header mapping
//! each tensor name to its dtype, shape and byte range, then the data (little-endian, row-major).
//! Parsing is done by the `safetensors` crate; the file is memory-mapped.
//!
//! A PyTorch `nn.Linear` weight is stored as `[out_features, in_features]` = `[N, K]`, the layout of
//! [`QuantizedWeights`], so no transpose is needed.

use crate::bytes::FileBytes;
use crate::error::{Error, Result};
use humming_runtime::QuantizedWeights;
use humming_spec::KernelSpec;
use safetensors::{Dtype, SafeTensors, tensor::Metadata};
use std::path::Path;

/// The safetensors dtypes that [`SafetensorsFile::tensor_f32`] and [`SafetensorsFile::quantize`]
/// read.
pub const FLOAT_DTYPES: &str = "F32, F16, BF16";

/// One tensor of a safetensors file (name, dtype, shape).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetensorsInfo {
    /// The tensor's name, e.g. `model.layers.0.self_attn.q_proj.weight`.
    pub name: String,
    /// Its element type.
    pub dtype: Dtype,
    /// Its shape, outermost first (`[N, K]` for a linear layer's weight).
    pub shape: Vec<usize>,
}

/// An open safetensors file: header parsed, data memory-mapped.
#[derive(Debug)]
pub struct SafetensorsFile {
    bytes: FileBytes,
    header_len: usize,
    metadata: Metadata,
    label: String,
}

impl SafetensorsFile {
    /// Opens and parses the safetensors file at `path` (memory-mapped, read-only). The file must
    /// not be modified or truncated while the returned value lives.
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be opened or mapped; [`Error::Safetensors`] if the header is
    /// invalid (bad JSON, offsets that do not cover the data exactly, ...).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        Self::parse(FileBytes::map(path)?, path.display().to_string())
    }

    /// Parses a safetensors file held in memory.
    ///
    /// # Errors
    /// [`Error::Safetensors`] if the header is invalid.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self> {
        Self::parse(FileBytes::Owned(bytes), "<memory>".to_owned())
    }

    fn parse(bytes: FileBytes, label: String) -> Result<Self> {
        let (header_len, metadata) =
            SafeTensors::read_metadata(bytes.as_slice()).map_err(|source| Error::Safetensors {
                context: label.clone(),
                source,
            })?;
        Ok(SafetensorsFile {
            bytes,
            header_len,
            metadata,
            label,
        })
    }

    /// Every tensor, in the order of its data in the file.
    pub fn tensors(&self) -> Vec<SafetensorsInfo> {
        self.metadata
            .offset_keys()
            .into_iter()
            .filter_map(|name| {
                let info = self.metadata.info(&name)?;
                Some(SafetensorsInfo {
                    name,
                    dtype: info.dtype,
                    shape: info.shape.clone(),
                })
            })
            .collect()
    }

    /// The 2-D tensors (weight matrices `[N, K]`) of a float dtype (F32, F16, BF16), in file order:
    /// the candidates for [`SafetensorsFile::quantize`].
    pub fn matrices(&self) -> Vec<SafetensorsInfo> {
        self.tensors()
            .into_iter()
            .filter(|t| {
                t.shape.len() == 2 && matches!(t.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16)
            })
            .collect()
    }

    /// Tensor `name`'s entry and raw little-endian bytes.
    ///
    /// # Errors
    /// [`Error::MissingTensor`].
    pub fn tensor_bytes(&self, name: &str) -> Result<(SafetensorsInfo, &[u8])> {
        let info = self
            .metadata
            .info(name)
            .ok_or_else(|| Error::MissingTensor {
                name: name.to_owned(),
            })?;
        let (start, end) = info.data_offsets;
        // In bounds: `read_metadata` checked that the offsets tile the data section exactly.
        let base = 8 + self.header_len;
        let data = &self.bytes.as_slice()[base + start..base + end];
        Ok((
            SafetensorsInfo {
                name: name.to_owned(),
                dtype: info.dtype,
                shape: info.shape.clone(),
            },
            data,
        ))
    }

    /// Tensor `name`'s shape and elements as f32 (row-major), for F32, F16 and BF16 tensors (exact
    /// conversions).
    ///
    /// # Errors
    /// [`Error::MissingTensor`]; [`Error::Shape`] (naming the tensor) for any other dtype.
    pub fn tensor_f32(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        let (info, data) = self.tensor_bytes(name)?;
        let values = match info.dtype {
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            other => {
                return Err(Error::Shape {
                    tensor: name.to_owned(),
                    msg: format!(
                        "dtype {other:?} cannot be read as floats; supported: {FLOAT_DTYPES}"
                    ),
                });
            }
        };
        Ok((info.shape, values))
    }

    /// Quantizes the 2-D float tensor `name` (`[N, K]`) for `spec` with
    /// [`QuantizedWeights::quantize`] (round-to-nearest; see there for the formulas).
    ///
    /// # Errors
    /// [`Error::MissingTensor`]; [`Error::Shape`] if the tensor is not 2-D or not F32/F16/BF16;
    /// [`Error::Weights`] if quantization fails (unsupported `spec`, NaN or infinite weights, a scale
    /// that overflows the scale dtype).
    pub fn quantize(&self, name: &str, spec: &KernelSpec) -> Result<QuantizedWeights> {
        let (shape, values) = self.tensor_f32(name)?;
        let [n, k] = shape[..] else {
            return Err(Error::Shape {
                tensor: name.to_owned(),
                msg: format!("shape {shape:?} is not a matrix [N, K]"),
            });
        };
        QuantizedWeights::quantize(spec, n, k, &values).map_err(|source| Error::Weights {
            tensor: name.to_owned(),
            source,
        })
    }

    /// The path the file was opened from (`<memory>` for [`SafetensorsFile::from_bytes`]).
    pub fn label(&self) -> &str {
        &self.label
    }
}
