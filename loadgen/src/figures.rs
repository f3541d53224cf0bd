//! The experiment's figures, as PNG and SVG, like the paper's: every
//! instance's memory over time per arm (figs. 7, 9), the mean over time of
//! every arm on one chart (fig. 11), histograms of the per-instance medians
//! (figs. 8, 10), and the trade-off of memory saved against restarts.
//!
//! Text is drawn with an embedded DejaVu Sans Mono (`assets/`), so the
//! figures need no system fonts and look the same everywhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use estimator::{Sample, Warmup};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::experiment::{ArmResult, Report};
use crate::suite::SuiteReport;

const FONT: &str = "sans-serif";
const FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
const SIZE: (u32, u32) = (900, 520);

/// Draw every figure of `report` into `out`; returns the files written.
pub fn draw_all(report: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // Registering twice is harmless; the first registration wins.
    let _ = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES);
    let mut samples = BTreeMap::new();
    for arm in &report.arms {
        let csv = std::fs::read(&arm.samples_csv)?;
        samples.insert(arm.name.clone(), estimator::read_csv(&csv[..])?);
    }
    let mut written = Vec::new();
    for arm in &report.arms {
        let series = &samples[&arm.name];
        let title = format!("Instance memory over time: {}", arm.name);
        written.extend(both(out, &format!("memory-{}", arm.name), |area| {
            instance_memory(area, &title, series, arm.threshold_bytes)
        })?);
        let title = format!("Per-instance medians after warm-up: {}", arm.name);
        written.extend(both(out, &format!("medians-{}", arm.name), |area| {
            medians_histogram(area, &title, series)
        })?);
    }
    written.extend(both(out, "mean-memory", |area| {
        mean_memory(area, &report.arms, &samples)
    })?);
    written.extend(both(out, "tradeoff", |area| tradeoff(area, &report.arms))?);
    Ok(written)
}

/// For each cell of a policy suite: mean memory over time of every arm, and
/// memory saved against restarts (`<workload>-c<concurrency>-*.png|svg`).
pub fn draw_suite(suite: &SuiteReport, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let _ = plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES);
    let mut written = Vec::new();
    for cell in &suite.cells {
        let mut samples = BTreeMap::new();
        for arm in &cell.report.arms {
            let csv = std::fs::read(&arm.samples_csv)?;
            samples.insert(arm.name.clone(), estimator::read_csv(&csv[..])?);
        }
        let stem = format!("{}-c{}", cell.workload, cell.concurrency);
        written.extend(both(out, &format!("{stem}-mean-memory"), |area| {
            mean_memory(area, &cell.report.arms, &samples)
        })?);
        written.extend(both(out, &format!("{stem}-tradeoff"), |area| {
            tradeoff(area, &cell.report.arms)
        })?);
    }
    Ok(written)
}

