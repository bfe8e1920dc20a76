//! The benchmark's results: `bench.json`'s schema, its terminal table and its charts (the merge with
//! humming-kernels is `bench_merge`). The field names are a contract with `scripts/bench-h200.sh`.

use super::plot::{CUBLAS, FLOOR, OURS, Series, plot};
use super::table::{Col, Table, opt};
use super::timing::{Res, Trials};
use cudarc::driver::{CudaContext, sys};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------------
// bench.json

/// Per-launch times of one case, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stats {
    pub median_us: f64,
    pub p25_us: f64,
    pub p75_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// (max − min) / median, in percent.
    pub spread_pct: f64,
    /// Launches per timed graph replay (or per timed batch of back-to-back launches).
    pub launches_per_trial: usize,
    /// Weight copies rotated through.
    pub copies: usize,
    /// "graph" (CUDA-graph replay) or "events" (back-to-back launches between two events).
    pub method: String,
    pub trials_us: Vec<f64>,
}

impl Stats {
    /// The statistics of [`super::timing::replay`]'s trials, with `copies` copies rotated through.
    pub fn new(trials: Trials, copies: usize) -> Stats {
        let (launches, method, mut ts) = (trials.launches, trials.method, trials.us);
        ts.sort_by(f64::total_cmp);
        let at = |q: usize| ts[(q * ts.len() / 4).min(ts.len() - 1)];
        let median = ts[ts.len() / 2];
        let (min, max) = (ts[0], ts[ts.len() - 1]);
        Stats {
            median_us: median,
            p25_us: at(1),
            p75_us: at(3),
            min_us: min,
            max_us: max,
            spread_pct: (max - min) / median * 100.0,
            launches_per_trial: launches,
            copies,
            method: method.to_string(),
            trials_us: ts,
        }
    }
}

/// One (kernel, shape, M) case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub kernel: String,
    pub descriptor: String,
    /// Activation dtype, "f16" or "bf16".
    pub a: String,
    pub bits: u32,
    pub group: u32,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub tile: String,
    /// K splits of the runtime's split rule for this launch (`LaunchPlan::splits` of `Gemm::plan`;
    /// a stream-K launch, see `stream_k_ctas`, ignores it).
    pub splits: usize,
    /// CTAs of a stream-K launch (`LaunchOptions::stream_k`), absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_k_ctas: Option<usize>,
    /// "fatbin" (NVCC at build time) or "nvrtc".
    pub module: String,
    /// Packed weights, scales and zero points of one copy.
    pub weight_bytes: usize,
    pub a_bytes: usize,
    pub c_bytes: usize,
    pub floor_us: f64,
    pub ours: Stats,
    /// Ours with programmatic dependent launch off (None where it is not available: before compute
    /// capability 9.0). `ours` has it on, where available.
    #[serde(default)]
    pub ours_no_pdl: Option<Stats>,
    /// Whether the opt-in `Reduction::AtomicF16` adds this launch's K splits into C with f16 atomics
    /// (`ours`, the default, sums them in split order in f32).
    #[serde(default)]
    pub atomic_f16: bool,
    /// Where `atomic_f16`: that launch's times and relative error on `checked_rows` (None elsewhere).
    #[serde(default)]
    pub ours_atomic_f16: Option<Stats>,
    #[serde(default)]
    pub rel_err_atomic_f16: Option<f64>,
    /// 8-bit activations: the launches on activations quantized beforehand (`run_quantized`), and
    /// the input quantization alone; `ours` includes it.
    #[serde(default)]
    pub ours_prequantized: Option<Stats>,
    #[serde(default)]
    pub quantize: Option<Stats>,
    pub cublas: Option<Stats>,
    /// 8-bit activations: cuBLASLt FP8 (e4m3 x e4m3, tensor scales, f16 C) on the same shape.
    #[serde(default)]
    pub cublaslt_fp8: Option<Stats>,
    /// cuBLAS time / our time.
    pub speedup_vs_cublas: Option<f64>,
    /// 100 · floor / our time.
    pub floor_pct: f64,
    /// Relative Frobenius error against the f64 reference on `checked_rows` (None: NaN or ∞).
    pub rel_err: Option<f64>,
    pub checked_rows: Vec<usize>,
    pub tolerance: f64,
    pub ok: bool,
    /// Relative error of our C against cuBLAS on the unquantized weights (quantization error).
    pub rel_err_vs_cublas: Option<f64>,
}

/// The GPU of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub capability: String,
    pub sms: usize,
    pub l2_bytes: usize,
    pub memory_bytes: usize,
}

