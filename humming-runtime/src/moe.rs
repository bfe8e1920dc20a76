//! Mixture-of-experts on the host: the routing of the `moe_indexed` layout (the CPU twin of the GPU
//! helper, [`route_indexed`]), the rule that picks its block M ([`moe_block_m`]), and the f64
//! reference of every MoE layout ([`reference_moe`]).
//!
//! A MoE GEMM multiplies rows of A by the weights of the expert each row is routed to. Experts are
//! `[N, K]` weights of one spec (stacked `[E, N, K]` on the GPU), and the layouts say which rows go
//! where:
//!
//! - `moe_indexed` (vLLM `fused_moe`): token `t`'s `j`-th choice is expert `topk_ids[t * top_k + j]`;
//!   slot `t * top_k + j` reads row `t` of A and writes row `t * top_k + j` of C (`[M * top_k, N]`).
//!   A choice outside `0..E` (-1 where expert parallelism routes the token to another rank) writes
//!   nothing. With `top_k = 1` and rows already expanded, this is the down projection.
//! - `moe_grouped_contiguous`: expert `e` owns rows `offsets[e]..offsets[e + 1]` of A and C (DeepGEMM's
//!   contiguous layout, given by each expert's first row instead of a per-row expert index).
//! - `moe_grouped_masked` (DeepGEMM): A is `[E, max_m, K]`; expert `e` owns its first `counts[e]` rows.

use crate::error::{Result, invalid};
use crate::quant::QuantizedWeights;
use crate::reference::apply_epilogue;
use humming_spec::layout::{c_columns, glu_rows};
use humming_spec::{KernelSpec, Layout};

/// The f64 reference of a whole MoE layer ([`crate::cuda::MoeLayer`]), rounding where its launches
/// round: `x` `[tokens, H]` (quantized and dequantized first under 8-bit activations), the gate-up
/// `w13` (`[2 I, H]` per expert) into C's dtype `c_dtype`; with a SiLU-GLU epilogue on `w13`'s spec
/// that is `[slots, I]`, else `[slots, 2 I]` rounded and then `silu(gate) · up`; that quantized
/// under `w2`'s 8-bit activations; the down `w2` (`[H, I]`) times `topk_weights`, rounded; each
/// token's valid choices summed and rounded. Returns `[tokens, H]`.
///
/// # Errors
/// Those of [`reference_moe`] and of the activations' quantization.
#[allow(clippy::too_many_arguments)]
pub fn reference_moe_layer(
    w13: &[QuantizedWeights],
    w2: &[QuantizedWeights],
    x: &[f64],
    tokens: usize,
    topk_ids: &[i32],
    top_k: usize,
    topk_weights: &[f32],
    c_dtype: humming_spec::DType,
) -> Result<Vec<f64>> {
    let (Some(up), Some(down)) = (w13.first(), w2.first()) else {
        return Err(invalid("experts", "no experts given"));
    };
    let round = |v: f64| crate::quant::round_to_format(v, c_dtype);
    // A as an 8-bit kernel quantizes it (per token or per activation group), else as it is.
    let act = |spec: &KernelSpec, v: Vec<f64>, rows: usize, k: usize| -> Result<Vec<f64>> {
        if !humming_spec::layout::is_8bit_activation(spec.a) {
            return Ok(v);
        }
        let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        let how = crate::act_quant::ActScale::of_kernel(spec);
        Ok(crate::act_quant::quantize_activations(&v32, rows, k, spec.a, how)?.dequantize())
    };
    let (hidden, slots) = (up.k(), tokens * top_k);
    let x = act(up.spec(), x.to_vec(), tokens, hidden)?;
    let indexed = |top_k, weights| MoeRows::Indexed {
        topk_ids,
        top_k,
        weights,
    };
    let h = reference_moe(w13, &x, tokens, &indexed(top_k, None), None)?;
    let inter = down.k();
    let h: Vec<f64> = if up.spec().epilogue.is_glu() {
        h.c.iter().map(|&v| round(v)).collect()
    } else {
        (0..slots * inter)
            .map(|i| {
                let (r, j) = (i / inter, i % inter);
                let (g, u) = (
                    round(h.c[r * 2 * inter + j]),
                    round(h.c[r * 2 * inter + inter + j]),
                );
                g / (1.0 + (-g).exp()) * u
            })
            .collect()
    };
    let h = act(down.spec(), h, slots, inter)?;
    let y = reference_moe(w2, &h, slots, &indexed(1, Some(topk_weights)), None)?;
    let mut out = vec![0f64; tokens * hidden];
    for (s, &e) in topk_ids.iter().enumerate() {
        if e >= 0 && (e as usize) < w2.len() {
            let t = s / top_k;
            for c in 0..hidden {
                out[t * hidden + c] += round(y.c[s * hidden + c]);
            }
        }
    }
    Ok(out.into_iter().map(round).collect())
}

