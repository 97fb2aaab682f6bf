//! `run --tbb` on unmodified oneTBB programs (fixtures/tbb_known.cpp linked with -ltbb: its
//! only marks are the region around the construct), against their hand-marked twins (the same
//! source with -DTWIN: cilkview.h's spawns and syncs on the same dag, no oneTBB), with numbers
//! known by construction.

mod common;

use std::path::PathBuf;

use cilkview_fixtures::{build, compile_source, skip, BuildOptions, Lang};
use common::omp_known::{count, u};
use common::{analyze_with, bin, std_bin, within};
use serde_json::Value;

/// The build options of the unmodified oneTBB program (libtbb kept among the needed libraries
/// whatever the linker's --as-needed default).
fn tbb_options() -> BuildOptions {
    BuildOptions::default()
        .compiler("gcc")
        .opt(2)
        .flag("-Wl,--no-as-needed")
        .flag("-ltbb")
}

/// The oneTBB build of a fixture; `None`, said aloud, where oneTBB's headers or library are
/// missing (scripts/setup.sh installs libtbb-dev).
fn tbb_build(name: &str) -> Option<PathBuf> {
    let probe = "#include <oneapi/tbb/task_group.h>\n\
                 int main() { tbb::task_group g; g.run([] {}); g.wait(); }\n";
    if compile_source("tbb_works", probe, Lang::Cxx, &tbb_options()).is_err() {
        skip("oneTBB not available: scripts/setup.sh installs libtbb-dev");
        return None;
    }
    Some(build(name, &tbb_options()))
}

/// The hand-marked twin: the same source with -DTWIN (no oneTBB).
fn twin(name: &str) -> PathBuf {
    build(
        name,
        &BuildOptions::default()
            .compiler("gcc")
            .opt(2)
            .define("TWIN"),
    )
}

/// The instructions argument of each unit of work, cv_work(W).
const W: u64 = 1_000_000;
/// One unit: cv_work(W) is 2W + 1 instructions (and unit()'s call, a few more).
const UNIT: u64 = 2 * W + 1;

/// What the wrappers and libtbb add to the region "construct" beside the twin's, in work and
/// in span, for a construct of `spawns` spawns: per spawned task libtbb's allocation and
/// deallocation, its context check and the wrapper's bookkeeping (groups, continuations), per
/// task_group a context made and destroyed, per parallel_for or parallel_reduce its root, its
/// context and its range tree. Measured under emulation at W = 100,000 (AMD EPYC, g++ 12 -O2,
/// oneTBB 2021.8): 8 tasks +3.7k work +2.0k span; fib(8) (33 spawns) +24.1k work, +5.2k span;
/// parallel_for of 8 +9.1k work, +6.1k span; the continuation tree +9.8k, +6.7k.
fn overhead(spawns: u64) -> u64 {
    4_000 + 1_000 * spawns
}

fn parallelism(r: &Value) -> f64 {
    r["parallelism"].as_f64().unwrap()
}

