//! `run --locks` on fixtures/locks_known.c, whose mutex is held for a quarter of the loop's work
//! by construction (CV_WORK: exactly 2N + 2 instructions): the lock's share and speedup bound
//! (4.0) with the exact counters, the two exact counters equal, the lock named by its acquiring
//! `file:line`; and what `--locks` cannot measure refused before anything runs.

mod common;

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, skip, BuildOptions};
use common::{analyze_with, bin, openmp, static_opts};
use serde_json::Value;

const FIXTURE: &str = "locks_known";
const ITERATIONS: u64 = 8;

/// The fixture, dynamically linked (the preload library reaches its lock calls), with CV_WORK
/// units `n` (the fixture's N).
fn fixture(n: u64) -> PathBuf {
    let opts = BuildOptions::default().compiler("gcc").opt(2);
    build(FIXTURE, &opts.define(&format!("N={n}")))
}

/// `run --locks --counter COUNTER --json` of `exe`: its JSON and stderr.
fn measure(exe: &Path, counter: &str) -> (Value, String) {
    measure_with(exe, &["--locks", "--counter", counter])
}

/// `run OPTIONS --json` of `exe`: its JSON and stderr.
fn measure_with(exe: &Path, options: &[&str]) -> (Value, String) {
    let a = analyze_with(exe, options, &[]);
    let stderr = a.stderr();
    assert_eq!(a.code(), Some(0), "{stderr}");
    (a.json, stderr)
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The one lock of the report.
fn the_lock(json: &Value) -> &Value {
    let sites = json["locks"]["sites"].as_array().expect("a locks block");
    assert_eq!(sites.len(), 1, "one acquiring site: {sites:?}");
    &sites[0]
}

/// The end of the fixture's acquiring call's `file:line` (the line marked SITE_LOCK; the file is
/// the copy the fixtures' build compiled).
fn site_line() -> String {
    marked_line("locks_known", "/* SITE_LOCK */")
}

/// `.c:LINE` of the line of fixture `name` containing `marker`.
fn marked_line(name: &str, marker: &str) -> String {
    marked_line_in(name, "c", marker)
}

/// `.EXT:LINE` of the line of fixture `name`.`ext` containing `marker`.
fn marked_line_in(name: &str, ext: &str, marker: &str) -> String {
    let path = cilkview_fixtures::fixtures_dir().join(format!("{name}.{ext}"));
    let src = std::fs::read_to_string(path).unwrap();
    let line = src.lines().position(|l| l.contains(marker)).unwrap() + 1;
    format!(".{ext}:{line}")
}

/// With N = 10^6: the mutex held for 8 sections of CV_WORK(N) (2N + 2 each), plus what runs
/// between the wrappers' marks and the program (the return from the lock call, the unlock call
/// up to its mark: 19 instructions a section measured here) and, once, the dynamic loader's
/// lazy binding of pthread_mutex_unlock at its first call (~700): within 2,000 of 8(2N + 2).
/// The rest of the loop is 8 CV_WORK(3N): the lock holds a quarter of the loop, 24.9% of the
/// whole run (start-up included), and bounds the speedup at work / held = 4.01, below the
/// parallelism (7.9): the speedup table's upper bounds from 8 processors on are that bound.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled program (emulation)"]
fn a_mutex_held_for_a_quarter_of_the_work_bounds_the_speedup_at_4() {
    if let Err(why) = cilkview_fixtures::emulator() {
        return skip(why);
    }
    const N: u64 = 1_000_000;
    let (json, stderr) = measure(&fixture(N), "emulate");
    let lock = the_lock(&json);
    assert_eq!(u(lock, "acquisitions"), ITERATIONS);
    let held = u(lock, "held_work");
    let sections = ITERATIONS * (2 * N + 2);
    assert!(
        (sections..=sections + 2_000).contains(&held),
        "held {held}, sections {sections}"
    );
    let work = u(&json, "work");
    assert_eq!(f(lock, "share"), held as f64 / work as f64);
    let bound = f(lock, "bound");
    assert_eq!(bound, work as f64 / held as f64);
    assert!((4.0..4.03).contains(&bound), "bound {bound}");
    // The region "compute" (the loop): the lock holds a quarter of it, to 10^-5.
    let region = &json["regions"][0];
    assert_eq!(region["label"], "compute");
    let quarter = held as f64 / u(region, "work") as f64;
    assert!((quarter - 0.25).abs() < 1e-5, "share of the loop {quarter}");
    // The bound is below the parallelism: it caps the table.
    assert!(f(&json, "parallelism") > 7.5);
    for row in json["speedup"].as_array().unwrap() {
        let (cores, upper) = (u(row, "cores"), f(row, "upper"));
        assert_eq!(upper, (cores as f64).min(bound), "{row}");
        assert!(f(row, "lower") <= upper);
    }
    // Named by the acquiring call, in the text too.
    let location = lock["location"].as_str().unwrap();
    assert!(location.ends_with(&site_line()), "{location}");
    assert_eq!(lock["function"], "iteration");
    assert!(
        stderr.contains(&format!(
            "Lock bound: {bound:.2} (below the parallelism: the lock binds)"
        )) && stderr.contains(&site_line())
            && stderr.contains("Locks (by acquiring call site)"),
        "{stderr}"
    );
}

/// The two exact counters (single-stepping, emulation) count the same instructions under the
/// lock, acquisition by acquisition: equal held work (N = 1000: stepping is ~20 µs an
/// instruction).
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled program (single-stepping and emulation)"]
fn the_exact_counters_hold_the_lock_for_the_same_instructions() {
    if let Err(why) = cilkview_fixtures::emulator() {
        return skip(why);
    }
    const N: u64 = 1_000;
    let exe = fixture(N);
    let (stepped, _) = measure(&exe, "step");
    let (emulated, _) = measure(&exe, "emulate");
    let (a, b) = (the_lock(&stepped), the_lock(&emulated));
    assert_eq!(u(a, "acquisitions"), ITERATIONS);
    assert_eq!(u(a, "held_work"), u(b, "held_work"));
    assert_eq!(a["location"], b["location"]);
    let sections = ITERATIONS * (2 * N + 2);
    let held = u(a, "held_work");
    assert!((sections..=sections + 2_000).contains(&held), "held {held}");
}

/// What `--locks` cannot reach is refused in one line, before anything runs: a static program
/// (no LD_PRELOAD), a `#!` script (the library leaves the interpreter's children), and `attach`
/// (the library is preloaded at the program's start).
#[test]
#[ignore = "slow: runs cilkview-rs (compiles a program)"]
fn what_the_preload_cannot_reach_is_refused_before_the_run() {
    let refused = |args: &[&std::ffi::OsStr], says: &str| {
        let out = bin().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(says),
            "{stderr}"
        );
    };
    let exe = build(FIXTURE, &static_opts());
    refused(
        &["run".as_ref(), "--locks".as_ref(), exe.as_os_str()],
        "is statically linked: --locks",
    );
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.sh");
    std::fs::write(&script, format!("#!/bin/sh\nexec {}\n", exe.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    refused(
        &["run".as_ref(), "--locks".as_ref(), script.as_os_str()],
        "is a `#!` script: --locks",
    );
    refused(
        &["attach".as_ref(), "--locks".as_ref(), "1".as_ref()],
        "attach cannot measure locks",
    );
}

/// Under `--openmp` (no `--locks` needed) a `critical` section is a lock, named by the construct's
/// line: fixtures/omp_critical_known.c holds it for CV_WORK(N) of each 4N iteration of a dynamic
/// loop (N = 250,000). Held: the eight sections, within 2,000 (the count's increment, the
/// wrappers' instructions, the loader's binding of GOMP_critical_end: 755 here), and the region
/// "critical" plus the marks between the lock's and the region's (4 a section here); a quarter of
/// the region "parallel" to 10^-3 (0.24982 here: the region has libgomp's loop set-up too); bound 4.0 to 4.1 with libgomp's start-up, below the
/// parallelism (7.25 here), so it bounds the speedup table.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled OpenMP program (emulation)"]
fn an_openmp_critical_section_is_a_lock_named_by_its_construct() {
    if let Err(why) = cilkview_fixtures::emulator() {
        return skip(why);
    }
    const N: u64 = 250_000;
    let exe = openmp("omp_critical_known");
    let (json, _) = measure_with(&exe, &["--openmp", "--counter", "emulate"]);
    // The lock marks' labels are no regions, in the report or in the labels a run can name.
    let out = bin()
        .args([
            "run",
            "--openmp",
            "--plot-region",
            "none",
            "--plot",
            "p.svg",
        ])
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("(its regions: atomic, critical, ordered, parallel)"),
        "{stderr}"
    );
    let lock = the_lock(&json);
    assert_eq!(u(lock, "acquisitions"), ITERATIONS);
    let held = u(lock, "held_work");
    let sections = ITERATIONS * (2 * N + 2);
    assert!((sections..=sections + 2_000).contains(&held), "held {held}");
    let region = |label: &str| {
        json["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("region {label}"))
            .clone()
    };
    assert_eq!(
        json["regions"].as_array().unwrap().len(),
        2,
        "parallel, critical"
    );
    let critical = u(&region("critical"), "work");
    assert!(
        (critical..=critical + 16 * ITERATIONS).contains(&held),
        "{held} vs {critical}"
    );
    let quarter = held as f64 / u(&region("parallel"), "work") as f64;
    assert!((quarter - 0.25).abs() < 1e-3, "share of the loop {quarter}");
    let bound = f(lock, "bound");
    assert!((4.0..4.1).contains(&bound), "bound {bound}");
    assert!(f(&json, "parallelism") > bound);
    let top = json["speedup"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(f(&top, "upper"), bound);
    let location = lock["location"].as_str().unwrap();
    let line = marked_line("omp_critical_known", "SITE_CRITICAL */");
    assert!(location.ends_with(&line), "{location}");
}

/// A `std::mutex` taken by a `std::lock_guard` (fixtures/locks_guard.cpp): libstdc++'s headers
/// inline the call of pthread_mutex_lock into the program; the lock is named by the guard's line
/// in the program and its function, not by the header (`gthr-default.h`); 4 acquisitions of
/// CV_WORK(1000) (2,002 instructions each) plus the wrappers' and std::mutex's few instructions
/// and the loader's binding of the unlock (within 2,000 in all).
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled C++ program (emulation)"]
fn a_lock_guard_is_named_by_the_programs_line_not_the_header() {
    if let Err(why) = cilkview_fixtures::emulator() {
        return skip(why);
    }
    let exe = build(
        "locks_guard",
        &BuildOptions::default().compiler("gcc").opt(2),
    );
    let (json, _) = measure(&exe, "emulate");
    let lock = the_lock(&json);
    assert_eq!(u(lock, "acquisitions"), 4);
    let held = u(lock, "held_work");
    assert!(
        (4 * 2_002..=4 * 2_002 + 2_000).contains(&held),
        "held {held}"
    );
    let location = lock["location"].as_str().unwrap();
    let line = marked_line_in("locks_guard", "cpp", "// SITE_GUARD");
    assert!(location.ends_with(&line), "{location}");
    assert_eq!(lock["function"], "iteration");
}

/// The same critical section built by clang (LLVM's libomp, `__kmpc_critical`): a lock too, with
/// the gcc build's acquisitions and held work (the sections' 8 × (2N + 2) plus the wrappers'
/// and libomp's few instructions per section, within 2,000), a quarter of the region "parallel"
/// (libomp's dynamic-loop dispatch adds ~3k instructions per chunk to it: within 0.002), named
/// by the construct's line.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled OpenMP program (emulation)"]
fn an_openmp_critical_section_under_libomp_is_a_lock_too() {
    if let Err(why) = cilkview_fixtures::emulator() {
        return skip(why);
    }
    let opts = BuildOptions::default().opt(2).flag("-fopenmp").disabled();
    let Some(exe) = common::clang_openmp("omp_critical_known", opts) else {
        return;
    };
    const N: u64 = 250_000;
    let (json, _) = measure_with(&exe, &["--openmp", "--counter", "emulate"]);
    assert_eq!(json["runtime"]["name"], "libomp", "{}", json["runtime"]);
    let lock = the_lock(&json);
    assert_eq!(u(lock, "acquisitions"), ITERATIONS);
    let held = u(lock, "held_work");
    let sections = ITERATIONS * (2 * N + 2);
    assert!((sections..=sections + 2_000).contains(&held), "held {held}");
    let parallel = json["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "parallel")
        .expect("region parallel");
    let quarter = held as f64 / u(parallel, "work") as f64;
    assert!((quarter - 0.25).abs() < 2e-3, "share of the loop {quarter}");
    let location = lock["location"].as_str().unwrap();
    let line = marked_line("omp_critical_known", "SITE_CRITICAL */");
    assert!(location.ends_with(&line), "{location}");
}
