//! `bench --csv FILE`: one row per worker count (docs/json-schema.md documents the columns).

use std::path::PathBuf;

use cilkview_bench::{BenchReport, Placement};

use crate::{Artifact, Destination, ExportError, Exporter};

/// `--csv FILE` (`-`: standard output).
pub struct BenchCsvExporter {
    pub path: PathBuf,
}

/// One CSV row.
#[derive(serde::Serialize)]
struct CsvRow {
    cores: u32,
    time_median: f64,
    time_min: f64,
    time_max: f64,
    speedup_median: f64,
    speedup_min: f64,
    speedup_max: f64,
    efficiency: f64,
    predicted_lower: Option<f64>,
    predicted_upper: Option<f64>,
    placement: Option<&'static str>,
}

impl BenchCsvExporter {
    /// The CSV text of the benchmark.
    pub fn to_csv(report: &BenchReport) -> Result<Vec<u8>, ExportError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &report.results {
            w.serialize(CsvRow {
                cores: r.cores,
                time_median: r.time.median,
                time_min: r.time.min,
                time_max: r.time.max,
                speedup_median: r.speedup.median,
                speedup_min: r.speedup.min,
                speedup_max: r.speedup.max,
                efficiency: r.efficiency,
                predicted_lower: r.predicted.map(|p| p.lower),
                predicted_upper: r.predicted.map(|p| p.upper),
                placement: r.placement.map(Placement::as_str),
            })
            .map_err(ExportError::BenchCsv)?;
        }
        w.into_inner()
            .map_err(|e| ExportError::Io("benchmark's CSV", e.into_error()))
    }
}

impl Exporter<BenchReport> for BenchCsvExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::of_path(&self.path)]
    }

    fn render(&self, report: &BenchReport) -> Result<Vec<Artifact>, ExportError> {
        Ok(vec![Artifact {
            destination: Destination::of_path(&self.path),
            bytes: Self::to_csv(report)?,
        }])
    }
}