/// task_group tasks and a recursive task_group fib, parallel_for and parallel_reduce split to
/// a grain of 1, parallel_invoke, continuation passing (joins run by the last half to end, as
/// libstdc++'s parallel sort), two task_groups in one function (a wait for one group's tasks):
/// the oneTBB program's region "construct" has the twin's spawns,
/// its work and span within the wrappers' overhead (both equal to the construction), its
/// parallelism within what that overhead allows, the library's counts, and the program's output.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn tbb_constructs_equal_their_hand_marked_twins() {
    let Some(tbb) = tbb_build("tbb_known") else {
        return;
    };
    let marked = twin("tbb_known");
    let w = W.to_string();
    // mode, n, spawns in the region, units of work, units on the span, roots, waits (the
    // library's counts: the program's first task_group, outside the region, is one more spawn
    // and one more wait)
    for (mode, n, spawns, units, span_units, roots, waits) in [
        ("tasks", 8, 8, 8, 1, 0, 1),
        ("fib", 8, 33, 34, 1, 0, 33),
        ("for", 8, 7, 8, 1, 1, 0),
        ("reduce", 8, 7, 8, 1, 1, 0),
        ("invoke", 8, 2, 3, 1, 1, 0),
        ("join", 8, 7, 18, 7, 1, 0),
        ("groups", 8, 2, 5, 3, 0, 2),
    ] {
        let args = [mode, &n.to_string(), &w];
        let a = analyze_with(&tbb, &["--tbb"], &args);
        let b = analyze_with(&marked, &[], &args);
        assert_eq!(a.code(), Some(0), "{mode}: {}", a.stderr());
        assert_eq!(b.code(), Some(0), "{mode}: {}", b.stderr());
        assert_eq!(a.stdout(), b.stdout(), "{mode}: the program's output");
        assert_eq!(a.json["runtime"]["name"], "libtbb", "{mode}");
        assert_eq!(count(&a, "spawns"), spawns + 1, "{mode}");
        assert_eq!(count(&a, "roots"), roots, "{mode}");
        assert_eq!(count(&a, "waits"), waits + 1, "{mode}");
        assert_eq!(count(&a, "waits_left_to_tbb"), 0, "{mode}");
        // join: each of the 7 joins is a continuation waiting for what was spawned since it
        // was made (before: the joins ran in parallel with the right halves, span 4 units).
        let continuations = if mode == "join" { 7 } else { 0 };
        assert_eq!(count(&a, "continuations"), continuations, "{mode}");
        // groups: g2's wait, in a function that also ran g1's task, waits for g2's only. fib:
        // fib(n-2)'s own task_group waits in the frame where fib(n-1) was spawned.
        let group_waits = match mode {
            "groups" => 1,
            "fib" => 12,
            _ => 0,
        };
        assert_eq!(count(&a, "group_waits"), group_waits, "{mode}");
        let (ra, rb) = (a.region("construct"), b.region("construct"));
        assert_eq!(u(ra, "spawns"), spawns, "{mode}: tbb {ra}");
        assert_eq!(u(rb, "spawns"), spawns, "{mode}: twin {rb}");
        for (key, expected) in [("work", units * UNIT), ("span", span_units * UNIT)] {
            let (x, y) = (u(ra, key), u(rb, key));
            // The twin: the units and, per unit, its call and the marks around it.
            assert!(
                y >= expected && y - expected < 1_000 + 200 * units,
                "{mode}: {key}: twin {rb}"
            );
            assert!(
                x.abs_diff(y) <= overhead(spawns),
                "{mode}: {key} {x} (--tbb) vs {y} (hand-marked): more than {} apart",
                overhead(spawns)
            );
        }
        // Parallelism work/span, each within the overhead o of the twin's: at most o/span +
        // o/work apart, relatively (fib: 1.8%; measured 0.25% at this W).
        let (pa, pb) = (parallelism(ra), parallelism(rb));
        let o = overhead(spawns) as f64;
        let bound = o / u(rb, "span") as f64 + o / u(rb, "work") as f64;
        assert!(
            (pa - pb).abs() <= bound * pb,
            "{mode}: parallelism {pa} (--tbb) vs {pb} (hand-marked), bound {bound}"
        );
    }
}

/// C++17 `std::for_each(std::execution::par)` (libstdc++ runs it on oneTBB): its chunks are
/// spawns, its work the serial loop's within the wrappers' and the parallel algorithm's
/// overhead (libstdc++'s isolate and its parallel_for: measured 25.4k over the twin's for 64
/// items in 20 chunks on 2 threads), its span a chunk's (8 units: parallelism 7.95). The chunks come from oneTBB's default
/// partitioner, so their count depends on the machine's threads (about 4 per thread).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn std_par_for_each_is_measured() {
    let Some(tbb) = tbb_build("tbb_known") else {
        return;
    };
    let marked = twin("tbb_known");
    let (n, w) = (64u64, W.to_string());
    let args = ["par", &n.to_string(), &w];
    let a = analyze_with(&tbb, &["--tbb"], &args);
    let b = analyze_with(&marked, &[], &args);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.stdout(), b.stdout());
    let (ra, rb) = (a.region("construct"), b.region("construct"));
    let spawns = u(ra, "spawns");
    assert!((1..n).contains(&spawns), "{ra}");
    assert_eq!(count(&a, "roots"), 1);
    let (work, twin_work) = (u(ra, "work"), u(rb, "work"));
    assert!(
        work >= twin_work && work - twin_work <= overhead(spawns) + 10_000,
        "work {work} (--tbb) vs {twin_work} (serial loop)"
    );
    // At least one unit, at most a half of the items (a blocked_range is split at its middle;
    // measured: 8 units, 20 chunks of 64 items, 2 threads) and the overhead.
    let span = u(ra, "span");
    assert!(
        span >= UNIT && span <= n / 2 * UNIT + overhead(spawns),
        "span {span}, {spawns} spawns"
    );
    assert!(parallelism(ra) > 1.5, "{ra}");
}

