//! Walking a llama-family GGUF model: which tensors are linear layers, of which kind, and their
//! lossless conversion into [`QuantizedWeights`] for the kernel of their GGML type.
//!
//! llama.cpp names the weights of block `b` `blk.{b}.{attn_q,attn_k,attn_v,attn_output,ffn_gate,
//! ffn_up,ffn_down}.weight`, the token embedding `token_embd.weight` and the LM head
//! `output.weight`; a model without `output.weight` ties its LM head to the embedding (SmolLM2
//! does). The norm vectors are `blk.{b}.attn_norm.weight`, `blk.{b}.ffn_norm.weight` and
//! `output_norm.weight` (F32).
//!
//! ```no_run
//! use humming_import::{GgufFile, LinearKind, LlamaModel};
//! let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let model = LlamaModel::load(&file)?;
//! let q = &model.layer(0, LinearKind::AttnQ).weights; // [N, K] = [576, 576]
//! assert_eq!((model.layers.len(), q.n()), (210, 576));
//! # Ok::<(), humming_import::Error>(())
//! ```

use crate::convert::to_quantized;
use crate::error::{Error, Result};
use crate::gguf::{GgmlType, GgufFile};
use crate::model::LlamaParams;
use humming_runtime::QuantizedWeights;
use std::fmt;

/// What a linear (weight matrix) tensor of a llama model does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinearKind {
    /// Query projection, `blk.{b}.attn_q.weight`.
    AttnQ,
    /// Key projection, `blk.{b}.attn_k.weight`.
    AttnK,
    /// Value projection, `blk.{b}.attn_v.weight`.
    AttnV,
    /// Attention output projection, `blk.{b}.attn_output.weight`.
    AttnOutput,
    /// MLP gate projection, `blk.{b}.ffn_gate.weight`.
    FfnGate,
    /// MLP up projection, `blk.{b}.ffn_up.weight`.
    FfnUp,
    /// MLP down projection, `blk.{b}.ffn_down.weight`.
    FfnDown,
    /// The token embedding, `token_embd.weight` (`[vocab, hidden]`); also the LM head of a model
    /// without `output.weight`.
    TokenEmbd,
    /// The LM head, `output.weight`, of a model whose head is not tied to the embedding.
    Output,
}

impl LinearKind {
    /// The seven projections of a block, in the order they run.
    pub const BLOCK: [LinearKind; 7] = [
        LinearKind::AttnQ,
        LinearKind::AttnK,
        LinearKind::AttnV,
        LinearKind::AttnOutput,
        LinearKind::FfnGate,
        LinearKind::FfnUp,
        LinearKind::FfnDown,
    ];

    /// llama.cpp's name of the tensor without the block prefix and the `.weight` suffix
    /// (`attn_q`, ..., `token_embd`, `output`).
    pub fn short_name(self) -> &'static str {
        match self {
            LinearKind::AttnQ => "attn_q",
            LinearKind::AttnK => "attn_k",
            LinearKind::AttnV => "attn_v",
            LinearKind::AttnOutput => "attn_output",
            LinearKind::FfnGate => "ffn_gate",
            LinearKind::FfnUp => "ffn_up",
            LinearKind::FfnDown => "ffn_down",
            LinearKind::TokenEmbd => "token_embd",
            LinearKind::Output => "output",
        }
    }

    /// Whether the tensor belongs to a block (one of [`LinearKind::BLOCK`]).
    pub fn in_block(self) -> bool {
        Self::BLOCK.contains(&self)
    }

    /// The full tensor name: `blk.{block}.{short}.weight` for a projection, `{short}.weight` else
    /// (`block` is then ignored).
    pub fn tensor_name(self, block: usize) -> String {
        if self.in_block() {
            format!("blk.{block}.{}.weight", self.short_name())
        } else {
            format!("{}.weight", self.short_name())
        }
    }

    /// Reads a tensor name: `Some((Some(block), kind))` for a block projection,
    /// `Some((None, kind))` for `token_embd.weight` and `output.weight`, `None` for anything else
    /// (norms, biases, other architectures' tensors).
    pub fn parse(name: &str) -> Option<(Option<usize>, LinearKind)> {
        let stem = name.strip_suffix(".weight")?;
        if let Some(kind) = [LinearKind::TokenEmbd, LinearKind::Output]
            .into_iter()
            .find(|k| k.short_name() == stem)
        {
            return Some((None, kind));
        }
        let (block, short) = stem.strip_prefix("blk.")?.split_once('.')?;
        let kind = Self::BLOCK.into_iter().find(|k| k.short_name() == short)?;
        Some((Some(block.parse().ok()?), kind))
    }
}

impl fmt::Display for LinearKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short_name())
    }
}

/// One linear tensor of the model, converted.
#[derive(Clone, Debug)]
pub struct LinearLayer {
    /// The tensor's name in the file.
    pub name: String,
    /// Its block, for a block projection.
    pub block: Option<usize>,
    /// What it does.
    pub kind: LinearKind,
    /// Its GGML type in the file: it selects the kernel (see [`crate::spec_for`]).
    pub ggml_type: GgmlType,
    /// The weights, `[N, K]` (N output features), converted without loss.
    pub weights: QuantizedWeights,
}

