//! `cilkview-rs run` on real fixtures under real ptrace. The known-by-construction fixtures
//! (fixtures/known_*.c, built on an asm loop of an exact instruction count) give numbers to assert.
//!
//! The fixtures run serial startup code (the C runtime) before and after their marked part; that
//! code is in both work and span, so `work − span` isolates exactly what ran in parallel with the
//! critical path. Tolerances are a few dozen instructions of calls and prologues.

mod common;

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, compile_source, gnuplot_render, BuildOptions, Lang};
use common::{analyze, analyze_with, assert_success, bin, fixture};
use serde_json::Value;

fn assert_near(what: &str, got: u64, expected: u64, tolerance: u64) {
    assert!(
        got.abs_diff(expected) <= tolerance,
        "{what}: got {got}, expected {expected} ± {tolerance}"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn known_spawn_work_and_span() {
    let a = analyze(&fixture("known_spawn"), &[]);
    assert!(a.out.status.success(), "{}", a.stderr());
    // Children of 20002 and 40002, continuation 10002: work 70006, span 40002 in the marked part.
    assert_near("work - span", a.u("work") - a.u("span"), 70006 - 40002, 64);
    assert_eq!((a.u("spawns"), a.u("syncs"), a.u("events")), (2, 1, 7));
    assert!(a.u("burdened_span") == a.u("span") + 15_000, "{}", a.json);
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn known_scope_a_callee_sync_does_not_join_the_callers_child() {
    let a = analyze(&fixture("known_scope"), &[]);
    // work 100008, span 60002 (70004 if inner's sync joined the caller's child).
    assert_near("work - span", a.u("work") - a.u("span"), 100008 - 60002, 64);
    assert_eq!((a.u("spawns"), a.u("syncs")), (2, 2));
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn known_loop_with_a_run_time_grain() {
    let exe = fixture("known_loop");
    // 8 iterations of 4002; chunks of `grain` consecutive iterations (docs/engine.md).
    for (grain, largest_chunk, spawns) in [(1u64, 1u64, 7u64), (2, 2, 3), (3, 3, 2), (8, 8, 0)] {
        let a = analyze(&exe, &[&grain.to_string()]);
        assert_near(
            &format!("grain {grain}: work - span"),
            a.u("work") - a.u("span"),
            (8 - largest_chunk) * 4002,
            8 * 8,
        );
        assert_eq!(a.u("spawns"), spawns, "grain {grain}");
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn known_regions_repeat_and_nest() {
    let a = analyze(&fixture("known_regions"), &[]);
    for (label, work, span) in [
        ("step", 3 * 8004, 3 * 6002),
        ("inner", 8004, 6002),
        ("outer", 10006, 8004),
    ] {
        let r = a.region(label);
        assert_near(
            &format!("{label} work"),
            r["work"].as_u64().unwrap(),
            work,
            48,
        );
        assert_near(
            &format!("{label} span"),
            r["span"].as_u64().unwrap(),
            span,
            48,
        );
    }
    let text = a.stderr();
    assert!(text.contains("Region \"step\""), "{text}");
}

/// Each mark is one 5-byte NOP: the marked binary runs about one instruction more per mark hit
/// than its serial elision (the same source compiled with CILKVIEW_DISABLE).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn marks_cost_about_one_instruction_per_hit() {
    let opts = BuildOptions::default().compiler("gcc").opt(2).static_link();
    let marked = analyze(&build("known_scope", &opts), &[]);
    let elided = analyze(&build("known_scope", &opts.clone().disabled()), &[]);
    assert_eq!(elided.u("events"), 0);
    assert_eq!(elided.u("work"), elided.u("span"));
    let extra = marked.u("work") as i64 - elided.u("work") as i64;
    let hits = marked.u("events") as i64;
    assert!(
        (extra - hits).abs() <= 16,
        "marked − elided = {extra}, marks hit = {hits}"
    );
}

/// The hardware counter and single-stepping must agree exactly where both exist.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn hardware_and_step_counters_agree() {
    let exe = fixture("known_spawn");
    let probe = bin()
        .args(["run", "--counter", "hw"])
        .arg(&exe)
        .output()
        .unwrap();
    if !probe.status.success() {
        let why = String::from_utf8_lossy(&probe.stderr);
        cilkview_fixtures::skip(format!(
            "no hardware instruction counter here: {}",
            why.trim()
        ));
        return;
    }
    let hw = analyze_with(&exe, &["--counter", "hw"], &[]);
    let step = analyze_with(&exe, &["--counter", "step"], &[]);
    for key in ["work", "span", "burdened_span"] {
        let (h, s) = (hw.u(key), step.u(key));
        assert!(h.abs_diff(s) * 100 <= s, "{key}: hardware {h}, step {s}");
    }
}

/// Whole-program work equals what `perf stat -e instructions:u` counts (within 1%).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn work_matches_perf_stat() {
    let exe = fixture("known_spawn");
    let perf = cilkview_fixtures::command("perf")
        .args(["stat", "-x,", "-e", "instructions:u"])
        .arg(&exe)
        .output();
    let counted = perf.ok().and_then(|o| {
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        err.lines()
            .find(|l| l.contains("instructions"))
            .and_then(|l| l.split(',').next()?.parse::<u64>().ok())
    });
    let Some(native) = counted else {
        cilkview_fixtures::skip("perf stat cannot count instructions:u here (no PMU or no perf)");
        return;
    };
    let a = analyze(&exe, &[]);
    let work = a.u("work");
    assert!(
        work.abs_diff(native) * 100 <= native,
        "work {work}, perf stat {native}"
    );
}

/// Paper section 5: the stencil with the parallel loop inside (a loop of small iterations per row)
/// cannot pay for its spawns; with the loop outside it can. Measured on the region "stencil" (the
/// sweeps), on a 64×64 grid with a burden of 1,000 instructions: single-stepping (the fallback on
/// machines without a hardware counter, ~30 µs per instruction) makes the grids the default burden
/// of 15,000 needs (n ≥ 256) too slow for a test; scripts/bench.sh runs those with the default burden.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn stencil_inner_loop_is_burdened_outer_loop_is_not() {
    let flags = ["--burden", "1000"];
    let inner = analyze_with(&fixture("stencil_inner"), &flags, &["64", "1"]);
    let outer = analyze_with(&fixture("stencil_outer"), &flags, &["64", "1"]);
    let (bi, bo) = (
        inner.region("stencil")["burdened_parallelism"]
            .as_f64()
            .unwrap(),
        outer.region("stencil")["burdened_parallelism"]
            .as_f64()
            .unwrap(),
    );
    assert!(bi < 1.0, "inner: burdened parallelism {bi}");
    assert!(bo > 5.0, "outer: burdened parallelism {bo}");
    // Both have ample parallelism: only the burden tells them apart.
    for a in [&inner, &outer] {
        assert!(a.region("stencil")["parallelism"].as_f64().unwrap() > 20.0);
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn figure_4_snippets_same_parallelism_different_burden() {
    let a = analyze(&fixture("snippet_a"), &["200"]);
    let b = analyze(&fixture("snippet_b"), &["200"]);
    let (pa, pb) = (a.f("parallelism"), b.f("parallelism"));
    assert!((pa - pb).abs() / pa < 0.1, "parallelism A {pa}, B {pb}");
    let (ba, bb) = (a.f("burdened_parallelism"), b.f("burdened_parallelism"));
    assert!(ba > 5.0 * bb, "burdened parallelism A {ba}, B {bb}");
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn stdout_stdin_and_exit_status_pass_through() {
    let exe = compile_source(
        "echo_exit",
        r#"#include <stdio.h>
           #include <stdlib.h>
           int main(int argc, char **argv) {
               char line[64];
               if (fgets(line, sizeof line, stdin)) printf("got %s", line);
               printf("args %d %s\n", argc, argv[1]);
               fprintf(stderr, "to stderr\n");
               return atoi(argv[1]);
           }"#,
        Lang::C,
        &BuildOptions::default().compiler("gcc").opt(1).static_link(),
    )
    .unwrap();
    let out = bin()
        .arg("run")
        .arg(&exe)
        .args(["--", "7"])
        .write_stdin("hello\n")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "got hello\nargs 2 7\n"
    );
    assert_eq!(out.status.code(), Some(7));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("to stderr\n"), "{err}");
    assert!(
        err.contains("exited with status 7") && err.contains("1) Parallelism Profile"),
        "{err}"
    );
    // An unmarked program is measured as serial code, with a warning naming it.
    assert!(
        err.contains("has no cilkview marks") && err.contains("echo_exit"),
        "{err}"
    );
    assert!(err.contains("Parallelism: 1.00"), "{err}");
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_program_killed_by_a_signal_exits_128_plus_n() {
    let exe = compile_source(
        "abort_after_spawn",
        r#"#include <stdlib.h>
           #include "cilkview.h"
           #include "work.h"
           static void child(void) { CV_WORK(100); }
           static void f(void) { cv_function(); cv_spawn(child()); abort(); }
           int main(void) { f(); return 0; }"#,
        Lang::C,
        &BuildOptions::default().compiler("gcc").opt(1).static_link(),
    )
    .unwrap();
    let a = analyze(&exe, &[]);
    assert_eq!(a.out.status.code(), Some(128 + 6));
    assert_eq!(a.json["signal"], 6);
    assert!(a.json.get("exit_status").is_none());
    assert_eq!(a.u("spawns"), 1);
    assert!(
        a.stderr().contains("killed by signal 6 (SIGABRT)"),
        "{}",
        a.stderr()
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn gnuplot_output_renders() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    std::fs::create_dir(&plots).unwrap();
    let out = bin()
        .arg("run")
        .arg("--gnuplot")
        .arg(plots.join("fib"))
        .arg(fixture("fib"))
        .args(["--", "8"])
        .output()
        .unwrap();
    assert_success(&out);
    assert!(plots.join("fib.dat").is_file());
    // Run from the folder above: the script finds its .dat and draws the .png beside itself.
    if let Some(png) = gnuplot_render(dir.path(), "plots/fib.plt", "plots/fib.png") {
        assert!(png.len() > 5000, "a PNG of {} bytes", png.len());
    }
    // And from the folder itself.
    std::fs::remove_file(plots.join("fib.png")).unwrap();
    gnuplot_render(&plots, "fib.plt", "fib.png");
}

fn figure6() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json")
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn report_of_the_figure_6_json_reads_as_figure_6() {
    let out = bin().arg("report").arg(figure6()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stderr);
    for line in [
        "Work: 5,570,609,776 instructions",
        "Burdened span: 262,078,779 instructions",
        "Parallelism: 21.31",
        "Burdened parallelism: 21.26",
        "Average maximal strand: 218 instructions (work per strand between marks)",
        "2 processors: 1.85 – 2.00",
        "32 processors: 9.20 – 21.31",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(out.stdout.is_empty(), "the report goes to stderr");
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn fail_below_gates() {
    let run = |gates: &[&str]| {
        let mut c = bin();
        c.arg("report").arg(figure6());
        for g in gates {
            c.arg("--fail-below").arg(g);
        }
        c.output().unwrap()
    };
    let ok = run(&["parallelism=20", "burdened_parallelism=21"]);
    assert_eq!(ok.status.code(), Some(0));
    let bad = run(&[
        "parallelism=30",
        "burdened_parallelism=21",
        "burdened_parallelism=22",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    let failures: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("is below the required"))
        .collect();
    assert_eq!(failures.len(), 2, "{err}");
    assert!(
        failures[0].contains("parallelism 21.31 is below the required 30"),
        "{err}"
    );
    let missing = run(&["region:nope:parallelism=1"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("region \"nope\" was never measured"));
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn fail_below_on_a_real_run_writes_outputs_first() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = bin()
        .arg("run")
        .args([
            "--fail-below",
            "parallelism=1000",
            "--fail-below",
            "region:step:parallelism=1.2",
        ])
        .arg("--json")
        .arg(&json)
        .arg(fixture("known_regions"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(json.is_file());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cilkview-rs: parallelism"), "{err}");
    // step's own parallelism is 8004 / 6002 = 1.33 ≥ 1.2: that gate passes.
    assert!(!err.contains("region \"step\": parallelism"), "{err}");
}

/// Single-stepping binds the program and the tracer to one CPU for speed, unless
/// `--no-cpu-binding`: then the program sees its own affinity mask, as without the tool. Either
/// way the measures are the same.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn cpu_binding_is_visible_in_the_report_and_can_be_turned_off() {
    let exe = compile_source(
        "print_cpus",
        r#"#define _GNU_SOURCE
           #include <sched.h>
           #include <stdio.h>
           #include "cilkview.h"
           #include "work.h"
           static void child(void) { CV_WORK(300); }
           static void f(void) { cv_function(); cv_spawn(child()); CV_WORK(100); cv_sync(); }
           int main(void) {
               cpu_set_t s;
               sched_getaffinity(0, sizeof s, &s);
               f();
               printf("cpus %d\n", CPU_COUNT(&s));
               return 0;
           }"#,
        Lang::C,
        &common::static_opts(),
    )
    .unwrap();
    let native = cilkview_fixtures::command(&exe).output().unwrap();
    let unbound = analyze_with(&exe, &["--counter", "step", "--no-cpu-binding"], &[]);
    assert_eq!(unbound.out.stdout, native.stdout);
    let bound = analyze_with(&exe, &["--counter", "step"], &[]);
    let reason = &common::counter_says(&bound.json);
    assert!(reason.contains("bound to CPU"), "{reason}");
    assert_eq!(bound.stdout(), "cpus 1\n");
    assert_eq!(bound.parallel_part(), unbound.parallel_part());
    assert_eq!(bound.u("spawns"), unbound.u("spawns"));
}

/// Threads are counted over all threads, each with its own fork-join stack: the marks two threads
/// hit in turn do not get mixed up, and the threads' measures combine as parallel computations.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn threads_each_have_their_own_fork_join_stack() {
    let exe = build("long_running", &common::static_opts().flag("-pthread"));
    // 3 rounds in each of 2 threads; each round's step: 2 spawns, 1 sync, work 5006, span 2002.
    let a = analyze(&exe, &["3", "0", "2"]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!((a.u("spawns"), a.u("syncs")), (12, 6), "{}", a.json);
    assert!(!a.stderr().contains("did not nest"), "{}", a.stderr());
    assert!(a.u("work") >= 6 * 5006, "{}", a.json);
    // The second thread's 3 steps (work − span = 3 × 3004 of it runs beside the main thread's span)
    // make the whole more parallel than one thread's steps alone could.
    assert!(a.parallel_part() >= 6 * 3004, "{}", a.json);
}

/// A small run's whole-program figures are mostly its start-up: the text report puts the whole
/// program and each region side by side, and `--plot-region` draws a region instead of the run.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn regions_side_by_side_and_plot_region() {
    let dir = tempfile::tempdir().unwrap();
    let (json, svg, dat) = (
        dir.path().join("r.json"),
        dir.path().join("p.svg"),
        dir.path().join("g.dat"),
    );
    let out = bin()
        .arg("run")
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .arg("--gnuplot")
        .arg(dir.path().join("g"))
        .args(["--plot-region", "step"])
        .arg(fixture("known_regions"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let step = r["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["label"] == "step")
        .unwrap();
    let (work, span) = (
        step["work"].as_u64().unwrap(),
        step["span"].as_u64().unwrap(),
    );
    // Three instances of work 8004, span 6002 (fixtures/known_regions.c), a few dozen apart.
    assert!(
        work.abs_diff(3 * 8004) < 100 && span.abs_diff(3 * 6002) < 100,
        "{step}"
    );
    let line = err
        .lines()
        .find(|l| l.starts_with("region \"step\""))
        .unwrap_or_else(|| panic!("no side-by-side row: {err}"));
    let fmt = |v: u64| {
        let s = v.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    assert!(
        line.contains(&fmt(work)) && line.contains(&fmt(span)),
        "{line}"
    );
    assert!(err.contains("Whole program and regions"), "{err}");
    // The plots show the region: its title and its parallelism (work / span = 1.33).
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg.contains("[region step]") && svg.contains("parallelism 1.33"),
        "{svg}"
    );
    let dat = std::fs::read_to_string(&dat).unwrap();
    assert!(dat.contains("1.33"), "{dat}");
    // A region that the program does not have: refused before it runs, naming those it has.
    let out = bin()
        .arg("run")
        .arg("--plot")
        .arg(dir.path().join("q.svg"))
        .args(["--plot-region", "nope"])
        .arg(fixture("known_regions"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert!(!err.contains("Parallelism Profile"), "{err}");
    assert!(
        err.trim_end()
            .starts_with("error: --plot-region names region \"nope\", which ")
            && err
                .trim_end()
                .ends_with(" never reports (its regions: inner, outer, step)"),
        "{err}"
    );
    assert!(!dir.path().join("q.svg").exists());
}

/// `run --counter step` single-steps the program's own `pushfq; popfq` (fixtures/popf_rounds.c):
/// the kernel then took the trap flag set for the step as the program's, and a child forked
/// after it, detached at once, trapped at its first instruction and died of SIGTRAP ("child 0
/// killed by Trace/breakpoint trap"). Each child now exits with its own status.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn children_forked_after_a_stepped_popf_run_as_without_the_tool() {
    let exe = fixture("popf_rounds");
    let args = ["3", "5", "1"];
    let native = cilkview_fixtures::command(&exe)
        .args(args)
        .output()
        .unwrap();
    let expected = String::from_utf8_lossy(&native.stdout);
    assert_eq!(native.status.code(), Some(5));
    assert!(expected.contains("child 2 exited 7\n"), "{expected}");
    let out = bin()
        .args(["run", "--counter", "step"])
        .arg(&exe)
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{err}");
    assert_eq!(out.status.code(), Some(5), "{err}");
    // The strands of `popfq` were measured: two spawns a round.
    assert!(err.contains("Spawns: 6"), "{err}");
}