/// The program's output and exit status are its own under --tbb.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn the_programs_output_and_status_are_unchanged() {
    let Some(tbb) = tbb_build("tbb_known") else {
        return;
    };
    let plain = cilkview_fixtures::command(&tbb)
        .args(["fib", "6", "1000", "3"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(3));
    let a = analyze_with(&tbb, &["--tbb"], &["fib", "6", "1000", "3"]);
    assert_eq!(a.code(), Some(3), "{}", a.stderr());
    assert_eq!(a.out.stdout, plain.stdout);
    assert_eq!(a.stdout(), "fib: 13 units, result 13\n");
}

/// A program without libtbb is refused under --tbb with one line, before it runs; --tbb and
/// --openmp together are refused too.
#[test]
#[ignore = "slow: compiles a program"]
fn a_program_without_libtbb_is_refused() {
    let marked = twin("tbb_known");
    let out = bin()
        .args(["run", "--tbb"])
        .arg(&marked)
        .args(["--", "tasks"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "the program ran: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("--tbb")
            && stderr.contains("libtbb")
            && stderr.contains("-ltbb"),
        "{stderr}"
    );
    let both = bin()
        .args(["run", "--tbb", "--openmp"])
        .arg(&marked)
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(125));
    assert!(both.stdout.is_empty());
}

/// The same run single-stepped and emulated: the same spawns and library counts, and the region
/// "construct" within a few instructions (its code is the same; the two counters differ only
/// at the marks).
#[test]
#[ignore = "slow: single-steps a oneTBB program (~70 s: libtbb's start-up is 2.5M instructions)"]
fn step_equals_emulate_under_tbb() {
    let Some(tbb) = tbb_build("tbb_known") else {
        return;
    };
    let args = ["fib", "4", "200"];
    let step = analyze_with(&tbb, &["--tbb", "--counter", "step"], &args);
    if step.json["counter"]["mode"] != "step" {
        skip("single-stepping not available here");
        return;
    }
    let emu = analyze_with(&tbb, &["--tbb", "--counter", "emulate"], &args);
    if emu.code() != Some(0) {
        skip("qemu-x86_64 not available here");
        return;
    }
    let (s, e) = (step.region("construct"), emu.region("construct"));
    assert_eq!(u(s, "spawns"), 4, "{s}");
    for key in ["spawns", "syncs"] {
        assert_eq!(s[key], e[key], "{key}: step {s} emulate {e}");
    }
    assert_eq!(
        step.json["runtime"]["counts"],
        emu.json["runtime"]["counts"]
    );
    for key in ["work", "span"] {
        assert!(
            u(s, key).abs_diff(u(e, key)) <= 64,
            "{key}: step {s} emulate {e}"
        );
    }
    assert_eq!(step.stdout(), emu.stdout());
}

