//! `--plot FILE.svg`: the run just made as one SVG picture (plotters, SVG
//! backend, no system libraries): reader and writer throughput per engine
//! and configuration (the median, with a whisker from the slowest to the
//! fastest round), and each engine's latency percentile curve in the HDR
//! style (percentile on a log "nines" axis, latency on a log axis).

use crate::fmt::{fmt_int, fmt_ns};
use crate::measure::new_hist;
use crate::report::{EngineRounds, Round};
use crate::stats::{median, min_max};
use hdrhistogram::Histogram;
use plotters::prelude::*;
use std::io::Write;

type DynError = Box<dyn std::error::Error>;

/// One colour per engine, by its position in `--engines`.
const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
];

/// Draws a chart's series legend at `pos`, the same style on every panel.
fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Result<(), DynError>
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// `1.2M`, `850k`, `12` for throughput axes.
fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 1e6 {
        format!("{:.1}M", x / 1e6)
    } else if a >= 1e3 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

/// A latency axis label: 100ns, 1us, 10us, 1ms, 1.5s.
fn axis_ns(ns: f64) -> String {
    let (v, unit) = if ns >= 1e9 {
        (ns / 1e9, "s")
    } else if ns >= 1e6 {
        (ns / 1e6, "ms")
    } else if ns >= 1e3 {
        (ns / 1e3, "us")
    } else {
        (ns, "ns")
    };
    let s = format!("{v:.1}");
    format!("{}{unit}", s.trim_end_matches(".0"))
}

/// The percentile a "nines" value stands for: 1 -> 90%, 2 -> 99%, ...
fn nines_label(n: f64) -> String {
    let p = 100.0 * (1.0 - 10f64.powf(-n));
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// Draws every configuration's throughput and the first configuration's
/// latency curves into `out`.
///
/// # Errors
///
/// A drawing or write error.
pub fn draw(
    mut out: &std::fs::File,
    title: &str,
    configs: &[((usize, usize), Vec<EngineRounds>)],
) -> Result<(), DynError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 22))?;
        let (top, bottom) = root.split_vertically(430);
        let (left, right) = top.split_horizontally(600);
        throughput(&left, "reader transactions/s", configs, |r| {
            r.reader_txn_per_s
        })?;
        throughput(&right, "writer transactions/s", configs, |r| {
            r.writer_txn_per_s
        })?;
        latency(&bottom, configs)?;
        root.present()?;
    }
    out.write_all(svg.as_bytes())?;
    out.flush()?;
    Ok(())
}

