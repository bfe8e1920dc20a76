//! The host steps of a llama block (RMSNorm, RoPE, grouped-query attention, SiLU-GLU, in f32 as a
//! serving engine runs them between the kernels, or in f64), and the check of one block end to end:
//! the engine's way (projections through a caller's `linear`, f16 activations) against all-f64
//! math on the exactly dequantized weights.

use super::table::{Col, Table};
use super::timing::Res;
use humming::half::f16;
use humming::reference::to_f64;
use humming::{reference_gemm, relative_error};
use humming_import::{LinearKind, LinearLayer, LlamaModel};

// ---------------------------------------------------------------------------------------------------
// Host math

/// f32 or f64: the host math runs in either.
pub trait Real:
    Copy
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
    fn of(v: f64) -> Self;
    fn get(self) -> f64;
    fn exp(self) -> Self;
    fn sqrt(self) -> Self;
    fn sin_cos(self) -> (Self, Self);
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn get(self) -> f64 {
        f64::from(self)
    }
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    fn sin_cos(self) -> (Self, Self) {
        f32::sin_cos(self)
    }
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn get(self) -> f64 {
        self
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn sin_cos(self) -> (Self, Self) {
        f64::sin_cos(self)
    }
}

/// Converts between f32 and f64.
pub fn conv<T: Real, U: Real>(x: &[T]) -> Vec<U> {
    x.iter().map(|v| U::of(v.get())).collect()
}

/// Rounds to f16.
pub fn to_f16<T: Real>(x: &[T]) -> Vec<f16> {
    x.iter().map(|v| f16::from_f64(v.get())).collect()
}

/// Widens f16 values.
pub fn f16_to<T: Real>(x: &[f16]) -> Vec<T> {
    x.iter().map(|v| T::of(v.to_f64())).collect()
}

/// Row-wise `x / sqrt(mean(x²) + eps) * w` over rows of `w.len()`.
pub fn rmsnorm<T: Real>(x: &[T], w: &[f32], eps: f64) -> Vec<T> {
    let d = w.len();
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d) {
        let mut ss = T::default();
        for &v in row {
            ss = ss + v * v;
        }
        let scale = T::of(1.0) / (ss / T::of(d as f64) + T::of(eps)).sqrt();
        out.extend(
            row.iter()
                .zip(w)
                .map(|(&v, &g)| v * scale * T::of(f64::from(g))),
        );
    }
    out
}

/// `SiLU(gate) * up`, element-wise.
pub fn silu_glu<T: Real>(gate: &[T], up: &[T]) -> Vec<T> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| g / (T::of(1.0) + (T::of(0.0) - g).exp()) * u)
        .collect()
}

/// Element-wise sum.
pub fn add<T: Real>(a: &[T], b: &[T]) -> Vec<T> {
    a.iter().zip(b).map(|(&x, &y)| x + y).collect()
}

/// Head layout of the attention.
#[derive(Clone, Copy)]
pub struct Heads {
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads.
    pub n_kv: usize,
    /// Dimensions per head.
    pub head_dim: usize,
    /// Dimensions of each head that RoPE rotates.
    pub rope_dims: usize,
    /// RoPE base frequency.
    pub rope_base: f64,
}

impl Heads {
    /// The model's head layout.
    pub fn of(model: &LlamaModel) -> Heads {
        Heads {
            n_head: model.params.head_count,
            n_kv: model.params.head_count_kv,
            head_dim: model.head_dim,
            rope_dims: model.rope_dims,
            rope_base: model.params.rope_freq_base,
        }
    }
}

/// RoPE as llama.cpp applies it to llama models (`LLAMA_ROPE_TYPE_NORM`: adjacent pairs), in place,
/// on rows of `heads` heads, row `i` at position `i`.
pub fn rope<T: Real>(x: &mut [T], heads: usize, h: Heads) {
    let width = heads * h.head_dim;
    for (pos, row) in x.chunks_mut(width).enumerate() {
        for head in row.chunks_mut(h.head_dim) {
            for i0 in (0..h.rope_dims).step_by(2) {
                let theta = pos as f64 * h.rope_base.powf(-(i0 as f64) / h.rope_dims as f64);
                let (sin, cos) = T::of(theta).sin_cos();
                let (x0, x1) = (head[i0], head[i0 + 1]);
                head[i0] = x0 * cos - x1 * sin;
                head[i0 + 1] = x0 * sin + x1 * cos;
            }
        }
    }
}