/// `--profile` names a oneTBB construct by the program's own line, not by the oneTBB header its
/// call to libtbb was inlined from: task_group::run's tasks (a spawn and a call per task) by the
/// `g.run` line, parallel_for's root by the `tbb::parallel_for(` line.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn profile_names_the_programs_own_lines() {
    let Some(tbb) = tbb_build("tbb_known") else {
        return;
    };
    let source =
        std::fs::read_to_string(cilkview_fixtures::fixtures_dir().join("tbb_known.cpp")).unwrap();
    let line_of = |text: &str| {
        1 + source
            .lines()
            .position(|l| l.trim_start().starts_with(text))
            .unwrap_or_else(|| panic!("{text} in tbb_known.cpp"))
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p");
    let profile = profile.to_str().unwrap();
    let sites = |mode: &str| {
        let a = analyze_with(&tbb, &["--tbb", "--profile", profile], &[mode, "8", "1000"]);
        assert_eq!(a.code(), Some(0), "{}", a.stderr());
        a.json["call_sites"].as_array().unwrap().clone()
    };
    let find = |sites: &[Value], function: &str, kind: &str, line: usize| -> Value {
        sites
            .iter()
            .find(|s| {
                s["function"] == function
                    && s["kind"] == kind
                    && s["location"].as_str().is_some_and(|l| {
                        // The fixture is compiled from a copy named tbb_known.<…>.cpp.
                        l.contains("tbb_known") && l.contains(&format!(".cpp:{line}"))
                    })
            })
            .unwrap_or_else(|| panic!("{kind} of {function} at line {line} in {sites:?}"))
            .clone()
    };
    let fib = sites("fib");
    let run = line_of("g.run([&] { a = fib(n - 1, w); });");
    // fib(8): 33 tasks, each spawned and run from that line.
    assert_eq!(find(&fib, "fib", "spawn", run)["invocations"], 33);
    assert_eq!(find(&fib, "fib", "call", run)["invocations"], 33);
    let for_sites = sites("for");
    let root = find(&for_sites, "loop", "call", line_of("tbb::parallel_for("));
    assert_eq!(root["invocations"], 1);
}

