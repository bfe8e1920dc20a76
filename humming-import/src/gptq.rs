//! GPTQ and AWQ layers: their packed int32 tensors unpacked into [`QuantizedWeights`](crate::QuantizedWeights), without
//! loss, and the descriptor of the kernel that runs them.
//!
//! GPTQ (AutoGPTQ / GPTQModel), for `bits` in 2, 3, 4, 8, with `G` = `group_size` (`-1`: K):
//!
//! | tensor | dtype | shape | content |
//! |--------|-------|-------|---------|
//! | `qweight` | int32 | `[K * bits / 32, N]` | column `n`'s codes along K: code `k` at bit `k * bits` of the little-endian stream of the column's words (`32 / bits` codes a word; 3 bits: 32 codes in 3 words, some crossing a word boundary) |
//! | `qzeros` | int32 | `[ceil(K / G), N * bits / 32]` | row `g`'s zero points along N, the same stream; v1 (`checkpoint_format: "gptq"`) stores `(z - 1) mod 2^bits`, v2 stores `z` |
//! | `scales` | f16 / bf16 | `[ceil(K / G), N]` | |
//! | `g_idx` | int32 | `[K]` | the group of each k (absent: `k / G`) |
//!
//! v1 zero points are decoded per field, `(stored + 1) mod 2^bits`, never carrying into the next
//! field: a zero point of 0 (stored 15 at 4 bits) and one of 15 (stored 14) come out as 0 and 15.
//!
//! AWQ (AutoAWQ GEMM, 4 bits): `qweight` int32 `[K, N / 8]`, nibble `i` (bits `4 i`) of word `c`
//! holding column `8 c + [0, 2, 4, 6, 1, 3, 5, 7][i]`; `qzeros` int32 `[ceil(K / G), N / 8]` in the
//! same order, stored as they are; `scales` `[ceil(K / G), N]`.
//!
//! Weight value `s * (q - z)`. Descriptors (the scale dtype, f16 or bf16, is also A's):
//! - asymmetric: `a: f16, b: u4, scale: group(128, f16), zero_point: int`, codes and zero points
//!   as stored (decoded);
//! - symmetric GPTQ (`sym`, every zero point `2^(bits - 1)`): `a: f16, b: i4, scale:
//!   group(128, f16)`, the code `q - 2^(bits - 1)` as an `i4` pattern;
//! - `group_size: -1`: `scale: channel(f16)`.
//!
//! Act-order: a `g_idx` other than `k / G` (GPTQ `desc_act`) is honoured exactly by permuting K,
//! columns sorted by group (stably), so that each group is `G` contiguous columns; the permutation
//! is returned for A's columns ([`crate::ImportedLayer::k_perm`]).

use crate::checkpoint::SafetensorsInfo;
use crate::error::{Error, Result};
use crate::quant_config::{GptqFormat, QuantConfig, QuantMethod};
use crate::quantized::{ImportedLayer, QuantizedCheckpoint};
use humming_runtime::ZeroPoints;
use humming_spec::DType;
use safetensors::Dtype;

/// AWQ's position (nibble index) of column `j % 8` in its word: the inverse of AWQ's packing
/// order `[0, 2, 4, 6, 1, 3, 5, 7]`.
const AWQ_NIBBLE_OF_COLUMN: [u32; 8] = [0, 4, 1, 5, 2, 6, 3, 7];

/// The shape of a layer, checked against the settings and every one of its tensors.
pub(crate) struct Geometry {
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) groups: usize,
    /// Packed words per row of `qweight` (GPTQ: N; AWQ: N / 8) and of `qzeros`.
    qweight_cols: usize,
    qzeros_cols: usize,
    /// The scale dtype, also the activation dtype.
    pub(crate) act: DType,
    pub(crate) bytes: usize,
}

/// The `gemm!` fields of a layer of `config` with scales (and activations) of dtype `act`.
pub(crate) fn spec_text(config: &QuantConfig, act: DType) -> String {
    let scale = match config.group_size {
        Some(g) => format!("group({g}, {act})"),
        None => format!("channel({act})"),
    };
    let bits = config.bits;
    if config.sym {
        format!("a: {act}, b: i{bits}, scale: {scale}")
    } else {
        format!("a: {act}, b: u{bits}, scale: {scale}, zero_point: int")
    }
}

