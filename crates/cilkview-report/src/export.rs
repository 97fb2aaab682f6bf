//! The export manager: every output the user asked for, built once from the options (and checked
//! writable before anything runs), then written by one call that also evaluates the
//! `--fail-below` gates. Shaped like hyperfine's `ExportManager`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use crate::{
    Artifact, CallgrindExporter, Destination, ExportError, Exporter, FlameGraphExporter, Gate,
    GnuplotExporter, JsonExporter, MeasuredPoint, PlotExporter, ProfileCsvExporter, RunReport,
    TextExporter, TopSitesExporter,
};

/// What to write and check: the command line's output options.
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    /// `--json FILE`.
    pub json: Option<PathBuf>,
    /// `--gnuplot PREFIX`: `PREFIX.dat` and `PREFIX.plt`.
    pub gnuplot: Option<PathBuf>,
    /// `--plot FILE.svg|FILE.png`: the scalability profile drawn with plotters.
    pub plot: Option<PathBuf>,
    /// `--plot-region LABEL`: `--plot` and `--gnuplot` draw this region instead of the whole run.
    pub plot_region: Option<String>,
    /// `--fail-below` gates.
    pub gates: Vec<Gate>,
    /// `--profile PREFIX`: `PREFIX.csv`, `PREFIX.folded`, `PREFIX.svg`, `PREFIX.work.folded`,
    /// `PREFIX.work.svg`, `PREFIX.callgrind`, and
    /// the "top call sites on the span" table after the text report.
    pub profile: Option<PathBuf>,
    /// `--top N`: rows of that table (`None`: 10).
    pub top: Option<usize>,
}

impl ExportOptions {
    /// The prefix options are file name prefixes, not folders: `--profile outdir/` would write
    /// `outdir/.csv`, `--profile /` `/.csv`.
    fn check_prefixes(&self) -> Result<(), OutputError> {
        for (option, prefix) in [("--profile", &self.profile), ("--gnuplot", &self.gnuplot)] {
            let Some(path) = prefix else { continue };
            let text = path.as_os_str().as_encoded_bytes();
            let folder = text.is_empty()
                || text.ends_with(b"/")
                || !matches!(
                    path.components().next_back(),
                    Some(std::path::Component::Normal(_))
                );
            if folder {
                return Err(OutputError::FolderPrefix {
                    option,
                    path: path.clone(),
                });
            }
        }
        Ok(())
    }

    /// Every file these options write (`PREFIX.dat` and `PREFIX.plt` for gnuplot).
    pub fn files(&self) -> Vec<PathBuf> {
        let (whole, plots) = exporters(self, &[]);
        whole
            .iter()
            .chain(&plots)
            .flat_map(|e| e.destinations())
            .filter_map(|d| match d {
                Destination::File(path) => Some(path),
                Destination::Stderr | Destination::Stdout => None,
            })
            .collect()
    }
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
    /// Two outputs name one file: one would be lost.
    #[error("two outputs would write the same file {}: give them different names", path.display())]
    SameFile { path: PathBuf },
    /// A prefix option (`--profile`, `--gnuplot`) names a folder, so its files would be hidden
    /// (`outdir/.csv`).
    #[error("{option} {}: a prefix of file names is needed (e.g. {}), not a folder", path.display(), path.join("name").display())]
    FolderPrefix { option: &'static str, path: PathBuf },
}

/// Output files created before a run so that an unwritable path is reported before an hour of
/// tracing; unless [`Reservation::keep`] is called, the files it created are removed again when
/// it is dropped, so a failed run leaves no empty files behind.
#[derive(Debug, Default)]
pub struct Reservation {
    created: Vec<PathBuf>,
}

impl Reservation {
    /// Creates each file of `paths` that does not exist yet and checks every one is writable.
    /// Two paths that name one file (the same path, or the same file once created: `./a` and
    /// `a`, a link) are an error: one output would be lost.
    pub fn reserve(paths: impl IntoIterator<Item = PathBuf>) -> Result<Reservation, OutputError> {
        use std::os::unix::fs::MetadataExt;
        let mut reservation = Reservation::default();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        for path in paths {
            let existed = path.exists();
            if let Err(source) = OpenOptions::new().append(true).create(true).open(&path) {
                // Dropping `reservation` removes what was created so far.
                return Err(OutputError::Unwritable { path, source });
            }
            if !existed {
                reservation.created.push(path.clone());
            }
            if let Ok(meta) = path.metadata() {
                let id = (meta.dev(), meta.ino());
                if seen.contains(&id) {
                    return Err(OutputError::SameFile { path });
                }
                seen.push(id);
            }
        }
        Ok(reservation)
    }