/// The rows of one MoE launch, on the host.
#[derive(Clone, Copy, Debug)]
pub enum MoeRows<'a> {
    /// `moe_indexed`: the router's choices `[M, top_k]`, and optionally its weights `[M, top_k]`, by
    /// which each written row is multiplied after the epilogue.
    Indexed {
        /// Expert of each choice; outside `0..E`: none.
        topk_ids: &'a [i32],
        /// Choices per token.
        top_k: usize,
        /// Factor of each choice's row, or `None` for 1.
        weights: Option<&'a [f32]>,
    },
    /// `moe_grouped_contiguous`: the first row of each expert, `[E + 1]`, from 0, non-decreasing, the
    /// last at most the rows of A (the reference refuses others; the kernel clamps them).
    Contiguous {
        /// `offsets[e]..offsets[e + 1]` are expert `e`'s rows.
        offsets: &'a [i32],
    },
    /// `moe_grouped_masked`: rows used per expert `[E]`, of `max_m` each.
    Masked {
        /// Expert `e`'s rows are `e * max_m .. e * max_m + counts[e]`.
        counts: &'a [i32],
        /// Rows reserved per expert.
        max_m: usize,
    },
}

impl MoeRows<'_> {
    /// The layout these rows are for.
    pub fn layout(&self) -> Layout {
        match self {
            MoeRows::Indexed { .. } => Layout::MoeIndexed,
            MoeRows::Contiguous { .. } => Layout::MoeGroupedContiguous,
            MoeRows::Masked { .. } => Layout::MoeGroupedMasked,
        }
    }

    /// For each row of C (`c_rows` of them): the expert and the row of A it is computed from, or
    /// `None` where the layout writes nothing.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming `topk_ids`, `offsets` or `counts` where they do not
    /// describe rows of A (`a_rows`) and C.
    pub fn sources(&self, a_rows: usize, experts: usize) -> Result<Vec<Option<(usize, usize)>>> {
        let expert = |e: i32| usize::try_from(e).ok().filter(|&e| e < experts);
        match *self {
            MoeRows::Indexed {
                topk_ids, top_k, ..
            } => {
                if top_k == 0 || topk_ids.len() != a_rows * top_k {
                    return Err(invalid(
                        "topk_ids",
                        format!(
                            "expected M * top_k = {a_rows} * {top_k} choices, found {}",
                            topk_ids.len()
                        ),
                    ));
                }
                Ok(topk_ids
                    .iter()
                    .enumerate()
                    .map(|(s, &e)| expert(e).map(|e| (e, s / top_k)))
                    .collect())
            }
            MoeRows::Contiguous { offsets } => {
                let ok = offsets.len() == experts + 1
                    && offsets.first() == Some(&0)
                    && offsets.windows(2).all(|w| w[0] <= w[1])
                    && offsets.last().is_some_and(|&l| l as usize <= a_rows);
                if !ok {
                    return Err(invalid(
                        "offsets",
                        format!(
                            "expected E + 1 = {} non-decreasing offsets from 0 to at most {a_rows}",
                            experts + 1
                        ),
                    ));
                }
                let mut out = vec![None; a_rows];
                for e in 0..experts {
                    let span = offsets[e] as usize..offsets[e + 1] as usize;
                    for (o, r) in out[span.clone()].iter_mut().zip(span) {
                        *o = Some((e, r));
                    }
                }
                Ok(out)
            }
            MoeRows::Masked { counts, max_m } => {
                if counts.len() != experts || a_rows != experts * max_m {
                    return Err(invalid(
                        "counts",
                        format!(
                            "expected E = {experts} counts for A of E * max_m = {} rows, found {} counts and {a_rows} rows",
                            experts * max_m,
                            counts.len()
                        ),
                    ));
                }
                let mut out = vec![None; a_rows];
                for (e, &c) in counts.iter().enumerate() {
                    for r in 0..(c.max(0) as usize).min(max_m) {
                        out[e * max_m + r] = Some((e, e * max_m + r));
                    }
                }
                Ok(out)
            }
        }
    }
}

