//! Writing reports: the exporters the user asked for, checked before a run and written after it,
//! then the `--fail-below` gates.

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cilkview_report::{
    read_json, Destination, Exporter, GnuplotExporter, JsonExporter, RunReport, TextExporter,
};

use crate::cli::{OutputOptions, ReportArgs};

/// The exporters for these options: always the text report, then the files asked for.
pub fn exporters(opts: &OutputOptions) -> Vec<Box<dyn Exporter>> {
    let mut out: Vec<Box<dyn Exporter>> = vec![Box::new(TextExporter)];
    if let Some(path) = &opts.json {
        out.push(Box::new(JsonExporter { path: path.clone() }));
    }
    if let Some(prefix) = &opts.gnuplot {
        out.push(Box::new(GnuplotExporter {
            prefix: prefix.clone(),
        }));
    }
    out
}

/// Fails now, before anything runs, if an output file cannot be written.
pub fn check_writable(exporters: &[Box<dyn Exporter>]) -> Result<()> {
    for e in exporters {
        for d in e.destinations() {
            if let Destination::File(path) = d {
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
            }
        }
    }
    Ok(())
}

/// Renders and writes every exporter's output; then prints warnings and checks the gates.
/// Returns whether every gate passed.
pub fn emit(report: &RunReport, opts: &OutputOptions) -> Result<bool> {
    let mut stderr = std::io::stderr().lock();
    for w in &report.warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    for exporter in exporters(opts) {
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
    check_writable(&exporters(&args.output))?;
    Ok(if emit(&report, &args.output)? {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
