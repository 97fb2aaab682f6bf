//! `run --counter native --repeat N` through the real `cilkview-rs`: the program runs N times
//! (its output each time, its exit status the first run's), each strand's cost is the mean of
//! its runs, less the runs an interruption lengthened; the report states the noise bound of work and
//! span; runs whose marks depart from the first's are used up to there, a run that ends
//! otherwise ends the repetitions; `--repeat` without the native counter is refused. (Its
//! accuracy against the instruction counters: tests/native.rs.)

mod common;

use cilkview_fixtures::build;
use common::{analyze_with, bin, native_measures_time, static_opts};

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn repeat_runs_the_program_n_times_and_says_so() {
    if !native_measures_time() {
        return;
    }
    let exe = build("stencil_outer", &static_opts());
    let one = analyze_with(&exe, &["--counter", "native"], &["64", "20"]);
    assert_eq!(one.code(), Some(0), "{}", one.stderr());
    let output = one.stdout();
    assert_eq!(output.lines().count(), 1, "{output}");
    // One run of ~40 ns rows: the report says why --repeat would help.
    assert!(
        one.stderr().contains("strands are short (mean "),
        "{}",
        one.stderr()
    );
    assert!(one.json["counter"].get("runs").is_none(), "{}", one.json);

    let five = analyze_with(
        &exe,
        &["--counter", "native", "--repeat", "5"],
        &["64", "20"],
    );
    assert_eq!(five.code(), Some(0), "{}", five.stderr());
    assert_eq!(five.stdout(), output.repeat(5));
    assert_eq!(five.json["counter"]["runs"], 5);
    // The work is the median run's, and the counter's notes (a hit's cost, the waits) are
    // that run's, named in the note and the JSON.
    let reason = &common::counter_says(&five.json);
    let noise_block = &five.json["counter"]["noise"];
    let median_run = noise_block["median_run"].as_u64().unwrap();
    assert!((1..=5).contains(&median_run), "{noise_block}");
    assert_eq!(
        noise_block["run_work_median"].as_u64(),
        Some(five.u("work"))
    );
    assert!(
        reason.ends_with(&format!(
            "each strand the median of its 5 runs, all scaled to the median run's work: run \
             {median_run}'s, whose notes these are (--repeat)"
        )),
        "{reason}"
    );
    // The noise bound: the runs' work around the work, the span by the minima below the span.
    let noise = noise_numbers(&five.stderr());
    let (work, span) = (five.u("work") as f64 / 1e6, five.u("span") as f64 / 1e6);
    assert!((noise[0] - work).abs() <= 0.001, "{noise:?} {work}");
    assert!(noise[2] <= noise[3] && noise[1] >= 0.0, "{noise:?}");
    assert!(
        noise[2] <= 2.0 * work && noise[3] >= work / 2.0,
        "{noise:?} {work}"
    );
    assert!((noise[4] - span).abs() <= 0.001, "{noise:?} {span}");
    assert!(
        noise[6] <= span + 0.001 && noise[5] >= 0.0,
        "{noise:?} {span}"
    );
    assert!(
        !five.stderr().contains("strands are short"),
        "{}",
        five.stderr()
    );
    assert!(!five.stderr().contains("--repeat:"), "{}", five.stderr());
    // The same dag: the counts are one run's.
    for key in ["spawns", "syncs"] {
        assert_eq!(five.u(key), one.u(key), "{key}");
    }
    let region = |a: &common::Analysis, key: &str| a.region("stencil")[key].as_u64().unwrap();
    // 20 sweeps of a loop of 62 rows, each spawning all its iterations but the last.
    assert_eq!(region(&five, "spawns"), 61 * 20);
    assert_eq!(region(&one, "spawns"), 61 * 20);
    // Each strand is at most its first run's: the minimum's work is below one run's typical
    // work (not compared with `one`, another process whose caches and ticks differ).
    assert!(five.u("work") > 0 && five.u("span") <= five.u("work"));
}

/// The numbers of the report's "time noise over N runs" line: work (ms), its bound (%), the
/// runs' least and most work (ms), span (ms), its bound (%), the span by the minima (ms).
fn noise_numbers(stderr: &str) -> Vec<f64> {
    let line = stderr
        .lines()
        .find(|l| l.contains("time noise over 5 runs: work "))
        .unwrap_or_else(|| panic!("no time noise line: {stderr}"));
    let numbers: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.parse().ok())
        .collect();
    // "5" (runs) first, then the seven numbers.
    assert_eq!(numbers.len(), 8, "{line}");
    numbers[1..].to_vec()
}