/// The f64 reference of a MoE launch: C (`tokens * top_k` rows for `moe_indexed`, as many rows as A
/// for the grouped layouts; N columns, or N / 2 with a gated epilogue), and which rows the layout
/// writes. Rows it does not write are 0 here; the kernel
/// leaves them untouched.
#[derive(Clone, Debug)]
pub struct MoeReference {
    /// C, row-major.
    pub c: Vec<f64>,
    /// Whether each row of C is written.
    pub written: Vec<bool>,
    /// Columns of C.
    pub columns: usize,
}

/// The MoE GEMM in f64 (exact: nothing is rounded to C's dtype; a chain of launches rounds between
/// them, see `examples/moe_block.rs`; it keeps an f64 copy of each touched expert: for test-sized
/// problems): row `r` of C is `epilogue(A[src] · W_e[N, K]ᵀ + bias_e) · w_r` for the expert
/// `e` and row `src` of A that `rows` give it (`w_r`: the router's weight of an indexed slot, else 1).
///
/// - `experts`: the weights of every expert, one spec (a MoE layout), one shape.
/// - `a`: `[a_rows, K]` row-major.
/// - `bias`: `[E, N]`, given exactly when the spec has `bias: true`.
///
/// # Errors
/// [`crate::Error::InvalidArgument`] naming `experts` (empty, or of different specs or shapes, or a
/// dense spec), `a`, `bias`, or the routing buffer ([`MoeRows::sources`]).
pub fn reference_moe(
    experts: &[QuantizedWeights],
    a: &[f64],
    a_rows: usize,
    rows: &MoeRows<'_>,
    bias: Option<&[f64]>,
) -> Result<MoeReference> {
    let Some(first) = experts.first() else {
        return Err(invalid("experts", "no experts given"));
    };
    let spec: KernelSpec = *first.spec();
    let (n, k) = (first.n(), first.k());
    if experts
        .iter()
        .any(|w| !spec.takes_weights_of(w.spec()) || w.n() != n || w.k() != k)
    {
        return Err(invalid(
            "experts",
            "every expert needs the same spec and shape",
        ));
    }
    if spec.layout != rows.layout() {
        return Err(invalid(
            "experts",
            format!(
                "the weights are for the `{}` layout, the rows for `{}`",
                spec.layout.name(),
                rows.layout().name()
            ),
        ));
    }
    if a.len() != a_rows * k {
        return Err(invalid(
            "a",
            format!("expected {a_rows} * {k} elements, found {}", a.len()),
        ));
    }
    let e_count = experts.len();
    match (bias, spec.bias) {
        (Some(b), true) if b.len() != e_count * n => {
            return Err(invalid(
                "bias",
                format!(
                    "expected E * N = {} elements, found {}",
                    e_count * n,
                    b.len()
                ),
            ));
        }
        (Some(_), false) | (None, true) => {
            return Err(invalid(
                "bias",
                "give a bias `[E, N]` exactly when the spec has `bias: true`",
            ));
        }
        _ => {}
    }
    let sources = rows.sources(a_rows, e_count)?;
    let weights = match rows {
        MoeRows::Indexed {
            weights: Some(w), ..
        } => {
            if w.len() != sources.len() {
                return Err(invalid(
                    "weights",
                    format!(
                        "expected one weight per choice ({}), found {}",
                        sources.len(),
                        w.len()
                    ),
                ));
            }
            Some(*w)
        }
        _ => None,
    };
    let epi = spec.epilogue;
    let nc = c_columns(epi, n);
    let mut dequantized: Vec<Option<Vec<f64>>> = vec![None; e_count];
    for (e, _) in sources.iter().flatten() {
        if dequantized[*e].is_none() {
            dequantized[*e] = Some(experts[*e].dequantize());
        }
    }
    let mut c = vec![0f64; sources.len() * nc];
    for (r, src) in sources.iter().enumerate() {
        let Some((e, ar)) = *src else { continue };
        let wd = dequantized[e].as_deref().unwrap_or_default();
        let arow = &a[ar * k..(ar + 1) * k];
        let dot = |j: usize| {
            let s: f64 = arow
                .iter()
                .zip(&wd[j * k..(j + 1) * k])
                .map(|(x, y)| x * y)
                .sum();
            s + bias.map_or(0.0, |b| b[e * n + j])
        };
        let rw = weights.map_or(1.0, |w| f64::from(w[r]));
        for j in 0..nc {
            let v = if epi.is_glu() {
                let (gate, up) = glu_rows(epi, n, j);
                let g = dot(gate);
                g / (1.0 + (-g).exp()) * dot(up)
            } else {
                apply_epilogue(epi, dot(j))
            };
            c[r * nc + j] = v * rw;
        }
    }
    Ok(MoeReference {
        written: sources.iter().map(Option::is_some).collect(),
        c,
        columns: nc,
    })
}