/// Causal grouped-query attention of one sequence of `t` tokens (row i at position i): RoPE on q and
/// k, softmax(q·k / sqrt(head_dim)) over positions <= i, times v. q is `[t, n_head * head_dim]`,
/// k and v `[t, n_kv * head_dim]`; returns `[t, n_head * head_dim]`.
pub fn attention<T: Real>(q: &[T], k: &[T], v: &[T], t: usize, h: Heads) -> Vec<T> {
    let (hd, qw, kw) = (h.head_dim, h.n_head * h.head_dim, h.n_kv * h.head_dim);
    let mut q = q.to_vec();
    let mut k = k.to_vec();
    rope(&mut q, h.n_head, h);
    rope(&mut k, h.n_kv, h);
    let scale = T::of(1.0 / (hd as f64).sqrt());
    let group = h.n_head / h.n_kv;
    let mut out = vec![T::default(); t * qw];
    let mut p = vec![T::default(); t];
    for head in 0..h.n_head {
        let kvh = head / group;
        for i in 0..t {
            let qi = &q[i * qw + head * hd..i * qw + (head + 1) * hd];
            let mut max = T::of(f64::NEG_INFINITY);
            for (j, pj) in p.iter_mut().enumerate().take(i + 1) {
                let kj = &k[j * kw + kvh * hd..j * kw + (kvh + 1) * hd];
                let mut s = T::default();
                for (&a, &b) in qi.iter().zip(kj) {
                    s = s + a * b;
                }
                *pj = s * scale;
                if *pj > max {
                    max = *pj;
                }
            }
            let mut sum = T::default();
            for pj in p.iter_mut().take(i + 1) {
                *pj = (*pj - max).exp();
                sum = sum + *pj;
            }
            let o = &mut out[i * qw + head * hd..i * qw + (head + 1) * hd];
            for (j, &pj) in p.iter().enumerate().take(i + 1) {
                let vj = &v[j * kw + kvh * hd..j * kw + (kvh + 1) * hd];
                for (od, &vd) in o.iter_mut().zip(vj) {
                    *od = *od + pj / sum * vd;
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// One block end to end

/// One step of the block: the engine's value against the all-f64 block.
pub struct Stage {
    /// The step.
    pub what: String,
    /// Its shape (`M x N <- K` for a projection).
    pub shape: String,
    /// The kernel against the f64 reference on the very same f16 input (kernels only).
    pub isolated: Option<f64>,
    /// The engine's value against the all-f64 block.
    pub end_to_end: f64,
}

/// The check of a block: every stage, the worst projection on its own input, the block's output.
pub struct BlockReport {
    /// Every step, in order.
    pub stages: Vec<Stage>,
    /// The worst relative error of a projection against f64 on the same f16 input.
    pub worst_isolated: f64,
    /// The relative error of the block's output against the all-f64 block.
    pub output: f64,
}

/// A linear layer as the engine runs it: `(layer, A as [m, K] f16, m)` to C as `[m, N]` f16.
pub type Linear<'a> = dyn FnMut(&LinearLayer, &[f16], usize) -> Res<Vec<f16>> + 'a;

/// Runs block 0 on the embeddings of `tokens` (one causal sequence) twice: as a serving engine does
/// (the seven projections through `linear` on f16 activations; RMSNorm, RoPE, attention and
/// SiLU-GLU on the host in f32, rounded to f16 before each projection; the residual stream in f32) and
/// all in f64 with the exactly dequantized weights. Compares every intermediate.
pub fn block0(model: &LlamaModel, tokens: &[u32], linear: &mut Linear<'_>) -> Res<BlockReport> {
    let t = tokens.len();
    let eps = model.params.rms_norm_eps;
    let heads = Heads::of(model);
    let x64: Vec<f64> = tokens
        .iter()
        .flat_map(|&id| model.embedding_row(id))
        .collect();
    let x32: Vec<f32> = conv(&x64);
    let mut stages = Vec::new();
    let mut stage =
        |what: &str, shape: String, isolated: Option<f64>, got: Vec<f64>, want: &[f64]| {
            stages.push(Stage {
                what: what.to_owned(),
                shape,
                isolated,
                end_to_end: relative_error(&got, want),
            });
        };
    let mut project = |kind: LinearKind, a: &[f16]| -> Res<(Vec<f16>, f64, &LinearLayer)> {
        let l = model.layer(0, kind);
        let out = linear(l, a, t)?;
        let want = reference_gemm(&l.weights, &to_f64(a), t, None)?;
        Ok((out.clone(), relative_error(&to_f64(&out), &want), l))
    };
    let gemm64 =
        |kind: LinearKind, a: &[f64]| reference_gemm(&model.layer(0, kind).weights, a, t, None);
    let shape = |l: &LinearLayer| format!("{t} x {} <- {}", l.weights.n(), l.weights.k());

    // Attention half.
    let h = to_f16(&rmsnorm(&x32, &model.attn_norm[0], eps));
    let h_r = rmsnorm(&x64, &model.attn_norm[0], eps);
    stage(
        "attn_norm(x)",
        format!("{t} x {}", model.params.embedding_length),
        None,
        to_f64(&h),
        &h_r,
    );
    let mut qkv = Vec::new();
    let mut qkv_r = Vec::new();
    for kind in [LinearKind::AttnQ, LinearKind::AttnK, LinearKind::AttnV] {
        let (out, iso, l) = project(kind, &h)?;
        let want = gemm64(kind, &h_r)?;
        stage(kind.short_name(), shape(l), Some(iso), to_f64(&out), &want);
        qkv.push(f16_to::<f32>(&out));
        qkv_r.push(want);
    }
    let attn = to_f16(&attention(&qkv[0], &qkv[1], &qkv[2], t, heads));
    let attn_r = attention(&qkv_r[0], &qkv_r[1], &qkv_r[2], t, heads);
    stage(
        "attention (host: RoPE, causal softmax)",
        format!("{t} x {}", heads.n_head * heads.head_dim),
        None,
        to_f64(&attn),
        &attn_r,
    );
    let (o, iso, l) = project(LinearKind::AttnOutput, &attn)?;
    let o_r = gemm64(LinearKind::AttnOutput, &attn_r)?;
    stage("attn_output", shape(l), Some(iso), to_f64(&o), &o_r);
    let x1 = add(&x32, &f16_to::<f32>(&o));
    let x1_r = add(&x64, &o_r);
    stage(
        "x + attention",
        format!("{t} x {}", model.params.embedding_length),
        None,
        conv(&x1),
        &x1_r,
    );

    // MLP half.
    let h2 = to_f16(&rmsnorm(&x1, &model.ffn_norm[0], eps));
    let h2_r = rmsnorm(&x1_r, &model.ffn_norm[0], eps);
    stage(
        "ffn_norm(x1)",
        format!("{t} x {}", model.params.embedding_length),
        None,
        to_f64(&h2),
        &h2_r,
    );
    let (g, iso, l) = project(LinearKind::FfnGate, &h2)?;
    let g_r = gemm64(LinearKind::FfnGate, &h2_r)?;
    stage("ffn_gate", shape(l), Some(iso), to_f64(&g), &g_r);
    let (u, iso, l) = project(LinearKind::FfnUp, &h2)?;
    let u_r = gemm64(LinearKind::FfnUp, &h2_r)?;
    stage("ffn_up", shape(l), Some(iso), to_f64(&u), &u_r);
    let act = to_f16(&silu_glu(&f16_to::<f32>(&g), &f16_to::<f32>(&u)));
    let act_r = silu_glu(&g_r, &u_r);
    stage(
        "SiLU(gate) * up (host f32 -> f16)",
        format!("{t} x {}", model.params.feed_forward_length),
        None,
        to_f64(&act),
        &act_r,
    );
    let (dn, iso, l) = project(LinearKind::FfnDown, &act)?;
    let dn_r = gemm64(LinearKind::FfnDown, &act_r)?;
    stage("ffn_down", shape(l), Some(iso), to_f64(&dn), &dn_r);
    let y = add(&x1, &f16_to::<f32>(&dn));
    let y_r = add(&x1_r, &dn_r);
    let output = relative_error(&conv(&y), &y_r);
    stage(
        "block output x1 + mlp",
        format!("{t} x {}", model.params.embedding_length),
        None,
        conv(&y),
        &y_r,
    );
    let worst_isolated = stages.iter().filter_map(|s| s.isolated).fold(0f64, worse);
    Ok(BlockReport {
        stages,
        worst_isolated,
        output,
    })
}

impl BlockReport {
    /// Prints the stages; `kernels` says what ran the projections, `how_tokens` what the tokens are.
    pub fn print(&self, kernels: &str, how_tokens: &str) {
        println!();
        println!("Block 0 end to end ({kernels}), tokens: {how_tokens}");
        println!(
            "  engine: f16 activations into every projection, RMSNorm/RoPE/attention/SiLU-GLU on the \
             host in f32, residual in f32; CPU block: the same math all in f64 with the dequantized \
             weights"
        );
        let table = Table::new("  ", &[Col::L(40), Col::R(20), Col::R(16), Col::R(16)]);
        table.print(&[&"stage", &"M x N <- K", &"kernel vs f64", &"engine vs f64"]);
        table.print(&[&"", &"", &"(same input)", &"(whole block)"]);
        for s in &self.stages {
            let iso = s.isolated.map_or("-".to_owned(), |e| format!("{e:.2e}"));
            let e2e = format!("{:.2e}", s.end_to_end);
            table.print(&[&s.what, &s.shape, &iso, &e2e]);
        }
    }
}

/// The larger of two errors, NaN winning (`f64::max` would drop a NaN).
pub fn worse(acc: f64, e: f64) -> f64 {
    if e.is_nan() || e > acc { e } else { acc }
}