fn throughput<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    configs: &[((usize, usize), Vec<EngineRounds>)],
    f: fn(&Round) -> f64,
) -> Result<(), DynError>
where
    DB::ErrorType: 'static,
{
    let n = configs.len();
    let top = configs
        .iter()
        .flat_map(|(_, es)| es.iter().flat_map(|e| e.rounds.iter().map(f)))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.35;
    let labels: Vec<String> = configs
        .iter()
        .map(|((r, w), _)| format!("{r} readers / {w} writers"))
        .collect();
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{caption} (median, whisker: min-max over rounds)"),
            ("sans-serif", 16),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(4 * n + 1)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| short(*y))
        .y_desc("transactions/s")
        .draw()?;
    let engines = configs.first().map_or(0, |(_, es)| es.len());
    let width = 0.6;
    for ei in 0..engines {
        let c = color(ei);
        let name = configs[0].1[ei].engine;
        let x_of =
            |ci: usize| ci as f64 - width / 2.0 + width * (ei as f64 + 0.5) / engines.max(1) as f64;
        let pts: Vec<(f64, f64, f64, f64)> = configs
            .iter()
            .enumerate()
            .map(|(ci, (_, es))| {
                let v: Vec<f64> = es[ei].rounds.iter().map(f).collect();
                let (lo, hi) = min_max(&v);
                (x_of(ci), median(&v), lo, hi)
            })
            .collect();
        chart
            .draw_series(
                pts.iter()
                    .map(|&(x, m, _, _)| Circle::new((x, m), 5, c.filled())),
            )?
            .label(name)
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
        chart.draw_series(pts.iter().flat_map(|&(x, _, lo, hi)| {
            let cap = 0.03;
            [
                PathElement::new(vec![(x, lo), (x, hi)], c.stroke_width(2)),
                PathElement::new(vec![(x - cap, lo), (x + cap, lo)], c.stroke_width(2)),
                PathElement::new(vec![(x - cap, hi), (x + cap, hi)], c.stroke_width(2)),
            ]
        }))?;
        chart.draw_series(pts.iter().map(|&(x, m, _, _)| {
            EmptyElement::at((x, m))
                + Text::new(
                    fmt_int(m),
                    (9, -16),
                    ("sans-serif", 12).into_font().color(&BLACK),
                )
        }))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

fn latency<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    configs: &[((usize, usize), Vec<EngineRounds>)],
) -> Result<(), DynError>
where
    DB::ErrorType: 'static,
{
    let Some(((readers, writers), engines)) = configs.first() else {
        return Ok(());
    };
    let reads = *readers > 0;
    let hists: Vec<(&'static str, Histogram<u64>)> = engines
        .iter()
        .map(|e| {
            let mut h = new_hist();
            for r in &e.rounds {
                h.add(if reads { &r.read_hist } else { &r.write_hist })
                    .expect("histograms share their bounds");
            }
            (e.engine, h)
        })
        .collect();
    // The x axis ends at the nines the largest sample can resolve.
    let count = hists
        .iter()
        .map(|(_, h)| h.len())
        .max()
        .unwrap_or(1)
        .max(10);
    let max_nines = (count as f64).log10().floor().clamp(1.0, 7.0);
    let lo = hists
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(_, h)| h.min())
        .min()
        .unwrap_or(1)
        .max(1) as f64;
    let hi = hists
        .iter()
        .map(|(_, h)| h.max())
        .max()
        .unwrap_or(10)
        .max(10) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} transaction latency percentiles, {readers} readers / {writers} writers, all rounds (HDR style)",
                if reads { "reader" } else { "writer" }
            ),
            ("sans-serif", 16),
        )
        .margin(12)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(
            0f64..max_nines,
            ((lo * 0.8)..(hi * 1.25)).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_labels(max_nines as usize + 1)
        .x_label_formatter(&|x| nines_label(*x))
        .y_label_formatter(&|y| axis_ns(*y))
        .x_desc("percentile (log scale of nines)")
        .y_desc("latency (log scale)")
        .draw()?;
    for (i, (name, h)) in hists.iter().enumerate() {
        if h.is_empty() {
            continue;
        }
        let c = color(i);
        let steps = (max_nines * 40.0) as usize;
        let pts: Vec<(f64, f64)> = (0..=steps)
            .map(|k| {
                let nines = max_nines * k as f64 / steps as f64;
                let q = 1.0 - 10f64.powf(-nines);
                (nines, h.value_at_quantile(q).max(1) as f64)
            })
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(format!("{name} (max {})", fmt_ns(h.max())))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// Draws a `--sweep` into `out`: reader and writer throughput against the
/// swept thread count, one curve per engine (median, whisker min-max over
/// rounds), and below them the first engine's median throughput as a
/// ratio to each other engine's at every point (1.0 = the same).
///
/// # Errors
///
/// A drawing or write error.
pub fn draw_sweep(
    mut out: &std::fs::File,
    title: &str,
    sw: &crate::report::SweepResult,
) -> Result<(), DynError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, 900)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 22))?;
        let (top, bottom) = root.split_vertically(470);
        let (left, right) = top.split_horizontally(600);
        sweep_panel(&left, "reader transactions/s", sw, |c| &c.readers)?;
        sweep_panel(&right, "writer transactions/s", sw, |c| &c.writers)?;
        sweep_ratio(&bottom, sw)?;
        root.present()?;
    }
    out.write_all(svg.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Labels only whole thread counts (plotters also places ticks between).
fn whole(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-6 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

/// Enough ticks that every whole count up to 32 can be labelled.
fn sweep_ticks(sw: &crate::report::SweepResult) -> usize {
    let lo = sw.points.first().copied().unwrap_or(0);
    let hi = sw.points.last().copied().unwrap_or(1);
    (hi - lo + 3).min(34)
}

fn sweep_x_range(sw: &crate::report::SweepResult) -> std::ops::Range<f64> {
    let lo = sw.points.first().copied().unwrap_or(0) as f64;
    let hi = sw.points.last().copied().unwrap_or(1) as f64;
    let pad = ((hi - lo) * 0.05).max(0.5);
    (lo - pad)..(hi + pad)
}

fn sweep_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    sw: &crate::report::SweepResult,
    f: fn(&crate::report::SweepCurve) -> &Vec<(f64, f64, f64)>,
) -> Result<(), DynError>
where
    DB::ErrorType: 'static,
{
    let other = if sw.axis == "readers" {
        "writers"
    } else {
        "readers"
    };
    let top = sw
        .curves
        .iter()
        .flat_map(|c| f(c).iter().map(|p| p.2))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{caption}, {} {other} (median, whisker min-max)", sw.fixed),
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(sweep_x_range(sw), 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc(sw.axis)
        .y_desc("transactions/s")
        .x_labels(sweep_ticks(sw))
        .x_label_formatter(&whole)
        .y_label_formatter(&|y| short(*y))
        .draw()?;
    for (ei, c) in sw.curves.iter().enumerate() {
        let col = color(ei);
        let pts: Vec<(f64, (f64, f64, f64))> = sw
            .points
            .iter()
            .zip(f(c))
            .map(|(&x, &m)| (x as f64, m))
            .collect();
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|&(x, (m, _, _))| (x, m)),
                col.stroke_width(2),
            ))?
            .label(c.engine)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2)));
        chart.draw_series(
            pts.iter()
                .map(|&(x, (m, _, _))| Circle::new((x, m), 4, col.filled())),
        )?;
        chart.draw_series(pts.iter().map(|&(x, (_, lo, hi))| {
            PathElement::new(vec![(x, lo), (x, hi)], col.stroke_width(1))
        }))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