/// The `moe_indexed` routing, as the GPU helper builds it: each expert's choices (flat indices into
/// `topk_ids`) in flat order, padded with `topk_ids.len()` to a multiple of `block_m`; the expert of
/// each block; the slots in use. Choices outside `0..experts` take no slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexedRouting {
    /// Slot ids, `slots_used` of them.
    pub sorted_ids: Vec<i32>,
    /// One expert per block of `block_m` slots.
    pub expert_ids: Vec<i32>,
    /// Slots in use (a multiple of `block_m`).
    pub slots_used: usize,
}

/// The host twin of the GPU routing helper (see [`IndexedRouting`]).
pub fn route_indexed(topk_ids: &[i32], experts: usize, block_m: usize) -> IndexedRouting {
    let bm = block_m.max(1);
    let mut per: Vec<Vec<i32>> = vec![Vec::new(); experts];
    for (i, &e) in topk_ids.iter().enumerate() {
        if let Ok(e) = usize::try_from(e)
            && e < experts
        {
            per[e].push(i as i32);
        }
    }
    let pad = topk_ids.len() as i32;
    let mut sorted_ids = Vec::new();
    let mut expert_ids = Vec::new();
    for (e, ids) in per.iter().enumerate() {
        let padded = ids.len().div_ceil(bm) * bm;
        sorted_ids.extend(ids);
        sorted_ids.resize(sorted_ids.len() + padded - ids.len(), pad);
        expert_ids.extend(std::iter::repeat_n(e as i32, padded / bm));
    }
    IndexedRouting {
        slots_used: sorted_ids.len(),
        sorted_ids,
        expert_ids,
    }
}

/// Slots the routing of `ids` choices over `experts` may use at most: every choice, plus the padding
/// of each expert that has any, rounded up to a whole block.
pub fn route_capacity(ids: usize, experts: usize, block_m: usize) -> usize {
    let bm = block_m.max(1);
    (ids + ids.min(experts) * (bm - 1)).div_ceil(bm) * bm
}

/// Experts that get at least one of `rows` choices spread uniformly over `experts`.
fn touched_experts(rows: usize, experts: usize) -> f64 {
    let e = experts.max(1) as f64;
    (e * (1.0 - (1.0 - 1.0 / e).powf(rows as f64))).clamp(1.0, e)
}