/// Draw with `figure` into `<stem>.png` and `<stem>.svg`.
fn both(
    out: &Path,
    stem: &str,
    figure: impl Fn(&Area) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<PathBuf>> {
    let png = out.join(format!("{stem}.png"));
    let svg = out.join(format!("{stem}.svg"));
    {
        let area = BitMapBackend::new(&png, SIZE).into_drawing_area();
        figure(&Area::Bitmap(area.clone()))?;
        area.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    {
        let area = SVGBackend::new(&svg, SIZE).into_drawing_area();
        figure(&Area::Svg(area.clone()))?;
        area.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    Ok(vec![png, svg])
}

/// A drawing area on either backend, so each figure is written once.
enum Area<'a> {
    Bitmap(DrawingArea<BitMapBackend<'a>, Shift>),
    Svg(DrawingArea<SVGBackend<'a>, Shift>),
}

/// Call the backend-generic figure `$figure` on the concrete drawing area.
macro_rules! on_area {
    ($area:expr, $figure:ident($($arg:expr),*)) => {
        match $area {
            Area::Bitmap(area) => $figure(area, $($arg),*).map_err(|e| anyhow::anyhow!("{e:?}")),
            Area::Svg(area) => $figure(area, $($arg),*).map_err(|e| anyhow::anyhow!("{e:?}")),
        }
    };
}

type Drawn<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn kib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0
}

/// Seconds since the first sample, per instance, in time order.
fn by_instance(samples: &[Sample]) -> BTreeMap<u64, Vec<(f64, f64)>> {
    let start = samples.iter().map(|s| s.timestamp_ms).min().unwrap_or(0);
    let mut series: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for sample in samples {
        let seconds = (sample.timestamp_ms - start) as f64 / 1000.0;
        series
            .entry(sample.instance)
            .or_default()
            .push((seconds, kib(sample.bytes)));
    }
    for points in series.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

fn extent(points: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    points.fold((1.0, 1.0), |(x, y), (px, py)| (x.max(px), y.max(py)))
}

fn instance_memory(
    area: &Area,
    title: &str,
    samples: &[Sample],
    threshold: Option<u64>,
) -> anyhow::Result<()> {
    let series = by_instance(samples);
    on_area!(area, draw_instance_memory(title, &series, threshold))
}

fn draw_instance_memory<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    series: &BTreeMap<u64, Vec<(f64, f64)>>,
    threshold: Option<u64>,
) -> Drawn<DB> {
    let (max_x, max_y) = extent(series.values().flatten().copied());
    let max_y = max_y.max(threshold.map_or(0.0, kib)) * 1.1;
    {
        area.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(area)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..max_x, 0.0..max_y)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("linear memory (KiB)")
            .label_style((FONT, 13))
            .draw()?;
        for (index, points) in series.values().enumerate() {
            let color = Palette99::pick(index).mix(0.6);
            chart.draw_series(LineSeries::new(points.iter().copied(), color))?;
        }
        if let Some(threshold) = threshold.filter(|&t| t > 1) {
            let y = kib(threshold);
            chart
                .draw_series(LineSeries::new([(0.0, y), (max_x, y)], RED.stroke_width(2)))?
                .label(format!("threshold {y:.0} KiB"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], RED.stroke_width(2)));
            chart
                .configure_series_labels()
                .label_font((FONT, 13))
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        Ok(())
    }
}

fn medians_histogram(area: &Area, title: &str, samples: &[Sample]) -> anyhow::Result<()> {
    let medians: Vec<f64> = estimator::instance_medians(samples, Warmup::default())
        .into_values()
        .map(|m| m / 1024.0)
        .collect();
    let (low, high) = medians
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    let (low, high) = if medians.is_empty() {
        (0.0, 1.0)
    } else {
        (low, high.max(low + 1.0))
    };
    const BINS: usize = 12;
    let width = (high - low) / BINS as f64;
    let mut counts = [0u32; BINS];
    for m in &medians {
        let bin = (((m - low) / width) as usize).min(BINS - 1);
        counts[bin] += 1;
    }
    on_area!(area, draw_histogram(title, &counts, low, width))
}

fn draw_histogram<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    counts: &[u32],
    low: f64,
    width: f64,
) -> Drawn<DB> {
    let high = low + width * counts.len() as f64;
    let max_count = counts.iter().copied().max().unwrap_or(1).max(1);
    {
        area.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(area)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(low..high, 0u32..max_count + 1)?;
        chart
            .configure_mesh()
            .x_desc("median linear memory (KiB)")
            .y_desc("instances")
            .label_style((FONT, 13))
            .draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(bin, &count)| {
            let x0 = low + bin as f64 * width;
            Rectangle::new(
                [(x0, 0), (x0 + width * 0.95, count)],
                BLUE.mix(0.6).filled(),
            )
        }))?;
        Ok(())
    }
}

fn mean_memory(
    area: &Area,
    arms: &[ArmResult],
    samples: &BTreeMap<String, Vec<Sample>>,
) -> anyhow::Result<()> {
    let means: Vec<(String, Vec<(f64, f64)>)> = arms
        .iter()
        .map(|arm| {
            let series = &samples[&arm.name];
            let start = series.iter().map(|s| s.timestamp_ms).min().unwrap_or(0);
            let mut rounds: BTreeMap<i64, (f64, usize)> = BTreeMap::new();
            for sample in series {
                let round = rounds.entry(sample.timestamp_ms).or_default();
                round.0 += kib(sample.bytes);
                round.1 += 1;
            }
            let points = rounds
                .into_iter()
                .map(|(t, (sum, n))| ((t - start) as f64 / 1000.0, sum / n as f64))
                .collect();
            (arm.name.clone(), points)
        })
        .collect();
    on_area!(area, draw_means(&means))
}

