//! # cilkview-report
//!
//! The report of one analysis ([`RunReport`], whose serde form is the JSON schema) and its output
//! formats. Each format is one module implementing [`Exporter`]; adding a format touches one file
//! here and one flag in the CLI.

mod gnuplot;
mod json;
mod model;
mod plot;
mod prediction;
mod text;

use std::path::PathBuf;

pub use gnuplot::GnuplotExporter;
pub use json::{read_json, JsonExporter};
pub use model::{
    signal_name, speedup_table, AttachReport, CounterReport, Ending, RegionReport, RunInfo,
    RunReport, SpeedupRow,
};
pub use plot::{
    render_plot, MeasuredPoint, PlotExporter, PlotFormat, Prediction, Profile, PLOT_SIZE,
};
pub use prediction::predicted;
pub use text::TextExporter;

/// Where an artifact goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Standard error, like `perf stat`: standard output belongs to the program under test.
    Stderr,
    File(PathBuf),
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
    #[error("cannot draw the plot: {0}")]
    Plot(String),
    #[error("{0}: a plot file must end in .svg or .png")]
    PlotFormat(PathBuf),
}

/// An output format.
pub trait Exporter {
    /// Where this exporter will write, known before anything runs (so that an unwritable path is
    /// reported before an hour of tracing, not after).
    fn destinations(&self) -> Vec<Destination>;

    /// Renders the report.
    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError>;
}