/// A llama-family model read from GGUF: every linear tensor converted with [`to_quantized`], the
/// norm vectors, and the geometry that the host steps (attention, RoPE) need.
#[derive(Clone, Debug)]
pub struct LlamaModel {
    /// The hyper-parameters.
    pub params: LlamaParams,
    /// The seven projections of every block, block by block, each block in [`LinearKind::BLOCK`]
    /// order (so the projection `kind` of block `b` is at `b * 7 + position of kind`).
    pub layers: Vec<LinearLayer>,
    /// `token_embd.weight`.
    pub token_embd: LinearLayer,
    /// `output.weight`, if the model has one (else the LM head is [`LlamaModel::token_embd`]).
    pub output: Option<LinearLayer>,
    /// `blk.{b}.attn_norm.weight` of every block.
    pub attn_norm: Vec<Vec<f32>>,
    /// `blk.{b}.ffn_norm.weight` of every block.
    pub ffn_norm: Vec<Vec<f32>>,
    /// `output_norm.weight`.
    pub output_norm: Vec<f32>,
    /// Dimensions per attention head: hidden size / head count.
    pub head_dim: usize,
    /// Dimensions of each head that RoPE rotates: `{arch}.rope.dimension_count`, else `head_dim`.
    pub rope_dims: usize,
}

impl LlamaModel {
    /// Reads and converts the model; see [`LlamaModel::load_with`].
    ///
    /// # Errors
    /// As [`LlamaModel::load_with`].
    pub fn load(file: &GgufFile) -> Result<Self> {
        Self::load_with(file, |_, _| {})
    }

