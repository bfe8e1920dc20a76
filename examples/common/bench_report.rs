//! The benchmark's results: `bench.json`'s schema, its terminal table, its charts, and the merge
//! with the JSON of `scripts/humming-kernels-bench.py` (humming-kernels) into `merged.md`,
//! `merged.json` and `merged.svg`. The field names and the reader of the reference JSON are a
//! contract with that script and `scripts/bench-h200.sh`.

use super::plot::{CUBLAS, FLOOR, HUMMING, OURS, OURS2, Series, plot};
use super::table::{Col, Table, opt};
use super::timing::{Res, Trials};
use cudarc::driver::{CudaContext, sys};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
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
    pub cublas: Option<Stats>,
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
fn table() -> Table {
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

// ---------------------------------------------------------------------------------------------------
// Merge with humming-kernels

/// One row of `merged.json`: one of our f16 cases and the matching humming-kernels row, if any.
#[derive(Clone, Debug, Serialize)]
pub struct MergedRow {
    pub kernel: String,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub floor_us: f64,
    pub ours_us: f64,
    /// Ours with programmatic dependent launch off.
    pub ours_no_pdl_us: Option<f64>,
    /// The opt-in `Reduction::AtomicF16`, where it changes the launch.
    #[serde(default)]
    pub ours_atomic_f16_us: Option<f64>,
    pub cublas_us: Option<f64>,
    pub humming_us: Option<f64>,
    pub torch_cublas_us: Option<f64>,
    pub ours_over_humming: Option<f64>,
    pub ours_over_floor: f64,
    pub ok: bool,
}

/// Merges `report` with the reference JSON at `reference` into `merged.md`, `merged.json` and
/// (with `with_plot`) `merged.svg` in `out`, and prints the markdown.
pub fn merge(report: &Report, reference: &Path, out: &Path, with_plot: bool) -> Res<()> {
    let text = std::fs::read_to_string(reference)
        .map_err(|e| format!("reading {}: {e}", reference.display()))?;
    let py: serde_json::Value = serde_json::from_str(&text)?;
    let py_bw = py["copy_bw_tbs"].as_f64();
    let py_rows = py["rows"]
        .as_array()
        .ok_or("the reference JSON has no `rows` array")?;
    let num = |v: &serde_json::Value, key: &str| v[key].as_f64();
    let find = |r: &Row| {
        py_rows.iter().find(|p| {
            let bits: Option<u32> = p["w"].as_str().and_then(|w| {
                w.trim_start_matches(|c: char| c.is_alphabetic())
                    .parse()
                    .ok()
            });
            num(p, "n") == Some(r.n as f64)
                && num(p, "k") == Some(r.k as f64)
                && num(p, "m") == Some(r.m as f64)
                && num(p, "g") == Some(f64::from(r.group))
                && bits == Some(r.bits)
        })
    };
    // humming-kernels runs fp16 activations only.
    let merged: Vec<MergedRow> = report
        .rows
        .iter()
        .filter(|r| r.a == "f16")
        .map(|r| {
            let p = find(r);
            let humming_us = p.and_then(|p| num(p, "humming_us"));
            MergedRow {
                kernel: r.kernel.clone(),
                n: r.n,
                k: r.k,
                m: r.m,
                floor_us: r.floor_us,
                ours_us: r.ours.median_us,
                ours_no_pdl_us: r.ours_no_pdl.as_ref().map(|s| s.median_us),
                ours_atomic_f16_us: r.ours_atomic_f16.as_ref().map(|s| s.median_us),
                cublas_us: r.cublas.as_ref().map(|s| s.median_us),
                humming_us,
                torch_cublas_us: p.and_then(|p| num(p, "cublas_us")),
                ours_over_humming: humming_us.map(|h| r.ours.median_us / h),
                ours_over_floor: r.ours.median_us / r.floor_us,
                ok: r.ok,
            }
        })
        .collect();
    let kernels: Vec<&str> = {
        let mut v: Vec<&str> = Vec::new();
        for r in &merged {
            if !v.contains(&r.kernel.as_str()) {
                v.push(&r.kernel);
            }
        }
        v
    };

    let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |v| format!("{v:.p$}"));
    let mut md = String::new();
    writeln!(
        md,
        "# humming (Rust, gemm!) vs humming-kernels (Python) vs cuBLAS\n"
    )?;
    writeln!(
        md,
        "Device: {} (sm {}). Copy bandwidth (bytes read + written): {:.2} TB/s in our run, {} TB/s in the \
         reference's. Times are the median per launch by CUDA-graph replay with weights rotated past \
         the L2 cache, in microseconds. floor = (packed weights + scales + A + C bytes) / our copy \
         bandwidth. cuBLAS is ours (cudarc, cublasGemmEx fp16); \"cuBLAS (torch)\" is the reference \
         run's torch.matmul. Our W4A16 is `b: i4` (symmetric), the same format as humming-kernels' \
         \"uint4\" (q - 8). \"ours\" launches as the runtime does by default: with programmatic dependent launch \
         (PDL) on compute capability 9.0+ for tiles of which at most two CTAs fit per SM (a kernel \
         streams its first weights while the one before it ends), K splits summed in split order in \
         f32; \"ours, no PDL\" is the same kernel launched like cuBLAS and humming-kernels are, each \
         launch starting after the previous one has ended; \"ours, f16 atomics\" the opt-in \
         `Reduction::AtomicF16` (the K splits of the staged wgmma tiles, M > 16, and of the 8-row tile, \
         M <= 8, where its launch has more CTAs than SMs, added into C with f16 atomics; \"=\" where that \
         is the same launch).\n",
        report.device.name,
        report.device.capability,
        report.copy_bw_tbs,
        f(py_bw, 2)
    )?;
    let multi = kernels.len() > 1;
    writeln!(
        md,
        "| {}N x K | M | floor | ours | ours, no PDL | ours, f16 atomics | cuBLAS | humming-kernels | ours / humming | ours / floor | cuBLAS (torch) |",
        if multi { "kernel | " } else { "" }
    )?;
    writeln!(
        md,
        "|{}---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        if multi { "---|" } else { "" }
    )?;
    for r in &merged {
        writeln!(
            md,
            "| {}{} x {} | {} | {:.1} | {:.1}{} | {} | {} | {} | {} | {} | {:.2} | {} |",
            if multi {
                format!("{} | ", r.kernel)
            } else {
                String::new()
            },
            r.n,
            r.k,
            r.m,
            r.floor_us,
            r.ours_us,
            if r.ok { "" } else { " (WRONG)" },
            f(r.ours_no_pdl_us, 1),
            r.ours_atomic_f16_us
                .map_or("=".to_string(), |v| format!("{v:.1}")),
            f(r.cublas_us, 1),
            f(r.humming_us, 1),
            f(r.ours_over_humming, 2),
            r.ours_over_floor,
            f(r.torch_cublas_us, 1),
        )?;
    }
    for kname in &kernels {
        let ratios: Vec<f64> = merged
            .iter()
            .filter(|r| r.kernel == *kname)
            .filter_map(|r| r.ours_over_humming)
            .collect();
        if let Some((geo, wins)) = geomean_and_wins(&ratios) {
            writeln!(
                md,
                "\n{kname}: geometric mean of ours / humming-kernels = {geo:.3} over {} cases; ours faster in {wins}.",
                ratios.len()
            )?;
            let plain: Vec<f64> = merged
                .iter()
                .filter(|r| r.kernel == *kname)
                .filter_map(|r| Some(r.ours_no_pdl_us? / r.humming_us?))
                .collect();
            if let Some((geo, wins)) = geomean_and_wins(&plain) {
                writeln!(
                    md,
                    "{kname}, without PDL: geometric mean of ours / humming-kernels = {geo:.3} over {} cases; ours faster in {wins}.",
                    plain.len()
                )?;
            }
        }
    }
    let unmatched = merged.iter().filter(|r| r.humming_us.is_none()).count();
    if unmatched > 0 {
        writeln!(
            md,
            "\n{unmatched} of our cases have no humming-kernels row (shape, M, bits or group not in the reference run)."
        )?;
    }
    if merged.is_empty() {
        writeln!(
            md,
            "\nNo f16 kernel in our results: humming-kernels runs fp16 only."
        )?;
    }
    std::fs::create_dir_all(out)?;
    let md_path = out.join("merged.md");
    std::fs::write(&md_path, &md)?;
    write_json(
        &out.join("merged.json"),
        &serde_json::json!({
            "ours_copy_bw_tbs": report.copy_bw_tbs,
            "reference_copy_bw_tbs": py_bw,
            "device": report.device,
            "rows": merged,
        }),
    )?;
    if with_plot && !merged.is_empty() {
        let mut panels = Vec::new();
        let refs: Vec<&Row> = report.rows.iter().filter(|r| r.a == "f16").collect();
        for (n, k) in shapes_in(&refs) {
            let case: Vec<&MergedRow> = merged.iter().filter(|r| (r.n, r.k) == (n, k)).collect();
            let main = kernels[0];
            let pts = |kern: &str, f: &dyn Fn(&MergedRow) -> Option<f64>| -> Vec<(f64, f64)> {
                case.iter()
                    .filter(|r| r.kernel == kern)
                    .filter_map(|r| f(r).map(|y| (r.m as f64, y)))
                    .collect()
            };
            let mut series = Vec::new();
            for (i, kname) in kernels.iter().enumerate() {
                series.push(Series {
                    label: format!("ours ({kname})"),
                    color: if i == 0 { OURS } else { OURS2 },
                    dashed: false,
                    points: pts(kname, &|r| Some(r.ours_us)),
                });
            }
            for (label, color, points) in [
                ("humming-kernels", HUMMING, pts(main, &|r| r.humming_us)),
                ("cuBLAS fp16", CUBLAS, pts(main, &|r| r.cublas_us)),
            ] {
                if !points.is_empty() {
                    series.push(Series {
                        label: label.into(),
                        color,
                        dashed: false,
                        points,
                    });
                }
            }
            series.push(Series {
                label: "DRAM floor".into(),
                color: FLOOR,
                dashed: true,
                points: pts(main, &|r| Some(r.floor_us)),
            });
            panels.push((format!("N x K = {n} x {k}"), series));
        }
        let path = out.join("merged.svg");
        plot(
            &path,
            &format!(
                "W4A16 on {}: ours vs humming-kernels vs cuBLAS",
                report.device.name
            ),
            &panels,
        )?;
        println!("wrote {}", path.display());
    }
    println!("\n{md}");
    println!("wrote {}", md_path.display());
    Ok(())
}

/// Geometric mean of time ratios (ours / reference) and how many are below 1 (ours faster); `None`
/// for no ratios.
pub fn geomean_and_wins(ratios: &[f64]) -> Option<(f64, usize)> {
    if ratios.is_empty() {
        return None;
    }
    let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    Some((geo, ratios.iter().filter(|&&r| r < 1.0).count()))
}
