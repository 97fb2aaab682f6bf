//! The outputs of `cilkview-rs bench` (and the table of `run --bench`): a [`BenchReport`]'s
//! measured speedups, beside an analysis's predicted range when one is given. One module per
//! format behind [`Exporter`] (the JSON is the analysis's [`JsonExporter`]); [`ExportManager::bench`]
//! is their list.

mod csv;
mod plot;
mod table;

use std::path::PathBuf;

use cilkview_bench::BenchReport;

pub use self::csv::BenchCsvExporter;
pub use self::plot::BenchPlotExporter;
pub use self::table::BenchTableExporter;
use crate::export::Gated;
use crate::{
    predicted, ExportManager, Exporter, Gate, JsonExporter, MeasuredPoint, OutputError, RunReport,
};

/// What `bench` writes: the command line's output options.
#[derive(Clone, Debug, Default)]
pub struct BenchExportOptions {
    /// `--json FILE` (`-`: standard output).
    pub json: Option<PathBuf>,
    /// `--csv FILE` (`-`: standard output).
    pub csv: Option<PathBuf>,
    /// `--plot FILE.svg|FILE.png`.
    pub plot: Option<PathBuf>,
    /// `--analysis FILE` as [`RunReport::prediction`] made it: its prediction is drawn.
    pub analysis: Option<RunReport>,
    /// `--region LABEL`: named in the plot's title.
    pub region: Option<String>,
}

impl ExportManager<BenchReport> {
    /// The exporters of `bench`, in the order they write: the table, then the JSON, CSV and plot
    /// asked for; their files checked writable (and created if missing).
    pub fn bench(options: &BenchExportOptions) -> Result<ExportManager<BenchReport>, OutputError> {
        let stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p.as_os_str() == "-");
        if stdout(&options.json) && stdout(&options.csv) {
            return Err(OutputError::TwoOnStdout {
                first: "--json",
                second: "--csv",
            });
        }
        let mut exporters: Vec<Box<dyn Exporter<BenchReport>>> =
            vec![Box::new(BenchTableExporter::default())];
        if let Some(path) = &options.json {
            exporters.push(Box::new(JsonExporter { path: path.clone() }));
        }
        if let Some(path) = &options.csv {
            exporters.push(Box::new(BenchCsvExporter { path: path.clone() }));
        }
        if let Some(path) = &options.plot {
            exporters.push(Box::new(BenchPlotExporter {
                path: path.clone(),
                analysis: options.analysis.clone(),
                region: options.region.clone(),
            }));
        }
        ExportManager::with_exporters(exporters)
    }

    /// `run --bench`: the table, after the analysis's report (whose plots show the measured
    /// speedups: [`measured_points`]).
    pub fn bench_after_analysis() -> Result<ExportManager<BenchReport>, OutputError> {
        ExportManager::with_exporters(vec![Box::new(BenchTableExporter { after_report: true })])
    }
}

impl Gated for BenchReport {
    fn failing(&self, _gates: &[Gate]) -> Vec<String> {
        Vec::new()
    }
}

/// Puts the analysis's predicted range beside each measured speedup (with where it lies).
pub fn compare(bench: &mut BenchReport, analysis: &RunReport) {
    cilkview_bench::compare(bench, |p| Some(predicted(analysis, p)));
}

/// The measured speedups as plot points.
pub fn measured_points(bench: &BenchReport) -> Vec<MeasuredPoint> {
    bench
        .results
        .iter()
        .map(|r| MeasuredPoint {
            cores: r.cores,
            median: r.speedup.median,
            min: r.speedup.min,
            max: r.speedup.max,
        })
        .collect()
}
