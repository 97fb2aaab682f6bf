//! The chart itself, for any plotters backend.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{MeasuredPoint, Prediction, SpeedupPlot};

const BAND: RGBColor = RGBColor(0xbc, 0xd6, 0xee);
const WORK: RGBColor = RGBColor(0x55, 0x55, 0x55);
const SPAN: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const BURDENED: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const MEASURED: RGBColor = RGBColor(0xe0, 0x6c, 0x00);
const WHAT_IF: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);

/// How many x labels: one per core up to 12, then fewer (plotters picks round steps).
fn ticks(max: u32) -> usize {
    max.min(12) as usize
}

fn title(plot: &SpeedupPlot) -> String {
    let name = Path::new(&plot.program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| plot.program.clone());
    match &plot.prediction {
        Some(p) => format!(
            "{name}: parallelism {:.2}, burdened parallelism {:.2}",
            p.measures.parallelism(),
            p.measures.burdened_parallelism()
        ),
        None => format!("{name}: measured speedup"),
    }
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The work law, speedup = P, dashed from 1 to `end`.
fn work_law<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    end: f64,
    label: &str,
) -> Result<(), String> {
    chart
        .draw_series(DashedLineSeries::new(
            [(1.0, 1.0), (end, end)],
            8,
            5,
            WORK.stroke_width(2),
        ))
        .map_err(|e| e.to_string())?
        .label(label)
        .legend(|(x, y)| {
            plotters::element::DashedPathElement::new(
                [(x, y), (x + 24, y)],
                6,
                4,
                WORK.stroke_width(2),
            )
        });
    Ok(())
}

pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    plot: &SpeedupPlot,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let curve = plot.curve();
    let what_if = plot.what_if_curve();
    let xmax = f64::from(plot.max_cores.max(2));
    // Room above the highest curve or point for the legend.
    let top = curve
        .iter()
        .chain(&what_if)
        .flatten()
        .map(|c| c.2)
        .chain(plot.measured.iter().map(|m| m.max))
        .fold(1.0f64, f64::max);
    let ymax = top * 1.45;

    let mut chart = axes(root, plot, xmax, ymax)?;
    if let (Some(curve), Some(pred)) = (&curve, &plot.prediction) {
        draw_prediction(&mut chart, curve, pred, xmax, ymax)?;
        if let (Some(what_if), Some(after)) = (&what_if, pred.what_if) {
            draw_what_if(&mut chart, what_if, after.parallelism())?;
        }
    } else if !plot.measured.is_empty() {
        // No prediction: the work law alone, for scale.
        work_law(&mut chart, xmax.min(ymax), "Linear speedup")?;
    }
    if !plot.measured.is_empty() {
        draw_measured(&mut chart, &plot.measured)?;
    }

    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 15))
        .background_style(WHITE)
        .border_style(BLACK.mix(0.4))
        .margin(12)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The chart's frame on `root`: its title, axes from 1 to `xmax` cores and 0 to `ymax` speedup,
/// their labels and grid.
fn axes<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    plot: &SpeedupPlot,
    xmax: f64,
    ymax: f64,
) -> Result<Chart<'a, DB>, String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut chart = ChartBuilder::on(root)
        .caption(title(plot), ("sans-serif", 24).into_font())
        .margin(18)
        .x_label_area_size(50)
        .y_label_area_size(60)
        .build_cartesian_2d(0.8f64..xmax + 0.2, 0f64..ymax)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(ticks(plot.max_cores.max(2)))
        .x_desc("Cores (P)")
        .y_desc("Speedup T(1)/T(P)")
        .axis_desc_style(("sans-serif", 18))
        .label_style(("sans-serif", 15))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| {
            if ymax >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(e)?;
    Ok(chart)
}

/// The prediction: the estimated speedup range (`curve`: cores, burdened lower bound, upper
/// bound) as a band, the work and span laws, and the burdened speedup line.
fn draw_prediction<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    curve: &[(f64, f64, f64)],
    pred: &Prediction,
    xmax: f64,
    ymax: f64,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let mut band: Vec<(f64, f64)> = curve.iter().map(|c| (c.0, c.1)).collect();
    band.extend(curve.iter().rev().map(|c| (c.0, c.2)));
    chart
        .draw_series(std::iter::once(Polygon::new(band, BAND.filled())))
        .map_err(e)?
        .label("Estimated speedup range")
        .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 24, y + 6)], BAND.filled()));

    work_law(chart, xmax.min(ymax), "Work law: speedup ≤ P")?;

    let par = pred.measures.parallelism();
    let label = format!("Span law: speedup ≤ parallelism ({par:.2})");
    let span_line: Vec<(f64, f64)> = if par <= ymax {
        vec![(1.0, par), (xmax, par)]
    } else {
        Vec::new() // above the chart: the legend still names it
    };
    chart
        .draw_series(LineSeries::new(span_line, SPAN.stroke_width(2)))
        .map_err(e)?
        .label(label)
        .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], SPAN.stroke_width(2)));

    chart
        .draw_series(LineSeries::new(
            curve.iter().map(|c| (c.0, c.1)),
            BURDENED.stroke_width(3),
        ))
        .map_err(e)?
        .label("Burdened speedup (lower bound)")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], BURDENED.stroke_width(3)));
    Ok(())
}

/// The measured speedups: per core count, a bar from the fastest to the slowest trial and a
/// cross at the median.
fn draw_measured<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    measured: &[MeasuredPoint],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    chart
        .draw_series(measured.iter().map(|m| {
            ErrorBar::new_vertical(
                f64::from(m.cores),
                m.min,
                m.median,
                m.max,
                MEASURED.stroke_width(2),
                12,
            )
        }))
        .map_err(e)?;
    chart
        .draw_series(
            measured
                .iter()
                .map(|m| Cross::new((f64::from(m.cores), m.median), 7, MEASURED.stroke_width(3))),
        )
        .map_err(e)?
        .label("Measured speedup (median; bar: fastest to slowest trial)")
        .legend(|(x, y)| Cross::new((x + 12, y), 6, MEASURED.stroke_width(3)));
    Ok(())
}

/// `--what-if`: the range after the change, as two dashed lines (its upper and lower bounds).
fn draw_what_if<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    curve: &[(f64, f64, f64)],
    parallelism: f64,
) -> Result<(), String> {
    type Bound = fn(&(f64, f64, f64)) -> f64;
    let bounds: [(Bound, String); 2] = [
        (
            |c| c.2,
            format!("What-if: upper bound (parallelism {parallelism:.2})"),
        ),
        (|c| c.1, "What-if: burdened lower bound".to_string()),
    ];
    for (bound, label) in bounds {
        chart
            .draw_series(DashedLineSeries::new(
                curve.iter().map(|c| (c.0, bound(c))),
                8,
                5,
                WHAT_IF.stroke_width(3),
            ))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(|(x, y)| {
                plotters::element::DashedPathElement::new(
                    [(x, y), (x + 24, y)],
                    6,
                    4,
                    WHAT_IF.stroke_width(3),
                )
            });
    }
    Ok(())
}