    /// Reads the hyper-parameters, converts every linear tensor (calling `progress(done, total)`
    /// after each) and reads the norm vectors.
    ///
    /// # Errors
    /// - as [`LlamaParams::from_gguf`];
    /// - as [`to_quantized`] for a linear tensor whose type is not converted (for example an F16
    ///   embedding or a Q6_K head);
    /// - [`Error::MissingTensor`] for a missing projection, embedding or norm;
    /// - [`Error::Model`] when a projection names a block past `block_count` or the shapes do not
    ///   match the hyper-parameters.
    pub fn load_with(file: &GgufFile, mut progress: impl FnMut(usize, usize)) -> Result<Self> {
        let params = LlamaParams::from_gguf(file)?;
        let linear: Vec<_> = file
            .tensors()
            .iter()
            .filter_map(|t| Some((t, LinearKind::parse(&t.name)?)))
            .collect();
        let per_block = LinearKind::BLOCK.len();
        let mut slots: Vec<Option<LinearLayer>> =
            (0..params.block_count * per_block).map(|_| None).collect();
        let (mut token_embd, mut output) = (None, None);
        for (done, (info, (block, kind))) in linear.iter().enumerate() {
            let layer = LinearLayer {
                name: info.name.clone(),
                block: *block,
                kind: *kind,
                ggml_type: info.ggml_type,
                weights: to_quantized(&file.tensor(&info.name)?)?,
            };
            match (block, kind) {
                (None, LinearKind::TokenEmbd) => token_embd = Some(layer),
                (None, _) => output = Some(layer),
                (Some(b), _) if *b < params.block_count => {
                    slots[b * per_block + Self::position(*kind)] = Some(layer);
                }
                (Some(b), _) => {
                    return Err(Error::Model {
                        msg: format!(
                            "tensor `{}` is in block {b}, but the model has {} blocks",
                            info.name, params.block_count
                        ),
                    });
                }
            }
            progress(done + 1, linear.len());
        }
        let layers = slots
            .into_iter()
            .enumerate()
            .map(|(i, slot)| {
                slot.ok_or_else(|| Error::MissingTensor {
                    name: LinearKind::BLOCK[i % per_block].tensor_name(i / per_block),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let token_embd = token_embd.ok_or_else(|| Error::MissingTensor {
            name: LinearKind::TokenEmbd.tensor_name(0),
        })?;
        let norms = |what: &str| -> Result<Vec<Vec<f32>>> {
            (0..params.block_count)
                .map(|b| file.tensor_f32(&format!("blk.{b}.{what}.weight")))
                .collect()
        };
        let dim = params.embedding_length;
        let head_dim = dim / params.head_count.max(1);
        let rope_key = format!("{}.rope.dimension_count", params.architecture);
        let rope_dims = match file.get(&rope_key) {
            Some(_) => file.get_usize(&rope_key)?,
            None => head_dim,
        };
        let model = LlamaModel {
            attn_norm: norms("attn_norm")?,
            ffn_norm: norms("ffn_norm")?,
            output_norm: file.tensor_f32("output_norm.weight")?,
            params,
            layers,
            token_embd,
            output,
            head_dim,
            rope_dims,
        };
        model.check_shapes()?;
        Ok(model)
    }

    fn position(kind: LinearKind) -> usize {
        LinearKind::BLOCK
            .iter()
            .position(|&k| k == kind)
            .expect("a block projection")
    }

    /// The projection `kind` (one of [`LinearKind::BLOCK`]) of block `block`.
    ///
    /// # Panics
    /// If `block` is past the last block or `kind` is not a block projection.
    pub fn layer(&self, block: usize, kind: LinearKind) -> &LinearLayer {
        &self.layers[block * LinearKind::BLOCK.len() + Self::position(kind)]
    }

    /// The LM head: `output.weight`, else the tied `token_embd.weight`.
    pub fn lm_head(&self) -> &LinearLayer {
        self.output.as_ref().unwrap_or(&self.token_embd)
    }

    /// Every converted tensor: the block projections, then the embedding, then `output.weight`.
    pub fn linear_tensors(&self) -> impl Iterator<Item = &LinearLayer> {
        self.layers
            .iter()
            .chain([&self.token_embd])
            .chain(self.output.as_ref())
    }

    /// How many converted tensors there are of each GGML type, in order of first appearance in
    /// [`LlamaModel::linear_tensors`].
    pub fn type_counts(&self) -> Vec<(GgmlType, usize)> {
        let mut counts: Vec<(GgmlType, usize)> = Vec::new();
        for l in self.linear_tensors() {
            match counts.iter_mut().find(|(t, _)| *t == l.ggml_type) {
                Some((_, c)) => *c += 1,
                None => counts.push((l.ggml_type, 1)),
            }
        }
        counts
    }

    /// The embedding row of `token`, exactly dequantized.
    ///
    /// # Panics
    /// If `token` is not below the vocabulary size (`token_embd`'s N).
    pub fn embedding_row(&self, token: u32) -> Vec<f64> {
        let w = &self.token_embd.weights;
        (0..w.k())
            .map(|k| w.dequantize_value(token as usize, k))
            .collect()
    }

    fn check_shapes(&self) -> Result<()> {
        let p = &self.params;
        let (dim, kv) = (p.embedding_length, self.head_dim * p.head_count_kv);
        let (q_out, ffn) = (self.head_dim * p.head_count, p.feed_forward_length);
        for l in self.linear_tensors() {
            let (n, k) = match l.kind {
                LinearKind::AttnQ => (q_out, dim),
                LinearKind::AttnK | LinearKind::AttnV => (kv, dim),
                LinearKind::AttnOutput => (dim, q_out),
                LinearKind::FfnGate | LinearKind::FfnUp => (ffn, dim),
                LinearKind::FfnDown => (dim, ffn),
                LinearKind::TokenEmbd | LinearKind::Output => (l.weights.n(), dim),
            };
            if (l.weights.n(), l.weights.k()) != (n, k) {
                return Err(Error::Model {
                    msg: format!(
                        "tensor `{}` is [N, K] = [{}, {}], but the hyper-parameters give [{n}, {k}]",
                        l.name,
                        l.weights.n(),
                        l.weights.k()
                    ),
                });
            }
        }
        let norms = self.attn_norm.iter().chain(&self.ffn_norm);
        if let Some(bad) = norms.chain([&self.output_norm]).find(|v| v.len() != dim) {
            return Err(Error::Model {
                msg: format!(
                    "a norm vector has {} elements, the hidden size is {dim}",
                    bad.len()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in LinearKind::BLOCK {
            let name = kind.tensor_name(17);
            assert_eq!(LinearKind::parse(&name), Some((Some(17), kind)), "{name}");
        }
        assert_eq!(
            LinearKind::parse("token_embd.weight"),
            Some((None, LinearKind::TokenEmbd))
        );
        assert_eq!(
            LinearKind::parse("output.weight"),
            Some((None, LinearKind::Output))
        );
        for other in [
            "blk.0.attn_norm.weight",
            "output_norm.weight",
            "blk.x.attn_q.weight",
            "blk.0.attn_q.bias",
            "rope_freqs.weight",
        ] {
            assert_eq!(LinearKind::parse(other), None, "{other}");
        }
    }

    #[test]
    fn smollm2_walk() {
        let path = crate::smollm2_gguf_path();
        if !path.exists() {
            println!("skipped: smollm2_walk (model file absent; run scripts/fetch-smollm2.sh)");
            return;
        }
        let file = GgufFile::open(&path).unwrap();
        let mut calls = 0;
        let model = LlamaModel::load_with(&file, |done, total| {
            calls += 1;
            assert_eq!((done, total), (calls, 211));
        })
        .unwrap();
        assert_eq!(
            model.type_counts(),
            [(GgmlType::Q4_1, 210), (GgmlType::Q8_0, 1)]
        );
        assert!(model.output.is_none());
        assert_eq!(model.lm_head().name, "token_embd.weight");
        assert_eq!((model.head_dim, model.rope_dims), (64, 64));
        let down = model.layer(29, LinearKind::FfnDown);
        assert_eq!(
            (
                down.name.as_str(),
                down.block,
                down.weights.n(),
                down.weights.k()
            ),
            ("blk.29.ffn_down.weight", Some(29), 576, 1536)
        );
        let row = model.embedding_row(42);
        assert_eq!(row.len(), 576);
        assert_eq!(row[3], model.token_embd.weights.dequantize_value(42, 3));
    }
}
