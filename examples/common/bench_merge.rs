//! The merge of the benchmark's `bench.json` with the JSON of `scripts/humming-kernels-bench.py`
//! (humming-kernels) into `merged.md`, `merged.json` and `merged.svg`. The reader of the reference
//! JSON is a contract with that script and `scripts/bench-h200.sh`.

use super::bench_report::*;
use super::plot::{CUBLAS, FLOOR, HUMMING, OURS, Series, plot};
use super::timing::Res;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

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
    /// Bytes of our weights on the GPU, what the floor counts: packed weights, the scale grid (2
    /// bytes per entry, A's dtype), zero points and the f32 channel factors.
    pub weight_bytes: usize,
    /// The matched reference row's `weight_bytes` (packed weights and scales in their stored dtypes,
    /// plus a tensor scale), where it has one.
    pub reference_weight_bytes: Option<usize>,
    /// The matched reference row's format: its `format` (our kernel name), else its `w` and `g`.
    pub reference_format: Option<String>,
}

/// The value of `key=` in a canonical descriptor (`humming.gemm.v1 a=f16 b=i4 ...`).
fn descriptor_field<'a>(descriptor: &'a str, key: &str) -> Option<&'a str> {
    descriptor
        .split_whitespace()
        .find_map(|t| t.strip_prefix(key)?.strip_prefix('='))
}

/// The weight format of a canonical descriptor, shortly: `b=e2m1 scale=group16:e4m3 scale2=tensor:f32`
/// (the fields that are not `none`), or the whole descriptor where it has none of them.
pub fn short_descriptor(descriptor: &str) -> String {
    let parts: Vec<String> = ["b", "scale", "scale2", "zero_point"]
        .iter()
        .filter_map(|&key| {
            descriptor_field(descriptor, key)
                .filter(|v| *v != "none")
                .map(|v| format!("{key}={v}"))
        })
        .collect();
    if parts.is_empty() {
        descriptor.to_string()
    } else {
        parts.join(" ")
    }
}

/// Whether our row's weights are integer codes (`b=uN` / `b=iN`; true where the descriptor does
/// not say, as in older JSONs, all of which were integer kernels).
fn integer_weights(r: &Row) -> bool {
    descriptor_field(&r.descriptor, "b").is_none_or(|b| b.starts_with(['u', 'i']))
}

/// humming-kernels' format of a reference row, as people read it: `float4e2m1 g16 float8e4m3 scales
/// + f32 tensor scale`, `uint4 g128`.
fn reference_label(p: &serde_json::Value) -> String {
    let mut s = p["w"].as_str().unwrap_or("?").to_string();
    match p["g"].as_u64() {
        Some(0) => s.push_str(" channel"),
        Some(g) => s.push_str(&format!(" g{g}")),
        None => {}
    }
    if let Some(d) = p["scale_dtype"].as_str() {
        s.push_str(&format!(" {d} scales"));
    }
    if p["tensor_scale"].as_bool() == Some(true) {
        s.push_str(" + f32 tensor scale");
    }
    s
}

/// The reference row matching our row `r`: the row whose `format` is our kernel's name, with the
/// same N, K and M. Only where no reference row carries that name (older JSONs have no `format`; no
/// reference format is called `w4a16-u4`) and our weights are integer codes: the row with the same
/// N, K, M, group `g` and the bits in `w` (the digits after its letters, so `uint4` but no float
/// dtype such as `float4e2m1`): e.g. `w4a16-u4` matches the `uint4` g128 row.
pub fn find_reference<'a>(
    py_rows: &'a [serde_json::Value],
    r: &Row,
) -> Option<&'a serde_json::Value> {
    let num = |v: &serde_json::Value, key: &str| v[key].as_f64();
    let same_case = |p: &serde_json::Value| {
        num(p, "n") == Some(r.n as f64)
            && num(p, "k") == Some(r.k as f64)
            && num(p, "m") == Some(r.m as f64)
    };
    let named = |p: &serde_json::Value| p["format"].as_str() == Some(r.kernel.as_str());
    if py_rows.iter().any(named) {
        return py_rows.iter().find(|p| named(p) && same_case(p));
    }
    if !integer_weights(r) {
        return None;
    }
    py_rows.iter().find(|p| {
        let bits: Option<u32> = p["w"].as_str().and_then(|w| {
            w.trim_start_matches(|c: char| c.is_alphabetic())
                .parse()
                .ok()
        });
        same_case(p) && num(p, "g") == Some(f64::from(r.group)) && bits == Some(r.bits)
    })
}

