//! Host-side preparation of benchmark data: seeded random matrices and quantization, spread over
//! all cores.

use humming::Element;
use humming::quant::{QuantizedWeights, ZeroPoints};
use humming::spec::{KernelSpec, ZeroPoint};

use super::timing::Res;

/// Threads to spread host work over.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |t| t.get())
}

/// Calls `f(offset, part)` on about `threads()` contiguous parts of `data`, each a multiple of
/// `align` elements long (except the last), in parallel.
pub fn par_parts<T: Send>(data: &mut [T], align: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let units = data.len().div_ceil(align.max(1));
    let per = units.div_ceil(threads()).max(1) * align.max(1);
    std::thread::scope(|s| {
        for (i, part) in data.chunks_mut(per).enumerate() {
            let f = &f;
            s.spawn(move || f(i * per, part));
        }
    });
}

/// splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// `tokens` x `top_k` choices, each token's `top_k` distinct experts drawn uniformly (a partial
/// Fisher-Yates shuffle of a permutation kept across tokens).
pub fn random_routing(rng: &mut Rng, tokens: usize, top_k: usize, experts: usize) -> Vec<i32> {
    let mut perm: Vec<i32> = (0..experts as i32).collect();
    let mut ids = Vec::with_capacity(tokens * top_k);
    for _ in 0..tokens {
        for j in 0..top_k {
            let pick = j + (rng.next_u64() % (experts - j) as u64) as usize;
            perm.swap(j, pick);
            ids.push(perm[j]);
        }
    }
    ids
}

/// Random `[rows, cols]` values; each row has its own magnitude and offset (like real checkpoints)
/// when `per_row` is set, else uniform in [-1, 1). The same for any number of threads.
pub fn random_matrix(rows: usize, cols: usize, seed: u64, per_row: bool) -> Vec<f32> {
    let mut v = vec![0f32; rows * cols];
    par_parts(&mut v, cols, |offset, part| {
        for (i, row) in part.chunks_mut(cols).enumerate() {
            let mut rng = Rng::new(seed ^ ((offset / cols + i) as u64) << 20);
            let (mag, shift) = if per_row {
                (0.01 + 0.1 * rng.uniform().abs(), 0.02 * rng.uniform())
            } else {
                (1.0, 0.0)
            };
            for x in row {
                *x = mag * rng.uniform() + shift;
            }
        }
    });
    v
}

pub fn to_elements<E: Element>(v: &[f32]) -> Vec<E> {
    let mut out = vec![E::default(); v.len()];
    par_parts(&mut out, 1 << 16, |offset, part| {
        for (o, &x) in part.iter_mut().zip(&v[offset..]) {
            *o = E::from_f32(x);
        }
    });
    out
}

/// `QuantizedWeights::quantize` on blocks of rows in parallel, then joined (scales are `[groups][N]`).
pub fn quantize_parallel(
    spec: &KernelSpec,
    n: usize,
    k: usize,
    w: &[f32],
) -> Res<QuantizedWeights> {
    // Rows quantize independently only under per-row scales (channel, group, no secondary scale).
    let by_rows = spec.scale2.is_none()
        && matches!(
            spec.scale.granularity,
            humming::spec::ScaleGranularity::Channel
                | humming::spec::ScaleGranularity::Group { .. }
        );
    if !by_rows {
        return Ok(QuantizedWeights::quantize(spec, n, k, w)?);
    }
    let blocks = threads().min(n / 64).max(1);
    let rows_per = n.div_ceil(blocks);
    let parts: Vec<QuantizedWeights> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(rows_per)
            .map(|r0| {
                let r1 = (r0 + rows_per).min(n);
                s.spawn(move || QuantizedWeights::quantize(spec, r1 - r0, k, &w[r0 * k..r1 * k]))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a quantization thread panicked"))
            .collect::<humming::Result<Vec<_>>>()
    })?;
    if parts.len() == 1 {
        return Ok(parts.into_iter().next().expect("one part"));
    }
    let groups = parts[0].groups();
    let mut codes = Vec::with_capacity(n * k);
    let mut scales = vec![0f32; groups * n];
    let mut zi = vec![
        0u8;
        if spec.zero_point == ZeroPoint::Integer {
            groups * n
        } else {
            0
        }
    ];
    let mut zf = vec![
        0f32;
        if spec.zero_point == ZeroPoint::FloatOffset {
            groups * n
        } else {
            0
        }
    ];
    let mut r0 = 0;
    for p in &parts {
        let rows = p.n();
        codes.extend_from_slice(p.codes());
        for g in 0..groups {
            let (dst, src) = (g * n + r0..g * n + r0 + rows, g * rows..(g + 1) * rows);
            scales[dst.clone()].copy_from_slice(&p.scales()[src.clone()]);
            match p.zeros() {
                ZeroPoints::None => {}
                ZeroPoints::Integer(z) => zi[dst].copy_from_slice(&z[src]),
                ZeroPoints::Float(z) => zf[dst].copy_from_slice(&z[src]),
                ZeroPoints::FloatTwoLevel { .. } => {
                    return Err("two-level offsets are not joined by rows".into());
                }
            }
        }
        r0 += rows;
    }
    let zeros = match spec.zero_point {
        ZeroPoint::None => ZeroPoints::None,
        ZeroPoint::Integer => ZeroPoints::Integer(zi),
        ZeroPoint::FloatOffset => ZeroPoints::Float(zf),
    };
    Ok(QuantizedWeights::from_parts(
        spec, n, k, codes, scales, zeros,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use humming::spec::parse_kernel_str;

    /// Quantizing blocks of rows apart and joining them gives what one call gives.
    #[test]
    fn parallel_quantization_equals_serial() {
        let (n, k) = (192, 256);
        let w = random_matrix(n, k, 5, true);
        for fields in [
            "a: f16, b: i4, scale: group(128, f16)",
            "a: f16, b: u4, scale: group(64, f16), zero_point: int",
            "a: f16, b: u4, scale: group(32, f16), zero_point: float",
        ] {
            let spec = parse_kernel_str(fields).unwrap();
            let serial = QuantizedWeights::quantize(&spec, n, k, &w).unwrap();
            let parallel = quantize_parallel(&spec, n, k, &w).unwrap();
            assert_eq!(parallel.codes(), serial.codes(), "{fields}");
            assert_eq!(parallel.scales(), serial.scales(), "{fields}");
            assert_eq!(parallel.zeros(), serial.zeros(), "{fields}");
        }
    }
}