/// `run --counter native --repeat 3 varies_per_run COUNT HOW` with a new run counter.
fn three_runs_of_varies_per_run(how: &str) -> common::Analysis {
    let exe = build("varies_per_run", &static_opts());
    let dir = tempfile::tempdir().unwrap();
    let count = dir.path().join("count");
    let flags = ["--counter", "native", "--repeat", "3"];
    analyze_with(&exe, &flags, &[count.to_str().unwrap(), how])
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn runs_whose_marks_depart_are_used_up_to_there() {
    if !native_measures_time() {
        return;
    }
    // Run k spawns k children: runs 2 and 3 depart at the second spawn.
    let a = three_runs_of_varies_per_run("spawns");
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.stdout(), "run 1\nrun 2\nrun 3\n");
    assert_eq!(a.json["counter"]["runs"], 3);
    // The report is run 1's dag: one spawn.
    assert_eq!(a.u("spawns"), 1);
    let warnings = a.stderr();
    for run in [2, 3] {
        assert!(
            warnings.contains(&format!(
                "--repeat: run {run} did not hit the marks of run 1 in the same order (thread 1 \
                 after "
            )),
            "{warnings}"
        );
    }
    assert!(
        warnings.contains("its strands from there on were not used"),
        "{warnings}"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_run_that_ends_otherwise_ends_the_repetitions() {
    if !native_measures_time() {
        return;
    }
    // Run k exits with status k - 1: run 2 ends otherwise than run 1 (its strands, the same as run
    // 1's, are used), run 3 is not made.
    let a = three_runs_of_varies_per_run("status");
    assert_eq!(a.stdout(), "run 1\nrun 2\n");
    // The report and the exit status are run 1's.
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.u("spawns"), 2);
    assert_eq!(a.json["counter"]["runs"], 2);
    let reason = &common::counter_says(&a.json);
    assert!(
        reason.ends_with(
            "each strand the mean of its 2 runs where they agree (within 1/64 of the shorter or 40 ns), \
             else the shorter (--repeat)"
        ),
        "{reason}"
    );
    assert!(
        a.stderr().contains(
            "--repeat: run 2 ended with status 1 where run 1 ended with status 0: its strands \
             were used where its marks matched run 1's; run 3 was not made"
        ),
        "{}",
        a.stderr()
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn repeat_needs_the_native_counter() {
    for counter in ["auto", "emulate", "step"] {
        let out = bin()
            .args(["run", "--counter", counter, "--repeat", "3", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(common::TOOL_FAILED));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err,
            "error: --repeat 3 estimates each strand's time over runs: it needs --counter \
             native (the exact counters count the same every run)\n"
        );
    }
    let zero = bin()
        .args(["run", "--counter", "native", "--repeat", "0", "true"])
        .output()
        .unwrap();
    assert!(!zero.status.success());
    let err = String::from_utf8_lossy(&zero.stderr);
    assert!(err.contains("--repeat"), "{err}");
}

/// A fib with a mark every few instructions: strands of a few ns, of the order of the stub's own
/// cost taken off each — the report says time cannot resolve them, and bounds the work by the
/// marks' own cost.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn strands_too_fine_for_time_are_said_so() {
    if !native_measures_time() {
        return;
    }
    let exe = build("fib", &static_opts());
    for flags in [
        &["--counter", "native"][..],
        &["--counter", "native", "--repeat", "2"],
    ] {
        let a = analyze_with(&exe, flags, &["20"]);
        assert_eq!(a.code(), Some(0), "{}", a.stderr());
        assert!(
            a.stderr()
                .contains("warning: strands are too fine for time (mean "),
            "{flags:?}: {}",
            a.stderr()
        );
        assert!(!a.stderr().contains("strands are short"), "{}", a.stderr());
        // The work's bound from the marks' own cost: hits × 5 ns against the work, both read
        // back from the report (strands of a few ns: far above 5%).
        let hits = a.u("events");
        let bound = 100.0 * (hits * 5) as f64 / a.u("work") as f64;
        let line = format!(
            "work by time is uncertain by ±{bound:.0}% from the marks' own cost: {hits} hits × ~5 ns"
        );
        assert!(
            bound > 5.0 && a.stderr().contains(&line),
            "{line}\n{}",
            a.stderr()
        );
    }
}

/// `--repeat auto`: at least 3 runs, then until a run changes the span by 5% at most; the report
/// says how many runs and why it stopped, and the program ran that many times.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn repeat_auto_runs_until_the_span_settles() {
    if !native_measures_time() {
        return;
    }
    let exe = build("stencil_outer", &static_opts());
    let a = analyze_with(
        &exe,
        &["--counter", "native", "--repeat", "auto"],
        &["64", "20"],
    );
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    let runs = a.json["counter"]["runs"].as_u64().unwrap();
    assert!((3..=100).contains(&runs), "{}", a.json);
    assert_eq!(a.stdout().lines().count() as u64, runs, "{}", a.stdout());
    let settled =
        format!("--repeat auto: {runs} runs, the span settled (run {runs} changed it by ");
    let stopped = format!("--repeat auto: stopped after {runs} runs at the time budget");
    assert!(
        a.stderr().contains(&settled) || a.stderr().contains(&stopped),
        "{}",
        a.stderr()
    );
    assert!(
        a.stderr()
            .contains(&format!("time noise over {runs} runs: work ")),
        "{}",
        a.stderr()
    );
}