/// Writes a merged table into `out`: `<stem>.md`, and `<stem>.json` with both runs' copy bandwidth
/// (ours, the reference's), the device and the rows. Returns the markdown file's path.
pub fn write_merged<R: serde::Serialize>(
    out: &Path,
    stem: &str,
    md: &str,
    (ours_bw, py_bw): (f64, Option<f64>),
    device: &DeviceInfo,
    rows: &[R],
) -> Res<std::path::PathBuf> {
    std::fs::create_dir_all(out)?;
    let md_path = out.join(format!("{stem}.md"));
    std::fs::write(&md_path, md)?;
    write_json(
        &out.join(format!("{stem}.json")),
        &serde_json::json!({
            "ours_copy_bw_tbs": ours_bw,
            "reference_copy_bw_tbs": py_bw,
            "device": device,
            "rows": rows,
        }),
    )?;
    Ok(md_path)
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
    // humming-kernels runs fp16 activations only.
    let ours: Vec<&Row> = report.rows.iter().filter(|r| r.a == "f16").collect();
    let matched: Vec<Option<&serde_json::Value>> =
        ours.iter().map(|r| find_reference(py_rows, r)).collect();
    let merged: Vec<MergedRow> = ours
        .iter()
        .zip(&matched)
        .map(|(r, p)| {
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
                weight_bytes: r.weight_bytes,
                reference_weight_bytes: p
                    .and_then(|p| p["weight_bytes"].as_u64())
                    .map(|b| b as usize),
                reference_format: p.map(|p| match p["format"].as_str() {
                    Some(f) => f.to_string(),
                    None => reference_label(p),
                }),
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
    // Per kernel: our descriptor and the first matched reference row (what it was compared with).
    let about = |kname: &str| {
        let i = ours.iter().position(|r| r.kernel == kname);
        let desc = i.map_or(String::new(), |i| short_descriptor(&ours[i].descriptor));
        let reference = ours
            .iter()
            .zip(&matched)
            .find_map(|(r, p)| p.filter(|_| r.kernel == kname))
            .map(reference_label);
        (desc, reference)
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
         the L2 cache, in microseconds. floor = (the bytes our kernel reads once: packed weights, the \
         scale grid (2 bytes per entry, in A's dtype, as uploaded), zero points and f32 channel \
         factors; plus A and C) / our copy bandwidth; the reference's own weight bytes (packed weights \
         and scales in their stored dtypes) are in the last table. cuBLAS is ours (cudarc, \
         cublasGemmEx fp16 on the unquantized weights); \"cuBLAS (torch)\" is the reference run's \
         torch.matmul. \"ours\" launches as the runtime does by default: with programmatic dependent launch \
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
    if !kernels.is_empty() {
        writeln!(
            md,
            "Kernels (ours, f16 activations; humming-kernels' format compared with):\n"
        )?;
        for kname in &kernels {
            let (desc, reference) = about(kname);
            writeln!(
                md,
                "- `{kname}`: `{desc}`; humming-kernels: {}",
                reference.unwrap_or_else(|| "none".into())
            )?;
        }
        if kernels.contains(&"w4a16") {
            writeln!(
                md,
                "\nOur `w4a16` is `b: i4` (symmetric), the same format as humming-kernels' \"uint4\" (q - 8)."
            )?;
        }
        writeln!(md)?;
    }
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
        let of = || merged.iter().filter(|r| r.kernel == *kname);
        let ratios: Vec<f64> = of().filter_map(|r| r.ours_over_humming).collect();
        if let Some((geo, wins)) = geomean_and_wins(&ratios) {
            writeln!(
                md,
                "\n{kname}: geometric mean of ours / humming-kernels = {geo:.3} over {} cases; ours faster in {wins}.",
                ratios.len()
            )?;
            let plain: Vec<f64> = of()
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
        let vs_cublas: Vec<f64> = of()
            .filter_map(|r| Some(r.ours_us / r.cublas_us?))
            .collect();
        if let Some((geo, wins)) = geomean_and_wins(&vs_cublas) {
            writeln!(
                md,
                "{}{kname}: geometric mean of ours / cuBLAS = {geo:.3} over {} cases; ours faster in {wins}.",
                if ratios.is_empty() { "\n" } else { "" },
                vs_cublas.len()
            )?;
        }
    }
    let unmatched: Vec<&MergedRow> = merged.iter().filter(|r| r.humming_us.is_none()).collect();
    if !unmatched.is_empty() {
        let mut which: Vec<&str> = Vec::new();
        for r in &unmatched {
            if !which.contains(&r.kernel.as_str()) {
                which.push(&r.kernel);
            }
        }
        writeln!(
            md,
            "\n{} of our cases have no humming-kernels row (format, shape or M not in the reference run): {}.",
            unmatched.len(),
            which
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    // Bytes of the weights, ours (what the floor counts) and the reference's, per kernel and shape.
    let mut bytes: Vec<(&str, usize, usize, usize, Option<usize>)> = Vec::new();
    for r in &merged {
        let key = (r.kernel.as_str(), r.n, r.k);
        match bytes.iter_mut().find(|b| (b.0, b.1, b.2) == key) {
            Some(b) => b.4 = b.4.or(r.reference_weight_bytes),
            None => bytes.push((
                key.0,
                key.1,
                key.2,
                r.weight_bytes,
                r.reference_weight_bytes,
            )),
        }
    }
    if !bytes.is_empty() {
        writeln!(
            md,
            "\nWeight bytes per launch (MB = 10^6 bytes): ours as uploaded (packed weights, scale grid in \
             A's dtype, zero points, f32 channel factors), humming-kernels' `weight_bytes` (packed \
             weights and scales in their stored dtypes).\n"
        )?;
        writeln!(
            md,
            "| kernel | N x K | ours (MB) | humming-kernels (MB) | ours / humming-kernels |"
        )?;
        writeln!(md, "|---|---|---:|---:|---:|")?;
        for &(kname, n, k, ours_b, ref_b) in &bytes {
            writeln!(
                md,
                "| {kname} | {n} x {k} | {:.2} | {} | {} |",
                ours_b as f64 / 1e6,
                f(ref_b.map(|b| b as f64 / 1e6), 2),
                f(ref_b.map(|b| ours_b as f64 / b as f64), 3),
            )?;
        }
    }
    if merged.is_empty() {
        writeln!(
            md,
            "\nNo f16 kernel in our results: humming-kernels runs fp16 only."
        )?;
    }
    let md_path = write_merged(
        out,
        "merged",
        &md,
        (report.copy_bw_tbs, py_bw),
        &report.device,
        &merged,
    )?;
    if with_plot && !merged.is_empty() {
        // One panel per kernel and shape: ours, humming-kernels, cuBLAS and the floor against M.
        let mut panels = Vec::new();
        for kname in &kernels {
            let rows: Vec<&Row> = ours
                .iter()
                .copied()
                .filter(|r| r.kernel == *kname)
                .collect();
            for (n, k) in shapes_in(&rows) {
                let case: Vec<&MergedRow> = merged
                    .iter()
                    .filter(|r| r.kernel == *kname && (r.n, r.k) == (n, k))
                    .collect();
                let pts = |f: &dyn Fn(&MergedRow) -> Option<f64>| -> Vec<(f64, f64)> {
                    case.iter()
                        .filter_map(|r| f(r).map(|y| (r.m as f64, y)))
                        .collect()
                };
                let mut series = Vec::new();
                for (label, color, dashed, points) in [
                    (
                        format!("ours ({kname})"),
                        OURS,
                        false,
                        pts(&|r| Some(r.ours_us)),
                    ),
                    (
                        "humming-kernels".into(),
                        HUMMING,
                        false,
                        pts(&|r| r.humming_us),
                    ),
                    ("cuBLAS fp16".into(), CUBLAS, false, pts(&|r| r.cublas_us)),
                    ("DRAM floor".into(), FLOOR, true, pts(&|r| Some(r.floor_us))),
                ] {
                    if !points.is_empty() {
                        series.push(Series {
                            label,
                            color,
                            dashed,
                            points,
                        });
                    }
                }
                let name = if multi {
                    format!("{kname}, N x K = {n} x {k}")
                } else {
                    format!("N x K = {n} x {k}")
                };
                panels.push((name, series));
            }
        }
        let path = out.join("merged.svg");
        let title = if multi {
            format!(
                "ours vs humming-kernels vs cuBLAS on {}",
                report.device.name
            )
        } else {
            format!(
                "{} on {}: ours vs humming-kernels vs cuBLAS",
                kernels[0], report.device.name
            )
        };
        plot(&path, &title, &panels)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stats(us: f64) -> Stats {
        Stats {
            median_us: us,
            p25_us: us,
            p75_us: us,
            min_us: us,
            max_us: us,
            spread_pct: 0.0,
            launches_per_trial: 20,
            copies: 2,
            method: "graph".into(),
            trials_us: vec![us],
        }
    }

    fn row(kernel: &str, b: &str, scale: &str, bits: u32, group: u32, m: usize) -> Row {
        Row {
            kernel: kernel.into(),
            descriptor: format!(
                "humming.gemm.v1 a=f16 b={b} c=f16 scale={scale} scale2=none zero_point=none bias=false"
            ),
            a: "f16".into(),
            bits,
            group,
            n: 8192,
            k: 8192,
            m,
            tile: "t".into(),
            splits: 1,
            stream_k_ctas: None,
            module: "fatbin".into(),
            weight_bytes: 1_000_000,
            a_bytes: 0,
            c_bytes: 0,
            floor_us: 5.0,
            ours: stats(10.0),
            ours_no_pdl: None,
            atomic_f16: false,
            ours_atomic_f16: None,
            rel_err_atomic_f16: None,
            ours_prequantized: None,
            quantize: None,
            cublas: Some(stats(20.0)),
            cublaslt_fp8: None,
            speedup_vs_cublas: Some(2.0),
            floor_pct: 50.0,
            rel_err: Some(1e-4),
            checked_rows: vec![0],
            tolerance: 1e-2,
            ok: true,
            rel_err_vs_cublas: None,
        }
    }

    fn py(
        format: Option<&str>,
        w: &str,
        g: u32,
        bits: u32,
        m: usize,
        us: f64,
    ) -> serde_json::Value {
        let mut v = json!({"w": w, "g": g, "bits": bits, "a": "float16", "n": 8192, "k": 8192,
            "m": m, "humming_us": us, "cublas_us": 30.0, "weight_bytes": 900_000});
        if let Some(f) = format {
            v["format"] = json!(f);
        }
        v
    }

    #[test]
    fn rows_match_by_format_name_first() {
        let rows = vec![
            py(Some("w4a16"), "uint4", 128, 4, 1, 11.0),
            py(Some("mxfp4"), "float4e2m1", 32, 4, 1, 12.0),
            py(Some("mxfp4"), "float4e2m1", 32, 4, 16, 13.0),
            py(None, "uint4", 32, 4, 1, 14.0),
        ];
        let at = |r: &Row| find_reference(&rows, r).and_then(|p| p["humming_us"].as_f64());
        // By name, and the same M.
        assert_eq!(
            at(&row("mxfp4", "e2m1", "group32:ue8m0", 4, 32, 1)),
            Some(12.0)
        );
        assert_eq!(
            at(&row("mxfp4", "e2m1", "group32:ue8m0", 4, 32, 16)),
            Some(13.0)
        );
        // Named in the reference, but not at this M: no fallback to the uint4:32 row.
        assert_eq!(at(&row("mxfp4", "e2m1", "group32:ue8m0", 4, 32, 64)), None);
        assert_eq!(
            at(&row("w4a16", "i4", "group128:f16", 4, 128, 1)),
            Some(11.0)
        );
        // No reference row is called w4a16-u4: the w/g/bits rule finds the uint4 g128 row.
        assert_eq!(
            at(&row("w4a16-u4", "u4", "group128:f16", 4, 128, 1)),
            Some(11.0)
        );
        // A float kernel that the reference did not run never falls back to an integer row.
        assert_eq!(at(&row("nvfp4", "e2m1", "group32:ue8m0", 4, 32, 1)), None);
        // Older JSONs without `format`: the w/g/bits rule.
        let old = vec![py(None, "uint4", 128, 4, 1, 15.0)];
        let r = row("w4a16", "i4", "group128:f16", 4, 128, 1);
        assert_eq!(
            find_reference(&old, &r).and_then(|p| p["humming_us"].as_f64()),
            Some(15.0)
        );
        let mut r = row("w4a16", "i4", "group128:f16", 4, 128, 1);
        r.descriptor = String::new();
        assert!(find_reference(&old, &r).is_some());
    }

    #[test]
    fn merge_writes_every_kernel() {
        let dir = std::env::temp_dir().join(format!("bench-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut report = Report {
            copy_bw_tbs: 4.2,
            ..Default::default()
        };
        for m in [1, 16] {
            report
                .rows
                .push(row("w4a16", "i4", "group128:f16", 4, 128, m));
            report
                .rows
                .push(row("mxfp4", "e2m1", "group32:ue8m0", 4, 32, m));
            report.rows.push(row("q4_k", "u4", "group32:u6", 4, 32, m));
        }
        let reference = json!({"copy_bw_tbs": 4.1, "rows": [
            py(Some("w4a16"), "uint4", 128, 4, 1, 20.0),
            py(Some("w4a16"), "uint4", 128, 4, 16, 20.0),
            py(Some("mxfp4"), "float4e2m1", 32, 4, 1, 5.0),
            py(Some("mxfp4"), "float4e2m1", 32, 4, 16, 5.0),
        ]});
        let ref_path = dir.join("humming_py_bench.json");
        write_json(&ref_path, &reference).unwrap();
        merge(&report, &ref_path, &dir, true).unwrap();
        let md = std::fs::read_to_string(dir.join("merged.md")).unwrap();
        assert!(md.contains("| w4a16 | 8192 x 8192 | 1 |"), "{md}");
        assert!(
            md.contains("| mxfp4 | 8192 x 8192 | 16 | 5.0 | 10.0 | - | = | 20.0 | 5.0 | 2.00 |"),
            "{md}"
        );
        assert!(
            md.contains("w4a16: geometric mean of ours / humming-kernels = 0.500 over 2 cases")
        );
        assert!(
            md.contains("mxfp4: geometric mean of ours / humming-kernels = 2.000 over 2 cases")
        );
        assert!(md.contains("q4_k: geometric mean of ours / cuBLAS = 0.500"));
        assert!(
            md.contains("2 of our cases have no humming-kernels row"),
            "{md}"
        );
        assert!(
            md.contains("| mxfp4 | 8192 x 8192 | 1.00 | 0.90 | 1.111 |"),
            "{md}"
        );
        assert!(md.contains("| q4_k | 8192 x 8192 | 1.00 | - | - |"), "{md}");
        let merged: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("merged.json")).unwrap())
                .unwrap();
        let rows = merged["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 6);
        assert_eq!(rows[1]["reference_weight_bytes"], json!(900_000));
        assert_eq!(rows[1]["reference_format"], json!("mxfp4"));
        let svg = std::fs::read_to_string(dir.join("merged.svg")).unwrap();
        for name in ["w4a16, N x K", "mxfp4, N x K", "q4_k, N x K"] {
            assert!(svg.contains(name), "{name} not in merged.svg");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
