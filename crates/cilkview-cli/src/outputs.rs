//! Writing reports: the exporters the user asked for, checked before a run and written after it,
//! then the `--fail-below` gates.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cilkview_report::{
    read_json, Destination, Exporter, GnuplotExporter, JsonExporter, MeasuredPoint, PlotExporter,
    RunReport, TextExporter,
};

use crate::cli::{OutputOptions, ReportArgs};

/// The exporters for these options: always the text report, then the files asked for.
pub fn exporters(opts: &OutputOptions) -> Vec<Box<dyn Exporter>> {
    exporters_with(opts, &[])
}

/// The exporters, with benchmarked speedups for the plots.
pub fn exporters_with(opts: &OutputOptions, measured: &[MeasuredPoint]) -> Vec<Box<dyn Exporter>> {
    let mut out: Vec<Box<dyn Exporter>> = vec![Box::new(TextExporter)];
    if let Some(path) = &opts.json {
        out.push(Box::new(JsonExporter { path: path.clone() }));
    }
    if let Some(prefix) = &opts.gnuplot {
        out.push(Box::new(GnuplotExporter {
            prefix: prefix.clone(),
            measured: measured.to_vec(),
        }));
    }
    if let Some(path) = &opts.plot {
        out.push(Box::new(PlotExporter {
            path: path.clone(),
            measured: measured.to_vec(),
        }));
    }
    out
}

/// Output files the writability check created. Unless [`Reserved::keep`] is called (the report
/// was written), they are removed again when this is dropped, so a failed run leaves no empty
/// files behind.
#[must_use]
pub struct Reserved(Vec<PathBuf>);

impl Reserved {
    pub fn keep(mut self) {
        self.0.clear();
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Fails now, before anything runs, if an output file cannot be written.
pub fn check_writable(exporters: &[Box<dyn Exporter>]) -> Result<Reserved> {
    let mut created = Reserved(Vec::new());
    for e in exporters {
        for d in e.destinations() {
            if let Destination::File(path) = d {
                let existed = path.exists();
                OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .with_context(|| {
                        format!(
                            "cannot write output file {} (check that its folder exists and is writable)",
                            path.display()
                        )
                    })?;
                if !existed {
                    created.0.push(path);
                }
            }
        }
    }
    Ok(created)
}

/// Renders and writes every exporter's output; then prints warnings and checks the gates.
/// Returns whether every gate passed.
pub fn emit(report: &RunReport, opts: &OutputOptions) -> Result<bool> {
    emit_with(report, opts, &[])
}

/// [`emit`], with benchmarked speedups for the plots.
pub fn emit_with(
    report: &RunReport,
    opts: &OutputOptions,
    measured: &[MeasuredPoint],
) -> Result<bool> {
    let mut stderr = std::io::stderr().lock();
    for w in &report.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    for exporter in exporters_with(opts, measured) {
        for artifact in exporter.render(report)? {
            match artifact.destination {
                Destination::Stderr => {
                    let _ = stderr.write_all(&artifact.bytes);
                }
                Destination::File(path) => std::fs::write(&path, &artifact.bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?,
            }
        }
    }
    let mut passed = true;
    for gate in &opts.fail_below {
        if let Some(line) = gate.check(report) {
            let _ = writeln!(stderr, "cilkview-rs: {line}");
            passed = false;
        }
    }
    Ok(passed)
}

/// `cilkview-rs report FILE.json`.
pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let report = read_json(&args.file)?;
    let reserved = check_writable(&exporters(&args.output))?;
    let passed = emit(&report, &args.output)?;
    reserved.keep();
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