/// A task that throws: the exception reaches the program's handler (from the task's spawn, not
/// the wait: docs/runtimes.md), the run ends with the program's output and status, and the
/// report counts it and says so. (Before: the next wait waited for the task forever.)
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled oneTBB program"]
fn a_task_that_throws_does_not_hang_the_run() {
    if tbb_build("tbb_known").is_none() {
        return;
    }
    let source = r#"
#include <cstdio>
#include <stdexcept>
#include <oneapi/tbb/task_group.h>
int main() {
    long done = 0;
    tbb::task_group g;
    try {
        g.run([&] { done++; });
        g.run([] { throw std::runtime_error("boom"); });
        g.wait();
    } catch (std::exception &e) {
        g.wait();
        std::printf("caught %s after %ld\n", e.what(), done);
    }
    g.run([&] { done++; });
    g.wait();
    std::printf("done %ld\n", done);
    return 4;
}
"#;
    let exe = compile_source("tbb_throws", source, Lang::Cxx, &tbb_options()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = std_bin();
    cmd.args(["run", "--tbb", "--json"]).arg(&json).arg(&exe);
    let out = within(cmd, std::time::Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "caught boom after 1\ndone 2\n"
    );
    assert!(stderr.contains("1 task(s) threw"), "{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    let a = common::Analysis { json: report, out };
    assert_eq!(count(&a, "exceptions"), 1);
    assert_eq!(count(&a, "spawns"), 3);
    assert_eq!(count(&a, "waits_left_to_tbb"), 0);
    assert_eq!(u(&a.json, "spawns"), 3);
}

/// Run without --tbb, a oneTBB program without marks is measured as serial code, and the report
/// says that --tbb measures it.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled oneTBB program"]
fn without_tbb_the_report_points_to_it() {
    if tbb_build("tbb_known").is_none() {
        return;
    }
    let source = "#include <cstdio>\n#include <oneapi/tbb/task_group.h>\n\
                  int main() { long s = 0; tbb::task_group g; g.run([&] { s += 1; }); \
                  s += 2; g.wait(); std::printf(\"%ld\\n\", s); }\n";
    let tbb = compile_source("tbb_unmarked", source, Lang::Cxx, &tbb_options()).unwrap();
    let a = analyze_with(&tbb, &[], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(u(&a.json, "spawns"), 0);
    assert!(
        a.stderr()
            .contains("links libtbb: `cilkview-rs run --tbb` measures it unmodified"),
        "{}",
        a.stderr()
    );
    let b = analyze_with(&tbb, &["--tbb"], &["tasks", "4", "100"]);
    assert!(
        !b.stderr().contains("measures it unmodified"),
        "{}",
        b.stderr()
    );
}

/// What --tbb does not see is said: a parallel_pipeline (its stages run as one chain per token:
/// 64 tokens of 2M instructions in a parallel stage, 8 in flight, seen at parallelism ~1.1) and
/// a flow graph (its nodes' tasks submitted to the arena and run by libtbb's threads); both
/// programs' output unchanged.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn pipelines_and_flow_graphs_are_said_not_seen() {
    if tbb_build("tbb_known").is_none() {
        return;
    }
    let pipeline = r#"
#include <cstdio>
#include "work.h"
#include <oneapi/tbb/parallel_pipeline.h>
int main() {
    int i = 0; long sum = 0;
    tbb::parallel_pipeline(8,
        tbb::make_filter<void, int>(tbb::filter_mode::serial_in_order, [&](tbb::flow_control &fc) {
            if (i >= 64) { fc.stop(); return 0; } return i++; }) &
        tbb::make_filter<int, int>(tbb::filter_mode::parallel, [](int x) { cv_work(1000000); return x; }) &
        tbb::make_filter<int, void>(tbb::filter_mode::serial_in_order, [&](int x) { sum += x; }));
    std::printf("pipeline %ld\n", sum);
}
"#;
    let exe = compile_source("tbb_pipeline", pipeline, Lang::Cxx, &tbb_options()).unwrap();
    let a = analyze_with(&exe, &["--tbb"], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.stdout(), "pipeline 2016\n");
    assert_eq!(count(&a, "pipelines"), 1);
    assert!(
        a.stderr().contains("1 parallel_pipeline run(s)"),
        "{}",
        a.stderr()
    );
    assert!(u(&a.json, "work") > 64 * UNIT, "{}", a.json);
    let graph = r#"
#include <cstdio>
#include "work.h"
#include <oneapi/tbb/flow_graph.h>
int main() {
    tbb::flow::graph g;
    long s = 0;
    // Long enough that the graph is still running when main waits for it.
    tbb::flow::function_node<int, int> a(g, 1, [](int x) { cv_work(10000000); return x * 2; });
    tbb::flow::function_node<int> b(g, 1, [&](int x) { s += x; return tbb::flow::continue_msg(); });
    tbb::flow::make_edge(a, b);
    for (int i = 0; i < 10; i++)
        a.try_put(i);
    g.wait_for_all();
    std::printf("graph %ld\n", s);
}
"#;
    let exe = compile_source("tbb_graph", graph, Lang::Cxx, &tbb_options()).unwrap();
    let a = analyze_with(&exe, &["--tbb"], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.stdout(), "graph 90\n");
    assert!(count(&a, "waits_left_to_tbb") >= 1, "{}", a.json["runtime"]);
    assert!(
        a.stderr()
            .contains("not spawned through the wrapped entry points"),
        "{}",
        a.stderr()
    );
}

/// The same fixture built by clang++ (against libstdc++ and the same oneTBB) gives the g++
/// build's dag: the same spawns, span and work within the wrappers' overhead.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled oneTBB programs"]
fn clang_builds_equal_gcc_builds() {
    let Some(gcc) = tbb_build("tbb_known") else {
        return;
    };
    if !cilkview_fixtures::has_compiler("clang") {
        skip("clang not available: scripts/setup.sh installs it");
        return;
    }
    let clang = build(
        "tbb_known",
        &tbb_options().compiler("clang").flag("-std=c++17"),
    );
    let w = W.to_string();
    for mode in ["fib", "for", "reduce", "join", "groups"] {
        let args = [mode, "8", &w];
        let (a, g) = (
            analyze_with(&clang, &["--tbb"], &args),
            analyze_with(&gcc, &["--tbb"], &args),
        );
        assert_eq!(a.code(), Some(0), "{mode}: {}", a.stderr());
        assert_eq!(a.stdout(), g.stdout(), "{mode}");
        let (ra, rg) = (a.region("construct"), g.region("construct"));
        assert_eq!(u(ra, "spawns"), u(rg, "spawns"), "{mode}");
        let o = overhead(u(rg, "spawns"));
        for key in ["work", "span"] {
            assert!(
                u(ra, key).abs_diff(u(rg, key)) <= o,
                "{mode}: {key}: clang {ra} gcc {rg}"
            );
        }
    }
}
