//! The error summary of the GPU path of the real-model examples (`smollm2`, `gemma3`): the checks over
//! the tolerance and the worst errors against the f64 reference.

use super::layer_measure::Measured;
use super::llama_block::worse;
use humming_import::GgmlType;

/// Prints the checks over `tol` and the worst errors (also per GGML type if `by_type`); returns the
/// worst of the block layers and of the LM head (0 without one).
pub fn print_errors(tol: f64, r: &Measured, by_type: bool) -> (f64, f64) {
    let worst = r.timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_head = r.head_timed.iter().map(|t| t.err).fold(0f64, worse);
    let worst_at = r
        .timed
        .iter()
        .max_by(|a, b| a.err.total_cmp(&b.err))
        .map(|t| {
            let l = r.all[t.layer];
            if by_type {
                format!("{} ({}) at M={}", l.name, l.ggml_type, t.m)
            } else {
                format!("{} at M={}", l.name, t.m)
            }
        })
        .unwrap_or_default();
    let over: Vec<String> = r
        .timed
        .iter()
        .chain(&r.head_timed)
        .filter(|t| t.err > tol || t.err.is_nan())
        .map(|t| format!("{} at M={}: {:.2e}", r.all[t.layer].name, t.m, t.err))
        .collect();
    if !over.is_empty() {
        println!();
        println!("{} checks exceed the tolerance {:.0e}:", over.len(), tol);
        for o in over.iter().take(20) {
            println!("  {o}");
        }
    }
    let per_type = if by_type {
        // Worst error per GGML type.
        let mut per_type: Vec<(GgmlType, f64)> = Vec::new();
        for t in &r.timed {
            let ty = r.all[t.layer].ggml_type;
            match per_type.iter_mut().find(|(x, _)| *x == ty) {
                Some((_, e)) => *e = worse(*e, t.err),
                None => per_type.push((ty, t.err)),
            }
        }
        let per_type: Vec<String> = per_type
            .iter()
            .map(|(ty, e)| format!("{ty} {e:.2e}"))
            .collect();
        format!("by type {}; ", per_type.join(", "))
    } else {
        String::new()
    };
    let head = if r.head_timed.is_empty() {
        "no LM head (--no-lm-head)".to_owned()
    } else {
        format!("LM head {worst_head:.2e}")
    };
    println!();
    println!(
        "every layer vs the f64 CPU reference: worst relative error {worst:.2e} ({worst_at}); \
         {per_type}{head}; tolerance {tol:.0e}"
    );
    (worst, worst_head)
}
