//! # cilkview-report
//!
//! The report of one analysis ([`RunReport`], whose serde form is the JSON schema) and its output
//! formats. Each format is one module implementing [`Exporter`]; adding a format touches one file
//! here, one line in [`ExportManager`]'s `exporters` and one flag in the CLI. The
//! [`ExportManager`] owns the outputs of a run: files reserved before it, every format written
//! after it, and the `--fail-below` [`Gate`]s.

#![forbid(unsafe_code)]

mod export;
mod gate;
mod gnuplot;
mod json;
mod model;
mod text;

use std::path::PathBuf;

pub use cilkview_events::{CounterMode, Ending, ExitStatus};
pub use export::{ExportManager, ExportOptions, OutputError};
pub use gate::{Gate, GateMeasure};
pub use gnuplot::GnuplotExporter;
pub use json::{read_json, JsonExporter};
pub use model::{
    signal_name, speedup_table, AttachReport, CounterReport, RegionReport, RunInfo, RunReport,
    SpeedupRow,
};
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
}

/// An output format.
pub trait Exporter {
    /// Where this exporter will write, known before anything runs (so that an unwritable path is
    /// reported before an hour of tracing, not after).
    fn destinations(&self) -> Vec<Destination>;

    /// Renders the report.
    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError>;
}
