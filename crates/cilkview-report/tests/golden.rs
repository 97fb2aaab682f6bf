//! Golden files, as inferno keeps them: every exporter renders checked-in reports, and each
//! output is compared byte for byte with a reviewed file under `tests/golden/expected/`.
//!
//! The reports in `tests/golden/reports/` were saved by real runs (`cilkview-rs run --json`,
//! `bench --json`; paths made relative); `figure6.json` is the Cilkview paper's Figure 6. A change
//! that alters what a user sees shows up here as a diff to review. After reviewing it, accept
//! the new outputs with
//!
//! ```text
//! CILKVIEW_BLESS=1 cargo test -p cilkview-report --test golden
//! ```
//!
//! and commit the changed files with the change that made them.

use std::path::{Path, PathBuf};

use cilkview_report::{
    read_json, Artifact, BenchCsvExporter, BenchPlotExporter, BenchReport, BenchTableExporter,
    CallgrindExporter, Destination, Exporter, FlameGraphExporter, GnuplotExporter, JsonExporter,
    PlotExporter, ProfileCsvExporter, RunReport, TextExporter, TopSitesExporter, WarningsExporter,
};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn run_report(name: &str) -> RunReport {
    let path = golden_dir().join("reports").join(format!("{name}.json"));
    read_json(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn bench_report(name: &str) -> BenchReport {
    let path = golden_dir().join("reports").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One exporter's artifacts under the golden names: a file keeps its name; what goes to the
/// terminal is `STREAM` (stderr or stdout) named after the exporter.
fn named(exporter: &str, artifacts: Vec<Artifact>) -> Vec<(String, Vec<u8>)> {
    artifacts
        .into_iter()
        .map(|artifact| {
            let name = match &artifact.destination {
                Destination::File(path) => path.file_name().unwrap().to_string_lossy().into(),
                Destination::Stderr => format!("{exporter}.stderr"),
                Destination::Stdout => format!("{exporter}.stdout"),
            };
            (name, artifact.bytes)
        })
        .collect()
}

fn render<R: ?Sized>(exporter: &dyn Exporter<R>, report: &R, name: &str) -> Vec<(String, Vec<u8>)> {
    let artifacts = exporter
        .render(report)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    named(name, artifacts)
}

/// Every output of an analysis's exporters, as `run` writes them with all its output options
/// (the profile's only for a report that has call sites).
fn run_outputs(report: &RunReport) -> Vec<(String, Vec<u8>)> {
    let profile = PathBuf::from("profile");
    let mut exporters: Vec<(&str, Box<dyn Exporter>)> = vec![
        ("warnings", Box::new(WarningsExporter)),
        ("text", Box::new(TextExporter { verbose: false })),
        ("text-verbose", Box::new(TextExporter { verbose: true })),
        (
            "json",
            Box::new(JsonExporter {
                path: "report.json".into(),
            }),
        ),
        (
            "gnuplot",
            Box::new(GnuplotExporter {
                prefix: "scalability".into(),
                region: None,
            }),
        ),
        (
            "plot",
            Box::new(PlotExporter {
                path: "plot.svg".into(),
                region: None,
            }),
        ),
    ];
    if report.call_sites.is_some() {
        exporters.push(("top-sites", Box::new(TopSitesExporter::default())));
        exporters.push((
            "csv",
            Box::new(ProfileCsvExporter {
                prefix: profile.clone(),
            }),
        ));
        exporters.push((
            "flamegraph",
            Box::new(FlameGraphExporter {
                prefix: profile.clone(),
            }),
        ));
        exporters.push(("callgrind", Box::new(CallgrindExporter { prefix: profile })));
    }
    exporters
        .iter()
        .flat_map(|(name, exporter)| render(exporter.as_ref(), report, name))
        .collect()
}

/// Every output of a benchmark's exporters, with the analysis it is compared with.
fn bench_outputs(report: &BenchReport, analysis: RunReport) -> Vec<(String, Vec<u8>)> {
    let exporters: Vec<(&str, Box<dyn Exporter<BenchReport>>)> = vec![
        (
            "table",
            Box::new(BenchTableExporter {
                after_report: false,
            }),
        ),
        (
            "json",
            Box::new(JsonExporter {
                path: "bench.json".into(),
            }),
        ),
        (
            "csv",
            Box::new(BenchCsvExporter {
                path: "bench.csv".into(),
            }),
        ),
        (
            "plot",
            Box::new(BenchPlotExporter {
                path: "bench.svg".into(),
                analysis: Some(analysis),
                region: None,
            }),
        ),
    ];
    exporters
        .iter()
        .flat_map(|(name, exporter)| render(exporter.as_ref(), report, name))
        .collect()
}

/// Compares `outputs` with `expected/CASE/`, or writes them there under `CILKVIEW_BLESS=1`.
/// Every file there must be produced: a format that stopped being written is a difference too.
fn check(case: &str, outputs: Vec<(String, Vec<u8>)>) {
    let dir = golden_dir().join("expected").join(case);
    if std::env::var_os("CILKVIEW_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in &outputs {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        return;
    }
    let mut differences = Vec::new();
    for (name, bytes) in &outputs {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(expected) if expected == *bytes => {}
            Ok(expected) => differences.push(first_difference(name, &expected, bytes)),
            Err(_) => differences.push(format!("{name}: new output, no golden file")),
        }
    }
    let produced: Vec<&str> = outputs.iter().map(|(n, _)| n.as_str()).collect();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !produced.contains(&name.as_str()) {
            differences.push(format!("{name}: golden file no longer produced"));
        }
    }
    assert!(
        differences.is_empty(),
        "{case}: outputs differ from tests/golden/expected/{case}/:\n{}\n\
         review, then accept with CILKVIEW_BLESS=1 cargo test -p cilkview-report --test golden",
        differences.join("\n")
    );
}

/// The first line that differs, both ways, for the failure message.
fn first_difference(name: &str, expected: &[u8], got: &[u8]) -> String {
    let expected = String::from_utf8_lossy(expected);
    let got = String::from_utf8_lossy(got);
    let mut e = expected.lines();
    let mut g = got.lines();
    for line in 1.. {
        match (e.next(), g.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => {
                return format!(
                    "{name}: line {line}\n  golden: {}\n  now:    {}",
                    a.unwrap_or("(end)"),
                    b.unwrap_or("(end)")
                )
            }
        }
    }
    unreachable!()
}

#[test]
fn figure6() {
    check("figure6", run_outputs(&run_report("figure6")));
}

#[test]
fn quicksort_profile() {
    let report = run_report("quicksort_profile");
    assert!(
        report.call_sites.is_some(),
        "the profiled report has call sites"
    );
    check("quicksort_profile", run_outputs(&report));
}

#[test]
fn regions() {
    check("regions", run_outputs(&run_report("regions")));
}

/// `run --locks` (fixtures/locks_known.c): the locks section, the bound line, the table bounded.
#[test]
fn locks() {
    let report = run_report("locks");
    assert!(report.locks.is_some(), "the report has locks");
    check("locks", run_outputs(&report));
}

#[test]
fn loop_grain() {
    check("loop", run_outputs(&run_report("loop")));
}

#[test]
fn openmp() {
    check("openmp", run_outputs(&run_report("openmp")));
}

#[test]
fn openmp_loop() {
    check("openmp_loop", run_outputs(&run_report("openmp_loop")));
}

/// A report by time, with the warning its run printed (warnings are not saved in JSON).
#[test]
fn native_time() {
    let mut report = run_report("native_time");
    report.warnings.push(
        "strands are short (mean 26.1 µs between marks): each interruption of the machine (a \
         timer tick, the hypervisor; 15–40 µs on a VM) lengthens the strand it lands in and the \
         span collects them, so the parallelism by time reads low; --repeat 5 (or auto) leaves \
         each strand's interrupted runs out and states the noise bound"
            .into(),
    );
    check("native_time", run_outputs(&report));
}

#[test]
fn bench_with_its_analysis() {
    let report = bench_report("bench_omp_loop");
    check(
        "bench_omp_loop",
        bench_outputs(&report, run_report("openmp_loop")),
    );
}