/// The row tiles of `block_m` rows that `rows` choices spread uniformly over `experts` fill, about:
/// one per touched expert, or the rows' own tiles where more.
pub fn expected_row_tiles(rows: usize, experts: usize, block_m: usize) -> usize {
    let per = rows as f64 / touched_experts(rows, experts);
    (touched_experts(rows, experts) * (per / block_m.max(1) as f64).ceil()).ceil() as usize
}

/// The block M of a MoE launch: the smallest of `block_ms` (the kernel's tiles) that holds the rows
/// an expert gets on average, `rows` spread over `experts` (over those that get any: with few rows,
/// each touched expert gets about one), and above 16 rows half as many again (an expert with more
/// rows than its tile takes a second tile, which reads its weights again); the largest where none
/// does. (PERFORMANCE.md has the measurements behind the rule.)
pub fn moe_block_m(block_ms: &[usize], rows: usize, experts: usize) -> Option<usize> {
    block_m_holding(block_ms, rows, experts, 1.5)
}

/// [`moe_block_m`] for the persistent tiles, whose CTAs take an expert's row tiles one after the
/// other (its weights then come from L2 the second time): the smallest that holds the mean, as
/// measured (Qwen3-30B-A3B at M = 1024, 64 rows per expert: 64-row tiles 6-10% faster than 128).
pub fn persistent_moe_block_m(block_ms: &[usize], rows: usize, experts: usize) -> Option<usize> {
    block_m_holding(block_ms, rows, experts, 1.0)
}

/// The smallest of `block_ms` that holds the mean rows per touched expert, times `margin` above 16.
fn block_m_holding(block_ms: &[usize], rows: usize, experts: usize, margin: f64) -> Option<usize> {
    let mean = rows as f64 / touched_experts(rows, experts);
    let per = if mean > 16.0 { mean * margin } else { mean };
    // (Less a sixteenth: a mean of 8 over all but a few thousandths of the experts, 8.003, is 8.)
    let per = (per - 0.0625).ceil() as usize;
    let mut sorted: Vec<usize> = block_ms.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted
        .iter()
        .copied()
        .find(|&b| b >= per)
        .or(sorted.last().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_routing_pads_each_expert_and_skips_invalid_choices() {
        let ids = [2, 0, -1, 2, 5, 2, 0, 7];
        let r = route_indexed(&ids, 4, 4);
        let pad = ids.len() as i32;
        assert_eq!(r.sorted_ids, vec![1, 6, pad, pad, 0, 3, 5, pad]);
        assert_eq!(r.expert_ids, vec![0, 2]);
        assert_eq!(r.slots_used, 8);
        assert!(r.slots_used <= route_capacity(ids.len(), 4, 4));
        assert_eq!(route_indexed(&[], 4, 8).slots_used, 0);
    }

    #[test]
    fn block_m_follows_rows_per_expert() {
        let tiles = [8, 16, 32, 64];
        assert_eq!(moe_block_m(&tiles, 8, 128), Some(8));
        assert_eq!(moe_block_m(&tiles, 1024 * 8, 128), Some(64));
        assert_eq!(moe_block_m(&tiles, 1024 * 8, 256), Some(64));
        assert_eq!(moe_block_m(&tiles, 160, 8), Some(32));
        assert_eq!(moe_block_m(&tiles, 128 * 8, 128), Some(8));
        assert_eq!(moe_block_m(&tiles, 128 * 9, 128), Some(16));
        assert_eq!(moe_block_m(&tiles, 100_000, 8), Some(64));
        assert_eq!(moe_block_m(&[], 8, 8), None);
        let persistent = [16, 32, 64, 128];
        assert_eq!(persistent_moe_block_m(&persistent, 8, 128), Some(16));
        assert_eq!(persistent_moe_block_m(&persistent, 1024 * 8, 128), Some(64));
        assert_eq!(persistent_moe_block_m(&persistent, 1024 * 8, 256), Some(32));
        assert_eq!(persistent_moe_block_m(&persistent, 100_000, 8), Some(128));
    }
}
