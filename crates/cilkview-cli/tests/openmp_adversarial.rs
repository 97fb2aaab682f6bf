//! `run --openmp` against OpenMP programs built to trip a tool that replaces the runtime's entry
//! points (one table: each case a mode of `fixtures/omp_adversarial.c`, built by gcc for
//! libgomp and by clang for libomp, measured by the default counter and by `--counter native`).
//! Every case: the program's output and exit status equal a run without the tool (with
//! `OMP_CANCELLATION=true`, both), and the runtime's counts say what ran; or the tool refuses it
//! in one line before it runs.

mod common;

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, BuildOptions};
use common::bin;
use serde_json::Value;

/// A mode and the runtime counts its run must show (name, value).
struct Case {
    mode: &'static str,
    counts: &'static [(&'static str, u64)],
}

const CASES: &[Case] = &[
    // The outer region and the two inner ones, a task per element.
    Case {
        mode: "nested",
        counts: &[("parallel_regions", 3), ("tasks", 64)],
    },
    // The inner region of a region of one is serialized by the runtime itself.
    Case {
        mode: "setnum",
        counts: &[("parallel_regions", 1), ("serial_parallel_regions", 1)],
    },
    Case {
        mode: "private",
        counts: &[("parallel_regions", 1)],
    },
    // Tasks 0..=21 run, the 22nd cancels the group: the 42 after it and the one after the
    // taskwait are discarded, as the runtime discards them on one thread.
    Case {
        mode: "cancel",
        counts: &[("parallel_regions", 2), ("tasks", 22), ("taskgroups", 1)],
    },
    Case {
        mode: "fork",
        counts: &[("parallel_regions", 1)],
    },
];

/// Only libgomp: libomp (LLVM 14) aborts on it in a team of one (refused, below).
const DETACH: Case = Case {
    mode: "detach",
    counts: &[("tasks", 1), ("detached_tasks", 1)],
};

const COUNTERS: [&str; 2] = ["auto", "native"];

fn options(compiler: &str) -> BuildOptions {
    BuildOptions::default()
        .compiler(compiler)
        .opt(2)
        .flag("-fopenmp")
}

/// The clang build (libomp), `None` said aloud where clang -fopenmp cannot build.
fn clang_build(define: Option<&str>) -> Option<PathBuf> {
    let opts = options("clang");
    let opts = match define {
        Some(d) => opts.define(d),
        None => opts,
    };
    common::clang_openmp("omp_adversarial", opts)
}

/// The program's (stdout, status) without the tool.
fn alone(exe: &Path, mode: &str) -> (String, Option<i32>) {
    let out = cilkview_fixtures::command(exe)
        .args([mode, "64", "3"])
        .env("OMP_CANCELLATION", "true")
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

/// `case` under `run --openmp --counter counter`: `Err(what differed)`.
fn measured(exe: &Path, case: &Case, counter: &str) -> Result<(), String> {
    let expected = alone(exe, case.mode);
    if expected.1 != Some(3) {
        return Err(format!("without the tool: {expected:?}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = bin()
        .args(["run", "--openmp", "--counter", counter, "--json"])
        .arg(&json)
        .arg(exe)
        .args([case.mode, "64", "3"])
        .env("OMP_CANCELLATION", "true")
        .output()
        .unwrap();
    let got = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    if got != expected {
        return Err(format!(
            "the program changed: {got:?} against {expected:?}: {err}"
        ));
    }
    let report: Value = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| format!("no report: {err}"))?;
    let counts = &report["runtime"]["counts"];
    for &(name, value) in case.counts {
        let found = counts
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == name))
            .and_then(|c| c["value"].as_u64());
        if found != Some(value) {
            return Err(format!("{name}: {found:?}, not {value}: {counts}"));
        }
    }
    Ok(())
}

fn run_table(exe: &Path, runtime: &str, cases: &[&Case]) -> Vec<String> {
    let mut failures = vec![];
    for case in cases {
        for counter in COUNTERS {
            let result = measured(exe, case, counter);
            eprintln!(
                "{runtime} {} {counter}: {}",
                case.mode,
                result.as_ref().map_or("FAILED", |_| "ok")
            );
            if let Err(why) = result {
                failures.push(format!("{runtime} {} {counter}: {why}", case.mode));
            }
        }
    }
    failures
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn every_openmp_case_is_measured_and_the_program_is_unharmed() {
    let gcc = build("omp_adversarial", &options("gcc"));
    let gcc_cases: Vec<&Case> = CASES.iter().chain([&DETACH]).collect();
    let mut failures = run_table(&gcc, "libgomp", &gcc_cases);
    if let Some(clang) = clang_build(Some("NO_DETACH")) {
        failures.extend(run_table(
            &clang,
            "libomp",
            &CASES.iter().collect::<Vec<_>>(),
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A clang program with `detach` tasks: libomp aborts on them in a team of one thread (as
/// without the tool at OMP_NUM_THREADS=1), so it is refused before it runs, in one line.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn libomp_detach_tasks_are_refused_before_the_run() {
    let Some(clang) = clang_build(None) else {
        return;
    };
    let out = bin()
        .args(["run", "--openmp"])
        .arg(&clang)
        .args(["detach", "64", "3"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert!(out.stdout.is_empty(), "the program ran");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("detach tasks") && err.contains("66654"),
        "{err}"
    );
}
