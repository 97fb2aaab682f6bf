//! `bench --plot FILE.svg|FILE.png`: the measured speedups, beside the prediction of
//! `--analysis` (of its `--region`) when one is given.

use std::path::PathBuf;

use cilkview_bench::BenchReport;

use crate::{
    measured_points, render_plot, Artifact, Destination, ExportError, Exporter, PlotFormat,
    RunReport, SpeedupPlot,
};

pub struct BenchPlotExporter {
    pub path: PathBuf,
    /// The analysis whose prediction is drawn ([`RunReport::prediction`]).
    pub analysis: Option<RunReport>,
    /// Its region (`--region`), named in the title.
    pub region: Option<String>,
}

impl BenchPlotExporter {
    /// What the picture shows: titled with the program benchmarked, not the (serial) build
    /// analysed.
    fn plot(&self, bench: &BenchReport) -> SpeedupPlot {
        let measured = measured_points(bench);
        match &self.analysis {
            Some(analysis) => {
                let mut titled = analysis.clone();
                titled.program = match &self.region {
                    Some(label) => format!("{} [{label}]", bench.program),
                    None => bench.program.clone(),
                };
                titled.measured = measured;
                SpeedupPlot::of_report(&titled)
            }
            None => SpeedupPlot {
                program: bench.program.clone(),
                prediction: None,
                max_cores: measured.iter().map(|m| m.cores).max().unwrap_or(1),
                measured,
            },
        }
    }
}

impl Exporter<BenchReport> for BenchPlotExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::File(self.path.clone())]
    }

    fn render(&self, bench: &BenchReport) -> Result<Vec<Artifact>, ExportError> {
        let format = PlotFormat::of(&self.path)?;
        Ok(vec![Artifact {
            destination: Destination::File(self.path.clone()),
            bytes: render_plot(&self.plot(bench), format)?,
        }])
    }
}