impl DeviceInfo {
    /// The device of `ctx`.
    pub fn of(ctx: &CudaContext) -> Res<DeviceInfo> {
        let (major, minor) = ctx.compute_capability()?;
        let attr = |a| ctx.attribute(a).map(|v| v.max(0) as usize);
        Ok(DeviceInfo {
            name: ctx.name()?,
            capability: format!("{major}.{minor}"),
            sms: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            l2_bytes: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
            memory_bytes: ctx.total_mem()?,
        })
    }
}

/// `bench.json`: the run's settings, the device and every case.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub tool: String,
    pub device: DeviceInfo,
    /// Device-to-device copy bandwidth, bytes read + written per second, in TB/s.
    pub copy_bw_tbs: f64,
    pub copy_bytes: usize,
    pub trials: usize,
    pub min_launches: usize,
    pub rotate_mib: usize,
    pub max_copies: usize,
    pub notes: Vec<String>,
    pub rows: Vec<Row>,
}

/// `Some(x)` unless x is NaN or infinite (JSON has neither).
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

// ---------------------------------------------------------------------------------------------------
// Table and charts

/// The columns of the terminal table.
pub fn table() -> Table {
    let w = [11, 13, 5, 9, 7, 9, 10, 8, 9, 8, 9, 5];
    let cols: Vec<Col> = w
        .iter()
        .enumerate()
        .map(|(i, &w)| if i == 0 { Col::L(w) } else { Col::R(w) })
        .collect();
    Table::new("", &cols)
}

/// The header of the terminal table.
pub fn table_header() -> String {
    table().line(&[
        &"kernel",
        &"N x K",
        &"M",
        &"ours us",
        &"spread",
        &"no-PDL us",
        &"cuBLAS us",
        &"speedup",
        &"floor us",
        &"% floor",
        &"rel.err",
        &"check",
    ])
}

/// One case's line of the terminal table.
pub fn table_line(r: &Row) -> String {
    table().line(&[
        &r.kernel,
        &format!("{}x{}", r.n, r.k),
        &r.m,
        &format!("{:.2}", r.ours.median_us),
        &format!("{:.1}%", r.ours.spread_pct),
        &opt(r.ours_no_pdl.as_ref().map(|s| s.median_us), 2),
        &opt(r.cublas.as_ref().map(|s| s.median_us), 2),
        &r.speedup_vs_cublas
            .map_or("-".to_owned(), |s| format!("{s:.2}x")),
        &format!("{:.2}", r.floor_us),
        &format!("{:.1}%", r.floor_pct),
        &r.rel_err.map_or("NaN".to_owned(), |e| format!("{e:.1e}")),
        &if r.ok { "ok" } else { "WRONG" },
    ])
}

/// Writes `value` as pretty JSON.
pub fn write_json(path: &Path, value: &impl Serialize) -> Res<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(())
}

/// The (N, K) of the rows, in order of first appearance.
pub fn shapes_in(rows: &[&Row]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for r in rows {
        if !v.contains(&(r.n, r.k)) {
            v.push((r.n, r.k));
        }
    }
    v
}

/// Draws `bench-<kernel>.svg` in `out`: a panel per shape, ours, cuBLAS and the floor against M.
pub fn plot_kernel(out: &Path, kernel: &str, report: &Report) -> Res<PathBuf> {
    let rows: Vec<&Row> = report.rows.iter().filter(|r| r.kernel == kernel).collect();
    let mut panels = Vec::new();
    for (n, k) in shapes_in(&rows) {
        let case: Vec<&&Row> = rows.iter().filter(|r| (r.n, r.k) == (n, k)).collect();
        let pts = |f: &dyn Fn(&Row) -> Option<f64>| -> Vec<(f64, f64)> {
            case.iter()
                .filter_map(|r| f(r).map(|y| (r.m as f64, y)))
                .collect()
        };
        let mut series = vec![Series {
            label: format!("ours ({kernel})"),
            color: OURS,
            dashed: false,
            points: pts(&|r| Some(r.ours.median_us)),
        }];
        let cub = pts(&|r| r.cublas.as_ref().map(|s| s.median_us));
        if !cub.is_empty() {
            series.push(Series {
                label: format!("cuBLAS {}", case[0].a),
                color: CUBLAS,
                dashed: false,
                points: cub,
            });
        }
        series.push(Series {
            label: "DRAM floor".into(),
            color: FLOOR,
            dashed: true,
            points: pts(&|r| Some(r.floor_us)),
        });
        panels.push((format!("N x K = {n} x {k}"), series));
    }
    let path = out.join(format!("bench-{kernel}.svg"));
    let title = format!(
        "{kernel} on {} ({} TB/s copy): time per launch against M",
        report.device.name,
        (report.copy_bw_tbs * 100.0).round() / 100.0
    );
    plot(&path, &title, &panels)?;
    Ok(path)
}