/// Checks the layer's tensors against the settings and each other.
pub(crate) fn geometry(ckpt: &QuantizedCheckpoint, prefix: &str) -> Result<Geometry> {
    let cfg = ckpt.config();
    let bits = cfg.bits as usize;
    let (qw, qw_data) = ckpt.required(prefix, "qweight")?;
    let (sc, sc_data) = ckpt.required(prefix, "scales")?;
    let (qz, qz_data) = ckpt.required(prefix, "qzeros")?;
    check_dtype(&qw, "qweight", &[Dtype::I32], "I32")?;
    check_dtype(&qz, "qzeros", &[Dtype::I32], "I32")?;
    check_dtype(&sc, "scales", &[Dtype::F16, Dtype::BF16], "F16 or BF16")?;
    let act = if sc.dtype == Dtype::F16 {
        DType::F16
    } else {
        DType::BF16
    };
    let [rows, cols] = matrix(&qw, "qweight")?;
    let settings = format!(
        "{} with bits = {bits}, group_size = {}",
        cfg.file,
        cfg.group_size.map_or(-1, |g| g as i64)
    );
    let (n, k, qweight_cols) = match cfg.method {
        QuantMethod::Gptq => {
            if (rows * 32) % bits != 0 {
                return Err(shape_err(
                    &qw,
                    "qweight",
                    format!("[K * {bits} / 32, N], a whole number of {bits}-bit codes along K"),
                    settings,
                ));
            }
            (cols, rows * 32 / bits, cols)
        }
        _ => (cols * 8, rows, cols), // AWQ
    };
    if n == 0 || k == 0 {
        return Err(shape_err(
            &qw,
            "qweight",
            "a non-empty matrix".into(),
            settings,
        ));
    }
    let from = format!(
        "K = {k}, N = {n} from qweight {:?} and {settings}",
        qw.shape
    );
    let mut bytes = qw_data.len() + sc_data.len() + qz_data.len();
    if let Some((gi, gi_data)) = ckpt.part(prefix, "g_idx")? {
        check_dtype(&gi, "g_idx", &[Dtype::I32, Dtype::I64], "I32 or I64")?;
        if gi.shape != [k] {
            return Err(shape_err(&gi, "g_idx", format!("[{k}]"), from));
        }
        bytes += gi_data.len();
    }
    let groups = cfg.group_size.map_or(1, |g| k.div_ceil(g));
    if sc.shape != [groups, n] {
        return Err(shape_err(&sc, "scales", format!("[{groups}, {n}]"), from));
    }
    let qzeros_cols = (n * bits) / 32;
    if !(n * bits).is_multiple_of(32) || qz.shape != [groups, qzeros_cols] {
        let expected = format!("[{groups}, {n} * {bits} / 32], whole int32 words along N");
        return Err(shape_err(&qz, "qzeros", expected, from));
    }
    Ok(Geometry {
        n,
        k,
        groups,
        qweight_cols,
        qzeros_cols,
        act,
        bytes,
    })
}

/// Unpacks one GPTQ or AWQ layer (see the module doc).
pub(crate) fn unpack(ckpt: &QuantizedCheckpoint, prefix: &str) -> Result<ImportedLayer> {
    let cfg = ckpt.config();
    let geo = geometry(ckpt, prefix)?;
    let (n, k, groups) = (geo.n, geo.k, geo.groups);
    let bits = cfg.bits;
    let mask = (1u32 << bits) - 1;
    let qweight = words(ckpt.required(prefix, "qweight")?.1);
    let qzeros = words(ckpt.required(prefix, "qzeros")?.1);
    let (_, scale_bytes) = ckpt.required(prefix, "scales")?;
    let scales = floats(scale_bytes, geo.act);

    let mut codes = vec![0u8; n * k];
    let mut zeros = vec![0u8; groups * n];
    match cfg.method {
        QuantMethod::Gptq => {
            for (row, out) in codes.chunks_exact_mut(k).enumerate() {
                for (kk, c) in out.iter_mut().enumerate() {
                    *c = stream(&qweight, geo.qweight_cols, row, kk, bits) as u8;
                }
            }
            for (g, out) in zeros.chunks_exact_mut(n).enumerate() {
                let words = &qzeros[g * geo.qzeros_cols..(g + 1) * geo.qzeros_cols];
                for (col, z) in out.iter_mut().enumerate() {
                    let stored = stream(words, 1, 0, col, bits);
                    *z = match cfg.format {
                        GptqFormat::V1 => (stored + 1) & mask,
                        GptqFormat::V2 => stored,
                    } as u8;
                }
            }
        }
        _ => {
            // AWQ
            let nibble = |words: &[u32], row: usize, col: usize| {
                let w = words[row * geo.qweight_cols + col / 8];
                ((w >> (4 * AWQ_NIBBLE_OF_COLUMN[col % 8])) & 0xF) as u8
            };
            for (row, out) in codes.chunks_exact_mut(k).enumerate() {
                for (kk, c) in out.iter_mut().enumerate() {
                    *c = nibble(&qweight, kk, row);
                }
            }
            for (g, out) in zeros.chunks_exact_mut(n).enumerate() {
                for (col, z) in out.iter_mut().enumerate() {
                    *z = nibble(&qzeros, g, col);
                }
            }
        }
    }

    let k_perm = act_order(ckpt, prefix, k, groups)?;
    if let Some(perm) = &k_perm {
        let mut row_buf = vec![0u8; k];
        for row in codes.chunks_exact_mut(k) {
            for (j, &src) in perm.iter().enumerate() {
                row_buf[j] = row[src];
            }
            row.copy_from_slice(&row_buf);
        }
    }

    let zeros = if cfg.sym {
        let half = 1u8 << (bits - 1);
        if let Some(i) = zeros.iter().position(|&z| z != half) {
            return Err(Error::QuantValue {
                tensor: format!("{prefix}.qzeros"),
                field: "qzeros",
                msg: format!(
                    "sym is true in {}, but the zero point of group {} column {} is {} (decoded), not {half}",
                    cfg.file,
                    i / n,
                    i % n,
                    zeros[i]
                ),
            });
        }
        // q - 2^(bits - 1) as a `bits`-wide two's-complement pattern.
        codes.iter_mut().for_each(|c| *c ^= half);
        ZeroPoints::None
    } else {
        ZeroPoints::Integer(zeros)
    };

    let parts = (codes, scales, Vec::new(), zeros);
    ImportedLayer::build(prefix, spec_text(cfg, geo.act), (n, k), parts, k_perm)
}

