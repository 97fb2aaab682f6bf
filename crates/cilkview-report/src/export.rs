//! The export manager: every output the user asked for, built once from the options (and checked
//! writable before anything runs), then written by one call that also evaluates the
//! `--fail-below` gates. Shaped like hyperfine's `ExportManager`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use crate::{
    CallgrindExporter, Destination, ExportError, Exporter, FlameGraphExporter, Gate,
    GnuplotExporter, JsonExporter, ProfileCsvExporter, RunReport, TextExporter, TopSitesExporter,
};

/// What to write and check: the command line's output options.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `--gnuplot PREFIX`: `PREFIX.dat` and `PREFIX.plt`.
    pub gnuplot: Option<PathBuf>,
    /// `--fail-below` gates.
    pub gates: Vec<Gate>,
    /// `--profile PREFIX`: `PREFIX.csv`, `PREFIX.folded`, `PREFIX.svg`, `PREFIX.callgrind`, and
    /// the "top call sites on the span" table after the text report.
    pub profile: Option<PathBuf>,
    /// `--top N`: rows of that table (`None`: 10).
    pub top: Option<usize>,
}

/// Why the outputs could not be prepared or written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot write output file {} (check that its folder exists and is writable)", path.display())]
    Unwritable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// The exporters of one report and its gates. [`ExportManager::new`] creates the output files
/// that do not exist yet (so that an unwritable path is reported before an hour of tracing);
/// unless [`ExportManager::write`] ran, they are removed again when the manager is dropped, so a
/// failed run leaves no empty files behind.
pub struct ExportManager {
    exporters: Vec<Box<dyn Exporter>>,
    gates: Vec<Gate>,
    /// Files `new` created, removed on drop until the report is written.
    reserved: Vec<PathBuf>,
}

/// The exporters for these options: always the text report, then the files asked for.
fn exporters(options: &ExportOptions) -> Vec<Box<dyn Exporter>> {
    let mut out: Vec<Box<dyn Exporter>> = vec![Box::new(TextExporter)];
    if let Some(prefix) = &options.profile {
        let top = options.top.unwrap_or(TopSitesExporter::default().top);
        out.push(Box::new(TopSitesExporter { top }));
        out.push(Box::new(ProfileCsvExporter {
            prefix: prefix.clone(),
        }));
        out.push(Box::new(FlameGraphExporter {
            prefix: prefix.clone(),
        }));
        out.push(Box::new(CallgrindExporter {
            prefix: prefix.clone(),
        }));
    }
    if let Some(path) = &options.json {
        out.push(Box::new(JsonExporter { path: path.clone() }));
    }
    if let Some(prefix) = &options.gnuplot {
        out.push(Box::new(GnuplotExporter {
            prefix: prefix.clone(),
        }));
    }
    out
}

impl ExportManager {
    /// The exporters of `options`, their files checked writable (and created if missing).
    pub fn new(options: &ExportOptions) -> Result<ExportManager, OutputError> {
        let mut manager = ExportManager {
            exporters: exporters(options),
            gates: options.gates.clone(),
            reserved: Vec::new(),
        };
        let destinations: Vec<Destination> = manager
            .exporters
            .iter()
            .flat_map(|e| e.destinations())
            .collect();
        for destination in destinations {
            if let Destination::File(path) = destination {
                let existed = path.exists();
                if let Err(source) = OpenOptions::new().append(true).create(true).open(&path) {
                    // Dropping `manager` removes what was created so far.
                    return Err(OutputError::Unwritable { path, source });
                }
                if !existed {
                    manager.reserved.push(path);
                }
            }
        }
        Ok(manager)
    }

