//! Rust programs marked with the `cilkview` crate (fixtures/rust, built with cargo at test time)
//! under the real `cilkview-rs`: work and span known by construction (burn loops of an exact
//! instruction count), the same ratios and marks as their C twins (fixtures/twin_*.c), exact
//! counters equal (emulate = step), `RAYON_NUM_THREADS=1` set for them, call-site profiles naming
//! Rust functions.
//!
//! Numbers are those of each fixture's region (the computation, without the Rust or C runtime's
//! startup); tolerances are a few dozen instructions per call, loop iteration or element.

mod common;

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, build_rust, emulator, skip};
use common::{analyze_with, bin, static_opts, Analysis};

/// A Rust fixture, its C twin, and what each builds by construction.
struct Case {
    rust: &'static str,
    twin: &'static str,
    args: &'static [&'static str],
    label: &'static str,
    /// Region work and span by construction (burn loops only).
    work: u64,
    span: u64,
    /// How far the rest (calls, joins, the real sorting or multiplying) may add.
    work_tolerance: u64,
    span_tolerance: u64,
    spawns: u64,
}

const CASES: [Case; 5] = [
    // 34 leaves of 40002; one leaf on the span.
    Case {
        rust: "rs_fib",
        twin: "twin_fib",
        args: &[],
        label: "fib",
        work: 34 * 40002,
        span: 40002,
        work_tolerance: 67 * 100,
        span_tolerance: 7 * 100,
        spawns: 33,
    },
    // Partitions of 64, 2 × 32, 4 × 16 (10000 × len + 1 each), 8 leaves of 4002; the span has
    // one partition per level and a leaf.
    Case {
        rust: "rs_quicksort",
        twin: "twin_quicksort",
        args: &[],
        label: "sort",
        work: 3 * 64 * 10000 + 7 + 8 * 4002,
        span: (64 + 32 + 16) * 10000 + 3 + 4002,
        work_tolerance: 192 * 30 + 15 * 200,
        span_tolerance: 112 * 30 + 4 * 200,
        spawns: 7,
    },
    // 64 leaves of 20002; two levels of two phases: 4 leaves on the span.
    Case {
        rust: "rs_matmul",
        twin: "twin_matmul",
        args: &[],
        label: "matmul",
        work: 64 * 20002,
        span: 4 * 20002,
        work_tolerance: 64 * 200,
        span_tolerance: 4 * 400,
        spawns: 54,
    },
    // 16 iterations of 4002, grain 1: one on the span; grain 3: chunks of 3.
    Case {
        rust: "rs_loop",
        twin: "twin_loop",
        args: &["1"],
        label: "loop",
        work: 16 * 4002,
        span: 4002,
        work_tolerance: 16 * 80,
        span_tolerance: 200,
        spawns: 15,
    },
    Case {
        rust: "rs_loop",
        twin: "twin_loop",
        args: &["3"],
        label: "loop",
        work: 16 * 4002,
        span: 3 * 4002,
        work_tolerance: 16 * 80,
        span_tolerance: 3 * 80,
        spawns: 5,
    },
];

/// `run --counter COUNTER --json` of `exe`, or `None` (said aloud) where emulation is missing.
fn measured(exe: &Path, counter: &str, args: &[&str]) -> Option<Analysis> {
    if counter == "emulate" {
        if let Err(why) = emulator() {
            skip(format!("emulation: {why}"));
            return None;
        }
    }
    let a = analyze_with(exe, &["--counter", counter], args);
    assert!(a.out.status.success(), "{}", a.stderr());
    Some(a)
}

/// (work, span) of region `label`.
fn region(a: &Analysis, label: &str) -> (u64, u64) {
    let r = a.region(label);
    (r["work"].as_u64().unwrap(), r["span"].as_u64().unwrap())
}

fn twin(name: &str) -> PathBuf {
    build(name, &static_opts())
}

#[test]
#[ignore = "slow: runs cilkview-rs on the Rust fixtures (built with cargo)"]
fn rust_fixtures_have_their_work_and_span_by_construction_and_their_c_twins_ratios() {
    for case in &CASES {
        let what = format!("{} {:?}", case.rust, case.args);
        let Some(rust) = measured(&build_rust(case.rust, true), "emulate", case.args) else {
            return;
        };
        let c = measured(&twin(case.twin), "emulate", case.args).unwrap();
        let (rw, rs) = region(&rust, case.label);
        let (cw, cs) = region(&c, case.label);
        println!("{what}: Rust work {rw} span {rs}, C work {cw} span {cs}");
        for (lang, work, span) in [("Rust", rw, rs), ("C", cw, cs)] {
            assert!(
                work >= case.work && work - case.work <= case.work_tolerance,
                "{what} {lang}: work {work}, by construction {} + at most {}",
                case.work,
                case.work_tolerance
            );
            assert!(
                span >= case.span && span - case.span <= case.span_tolerance,
                "{what} {lang}: span {span}, by construction {} + at most {}",
                case.span,
                case.span_tolerance
            );
        }
        // The same shape: the same marks hit, the same parallelism within 2%.
        for key in ["spawns", "syncs", "events"] {
            assert_eq!(rust.u(key), c.u(key), "{what}: {key}");
        }
        assert_eq!(rust.u("spawns"), case.spawns, "{what}");
        let (rp, cp) = (rw as f64 / rs as f64, cw as f64 / cs as f64);
        assert!(
            (rp / cp - 1.0).abs() < 0.02,
            "{what}: parallelism Rust {rp:.3}, C {cp:.3}"
        );
    }
}

