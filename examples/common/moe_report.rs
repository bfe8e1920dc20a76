//! The MoE benchmark's results (`examples/bench_moe.rs`): `bench_moe.json`'s schema, its terminal
//! table, and the merge with `scripts/humming-kernels-moe-bench.py`'s `humming_moe_bench.json` into
//! `merged_moe.md` and `merged_moe.json`. The field names are a contract with those scripts and
//! `scripts/bench-h200.sh --moe`.

use super::bench_merge::{geomean_and_wins, write_merged};
use super::bench_report::{DeviceInfo, Stats};
use super::table::{Col, Table, opt};
use super::timing::Res;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// One (model, projection, M) case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MoeRow {
    /// `qwen3_30b_a3b` or `deepseek_v3` (humming-kernels' names).
    pub model: String,
    /// `gate_up` (A has M rows, each read by its token's `top_k` slots) or `down` (A has M * top_k
    /// rows, one per slot: the launch's top_k is 1).
    pub proj: String,
    #[serde(rename = "E")]
    pub experts: usize,
    pub top_k: usize,
    /// The top_k the launch was given: `top_k` for gate_up, 1 for down.
    pub kernel_top_k: usize,
    pub n: usize,
    pub k: usize,
    /// Tokens.
    pub m: usize,
    /// Rows of A: M (gate_up) or M * top_k (down).
    pub a_rows: usize,
    /// Slots per row tile, the block M the routing was built for.
    pub block_m: usize,
    /// Median per launch: `run_indexed` alone, the routing helper (`route_into`) alone, and both.
    pub ours_us: f64,
    pub route_us: f64,
    pub total_us: f64,
    pub floor_us: f64,
    /// Distinct experts in the routings' choices, the mean over the routings.
    pub experts_touched: f64,
    /// Bytes of the touched experts' weights (`experts_touched` x `weight_bytes_per_expert`): the
    /// floor's weight part.
    pub weight_bytes: f64,
    /// `DeviceWeights::bytes() / E`: packed weights and the scale grid (A's dtype) of one expert.
    pub weight_bytes_per_expert: usize,
    pub a_bytes: usize,
    pub c_bytes: usize,
    /// Relative Frobenius error against the f64 reference on the checked slots (None: NaN or inf).
    pub err: Option<f64>,
    /// Slots of C compared with the reference (every choice of a few tokens).
    pub checked_slots: usize,
    /// Values of the whole C (every slot is routed, so every row is written) that are NaN or inf,
    /// C having been filled with NaN before the launch.
    pub nonfinite: usize,
    pub tolerance: f64,
    pub ok: bool,
    /// Copies of all E experts' weights rotated through, and routings (each with its A and C).
    pub weight_copies: usize,
    pub routings: usize,
    /// "fatbin" (NVCC at build time) or "nvrtc".
    pub module: String,
    pub ours: Stats,
    pub route: Stats,
    pub total: Stats,
}

/// `bench_moe.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MoeReport {
    pub tool: String,
    pub descriptor: String,
    /// "w4a16" or "w4a8": a reference row of a named format must name this one.
    #[serde(default)]
    pub format: String,
    pub device: DeviceInfo,
    /// Device-to-device copy bandwidth, bytes read + written per second, in TB/s.
    pub copy_bw_tbs: f64,
    pub copy_bytes: usize,
    pub trials: usize,
    pub min_launches: usize,
    pub routings: usize,
    /// Distinct random experts quantized; expert e holds a copy of distinct expert e % this.
    pub distinct_experts: usize,
    pub rotate_mib: usize,
    pub max_copies: usize,
    pub notes: Vec<String>,
    pub rows: Vec<MoeRow>,
}

fn table() -> Table {
    let w = [13, 7, 11, 5, 7, 9, 7, 9, 9, 9, 8, 9, 5];
    let cols: Vec<Col> = w
        .iter()
        .enumerate()
        .map(|(i, &w)| if i < 2 { Col::L(w) } else { Col::R(w) })
        .collect();
    Table::new("", &cols)
}