/// The permutation of K that makes `g_idx`'s groups contiguous, `None` when `g_idx` is absent or
/// already `k / G`.
fn act_order(
    ckpt: &QuantizedCheckpoint,
    prefix: &str,
    k: usize,
    groups: usize,
) -> Result<Option<Vec<usize>>> {
    let cfg = ckpt.config();
    let tensor = format!("{prefix}.g_idx");
    let value_err = |msg: String| Error::QuantValue {
        tensor: tensor.clone(),
        field: "g_idx",
        msg,
    };
    let Some((info, data)) = ckpt.part(prefix, "g_idx")? else {
        if cfg.desc_act {
            return Err(Error::MissingQuantTensor {
                layer: prefix.to_owned(),
                field: "g_idx",
                tensor,
            });
        }
        return Ok(None);
    };
    let g_idx: Vec<i64> = if info.dtype == Dtype::I32 {
        words(data)
            .into_iter()
            .map(|w| i64::from(w as i32))
            .collect()
    } else {
        data.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    if let Some(i) = g_idx.iter().position(|&g| g < 0 || g as usize >= groups) {
        return Err(value_err(format!(
            "g_idx[{i}] = {} is not a group (0..{groups})",
            g_idx[i]
        )));
    }
    let size = cfg.group_size.unwrap_or(k);
    let plain = |j: usize, g: i64| g as usize == j / size;
    if g_idx.iter().enumerate().all(|(j, &g)| plain(j, g)) {
        return Ok(None);
    }
    if !cfg.desc_act {
        let j = g_idx
            .iter()
            .enumerate()
            .position(|(j, &g)| !plain(j, g))
            .expect("not plain");
        return Err(value_err(format!(
            "desc_act is false in {}, but g_idx[{j}] = {} is not k / group_size = {}",
            cfg.file,
            g_idx[j],
            j / size
        )));
    }
    let mut perm: Vec<usize> = (0..k).collect();
    perm.sort_by_key(|&j| g_idx[j]);
    if let Some(j) = perm
        .iter()
        .enumerate()
        .position(|(j, &src)| !plain(j, g_idx[src]))
    {
        let g = g_idx[perm[j]];
        let count = g_idx.iter().filter(|&&x| x == g).count();
        return Err(value_err(format!(
            "group {g} has {count} columns; group_size {size} needs {size} per group (fewer only in the last)"
        )));
    }
    Ok(Some(perm))
}

/// Code `idx` of the bit stream of `bits`-wide codes in `words[(r) * stride + col]`, r = 0, 1, ...
pub(crate) fn stream(words: &[u32], stride: usize, col: usize, idx: usize, bits: u32) -> u32 {
    let pos = idx * bits as usize;
    let (r, s) = (pos / 32, (pos % 32) as u32);
    let mut v = words[r * stride + col] >> s;
    if s + bits > 32 {
        v |= words[(r + 1) * stride + col] << (32 - s);
    }
    v & ((1u32 << bits) - 1)
}

pub(crate) fn words(data: &[u8]) -> Vec<u32> {
    data.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

pub(crate) fn floats(data: &[u8], dtype: DType) -> Vec<f32> {
    data.chunks_exact(2)
        .map(|c| {
            let bits = u16::from_le_bytes([c[0], c[1]]);
            if dtype == DType::F16 {
                half::f16::from_bits(bits).to_f32()
            } else {
                half::bf16::from_bits(bits).to_f32()
            }
        })
        .collect()
}

pub(crate) fn check_dtype(
    info: &SafetensorsInfo,
    field: &'static str,
    allowed: &[Dtype],
    expected: &'static str,
) -> Result<()> {
    if allowed.contains(&info.dtype) {
        return Ok(());
    }
    Err(Error::QuantDtype {
        tensor: info.name.clone(),
        field,
        found: format!("{:?}", info.dtype),
        expected,
    })
}

pub(crate) fn matrix(info: &SafetensorsInfo, field: &'static str) -> Result<[usize; 2]> {
    match info.shape[..] {
        [r, c] => Ok([r, c]),
        _ => Err(shape_err(
            info,
            field,
            "a matrix".into(),
            "packed codes".into(),
        )),
    }
}

pub(crate) fn shape_err(
    info: &SafetensorsInfo,
    field: &'static str,
    expected: String,
    why: String,
) -> Error {
    Error::QuantShape {
        tensor: info.name.clone(),
        field,
        found: info.shape.clone(),
        expected,
        why,
    }
}