/// Single-stepping and emulation count the same instructions: equal work and span, exactly.
#[test]
#[ignore = "slow: runs cilkview-rs on the Rust fixtures (built with cargo)"]
fn rust_fixtures_emulate_equals_step() {
    for (name, args, label) in [
        ("rs_fib", &["4"][..], "fib"),
        ("rs_loop", &["3", "4"], "loop"),
        ("rs_quicksort", &["16"], "sort"),
        ("rs_matmul", &["4"], "matmul"),
    ] {
        let exe = build_rust(name, true);
        let Some(emulated) = measured(&exe, "emulate", args) else {
            return;
        };
        let stepped = measured(&exe, "step", args).unwrap();
        assert_eq!(
            region(&emulated, label),
            region(&stepped, label),
            "{name} {args:?}"
        );
        for key in ["spawns", "syncs", "events"] {
            assert_eq!(emulated.u(key), stepped.u(key), "{name}: {key}");
        }
        println!("{name} {args:?}: {:?} under both", region(&stepped, label));
    }
}

/// `run` starts a program marked with the crate with RAYON_NUM_THREADS=1, whatever the user's
/// value: the crate then runs everything on the calling thread. Natively it uses rayon's pool.
#[test]
#[ignore = "slow: runs cilkview-rs on the Rust fixtures (built with cargo)"]
fn run_makes_a_rust_program_serial() {
    let exe = build_rust("rs_loop", true);
    let native = cilkview_fixtures::command(&exe)
        .env_remove("RAYON_NUM_THREADS")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&native.stdout),
        "sum 64 (serial: false)\n"
    );
    let measured = bin()
        .args(["run", "--counter", "step"])
        .arg(&exe)
        .env("RAYON_NUM_THREADS", "4")
        .output()
        .unwrap();
    assert!(measured.status.success());
    assert_eq!(
        String::from_utf8_lossy(&measured.stdout),
        "sum 64 (serial: true)\n"
    );
}

/// The line of fixtures/rust/src/bin/NAME.rs holding `marker`, as `NAME.rs:LINE`.
fn line_of(name: &str, marker: &str) -> String {
    let path = cilkview_fixtures::fixtures_dir().join(format!("rust/src/bin/{name}.rs"));
    let src = std::fs::read_to_string(path).unwrap();
    let n = src
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} in {name}"));
    format!("{name}.rs:{}", n + 1)
}

/// Call-site profiles name the Rust functions (demangled) and lines that call the crate, never
/// the crate's own inlined code.
#[test]
#[ignore = "slow: runs cilkview-rs on the Rust fixtures (built with cargo)"]
fn rust_profile_names_rust_functions_and_lines() {
    if let Err(why) = emulator() {
        skip(format!("emulation: {why}"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = build_rust("rs_fib", true);
    let (report, _) = common::profiled(&exe, "emulate", &[], &[], dir.path()).unwrap();
    let sites = report["call_sites"].as_array().unwrap();
    let join = line_of("rs_fib", "cilkview::join(");
    let spawn = sites
        .iter()
        .find(|s| s["kind"] == "spawn")
        .unwrap_or_else(|| panic!("a spawn site in {sites:?}"));
    assert_eq!(spawn["function"], "rs_fib::fib", "{spawn}");
    assert!(
        spawn["location"].as_str().unwrap().ends_with(&join),
        "{spawn}: {join}"
    );
    assert_eq!(spawn["invocations"], 33, "{spawn}");
    for site in sites {
        let function = site["function"].as_str().unwrap();
        assert!(
            function.starts_with("rs_fib::")
                && !site["location"]
                    .as_str()
                    .unwrap()
                    .contains("crates/cilkview/"),
            "{site}"
        );
    }
}

/// The marks cost about one NOP per mark hit: the marked build runs at most 2.5 instructions per
/// mark hit more (or fewer: code generation differs a little) than its serial elision (built
/// without the `marks` feature; started with RAYON_NUM_THREADS=1 here, which `run` does not set
/// for a program without marks), give or take 200 instructions of the runtime's startup (string
/// functions whose count depends on where the kernel put the arguments).
#[test]
#[ignore = "slow: runs cilkview-rs on the Rust fixtures (built with cargo)"]
fn rust_marks_cost_little_against_the_elision() {
    if let Err(why) = emulator() {
        skip(format!("emulation: {why}"));
        return;
    }
    let work = |exe: &Path, args: &[&str]| {
        // Both builds run as DIR/prog, DIR of the same length: the startup copies the same
        // arguments.
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("prog");
        std::fs::copy(exe, &prog).unwrap();
        let json = dir.path().join("r.json");
        let out = bin()
            .args(["run", "--counter", "emulate", "--json"])
            .arg(&json)
            .arg(&prog)
            .args(args)
            .env("RAYON_NUM_THREADS", "1")
            .output()
            .unwrap();
        assert!(out.status.success());
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
        (
            report["work"].as_i64().unwrap(),
            report["events"].as_i64().unwrap(),
        )
    };
    for (name, args) in [
        ("rs_fib", &["12", "2"][..]),
        ("rs_matmul", &["16"]),
        ("rs_loop", &["1", "256"]),
    ] {
        let (marked, hits) = work(&build_rust(name, true), args);
        let (elided, none) = work(&build_rust(name, false), args);
        assert_eq!(none, 0, "{name}: the elision has no marks");
        let extra = marked - elided;
        println!("{name}: {extra} more instructions for {hits} mark hits");
        assert!(hits > 500, "{name}: {hits} mark hits");
        assert!(
            extra.abs() * 2 <= 5 * hits + 400,
            "{name}: {extra} more for {hits} hits"
        );
    }
}
