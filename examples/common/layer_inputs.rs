//! The activation rows of the per-layer runs of the real-model examples (`smollm2`, `gemma3`), from
//! rows of a model's residual stream (the example makes them from its embedding):
//! - `attn_q`/`attn_k`/`attn_v` of block b: `RMSNorm(x) * blk.b.attn_norm` (`ffn_gate`/`ffn_up`:
//!   `* blk.b.ffn_norm`; the LM head: `* output_norm`);
//! - `attn_output`: the attention output of M independent one-token sequences, which is V (the
//!   reference output of `attn_v` of the same block) repeated over the grouped-query heads;
//! - `ffn_down`: the model's gated activation of the reference outputs of the same block's
//!   `ffn_gate`/`ffn_up`.

use super::llama_block::{Heads, rmsnorm, silu_glu, to_f16};
use super::timing::Res;
use humming::half::f16;
use humming_import::{LinearKind, LinearLayer, LlamaModel};

/// What the activations take of a model.
pub struct Block<'a> {
    /// `blk.{b}.attn_norm.weight` and `blk.{b}.ffn_norm.weight` of every block, `output_norm.weight`.
    pub attn_norm: &'a [Vec<f32>],
    pub ffn_norm: &'a [Vec<f32>],
    pub output_norm: &'a [f32],
    /// Query heads, key/value heads and their width.
    pub n_head: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    /// The MLP's gated activation, `act(gate) * up` element-wise.
    pub glu: fn(&[f64], &[f64]) -> Vec<f64>,
}

/// A llama model's activations (SiLU-GLU) of `rows` rows: the embedding rows of `tokens`, cycled.
pub fn llama_inputs<'a>(model: &'a LlamaModel, tokens: &[u32], rows: usize) -> Inputs<'a> {
    let x: Vec<f64> = (0..rows)
        .flat_map(|r| model.embedding_row(tokens[r % tokens.len()]))
        .collect();
    let h = Heads::of(model);
    let block = Block {
        attn_norm: &model.attn_norm,
        ffn_norm: &model.ffn_norm,
        output_norm: &model.output_norm,
        n_head: h.n_head,
        n_kv: h.n_kv,
        head_dim: h.head_dim,
        glu: silu_glu::<f64>,
    };
    let p = &model.params;
    Inputs::new(block, &x, p.embedding_length, p.rms_norm_eps)
}

/// Builds each layer's activation rows and keeps what later layers of the same block need (the
/// reference outputs of v, gate and up).
pub struct Inputs<'a> {
    block: Block<'a>,
    /// `RMSNorm(x)` without weight, `[rows, dim]`.
    normed: Vec<f64>,
    v: Option<(usize, Vec<f64>)>,
    gate: Option<(usize, Vec<f64>)>,
    up: Option<(usize, Vec<f64>)>,
}

impl<'a> Inputs<'a> {
    /// The inputs from rows `x` of `dim` values, normalized with `eps`.
    pub fn new(block: Block<'a>, x: &[f64], dim: usize, eps: f64) -> Inputs<'a> {
        let ones = vec![1f32; dim];
        Inputs {
            block,
            normed: rmsnorm(x, &ones, eps),
            v: None,
            gate: None,
            up: None,
        }
    }

    fn scaled(&self, w: &[f32]) -> Vec<f16> {
        self.normed
            .chunks(w.len())
            .flat_map(|row| {
                row.iter()
                    .zip(w)
                    .map(|(&x, &g)| f16::from_f64(x * f64::from(g)))
            })
            .collect()
    }

    /// The activation rows of `l`; `attn_output` and `ffn_down` need the [`Inputs::record`]ed
    /// outputs of their block's `attn_v`, `ffn_gate` and `ffn_up`.
    pub fn for_layer(&self, l: &LinearLayer) -> Res<Vec<f16>> {
        let m = &self.block;
        let block = l.block.unwrap_or_default();
        let need = |slot: &Option<(usize, Vec<f64>)>, what: &str| -> Res<Vec<f64>> {
            match slot {
                Some((b, r)) if *b == block => Ok(r.clone()),
                _ => {
                    Err(format!("{} needs the {what} output of block {block} first", l.name).into())
                }
            }
        };
        Ok(match l.kind {
            LinearKind::AttnQ | LinearKind::AttnK | LinearKind::AttnV => {
                self.scaled(&m.attn_norm[block])
            }
            LinearKind::FfnGate | LinearKind::FfnUp => self.scaled(&m.ffn_norm[block]),
            LinearKind::TokenEmbd | LinearKind::Output => self.scaled(m.output_norm),
            LinearKind::AttnOutput => {
                // Attention of one-token sequences: each head's output is its kv head's V.
                let v = need(&self.v, "attn_v")?;
                let (hd, group) = (m.head_dim, m.n_head / m.n_kv.max(1));
                v.chunks(m.n_kv * hd)
                    .flat_map(|row| {
                        (0..m.n_head).flat_map(move |head| {
                            let kvh = head / group;
                            row[kvh * hd..(kvh + 1) * hd]
                                .iter()
                                .map(|&x| f16::from_f64(x))
                        })
                    })
                    .collect()
            }
            LinearKind::FfnDown => {
                let g = need(&self.gate, "ffn_gate")?;
                let u = need(&self.up, "ffn_up")?;
                to_f16(&(m.glu)(&g, &u))
            }
        })
    }

    /// Keeps the reference output of `l` if a later layer of its block needs it.
    pub fn record(&mut self, l: &LinearLayer, reference: &[f64]) {
        let slot = match l.kind {
            LinearKind::AttnV => &mut self.v,
            LinearKind::FfnGate => &mut self.gate,
            LinearKind::FfnUp => &mut self.up,
            _ => return,
        };
        *slot = Some((l.block.unwrap_or_default(), reference.to_vec()));
    }
}
