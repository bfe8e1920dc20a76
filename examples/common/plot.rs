//! SVG line charts of time per launch against M: one panel per case, log-scaled axes.

use plotters::prelude::*;
use std::path::Path;

use super::timing::Res;

/// One line of a chart: label, colour, dashed, points (M, µs).
pub struct Series {
    pub label: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

/// Tick values in `lo..=hi` for a log axis: 1-2-5 per decade, finer when that gives fewer than 4.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| {
        let mut v = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let t = m * decade;
                if (lo..=hi).contains(&t) {
                    v.push(t);
                }
            }
            decade *= 10.0;
        }
        v
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 4 {
        coarse
    } else {
        ticks(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// One SVG with a panel per (title, series), in two columns; x = M (log 2), y = µs (log 10).
pub fn plot(path: &Path, title: &str, panels: &[(String, Vec<Series>)]) -> Res<()> {
    if panels.is_empty() {
        return Ok(());
    }
    let cols = panels.len().min(2);
    let rows = panels.len().div_ceil(cols);
    let size = (560 * cols as u32, 420 * rows as u32 + 40);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let areas = root.split_evenly((rows, cols));
    for ((name, series), area) in panels.iter().zip(areas.iter()) {
        let all = series.iter().flat_map(|s| s.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in all {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 || y0 > y1 {
            continue;
        }
        let mut chart = ChartBuilder::on(area)
            .caption(name, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(
                ((x0 / 1.4).max(0.5)..x1 * 1.4).log_scale().base(2.0),
                (y0 / 1.5..y1 * 1.5)
                    .log_scale()
                    .with_key_points(log_ticks(y0 / 1.5, y1 * 1.5)),
            )?;
        chart
            .configure_mesh()
            .x_desc("M")
            .y_desc("time per launch (us)")
            .light_line_style(WHITE)
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .y_label_formatter(&|y| {
                if (y - y.round()).abs() < 1e-9 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .draw()?;
        for s in series {
            let style = s.color.stroke_width(2);
            if s.dashed {
                chart
                    .draw_series(DashedLineSeries::new(s.points.clone(), 6, 4, style))?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            } else {
                chart
                    .draw_series(LineSeries::new(s.points.clone(), style))?
                    .label(&s.label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                chart.draw_series(
                    s.points
                        .iter()
                        .map(|&p| Circle::new(p, 3, s.color.filled())),
                )?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Line colours: ours, a second kernel of ours, cuBLAS, humming-kernels, the DRAM floor.
pub const OURS: RGBColor = RGBColor(214, 39, 40);
pub const OURS2: RGBColor = RGBColor(148, 103, 189);
pub const CUBLAS: RGBColor = RGBColor(31, 119, 180);
pub const HUMMING: RGBColor = RGBColor(44, 160, 44);
pub const FLOOR: RGBColor = RGBColor(90, 90, 90);
