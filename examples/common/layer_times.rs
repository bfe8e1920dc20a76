//! The timing tables of the real-model examples (`smollm2`, `gemma3`): per layer kind (and GGML type,
//! for a model that mixes types), per layer, and of the forward pass of the block layers.

use super::layer_measure::{Measured, Runs};
use super::layer_sweep::{Timed, forward_line, gbs, nk};
use super::llama_block::worse;
use super::table::{Col, Table};
use humming_import::{GgmlType, LinearKind, LinearLayer};
use std::fmt::Display;

/// `cells` with `ty` as their second cell if `by_type`.
fn typed<'a>(
    cells: &[&'a dyn Display],
    by_type: bool,
    ty: &'a dyn Display,
) -> Vec<&'a dyn Display> {
    let mut cells = cells.to_vec();
    if by_type {
        cells.insert(1, ty);
    }
    cells
}

/// `cols` with a GGML type column as their second if `by_type`.
fn typed_cols(cols: &[Col], by_type: bool) -> Vec<Col> {
    let mut cols = cols.to_vec();
    if by_type {
        cols.insert(1, Col::R(5));
    }
    cols
}

/// Prints the table per layer kind (per kind and GGML type if `by_type`; kinds in the order they
/// run, types in order of first appearance), then the LM head: layers, mean time per call, weight
/// GB/s and worst error at each M.
pub fn kind_table(runs: &Runs, r: &Measured, by_type: bool) {
    let head_at = r.head_at;
    let widths = [22, 12, 7, 5, 12, 12, 14];
    let cols: Vec<Col> = widths
        .iter()
        .enumerate()
        .map(|(i, &w)| if i == 0 { Col::L(w) } else { Col::R(w) })
        .collect();
    let table = Table::new("", &typed_cols(&cols, by_type));
    let header: [&dyn Display; 7] = [
        &"layer kind",
        &"N x K",
        &"layers",
        &"M",
        &"us / call",
        &"weight GB/s",
        &"worst rel err",
    ];
    table.print(&typed(&header, by_type, &"type"));
    // Groups of layers of one kind (and type) in the order the kinds run, types in order of first
    // appearance; without `by_type`, a group's type is its first layer's.
    let same = |ty: GgmlType, l: &LinearLayer| !by_type || l.ggml_type == ty;
    let mut groups: Vec<(LinearKind, GgmlType, bool)> = Vec::new();
    for kind in LinearKind::BLOCK {
        for l in r.all[..head_at].iter().filter(|l| l.kind == kind) {
            if !groups.iter().any(|g| g.0 == kind && same(g.1, l)) {
                groups.push((kind, l.ggml_type, false));
            }
        }
    }
    if let Some(h) = r.all.get(head_at) {
        groups.push((h.kind, h.ggml_type, true));
    }
    for (kind, ty, is_head) in groups {
        let label = if is_head {
            let tied = if kind == LinearKind::TokenEmbd {
                "tied "
            } else {
                ""
            };
            let title = format!("{tied}LM head:");
            println!("{title:<22} (not one of the {head_at} layers)");
            format!("lm_head ({kind})")
        } else {
            kind.to_string()
        };
        let source = if is_head { &r.head_timed } else { &r.timed };
        for &m in &runs.ms {
            let rows: Vec<&Timed> = source
                .iter()
                .filter(|t| {
                    let l = r.all[t.layer];
                    t.m == m && l.kind == kind && same(ty, l)
                })
                .collect();
            let Some(first) = rows.first() else { continue };
            let us = rows.iter().map(|t| t.us).sum::<f64>() / rows.len() as f64;
            let err = rows.iter().map(|t| t.err).fold(0f64, worse);
            let cells: [&dyn Display; 7] = [
                &label,
                &nk(r.all[first.layer]),
                &rows.len(),
                &m,
                &format!("{us:.2}"),
                &format!("{:.1}", gbs(r.dws[first.layer].bytes(), us)),
                &format!("{err:.2e}"),
            ];
            table.print(&typed(&cells, by_type, &ty));
        }
    }
}

/// Prints one row per layer of `rows` and M (with its GGML type if `by_type`).
pub fn layer_table<'t>(r: &Measured, rows: impl Iterator<Item = &'t Timed>, by_type: bool) {
    println!();
    let cols = [
        Col::L(28),
        Col::R(12),
        Col::R(5),
        Col::R(12),
        Col::R(12),
        Col::R(14),
    ];
    let table = Table::new("", &typed_cols(&cols, by_type));
    let header: [&dyn Display; 6] = [
        &"layer",
        &"N x K",
        &"M",
        &"us / call",
        &"weight GB/s",
        &"rel err",
    ];
    table.print(&typed(&header, by_type, &"type"));
    for t in rows {
        let l = r.all[t.layer];
        let cells: [&dyn Display; 6] = [
            &l.name,
            &nk(l),
            &t.m,
            &format!("{:.2}", t.us),
            &format!("{:.1}", gbs(r.dws[t.layer].bytes(), t.us)),
            &format!("{:.2e}", t.err),
        ];
        table.print(&typed(&cells, by_type, &l.ggml_type));
    }
}

/// Prints the forward passes of the block layers (`weights`: what their bytes are) launch by launch
/// and as one CUDA graph; returns their times for the summary (`M=1 123 us`).
pub fn forward_table(runs: &Runs, r: &Measured, weights: &str) -> Vec<String> {
    let head_at = r.head_at;
    println!();
    println!(
        "Forward pass of the {head_at} quantized layers ({:.1} MB of {weights}; attention, norms and \
         the LM head not included):",
        r.layer_bytes as f64 / 1e6
    );
    let table = Table::new(
        "",
        &[Col::R(5), Col::R(22), Col::R(12), Col::R(22), Col::R(12)],
    );
    table.print(&[
        &"M",
        &"sum of per-layer us",
        &"weight GB/s",
        &"measured sweep us",
        &"weight GB/s",
    ]);
    let mut totals = Vec::new();
    for ((&m, &sweep), graph) in runs.ms.iter().zip(&r.sweep_us).zip(&r.graph) {
        let sum: f64 = r.timed.iter().filter(|t| t.m == m).map(|t| t.us).sum();
        table.print(&[
            &m,
            &format!("{sum:.1}"),
            &format!("{:.1}", gbs(r.layer_bytes, sum)),
            &format!("{sweep:.1}"),
            &format!("{:.1}", gbs(r.layer_bytes, sweep)),
        ]);
        let graph = match graph {
            Ok(g) => format!(" ({:.0} us as one CUDA graph)", g.us),
            Err(_) => " (CUDA graph failed)".to_owned(),
        };
        totals.push(format!("M={m} {sweep:.0} us{graph}"));
    }
    println!(
        "(per-layer timings re-read the same weights, which stay in the L2 cache, so their GB/s can \
         exceed DRAM bandwidth; the sweep runs the {head_at} layers in order, {} times, and reads each \
         layer's weights once per pass)",
        runs.sweeps.max(1)
    );
    for ((&m, &sweep), graph) in runs.ms.iter().zip(&r.sweep_us).zip(&r.graph) {
        println!("{}", forward_line(head_at, m, sweep, graph));
    }
    println!(
        "(the CUDA graph: the same {head_at} launches captured once per M and replayed {} times between \
         two CUDA events)",
        runs.replays.max(1)
    );
    totals
}