fn sweep_ratio<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    sw: &crate::report::SweepResult,
) -> Result<(), DynError>
where
    DB::ErrorType: 'static,
{
    let Some((first, rest)) = sw.curves.split_first() else {
        return Ok(());
    };
    type Side = fn(&crate::report::SweepCurve) -> &Vec<(f64, f64, f64)>;
    let sides: [(&str, Side); 2] = [("readers", |c| &c.readers), ("writers", |c| &c.writers)];
    // (legend, colour index, dashed (writers), points)
    type Series = (String, usize, bool, Vec<(f64, f64)>);
    let mut series: Vec<Series> = Vec::new();
    for (oi, o) in rest.iter().enumerate() {
        for (si, (side, f)) in sides.iter().enumerate() {
            let pts: Vec<(f64, f64)> = sw
                .points
                .iter()
                .zip(f(first).iter().zip(f(o)))
                .filter(|(_, (a, b))| a.0 > 0.0 && b.0 > 0.0)
                .map(|(&x, (a, b))| (x as f64, a.0 / b.0))
                .collect();
            if !pts.is_empty() {
                series.push((
                    format!("{side}: {} / {}", first.engine, o.engine),
                    oi + 1,
                    si == 1,
                    pts,
                ));
            }
        }
    }
    let (lo, hi) = series
        .iter()
        .flat_map(|s| s.3.iter().map(|p| p.1))
        .fold((1.0f64, 1.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    let pad = ((hi - lo) * 0.15).max(0.05);
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "{} median throughput as a ratio to each other engine's (1.0 = the same; dashed: writers)",
                first.engine
            ),
            ("sans-serif", 15),
        )
        .margin(12)
        .margin_right(40)
        .x_label_area_size(40)
        .y_label_area_size(64)
        // Headroom above the curves for the legend (upper right).
        .build_cartesian_2d(sweep_x_range(sw), (lo - pad)..(hi + 3.0 * pad))?;
    chart
        .configure_mesh()
        .x_desc(sw.axis)
        .y_desc("ratio")
        .x_labels(sweep_ticks(sw))
        .x_label_formatter(&whole)
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()?;
    let r = sweep_x_range(sw);
    chart.draw_series(LineSeries::new(
        [(r.start, 1.0), (r.end, 1.0)],
        BLACK.mix(0.4).stroke_width(1),
    ))?;
    for (name, ci, dashed, pts) in series {
        let col = color(ci);
        let style = col.stroke_width(if dashed { 1 } else { 2 });
        if dashed {
            chart
                .draw_series(DashedLineSeries::new(pts.clone(), 6, 4, style))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        } else {
            chart
                .draw_series(LineSeries::new(pts.clone(), style))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_read_as_percentiles() {
        assert_eq!(nines_label(0.0), "0%");
        assert_eq!(nines_label(1.0), "90%");
        assert_eq!(nines_label(3.0), "99.9%");
        assert_eq!(nines_label(2f64.log10()), "50%");
    }

    #[test]
    fn latency_axis_labels() {
        assert_eq!(axis_ns(100.0), "100ns");
        assert_eq!(axis_ns(1000.0), "1us");
        assert_eq!(axis_ns(1_500_000.0), "1.5ms");
    }

    #[test]
    fn short_numbers() {
        assert_eq!(short(1_234_567.0), "1.2M");
        assert_eq!(short(850_000.0), "850k");
        assert_eq!(short(12.0), "12");
    }
}
