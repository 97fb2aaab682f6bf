//! `--plot FILE.svg|FILE.png`: the scalability profile of the Cilkview paper's Figure 2, drawn
//! by cilkview-rs itself with plotters (no gnuplot): work law, span law, burdened lower bound,
//! the estimated range between them shaded, and measured speedups (median, with the trials'
//! min–max as a bar) when a benchmark ran. The format follows the file's extension. Text is
//! drawn with DejaVu Sans, embedded in the binary (the `dejavu` crate), so a PNG needs no
//! fonts installed.

mod draw;

use std::path::{Path, PathBuf};
use std::sync::Once;

use cilkview_engine::{speedup_with_task_cost, Measures};
use plotters::prelude::*;
use plotters::style::FontStyle;
use serde::{Deserialize, Serialize};

use crate::{Artifact, Destination, ExportError, Exporter, RunReport};

/// Pixel size of the picture.
pub const PLOT_SIZE: (u32, u32) = (960, 620);

/// A measured speedup at one core count: the median over trials, and the trials' range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPoint {
    pub cores: u32,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The predicted part of a plot.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub measures: Measures,
    pub span_coefficient: f64,
    /// A runtime's cost per spawn (`run --openmp`), 0 otherwise.
    pub task_cost: u64,
    /// The measures after `--what-if` (docs/what-if.md): their range drawn beside the measured
    /// one.
    pub what_if: Option<Measures>,
    /// The most held lock's speedup bound (`run --locks`; infinite without): the measured
    /// range is drawn within it (docs/locks.md).
    pub lock_bound: f64,
}

/// Everything one speedup plot shows (a plotters or gnuplot picture).
#[derive(Clone, Debug, PartialEq)]
pub struct SpeedupPlot {
    /// The program's name, for the title.
    pub program: String,
    pub prediction: Option<Prediction>,
    pub measured: Vec<MeasuredPoint>,
    /// The largest core count on the x axis.
    pub max_cores: u32,
}

impl SpeedupPlot {
    /// The prediction of a report with its measured speedups (`run --bench`). The x axis spans
    /// the report's table (its `--max-cores`) when nothing was measured; with measurements, the
    /// cores measured, and at least 8 so that the prediction's shape shows beyond a small
    /// machine.
    pub fn of_report(report: &RunReport) -> SpeedupPlot {
        let measured = report.measured.clone();
        let widest = measured.iter().map(|m| m.cores).max();
        SpeedupPlot {
            program: report.program.clone(),
            prediction: Some(Prediction {
                measures: report.measures.measured(),
                span_coefficient: report.span_coefficient,
                task_cost: report.task_cost(),
                what_if: report.what_if.as_ref().map(|w| w.after.measures.measured()),
                lock_bound: report.lock_bound(),
            }),
            measured,
            max_cores: match widest {
                Some(w) => w.max(8),
                None => report.max_cores().max(2),
            },
        }
    }

    /// Curves sampled at every integer P: (P, lower bound, upper bound).
    fn curve(&self) -> Option<Vec<(f64, f64, f64)>> {
        let p = self.prediction.as_ref()?;
        let bound = p.lock_bound;
        let curve = self.curve_of(&p.measures);
        Some(
            curve
                .into_iter()
                .map(|(c, lower, upper)| (c, lower.min(bound), upper.min(bound)))
                .collect(),
        )
    }

    /// The same curves for the measures after `--what-if`, if any.
    fn what_if_curve(&self) -> Option<Vec<(f64, f64, f64)>> {
        let m = self.prediction.as_ref()?.what_if?;
        Some(self.curve_of(&m))
    }

    fn curve_of(&self, m: &Measures) -> Vec<(f64, f64, f64)> {
        let p = self.prediction.as_ref();
        let (delta, task_cost) = p.map_or((0.85, 0), |p| (p.span_coefficient, p.task_cost));
        (1..=self.max_cores)
            .map(|c| {
                let s = speedup_with_task_cost(m, c, delta, task_cost);
                (f64::from(c), s.lower, s.upper)
            })
            .collect()
    }
}

/// The picture formats, chosen by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlotFormat {
    Svg,
    Png,
}

impl PlotFormat {
    /// The format for a file name, or an error naming the accepted extensions.
    pub fn of(path: &Path) -> Result<PlotFormat, ExportError> {
        match path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .as_deref()
        {
            Some("svg") => Ok(PlotFormat::Svg),
            Some("png") => Ok(PlotFormat::Png),
            _ => Err(ExportError::PlotFormat(path.to_owned())),
        }
    }
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded fonts are valid TrueType: registration cannot fail on them.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Draws `plot` as SVG or PNG bytes.
pub fn render_plot(plot: &SpeedupPlot, format: PlotFormat) -> Result<Vec<u8>, ExportError> {
    register_fonts();
    let plot_err = |e: String| ExportError::Plot(e);
    match format {
        PlotFormat::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, PLOT_SIZE).into_drawing_area();
                draw::draw(&root, plot).map_err(plot_err)?;
                root.present().map_err(|e| plot_err(e.to_string()))?;
            }
            Ok(svg.into_bytes())
        }
        PlotFormat::Png => {
            let (w, h) = PLOT_SIZE;
            let mut rgb = vec![0u8; (w * h * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, PLOT_SIZE).into_drawing_area();
                draw::draw(&root, plot).map_err(plot_err)?;
                root.present().map_err(|e| plot_err(e.to_string()))?;
            }
            let mut png = Vec::new();
            image::codecs::png::PngEncoder::new(&mut png)
                .write_image(&rgb, w, h, image::ColorType::Rgb8)
                .map_err(|e| plot_err(e.to_string()))?;
            Ok(png)
        }
    }
}

use image::ImageEncoder;

/// `--plot FILE`: the report's prediction (of region `region`, `--plot-region`, if named), with
/// the measured points when a benchmark ran (`run --bench`).
pub struct PlotExporter {
    pub path: PathBuf,
    pub region: Option<String>,
}

impl Exporter for PlotExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::File(self.path.clone())]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        let format = PlotFormat::of(&self.path)?;
        let report = report.focused(self.region.as_deref())?;
        let plot = SpeedupPlot::of_report(&report);
        Ok(vec![Artifact {
            destination: Destination::File(self.path.clone()),
            bytes: render_plot(&plot, format)?,
        }])
    }
}