fn draw_means<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    means: &[(String, Vec<(f64, f64)>)],
) -> Drawn<DB> {
    let (max_x, max_y) = extent(means.iter().flat_map(|(_, points)| points.iter().copied()));
    {
        area.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(area)
            .caption("Mean instance memory over time, every arm", (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..max_x, 0.0..max_y * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("mean linear memory (KiB)")
            .label_style((FONT, 13))
            .draw()?;
        for (index, (name, points)) in means.iter().enumerate() {
            let color = Palette99::pick(index);
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 13))
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

/// One arm on the trade-off figure.
struct TradeoffPoint {
    name: String,
    restarts_per_request: f64,
    reduction_percent: f64,
    /// A point of the frontier ([`crate::experiment::Policy::on_frontier`]).
    fixed: bool,
}

fn tradeoff(area: &Area, arms: &[ArmResult]) -> anyhow::Result<()> {
    let points: Vec<TradeoffPoint> = arms
        .iter()
        .map(|arm| TradeoffPoint {
            name: arm.name.clone(),
            restarts_per_request: arm.restarts_per_request,
            reduction_percent: arm.reduction_percent,
            fixed: arm.policy.on_frontier() && arm.dispatch.is_none(),
        })
        .collect();
    on_area!(area, draw_tradeoff(&points))
}

/// Saving against restarts per request on a log axis (a run without
/// restarts sits on the left edge). The arms with a fixed threshold at a
/// point of the true footprints (the oracle, the sweep, a fresh instance
/// per request) under the default's dispatch are joined in order of their
/// restart rate: the frontier of fixed thresholds. Every arm has its own
/// colour and marker, named beside the chart with its figures, so points
/// that sit close together stay readable and nothing covers them.
fn draw_tradeoff<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    points: &[TradeoffPoint],
) -> Drawn<DB> {
    let positive = points
        .iter()
        .map(|p| p.restarts_per_request)
        .filter(|&x| x > 0.0);
    let min_x = positive.clone().fold(1.0f64, f64::min).min(0.01) / 2.0;
    let max_x = positive.fold(0.02f64, f64::max).min(1.0) * 1.5;
    let at = |x: f64| x.max(min_x);
    let (min_y, max_y) = points.iter().fold((0.0f64, 1.0f64), |(lo, hi), p| {
        (lo.min(p.reduction_percent), hi.max(p.reduction_percent))
    });
    let span = (max_y - min_y).max(1.0);
    area.fill(&WHITE)?;
    let (plot, legend) = area.split_horizontally(area.dim_in_pixel().0 * 3 / 5);
    let mut chart = ChartBuilder::on(&plot)
        .caption("Memory saved against restarts", (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (min_x..max_x).log_scale(),
            (min_y - 0.05 * span)..(max_y + 0.05 * span),
        )?;
    chart
        .configure_mesh()
        .x_desc("restarts per request (log; left edge: none)")
        .y_desc("mean memory reduction vs monitor (%)")
        .x_label_formatter(&|x| format!("{:.2} %", x * 100.0))
        .label_style((FONT, 13))
        .draw()?;
    let mut frontier: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.fixed)
        .map(|p| (at(p.restarts_per_request), p.reduction_percent))
        .collect();
    frontier.sort_by(|a, b| a.0.total_cmp(&b.0));
    let frontier_style = BLACK.mix(0.4).stroke_width(1);
    if frontier.len() > 1 {
        chart.draw_series(LineSeries::new(frontier, frontier_style))?;
    }
    let row = |index: usize| 50 + 22 * index as i32;
    legend.draw(&PathElement::new(
        [(8, row(0)), (28, row(0))],
        frontier_style,
    ))?;
    legend.draw(&Text::new(
        "fixed thresholds (frontier)",
        (36, row(0) - 7),
        (FONT, 12),
    ))?;
    for (index, point) in points.iter().enumerate() {
        let color = Palette99::pick(index).to_rgba();
        let xy = (at(point.restarts_per_request), point.reduction_percent);
        let key = (18, row(index + 1));
        // Three marker shapes in turn, so neighbours differ in more than
        // colour.
        match index % 3 {
            0 => {
                chart.draw_series([Circle::new(xy, 6, color.filled())])?;
                legend.draw(&Circle::new(key, 6, color.filled()))?;
            }
            1 => {
                chart.draw_series([TriangleMarker::new(xy, 8, color.filled())])?;
                legend.draw(&TriangleMarker::new(key, 8, color.filled()))?;
            }
            _ => {
                chart.draw_series([Cross::new(xy, 6, color.stroke_width(3))])?;
                legend.draw(&Cross::new(key, 6, color.stroke_width(3)))?;
            }
        }
        let label = format!(
            "{}: {:.1} % at {:.2} %",
            point.name,
            point.reduction_percent,
            100.0 * point.restarts_per_request
        );
        legend.draw(&Text::new(label, (36, key.1 - 7), (FONT, 12)))?;
    }
    legend.draw(&Text::new(
        "arm: saving at restarts per request",
        (8, 20),
        (FONT, 13),
    ))?;
    Ok(())
}