/// The header of the terminal table.
pub fn moe_table_header() -> String {
    table().line(&[
        &"model",
        &"proj",
        &"N x K",
        &"M",
        &"experts",
        &"ours us",
        &"spread",
        &"route us",
        &"total us",
        &"floor us",
        &"% floor",
        &"rel.err",
        &"check",
    ])
}

/// One case's line of the terminal table.
pub fn moe_table_line(r: &MoeRow) -> String {
    table().line(&[
        &r.model,
        &r.proj,
        &format!("{}x{}", r.n, r.k),
        &r.m,
        &format!("{:.1}", r.experts_touched),
        &format!("{:.2}", r.ours_us),
        &format!("{:.1}%", r.ours.spread_pct),
        &format!("{:.2}", r.route_us),
        &format!("{:.2}", r.total_us),
        &format!("{:.2}", r.floor_us),
        &format!("{:.1}%", 100.0 * r.floor_us / r.ours_us),
        &r.err.map_or("NaN".to_owned(), |e| format!("{e:.1e}")),
        &if r.ok { "ok" } else { "WRONG" },
    ])
}

/// One row of `merged_moe.json`: one of our cases and the matching humming-kernels row, if any.
#[derive(Clone, Debug, Serialize)]
pub struct MergedMoeRow {
    pub model: String,
    pub proj: String,
    #[serde(rename = "E")]
    pub experts: usize,
    pub top_k: usize,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub experts_touched: f64,
    pub floor_us: f64,
    pub ours_us: f64,
    pub route_us: f64,
    pub total_us: f64,
    pub humming_us: Option<f64>,
    pub ours_over_humming: Option<f64>,
    pub ours_over_floor: f64,
    pub ok: bool,
    /// The reference row's own floor, experts touched and block M (its routings are its own).
    pub reference_floor_us: Option<f64>,
    pub reference_experts_touched: Option<f64>,
    pub reference_block_m: Option<u64>,
    pub reference_ok: Option<bool>,
}

/// The reference row of the same format, model, projection, E, N, K and M (a row naming its format
/// in `fmt` or `format` must name `format`).
fn find_reference<'a>(
    py_rows: &'a [serde_json::Value],
    r: &MoeRow,
    format: &str,
) -> Option<&'a serde_json::Value> {
    let num = |p: &serde_json::Value, key: &str| p[key].as_u64().map(|v| v as usize);
    py_rows.iter().find(|p| {
        let named = p["fmt"].as_str().or(p["format"].as_str());
        named.is_none_or(|f| format.is_empty() || f.contains(format))
            && p["model"].as_str() == Some(r.model.as_str())
            && p["proj"].as_str() == Some(r.proj.as_str())
            && num(p, "E") == Some(r.experts)
            && num(p, "n") == Some(r.n)
            && num(p, "k") == Some(r.k)
            && num(p, "m") == Some(r.m)
    })
}