    /// Writes the report's warnings, then every exporter's output (the text report to
    /// `stderr`, files to their paths), then a line for each failing gate. Returns whether every
    /// gate passed. The output files are kept from now on, even if a later one fails.
    pub fn write(
        &mut self,
        report: &RunReport,
        stderr: &mut dyn Write,
    ) -> Result<bool, OutputError> {
        self.reserved.clear();
        for w in &report.warnings {
            let _ = writeln!(stderr, "warning: {w}");
        }
        for exporter in &self.exporters {
            for artifact in exporter.render(report)? {
                match artifact.destination {
                    Destination::Stderr => {
                        let _ = stderr.write_all(&artifact.bytes);
                    }
                    Destination::File(path) => {
                        if let Err(source) = std::fs::write(&path, &artifact.bytes) {
                            return Err(OutputError::Write { path, source });
                        }
                    }
                }
            }
        }
        let mut passed = true;
        for gate in &self.gates {
            if let Some(line) = gate.check(report) {
                let _ = writeln!(stderr, "cilkview-rs: {line}");
                passed = false;
            }
        }
        Ok(passed)
    }
}

impl Drop for ExportManager {
    fn drop(&mut self) {
        for path in &self.reserved {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure6() -> RunReport {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
        crate::read_json(&path).expect("fixtures/figure6.json")
    }

    #[test]
    fn reserved_files_are_removed_unless_the_report_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let options = ExportOptions {
            json: Some(dir.path().join("r.json")),
            gnuplot: Some(dir.path().join("p")),
            ..Default::default()
        };
        let manager = ExportManager::new(&options).unwrap();
        for f in ["r.json", "p.dat", "p.plt"] {
            assert!(dir.path().join(f).exists(), "{f} reserved");
        }
        drop(manager);
        for f in ["r.json", "p.dat", "p.plt"] {
            assert!(!dir.path().join(f).exists(), "{f} removed");
        }
        let mut manager = ExportManager::new(&options).unwrap();
        let mut stderr = Vec::new();
        assert!(manager.write(&figure6(), &mut stderr).unwrap());
        drop(manager);
        let json = std::fs::read(dir.path().join("r.json")).unwrap();
        assert!(json.starts_with(b"{\n  \"program\": \"./qsort\""));
        assert!(dir.path().join("p.plt").exists());
        let text = String::from_utf8(stderr).unwrap();
        assert!(text.contains("Parallelism: 21.31\n"), "{text}");
    }

    #[test]
    fn an_existing_file_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.json");
        std::fs::write(&path, "keep me").unwrap();
        drop(
            ExportManager::new(&ExportOptions {
                json: Some(path.clone()),
                ..Default::default()
            })
            .unwrap(),
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep me");
    }

    #[test]
    fn an_unwritable_path_fails_before_the_run_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let options = ExportOptions {
            json: Some(dir.path().join("r.json")),
            gnuplot: Some(dir.path().join("missing/p")),
            ..Default::default()
        };
        let err = ExportManager::new(&options).err().expect("unwritable");
        assert!(
            err.to_string().starts_with("cannot write output file ")
                && err.to_string().contains("missing/p.dat"),
            "{err}"
        );
        assert!(!dir.path().join("r.json").exists());
    }

    #[test]
    fn warnings_come_first_and_failing_gates_last() {
        let mut report = figure6();
        report.warnings.push("something to know".into());
        let mut manager = ExportManager::new(&ExportOptions {
            gates: vec![
                Gate::parse("parallelism=21").unwrap(),
                Gate::parse("burdened_parallelism=22").unwrap(),
                Gate::parse("region:nowhere:parallelism=1").unwrap(),
            ],
            ..Default::default()
        })
        .unwrap();
        let mut stderr = Vec::new();
        assert!(!manager.write(&report, &mut stderr).unwrap());
        let text = String::from_utf8(stderr).unwrap();
        assert!(text.starts_with("warning: something to know\ncilkview-rs: ./qsort"));
        let tail: Vec<&str> = text.lines().rev().take(2).collect();
        assert_eq!(
            tail[1],
            "cilkview-rs: burdened_parallelism 21.26 is below the required 22 (--fail-below)"
        );
        assert!(tail[0].starts_with("cilkview-rs: region \"nowhere\" was never measured"));
    }
}
