//! # cilkview-report
//!
//! The report of one analysis ([`RunReport`], whose serde form is the JSON schema) and its output
//! formats, and those of a benchmark ([`BenchReport`], `bench/`). Each format is one module
//! implementing [`Exporter`]; adding a format touches one file here, one line in an exporter list
//! (`export.rs` for an analysis, `bench/mod.rs` for a benchmark) and one flag in the CLI. The
//! [`ExportManager`] owns the outputs of every subcommand: files reserved before it runs, every
//! format written after it (files created for a run that failed removed), and the
//! `--fail-below` [`Gate`]s.

#![forbid(unsafe_code)]

mod against;
mod bench;
mod callgrind;
mod export;
mod flamegraph;
mod focus;
mod gate;
mod gnuplot;
mod json;
mod locks;
mod model;
mod plot;
mod prediction;
mod profile_csv;
mod profile_model;
mod profile_text;
mod runtime;
mod text;
mod what_if;
mod what_if_text;

use std::path::{Path, PathBuf};

pub use against::{time_against_exact, AgainstError, AgainstPart, AgainstReport, SLOWER_PATH};
pub use bench::{
    compare, measured_points, BenchCsvExporter, BenchExportOptions, BenchPlotExporter,
    BenchTableExporter,
};
pub use callgrind::CallgrindExporter;
pub use cilkview_bench::BenchReport;
pub use flamegraph::FlameGraphExporter;
pub use profile_csv::ProfileCsvExporter;
pub use profile_model::{CallContextReport, CallSiteReport, SiteName, WorkSpanReport};
pub use profile_text::TopSitesExporter;

pub use cilkview_engine::Speedup;
pub use cilkview_events::{CounterMode, Ending, ExitStatus};
pub use export::{ExportManager, ExportOptions, Gated, OutputError, Reservation};
pub use gate::{Gate, GateMeasure};
pub use gnuplot::GnuplotExporter;
pub use json::{json_schema, read_json, JsonExporter};
pub use locks::{LockSiteReport, LocksReport};
pub use model::{
    signal_name, speedup_table, AttachReport, CounterReport, MeasuresReport, RegionReport, RunInfo,
    RunReport, TimeNoise, JSON_VERSION,
};
pub use plot::{
    render_plot, MeasuredPoint, PlotExporter, PlotFormat, Prediction, SpeedupPlot, PLOT_SIZE,
};
pub use prediction::predicted;
pub use runtime::{RuntimeCount, RuntimeReport, ThreadIdSite};
pub use text::{TextExporter, WarningsExporter};
pub use what_if::{
    PlanReport, PlanStepReport, SiteRef, WhatIfChangeReport, WhatIfError, WhatIfMeasures,
    WhatIfReport, WhatIfSpec,
};

/// Where an artifact goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Standard error, like `perf stat`: standard output belongs to the program under test.
    Stderr,
    /// Standard output: a file named `-` on the command line (`--json -`), written after the
    /// program ended.
    Stdout,
    File(PathBuf),
}

impl Destination {
    /// Where an output file named on the command line goes: `-` is standard output (a file
    /// named `-` is `./-`).
    pub fn of_path(path: &Path) -> Destination {
        if path.as_os_str() == "-" {
            Destination::Stdout
        } else {
            Destination::File(path.to_owned())
        }
    }
}

/// One rendered output.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub destination: Destination,
    pub bytes: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot encode the report as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no region \"{label}\" to plot ({})", focus::regions_to_plot(known))]
    NoSuchRegion { label: String, known: Vec<String> },
    #[error(
        "the analysis has no region \"{label}\" (its regions: {})",
        focus::regions_to_predict(known)
    )]
    NoRegionToPredict { label: String, known: Vec<String> },
    #[error("cannot draw the plot: {0}")]
    Plot(String),
    #[error("{0}: a plot file must end in .svg or .png")]
    PlotFormat(PathBuf),
    #[error("cannot write the call-site profile as CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("cannot write the benchmark as CSV: {0}")]
    BenchCsv(csv::Error),
    #[error("cannot render the {0}: {1}")]
    Io(&'static str, std::io::Error),
}

/// `PREFIX.extension` (the prefix may itself contain dots).
pub(crate) fn prefixed(prefix: &Path, extension: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(".");
    s.push(extension);
    PathBuf::from(s)
}

/// An output format of reports of type `R`: an analysis ([`RunReport`], the default) or a
/// benchmark ([`BenchReport`]).
pub trait Exporter<R: ?Sized = RunReport> {
    /// Where this exporter will write, known before anything runs (so that an unwritable path is
    /// reported before an hour of tracing, not after).
    fn destinations(&self) -> Vec<Destination>;

    /// Renders the report.
    fn render(&self, report: &R) -> Result<Vec<Artifact>, ExportError>;
}