    /// The files are written: keep them.
    pub fn keep(&mut self) {
        self.created.clear();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        for path in &self.created {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The exporters of one report and its gates. [`ExportManager::new`] reserves the output files
/// (see [`Reservation`]); [`ExportManager::write`] writes them all and checks the gates.
pub struct ExportManager {
    options: ExportOptions,
    /// Benchmarked speedups for the plots (`run --bench`), set after the run.
    measured: Vec<MeasuredPoint>,
    reserved: Reservation,
}

type Exporters = Vec<Box<dyn Exporter>>;

/// The exporters for these options: always the text report, the profile and the JSON asked for
/// (`whole`), then the plots (`plots`), which carry the `measured` points.
fn exporters(options: &ExportOptions, measured: &[MeasuredPoint]) -> (Exporters, Exporters) {
    let mut whole: Vec<Box<dyn Exporter>> = vec![Box::new(TextExporter)];
    if let Some(prefix) = &options.profile {
        let top = options.top.unwrap_or(TopSitesExporter::default().top);
        whole.push(Box::new(TopSitesExporter { top }));
        whole.push(Box::new(ProfileCsvExporter {
            prefix: prefix.clone(),
        }));
        whole.push(Box::new(FlameGraphExporter {
            prefix: prefix.clone(),
        }));
        whole.push(Box::new(CallgrindExporter {
            prefix: prefix.clone(),
        }));
    }
    if let Some(path) = &options.json {
        whole.push(Box::new(JsonExporter { path: path.clone() }));
    }
    let mut out: Vec<Box<dyn Exporter>> = Vec::new();
    if let Some(prefix) = &options.gnuplot {
        out.push(Box::new(GnuplotExporter {
            prefix: prefix.clone(),
            measured: measured.to_vec(),
        }));
    }
    if let Some(path) = &options.plot {
        out.push(Box::new(PlotExporter {
            path: path.clone(),
            measured: measured.to_vec(),
        }));
    }
    (whole, out)
}

/// Sends each artifact where it goes: the text to `stderr`, files to their paths.
fn write_artifacts(artifacts: Vec<Artifact>, stderr: &mut dyn Write) -> Result<(), OutputError> {
    for artifact in artifacts {
        match artifact.destination {
            Destination::Stderr => {
                let _ = stderr.write_all(&artifact.bytes);
            }
            Destination::Stdout => {
                let mut stdout = std::io::stdout().lock();
                if let Err(source) = stdout
                    .write_all(&artifact.bytes)
                    .and_then(|()| stdout.flush())
                {
                    return Err(OutputError::Write {
                        path: PathBuf::from("standard output"),
                        source,
                    });
                }
            }
            Destination::File(path) => {
                if let Err(source) = std::fs::write(&path, &artifact.bytes) {
                    return Err(OutputError::Write { path, source });
                }
            }
        }
    }
    Ok(())
}

impl ExportManager {
    /// The exporters of `options`, their files checked writable (and created if missing).
    pub fn new(options: &ExportOptions) -> Result<ExportManager, OutputError> {
        options.check_prefixes()?;
        let files = options.files();
        Ok(ExportManager {
            options: options.clone(),
            measured: Vec::new(),
            reserved: Reservation::reserve(files)?,
        })
    }

    /// Measured speedups (`run --bench`) to draw with the prediction.
    pub fn set_measured(&mut self, measured: Vec<MeasuredPoint>) {
        self.measured = measured;
    }

    /// Writes the report's warnings, then every exporter's output (the text report to
    /// `stderr`, files to their paths), then a line for each failing gate. Returns whether every
    /// gate passed. The output files are kept from now on, even if a later one fails.
    pub fn write(
        &mut self,
        report: &RunReport,
        stderr: &mut dyn Write,
    ) -> Result<bool, OutputError> {
        self.reserved.keep();
        for w in &report.warnings {
            let _ = writeln!(stderr, "warning: {}", crate::text::printable(w));
        }
        let (whole, plots) = exporters(&self.options, &self.measured);
        for exporter in &whole {
            write_artifacts(exporter.render(report)?, stderr)?;
        }
        if !plots.is_empty() {
            // The text and JSON are written even if the region to plot does not exist.
            let focused = match &self.options.plot_region {
                Some(label) => match report.focus(label) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        // Leave no empty plot file behind.
                        for path in plots.iter().flat_map(|p| p.destinations()) {
                            if let Destination::File(path) = path {
                                if path.metadata().is_ok_and(|m| m.len() == 0) {
                                    let _ = std::fs::remove_file(path);
                                }
                            }
                        }
                        return Err(e.into());
                    }
                },
                None => None,
            };
            for exporter in &plots {
                write_artifacts(exporter.render(focused.as_ref().unwrap_or(report))?, stderr)?;
            }
        }
        let mut passed = true;
        for gate in &self.options.gates {
            if let Some(line) = gate.check(report) {
                let _ = writeln!(stderr, "cilkview-rs: {line}");
                passed = false;
            }
        }
        Ok(passed)
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
        assert!(json.starts_with(b"{\n  \"version\": 2,\n  \"program\": \"./qsort\""));
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
