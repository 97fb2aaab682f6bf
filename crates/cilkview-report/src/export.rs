//! The export manager: every output the user asked for, built once from the options (and checked
//! writable before anything runs), then written by one call that also evaluates the
//! `--fail-below` gates. Shaped like hyperfine's `ExportManager`; one for each subcommand's report
//! type (an analysis here, a benchmark in `bench/`).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{
    Artifact, CallgrindExporter, Destination, ExportError, Exporter, FlameGraphExporter, Gate,
    GnuplotExporter, JsonExporter, PlotExporter, ProfileCsvExporter, RunReport, TextExporter,
    TopSitesExporter, WarningsExporter,
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
    /// `-v`: the counter's notes in their long form in the text report.
    pub verbose: bool,
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
        files(&exporters(self))
    }
}

/// The files among the exporters' destinations.
fn files<R: ?Sized>(exporters: &[Box<dyn Exporter<R>>]) -> Vec<PathBuf> {
    exporters
        .iter()
        .flat_map(|e| e.destinations())
        .filter_map(|d| match d {
            Destination::File(path) => Some(path),
            Destination::Stderr | Destination::Stdout => None,
        })
        .collect()
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
    /// Two outputs named `-`: their texts would be mixed on standard output.
    #[error("{first} - and {second} - would both write to standard output: name a file for one")]
    TwoOnStdout {
        first: &'static str,
        second: &'static str,
    },
}

/// Output files created before a run so that an unwritable path is reported before an hour of
/// tracing. Those it created and that were not written are removed again when it is dropped
/// (unless [`Reservation::keep`] was called), so a failed run leaves no empty files behind.
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

    /// `path` is written: keep it.
    fn written(&mut self, path: &Path) {
        self.created.retain(|p| p != path);
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

/// The exporters of one report (an analysis, [`RunReport`], or a benchmark) and its gates.
/// Creating one reserves the output files (see [`Reservation`]); [`ExportManager::write`] writes
/// them all and checks the gates. Dropped without a complete write (the run failed, or an output
/// did), it removes the files it created and did not write.
pub struct ExportManager<R: ?Sized = RunReport> {
    exporters: Vec<Box<dyn Exporter<R>>>,
    /// Each gate's complaint about a report, if it fails (`--fail-below`).
    gates: Vec<Gate>,
    reserved: Reservation,
}

/// The exporters of an analysis, in the order they write: warnings, the text report, the
/// profile and the JSON asked for, then the plots.
fn exporters(options: &ExportOptions) -> Vec<Box<dyn Exporter>> {
    let mut out: Vec<Box<dyn Exporter>> = vec![
        Box::new(WarningsExporter),
        Box::new(TextExporter {
            verbose: options.verbose,
        }),
    ];
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
            region: options.plot_region.clone(),
        }));
    }
    if let Some(path) = &options.plot {
        out.push(Box::new(PlotExporter {
            path: path.clone(),
            region: options.plot_region.clone(),
        }));
    }
    out
}

/// Sends an artifact where it goes: the text to `stderr`, files to their paths.
fn write_artifact(
    artifact: Artifact,
    stderr: &mut dyn Write,
    reserved: &mut Reservation,
) -> Result<(), OutputError> {
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
            reserved.written(&path);
        }
    }
    Ok(())
}

impl<R: ?Sized> ExportManager<R> {
    /// These exporters (in the order they write), their files checked writable (and created if
    /// missing).
    pub fn with_exporters(
        exporters: Vec<Box<dyn Exporter<R>>>,
    ) -> Result<ExportManager<R>, OutputError> {
        let reserved = Reservation::reserve(files(&exporters))?;
        Ok(ExportManager {
            exporters,
            gates: Vec::new(),
            reserved,
        })
    }

    /// Writes every exporter's output (text to `stderr`, files to their paths, `-` to standard
    /// output), then a line for each failing gate. Returns whether every gate passed. The
    /// output files written are kept, even if a later one fails.
    pub fn write(&mut self, report: &R, stderr: &mut dyn Write) -> Result<bool, OutputError>
    where
        R: Gated,
    {
        for exporter in &self.exporters {
            for artifact in exporter.render(report)? {
                write_artifact(artifact, stderr, &mut self.reserved)?;
            }
        }
        self.reserved.keep();
        let mut passed = true;
        for line in report.failing(&self.gates) {
            let _ = writeln!(stderr, "cilkview-rs: {line}");
            passed = false;
        }
        Ok(passed)
    }
}

/// A report the `--fail-below` gates judge: an analysis; a benchmark has none.
pub trait Gated {
    /// What each failing gate says.
    fn failing(&self, gates: &[Gate]) -> Vec<String>;
}

impl Gated for RunReport {
    fn failing(&self, gates: &[Gate]) -> Vec<String> {
        gates.iter().filter_map(|g| g.check(self)).collect()
    }
}

impl ExportManager<RunReport> {
    /// The exporters and gates of `options` (`run`, `attach`, `report`), their files checked
    /// writable (and created if missing).
    pub fn new(options: &ExportOptions) -> Result<ExportManager<RunReport>, OutputError> {
        options.check_prefixes()?;
        let mut manager = ExportManager::with_exporters(exporters(options))?;
        manager.gates = options.gates.clone();
        Ok(manager)
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
        let head = format!(
            "{{\n  \"version\": {},\n  \"program\": \"./qsort\"",
            crate::JSON_VERSION
        );
        assert!(json.starts_with(head.as_bytes()));
        assert!(dir.path().join("p.plt").exists());
        let text = String::from_utf8(stderr).unwrap();
        assert!(text.contains("Parallelism: 21.31\n"), "{text}");
    }

    #[test]
    fn a_failed_write_keeps_what_was_written_and_removes_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let mut manager = ExportManager::new(&ExportOptions {
            json: Some(dir.path().join("r.json")),
            gnuplot: Some(dir.path().join("p")),
            plot: Some(dir.path().join("p.svg")),
            plot_region: Some("nowhere".into()),
            ..Default::default()
        })
        .unwrap();
        let err = manager.write(&figure6(), &mut Vec::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no region \"nowhere\" to plot (the report has no region)"
        );
        drop(manager);
        assert!(std::fs::metadata(dir.path().join("r.json")).unwrap().len() > 0);
        for f in ["p.dat", "p.plt", "p.svg"] {
            assert!(!dir.path().join(f).exists(), "{f} left behind");
        }
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