/// Merges `report` with the reference JSON at `reference` into `merged_moe.md` and
/// `merged_moe.json` in `out`, and prints the markdown.
pub fn merge_moe(report: &MoeReport, reference: &Path, out: &Path) -> Res<()> {
    let text = std::fs::read_to_string(reference)
        .map_err(|e| format!("reading {}: {e}", reference.display()))?;
    let py: serde_json::Value = serde_json::from_str(&text)?;
    let py_bw = py["copy_bw_tbs"].as_f64();
    let py_rows = py["rows"]
        .as_array()
        .ok_or("the reference JSON has no `rows` array")?;
    let merged: Vec<MergedMoeRow> = report
        .rows
        .iter()
        .map(|r| {
            let p = find_reference(py_rows, r, &report.format);
            let humming_us = p.and_then(|p| p["humming_us"].as_f64());
            MergedMoeRow {
                model: r.model.clone(),
                proj: r.proj.clone(),
                experts: r.experts,
                top_k: r.top_k,
                n: r.n,
                k: r.k,
                m: r.m,
                experts_touched: r.experts_touched,
                floor_us: r.floor_us,
                ours_us: r.ours_us,
                route_us: r.route_us,
                total_us: r.total_us,
                humming_us,
                ours_over_humming: humming_us.map(|h| r.ours_us / h),
                ours_over_floor: r.ours_us / r.floor_us,
                ok: r.ok,
                reference_floor_us: p.and_then(|p| p["floor_us"].as_f64()),
                reference_experts_touched: p.and_then(|p| p["experts_touched"].as_f64()),
                reference_block_m: p.and_then(|p| p["block_m"].as_u64()),
                reference_ok: p.and_then(|p| p["ok"].as_bool()),
            }
        })
        .collect();

    let f = |v: Option<f64>, p: usize| opt(v, p);
    let mut md = String::new();
    writeln!(
        md,
        "# MoE: humming (Rust, gemm!) vs humming-kernels (Python)\n"
    )?;
    writeln!(
        md,
        "Device: {} (sm {}). Kernel: `{}` (humming-kernels: uint4, group 128, fp16 scales{}, the same \
         format), `moe_indexed` (vLLM fused_moe layout). Copy bandwidth (bytes read + written): {:.2} \
         TB/s in our run, {} TB/s in the reference's. Times: median per launch by CUDA-graph replay \
         over {} uniform random routings (each token picks top_k distinct experts), in microseconds; \
         all E experts' weights in as many copies as fit in {} MiB (at least one), launched in turn. \
         \"ours\" and \"humming-kernels\" are the GEMM alone on a routing built beforehand; \"route\" \
         is our GPU routing helper alone (`route_into`: sorted slot ids and expert per block from the \
         router's choices; humming-kernels has no routing kernel, its caller builds them) and \
         \"route + GEMM\" both in one graph. floor = (bytes of the experts the routing touches + A + C) \
         / our copy bandwidth. gate_up: A has M rows, each read by its top_k slots; down: A has M x \
         top_k rows, one per slot.\n",
        report.device.name,
        report.device.capability,
        report.descriptor,
        if report.format == "w4a8" {
            ", e4m3 activations quantized per token inside the launch (both timed with it)"
        } else {
            ""
        },
        report.copy_bw_tbs,
        f(py_bw, 2),
        report.routings,
        report.rotate_mib,
    )?;
    writeln!(
        md,
        "| model | proj | E | top_k | N x K | M | experts | floor | ours | humming-kernels | ours / humming | ours / floor | route | route + GEMM |"
    )?;
    writeln!(
        md,
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for r in &merged {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} x {} | {} | {:.1} | {:.1} | {:.1}{} | {}{} | {} | {:.2} | {:.1} | {:.1} |",
            r.model,
            r.proj,
            r.experts,
            r.top_k,
            r.n,
            r.k,
            r.m,
            r.experts_touched,
            r.floor_us,
            r.ours_us,
            if r.ok { "" } else { " (WRONG)" },
            f(r.humming_us, 1),
            if r.reference_ok == Some(false) {
                " (not ok)"
            } else {
                ""
            },
            f(r.ours_over_humming, 2),
            r.ours_over_floor,
            r.route_us,
            r.total_us,
        )?;
    }
    let ratios: Vec<f64> = merged.iter().filter_map(|r| r.ours_over_humming).collect();
    if let Some((geo, wins)) = geomean_and_wins(&ratios) {
        writeln!(
            md,
            "\nGeometric mean of ours / humming-kernels (GEMM alone) = {geo:.3} over {} cases; ours faster in {wins}.",
            ratios.len()
        )?;
        let with_route: Vec<f64> = merged
            .iter()
            .filter_map(|r| Some(r.total_us / r.humming_us?))
            .collect();
        if let Some((geo, wins)) = geomean_and_wins(&with_route) {
            writeln!(
                md,
                "With our routing helper counted (route + GEMM against humming-kernels' GEMM alone): {geo:.3}; ours faster in {wins}."
            )?;
        }
    }
    let unmatched = merged.iter().filter(|r| r.humming_us.is_none()).count();
    if unmatched > 0 {
        writeln!(
            md,
            "\n{unmatched} of our cases have no humming-kernels row (model, projection or M not in the reference run, or it failed there)."
        )?;
    }
    if let Some(errors) = py["errors"].as_array().filter(|e| !e.is_empty()) {
        writeln!(md, "\nErrors of the reference run:\n")?;
        for e in errors {
            writeln!(
                md,
                "- {}: {}",
                e["where"].as_str().unwrap_or("?"),
                e["error"].as_str().unwrap_or("?")
            )?;
        }
    }
    let md_path = write_merged(
        out,
        "merged_moe",
        &md,
        (report.copy_bw_tbs, py_bw),
        &report.device,
        &merged,
    )?;
    println!("\n{md}");
    println!("wrote {}", md_path.display());
    Ok(())
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
            launches_per_trial: 24,
            copies: 8,
            method: "graph".into(),
            trials_us: vec![us],
        }
    }

    fn row(proj: &str, m: usize, us: f64) -> MoeRow {
        MoeRow {
            model: "qwen3_30b_a3b".into(),
            proj: proj.into(),
            experts: 128,
            top_k: 8,
            kernel_top_k: if proj == "down" { 1 } else { 8 },
            n: 1536,
            k: 2048,
            m,
            a_rows: m,
            block_m: 8,
            ours_us: us,
            route_us: 2.0,
            total_us: us + 2.0,
            floor_us: us / 2.0,
            experts_touched: 8.0,
            weight_bytes: 8e6,
            weight_bytes_per_expert: 1_000_000,
            a_bytes: 0,
            c_bytes: 0,
            err: Some(1e-4),
            checked_slots: 8,
            nonfinite: 0,
            tolerance: 1e-2,
            ok: true,
            weight_copies: 2,
            routings: 8,
            module: "fatbin".into(),
            ours: stats(us),
            route: stats(2.0),
            total: stats(us + 2.0),
        }
    }

    #[test]
    fn merge_matches_model_proj_and_m() {
        let report = MoeReport {
            rows: vec![row("gate_up", 1, 10.0), row("gate_up", 16, 20.0)],
            ..MoeReport::default()
        };
        // The JSON round trip keeps `E` as humming-kernels spells it.
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains("\"E\":128"));
        let back: MoeReport = serde_json::from_str(&text).unwrap();
        let py = json!({"copy_bw_tbs": 4.2, "rows": [
            {"model": "qwen3_30b_a3b", "proj": "gate_up", "E": 128, "n": 1536, "k": 2048, "m": 1,
             "humming_us": 8.0, "ok": true},
            {"model": "qwen3_30b_a3b", "proj": "down", "E": 128, "n": 1536, "k": 2048, "m": 16,
             "humming_us": 99.0}
        ]});
        let rows = py["rows"].as_array().unwrap();
        let at =
            |r: &MoeRow| find_reference(rows, r, "w4a16").and_then(|p| p["humming_us"].as_f64());
        assert_eq!(at(&back.rows[0]), Some(8.0));
        assert_eq!(at(&back.rows[1]), None);
        // A row naming another format is not this one's reference.
        let named = json!([
            {"fmt": "moe_w4a8_uint4g128_fp8e4m3_tok", "model": "qwen3_30b_a3b", "proj": "gate_up",
             "E": 128, "n": 1536, "k": 2048, "m": 1, "humming_us": 9.0},
            {"fmt": "moe_w4a16_uint4g128", "model": "qwen3_30b_a3b", "proj": "gate_up",
             "E": 128, "n": 1536, "k": 2048, "m": 1, "humming_us": 7.0}
        ]);
        let named = named.as_array().unwrap();
        let pick = |f: &str| {
            find_reference(named, &back.rows[0], f).and_then(|p| p["humming_us"].as_f64())
        };
        assert_eq!(pick("w4a8"), Some(9.0));
        assert_eq!(pick("w4a16"), Some(7.0));

        let dir = std::env::temp_dir().join(format!("moe-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let reference = dir.join("humming_moe_bench.json");
        std::fs::write(&reference, py.to_string()).unwrap();
        merge_moe(&back, &reference, &dir).unwrap();
        let md = std::fs::read_to_string(dir.join("merged_moe.md")).unwrap();
        assert!(md.contains("| 1 | 8.0 | 5.0 | 10.0 | 8.0 | 1.25 | 2.00 | 2.0 | 12.0 |"));
        assert!(md.contains("1 of our cases have no humming-kernels row"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
