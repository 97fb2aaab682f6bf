//! `run --openmp` on unmodified clang OpenMP programs (LLVM's libomp): the OpenMP fixtures
//! compiled with `clang -fopenmp -DCILKVIEW_DISABLE` give the dag of their gcc builds (libgomp)
//! and of their hand-marked twins, with numbers known by construction.

mod common;

use std::path::PathBuf;

use cilkview_fixtures::{build, BuildOptions};
use common::analyze_with;
use common::omp_known::{count, step_and_emulate, twin, u, N, UNIT, W};
use serde_json::Value;

fn options(compiler: &str) -> BuildOptions {
    BuildOptions::default()
        .compiler(compiler)
        .opt(2)
        .flag("-fopenmp")
        .disabled()
}

/// The clang -fopenmp build of a fixture, marks compiled out; `None`, said aloud, where clang or
/// libomp is missing.
fn clang_openmp(name: &str) -> Option<PathBuf> {
    common::clang_openmp(name, options("clang"))
}

fn gcc_openmp(name: &str) -> PathBuf {
    build(name, &options("gcc"))
}

/// What the libomp wrappers and libomp add to the region "parallel" beside the twin's, in work
/// and in span: the region's team of one (~10k instructions for the first region, ~1.6k for the
/// next, serial), then per task libomp's own allocation and its begin/complete of an undeferred
/// task (~0.7-1.5k: libgomp's library runs a task without libgomp, so gcc builds pay less), per
/// chunk of a dynamic loop libomp's dispatch (~3k). Measured under emulation on AMD EPYC: at
/// most 50.2k of work for the dynamic loop of 8 chunks (27.8k for 8 tasks, 66.0k for 32 diamond
/// tasks), at most 33.0k of span.
fn overhead(units: u64) -> u64 {
    30_000 + 3_000 * units
}

/// Every construct of omp_known under clang/libomp: the region "parallel" has the spawns and
/// the dependence edges of the gcc/libgomp build and of the hand-marked twin, the library's
/// counts, and their work, span and parallelism within the runtimes' overhead.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn clang_builds_equal_gcc_builds_and_hand_marked_twins() {
    let Some(clang) = clang_openmp("omp_known") else {
        return;
    };
    let (gcc, marked) = (gcc_openmp("omp_known"), twin("omp_known"));
    let (n, w) = (N.to_string(), W.to_string());
    // mode, units of work, units on the span, a counter of the library and its value
    for (mode, units, span_units, counter, counted) in [
        ("tasks", N, 1, "tasks", N),
        ("taskloop", N, 1, "taskloop_tasks", N),
        ("dynamic", N, 1, "chunks", N),
        ("chain", N, N, "depend_tasks", N),
        ("diamond", 4 * N, 2 * N + 1, "depend_tasks", 4 * N),
        ("readers", N + 1, 2, "tasks", N + 1),
        ("partial", 5 * N, 3 * N, "depend_tasks", 3 * N),
        ("waitdep", 5 * N, 3 * N, "taskwait_depends", N),
        ("undeferred", 5 * N, 3 * N, "undeferred_tasks", N),
    ] {
        let a = analyze_with(&clang, &["--openmp"], &[mode, &n, &w]);
        let g = analyze_with(&gcc, &["--openmp"], &[mode, &n, &w]);
        let b = analyze_with(&marked, &[], &[mode, &n, &w]);
        for (x, what) in [(&a, "clang"), (&g, "gcc"), (&b, "twin")] {
            assert_eq!(x.code(), Some(0), "{mode} ({what}): {}", x.stderr());
        }
        assert_eq!(a.json["runtime"]["name"], "libomp", "{mode}");
        assert_eq!(g.json["runtime"]["name"], "libgomp", "{mode}");
        let (ra, rg, rb) = (
            a.region("parallel"),
            g.region("parallel"),
            b.region("parallel"),
        );
        // The same dag: the spawns of the gcc build and of the twin. (Syncs: clang keeps the
        // barrier ending `single` before the region's end, gcc drops it: one more sync, after
        // the taskwait, where nothing is left to wait for.)
        assert_eq!(
            u(ra, "spawns"),
            u(rg, "spawns"),
            "{mode}: clang {ra} gcc {rg}"
        );
        assert_eq!(u(ra, "spawns"), u(rb, "spawns"), "{mode}");
        assert!(
            u(ra, "syncs") - u(rg, "syncs") <= 1,
            "{mode}: clang {ra} gcc {rg}"
        );
        assert_eq!(count(&a, counter), counted, "{mode}");
        assert_eq!(count(&a, "parallel_regions"), 1, "{mode}");
        for c in [
            "tasks",
            "depend_edges",
            "taskloop_tasks",
            "chunks",
            "taskwaits",
        ] {
            assert_eq!(count(&a, c), count(&g, c), "{mode}: {c}");
        }
        // By construction (the twin), within the overhead.
        for (key, expected) in [("work", units * UNIT), ("span", span_units * UNIT)] {
            let (x, y) = (u(ra, key), u(rb, key));
            assert!(
                y >= expected && y < expected + 4_000,
                "{mode}: {key}: twin {rb}"
            );
            assert!(
                x >= y && x - y <= overhead(units),
                "{mode}: {key} {x} (clang --openmp) vs {y} (hand-marked): more than {} apart",
                overhead(units)
            );
        }
        // Parallelism: measured at most 1.2% below the twin's (the dynamic loop: 7.902 vs
        // 8.000), 0.7% from the gcc build's (7.958).
        let p = |r: &Value| r["parallelism"].as_f64().unwrap();
        let (pa, pg, pb) = (p(ra), p(rg), p(rb));
        assert!(
            (pa - pb).abs() <= 0.02 * pb,
            "{mode}: clang {pa} vs twin {pb}"
        );
        assert!(
            (pa - pg).abs() <= 0.01 * pg,
            "{mode}: clang {pa} vs gcc {pg}"
        );
    }
}

/// The BOTS-style nqueens (untied tasks with a final() cutoff, taskwaits, a critical section)
/// and fib (tasks above a cutoff) verify under clang/libomp and have the gcc build's counts:
/// the same tasks, the same included (undeferred) tasks below the cutoff, the same taskwaits.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn bots_style_programs_give_the_gcc_builds_counts() {
    let Some(clang) = clang_openmp("omp_nqueens") else {
        return;
    };
    let gcc = gcc_openmp("omp_nqueens");
    let a = analyze_with(&clang, &["--openmp"], &["8", "3"]);
    let g = analyze_with(&gcc, &["--openmp"], &["8", "3"]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert!(
        a.stdout().contains("nqueens(8) = 92 (verified)"),
        "{}",
        a.stdout()
    );
    for c in ["tasks", "undeferred_tasks", "taskwaits", "critical"] {
        assert_eq!(count(&a, c), count(&g, c), "nqueens: {c}");
    }
    assert_eq!(count(&a, "tasks"), 1528);
    assert_eq!(u(&a.json, "spawns"), count(&a, "tasks"));
    // The same dag, but each task (included ones too) costs libomp's allocation and its
    // begin/complete of an undeferred task in the work, where libgomp's library runs a task
    // without libgomp: measured 1,195 instructions more per task under emulation (work 22.73M
    // vs 3.95M over 15,720 tasks, parallelism 154 vs 111). A fine-grained program's numbers
    // thus differ between the two builds by the runtimes' own per-task costs.
    let (ra, rg) = (a.region("parallel"), g.region("parallel"));
    assert_eq!(u(ra, "spawns"), u(rg, "spawns"));
    let all_tasks = count(&a, "tasks") + count(&a, "undeferred_tasks");
    let per_task = (u(ra, "work") - u(rg, "work")) / all_tasks;
    assert!(
        (600..2_000).contains(&per_task),
        "nqueens: {per_task}: clang {ra} gcc {rg}"
    );
    let critical = a.region("critical");
    assert!(
        u(critical, "work") > 0 && u(critical, "work") < 2_000,
        "{critical}"
    );

    let (clang, gcc) = (clang_openmp("omp_fib").unwrap(), gcc_openmp("omp_fib"));
    let a = analyze_with(&clang, &["--openmp"], &["14", "8"]);
    let g = analyze_with(&gcc, &["--openmp"], &["14", "8"]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.stdout(), g.stdout());
    // fib(14) with tasks above 8: 33 tasks (profile_names_the_programs_pragma_lines).
    assert_eq!(count(&a, "tasks"), 33);
    for c in ["tasks", "undeferred_tasks", "taskwaits"] {
        assert_eq!(count(&a, c), count(&g, c), "fib: {c}");
    }
    let (ra, rg) = (a.region("parallel"), g.region("parallel"));
    assert_eq!(u(ra, "spawns"), u(rg, "spawns"), "fib");
}

/// schedule(static) under libomp: one thread gets the whole range from
/// __kmpc_for_static_init (one strand, as gcc's inlined static loop), and the report names the
/// call; with `--omp-team 8` the loop of 8 units is split in 8 virtual threads, a spawn each, as
/// the gcc build's and the hand-marked twin's (a cv_for of 8), within the team's overhead
/// (`TEAM_OVERHEAD`).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn a_static_loop_is_reported_and_split_by_omp_team() {
    let Some(clang) = clang_openmp("omp_known") else {
        return;
    };
    let (n, w) = (N.to_string(), W.to_string());
    let a = analyze_with(&clang, &["--openmp"], &["static", &n, "1000"]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    let r = a.region("parallel");
    assert!(
        (r["parallelism"].as_f64().unwrap() - 1.0).abs() < 1e-9,
        "{r}"
    );
    let sites = a.json["runtime"]["thread_id_code"].as_array().unwrap();
    assert_eq!(sites.len(), 1, "{sites:?}");
    assert!(
        sites[0]["site"].as_str().unwrap().contains("omp_outlined"),
        "{sites:?}"
    );
    assert!(
        a.stderr().contains("split work by thread number"),
        "{}",
        a.stderr()
    );
    let team = ["--openmp", "--omp-team", "8"];
    let a = analyze_with(&clang, &team, &["static", &n, &w]);
    let g = analyze_with(&gcc_openmp("omp_known"), &team, &["static", &n, &w]);
    let b = analyze_with(&twin("omp_known"), &[], &["static", &n, &w]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    let (ra, rg, rb) = (
        a.region("parallel"),
        g.region("parallel"),
        b.region("parallel"),
    );
    assert_eq!(u(ra, "spawns"), N, "one spawn per virtual thread: {ra}");
    assert_eq!(u(ra, "spawns"), u(rg, "spawns"));
    assert_eq!(count(&a, "virtual_team_regions"), 1);
    assert_eq!(a.json["runtime"]["team"], 8);
    assert!(a.json["runtime"]["thread_id_code"]
        .as_array()
        .unwrap()
        .is_empty());
    for key in ["work", "span"] {
        let (x, y) = (u(ra, key), u(rb, key));
        assert!(
            x >= y && x - y <= TEAM_OVERHEAD,
            "{key}: {x} (clang, --omp-team 8) vs {y} (twin)"
        );
    }
    let par = |r: &Value| r["parallelism"].as_f64().unwrap();
    let (pa, pg) = (par(ra), par(rg));
    assert!(pa > 7.8 && (pa - pg).abs() / pg < 0.01, "{ra} {rg}");
}

/// What `--omp-team`'s virtual teams add to a region's work and span under libomp, beside the
/// hand-marked twin's: libomp's team of one, each virtual thread's stack and context switches.
/// Measured (emulation, AMD EPYC): a static loop of 8 units at --omp-team 8, work +23.6k and
/// span +20.9k (the gcc build: +18.2k, +16.6k); 10 units at 4 in two regions, work +38.6k, span
/// +33.4k; nested, work +40.2k, span +32.4k at most. (Asking libomp for each virtual thread's
/// static split cost ~5.5k instructions a virtual thread more: the library computes it.)
const TEAM_OVERHEAD: u64 = 60_000;

/// threadprivate data and nested regions under `--omp-team K` with libomp: the clang build
/// prints what the real libomp prints at K threads (a static loop of 10 units counted per thread
/// in threadprivate data: 3 3 2 2 at 4 threads, libomp's balanced split; 22 21 21 of 64 at 3),
/// its static loop split in K (span 3 units of 10); omp_nested splits both levels with
/// max-active-levels 2 (span 4 units of 16, 3 virtual teams) and the outer only with 1 (span 8).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn omp_team_under_libomp_keeps_threadprivate_data_and_nests() {
    let Some(exe) = clang_openmp("omp_threadprivate") else {
        return;
    };
    for (threads, n, printed) in [
        ("4", "10", "team 4: 3 3 2 2\n"),
        ("3", "64", "team 3: 22 21 21\n"),
    ] {
        let native = cilkview_fixtures::command(&exe)
            .args([n, "1000"])
            .env("OMP_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&native.stdout), printed);
        let a = analyze_with(&exe, &["--openmp", "--omp-team", threads], &[n, "1000"]);
        assert_eq!(a.code(), Some(0), "{}", a.stderr());
        assert_eq!(a.stdout(), printed, "{}", a.stderr());
        assert_eq!(count(&a, "virtual_team_regions"), 2);
    }
    let a = analyze_with(&exe, &["--openmp", "--omp-team", "4"], &["10", "1000000"]);
    let r = a.region("parallel");
    assert!(
        u(r, "work") >= 10 * UNIT && u(r, "work") < 10 * UNIT + TEAM_OVERHEAD,
        "{r}"
    );
    assert!(
        u(r, "span") >= 3 * UNIT && u(r, "span") < 3 * UNIT + TEAM_OVERHEAD,
        "{r}"
    );
    let nested = clang_openmp("omp_nested").unwrap();
    let w = W.to_string();
    for (levels, span_units, sizes, teams) in [
        ("2", 4, "2 outer threads, inner teams of 2", 3),
        ("1", 8, "2 outer threads, inner teams of 1", 1),
    ] {
        let a = analyze_with(
            &nested,
            &["--openmp", "--omp-team", "4"],
            &["8", &w, levels],
        );
        assert_eq!(a.code(), Some(0), "{levels}: {}", a.stderr());
        assert_eq!(a.stdout(), format!("16 units, {sizes}\n"), "{levels}");
        let r = a.region("parallel");
        assert!(
            u(r, "work") >= 16 * UNIT && u(r, "work") < 16 * UNIT + TEAM_OVERHEAD,
            "{levels}: {r}"
        );
        assert!(
            u(r, "span") >= span_units * UNIT && u(r, "span") < span_units * UNIT + TEAM_OVERHEAD,
            "{levels}: {r}"
        );
        assert_eq!(count(&a, "virtual_team_regions"), teams, "{levels}");
    }
}

/// The emulator and single-stepping, both exact, give the same dag through the libomp library
/// and the same counts; libomp's allocations (each task's, its team's) take a few instructions
/// more or less with the heap addresses, which differ between QEMU and a native process:
/// measured on AMD EPYC, work and span up to 172 instructions apart (tasks, waitdep, dynamic),
/// off the critical path up to 10 (gcc builds: identical there). One mode (tasks, and waits for
/// one of two): single-stepping libomp's ~1M instructions of set-up takes 10-50 s here.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn emulate_and_step_agree_under_libomp() {
    let Some(exe) = clang_openmp("omp_known") else {
        return;
    };
    for mode in ["waitdep"] {
        let Some((step, emu)) = step_and_emulate(&exe, mode) else {
            return;
        };
        let (s, e) = (step.region("parallel"), emu.region("parallel"));
        for key in ["work", "span", "burdened_span"] {
            let (a, b) = (u(s, key), u(e, key));
            assert!(a.abs_diff(b) <= 256, "{mode}: {key}: step {s} emulate {e}");
        }
        let off = |r: &Value| u(r, "work") - u(r, "span");
        assert!(
            off(s).abs_diff(off(e)) <= 32,
            "{mode}: step {s} emulate {e}"
        );
    }
}

/// `--profile` under libomp: the program's `#pragma omp task` line is the spawn site and the
/// task's call site, its `#pragma omp parallel` line the region's (the return addresses into the
/// program at the library's marks, as with libgomp).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn profile_names_the_programs_pragma_lines_under_libomp() {
    if clang_openmp("omp_known").is_none() {
        return;
    }
    let exe = build("omp_fib", &options("clang").flag("-g"));
    let source =
        std::fs::read_to_string(cilkview_fixtures::fixtures_dir().join("omp_fib.c")).unwrap();
    let line_of = |text: &str| {
        1 + source
            .lines()
            .position(|l| l.trim_start().starts_with(text))
            .unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("p");
    let a = analyze_with(
        &exe,
        &["--openmp", "--profile", profile.to_str().unwrap()],
        &["14", "8"],
    );
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    let sites = a.json["call_sites"].as_array().unwrap();
    let find = |kind: &str, function: &str, line: usize| {
        sites
            .iter()
            .find(|s| {
                s["kind"] == kind
                    && s["function"] == function
                    && s["location"].as_str().is_some_and(|l| {
                        l.contains("omp_fib") && l.ends_with(&format!(".c:{line}"))
                    })
            })
            .unwrap_or_else(|| panic!("{kind} {function} at omp_fib.c:{line} in {sites:?}"))
    };
    let task = line_of("#pragma omp task");
    assert_eq!(find("spawn", "fib", task)["invocations"], 33);
    assert_eq!(find("call", "fib", task)["invocations"], 33);
    assert_eq!(
        find("call", "main", line_of("#pragma omp parallel"))["invocations"],
        1
    );
    for s in sites {
        assert!(
            !s["location"].as_str().unwrap_or("").contains("preload/"),
            "a site named by the tool's own source: {s}"
        );
    }
}

/// Constructs a program checks (fixtures/omp_constructs.c: guided, runtime and ordered loops,
/// sections, a taskgroup of tied tasks then untied recursive ones, taskloops, critical, an if(0)
/// region) print the same line under --openmp as alone, by clang and by gcc, with the same
/// counts but for what clang lowers otherwise: its sections are a static loop (a thread query,
/// not 2 chunks), its taskloops come in a taskgroup of their own. (A tied task freed before an
/// untied one was allocated at its address once made the library run the untied one as tied:
/// libomp asserted.) The same under `--omp-team 4`.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn constructs_give_the_same_results_and_counts_under_both_runtimes() {
    let Some(clang) = clang_openmp("omp_constructs") else {
        return;
    };
    let gcc = gcc_openmp("omp_constructs");
    let expected = "4950 4950 1 3 45 4950 499500 610 1\n";
    let a = analyze_with(&clang, &["--openmp"], &[]);
    let g = analyze_with(&gcc, &["--openmp"], &[]);
    for (x, what) in [(&a, "clang"), (&g, "gcc")] {
        assert_eq!(x.code(), Some(0), "{what}: {}", x.stderr());
        assert_eq!(x.stdout(), expected, "{what}");
    }
    for c in [
        "parallel_regions",
        "serial_parallel_regions",
        "tasks",
        "taskloops",
        "taskloop_tasks",
        "loops",
        "taskwaits",
        "barriers",
        "critical",
        "ordered",
    ] {
        assert_eq!(count(&a, c), count(&g, c), "{c}");
    }
    assert_eq!(count(&a, "tasks"), 1982);
    assert_eq!(count(&a, "ordered"), 100);
    assert_eq!(
        count(&g, "chunks") - count(&a, "chunks"),
        2,
        "the 2 sections"
    );
    assert_eq!(
        count(&a, "taskgroups") - count(&g, "taskgroups"),
        2,
        "the 2 taskloops"
    );
    // The sections' loop of 2 chunks is 1 spawn in the gcc build.
    assert_eq!(
        u(a.region("parallel"), "spawns"),
        u(g.region("parallel"), "spawns") - 1
    );
    // The same with 4 virtual threads: the checked line, the counts (20 barriers: 5 phases of 4).
    let team = ["--openmp", "--omp-team", "4"];
    let (a, g) = (
        analyze_with(&clang, &team, &[]),
        analyze_with(&gcc, &team, &[]),
    );
    for (x, what) in [(&a, "clang"), (&g, "gcc")] {
        assert_eq!(x.stdout(), expected, "{what}: {}", x.stderr());
        assert_eq!(count(x, "virtual_team_regions"), 1, "{what}");
        assert_eq!(count(x, "barriers"), 20, "{what}");
    }
    for c in [
        "tasks",
        "taskloop_tasks",
        "critical",
        "ordered",
        "taskwaits",
    ] {
        assert_eq!(count(&a, c), count(&g, c), "--omp-team 4: {c}");
    }
}

/// Mutual exclusion and reductions (fixtures/omp_exclusion.c: a dynamic loop of 8 iterations of
/// 3 units unlocked and 1 under the construct; units of 200,001 instructions) give the clang
/// build the regions, counts and locks of the gcc build: `critical` (unnamed and named) and
/// `ordered` regions of 8 entries holding 8 units; a reduction of one variable nothing (gcc's is an
/// inline atomic), of two an `atomic` region and lock (gcc's GOMP_atomic_start, clang's
/// __kmpc_reduce_nowait). The `omp atomic` of a long double is gcc's `atomic` region but goes
/// through libatomic, not libomp, in the clang build: not seen (0). Task reductions (`taskred`:
/// a taskgroup task_reduction of 8 tasks in_reduction, a taskloop reduction of 8 tasks), left to
/// each runtime, give both builds 16 spawns and the right sum. Work and span within
/// `overhead(8)` of the gcc build's (measured: 41.1k and 20.4k at most, libomp's dispatch per
/// chunk); the regions' work within 1,000 instructions per entry of 8 units (measured +739 to
/// +871 in all, both builds). With `--omp-team 4` the two-variable reduction is combined once per
/// virtual thread in both builds (`atomic` 4), the ordered loop gives the same spawns (11).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled OpenMP programs"]
fn exclusion_and_reductions_give_the_gcc_builds_regions() {
    let Some(clang) = common::clang_openmp("omp_exclusion", options("clang").flag("-latomic"))
    else {
        return;
    };
    let gcc = gcc_openmp("omp_exclusion");
    let held = 8 * (2 * 100_000 + 1);
    // mode, the region, its entries (the count of the same name) in the gcc and clang builds
    for (mode, label, in_gcc, in_clang) in [
        ("critical", "critical", 8, 8),
        ("named", "critical", 8, 8),
        ("ordered", "ordered", 8, 8),
        ("reduction", "atomic", 0, 0),
        ("reduction2", "atomic", 1, 1),
        ("atomic", "atomic", 8, 0),
        ("taskred", "atomic", 0, 0),
    ] {
        let a = analyze_with(&clang, &["--openmp"], &[mode, "8", "100000"]);
        let g = analyze_with(&gcc, &["--openmp"], &[mode, "8", "100000"]);
        for (x, what, entries) in [(&a, "clang", in_clang), (&g, "gcc", in_gcc)] {
            assert_eq!(x.code(), Some(0), "{mode} ({what}): {}", x.stderr());
            assert_eq!(x.stdout(), format!("{mode} 28\n"), "{mode} ({what})");
            assert_eq!(count(x, label), entries, "{mode} ({what})");
            for c in [
                "loops",
                "chunks",
                "critical",
                "ordered",
                "tasks",
                "taskloop_tasks",
            ] {
                assert_eq!(count(x, c), count(&g, c), "{mode} ({what}): {c}");
            }
            if mode == "taskred" {
                assert_eq!(count(x, "tasks"), 8, "{what}");
                assert_eq!(count(x, "taskloop_tasks"), 8, "{what}");
            }
            let region = x.json["regions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["label"] == label);
            let sites = x.json["locks"]["sites"].as_array().map_or(0, Vec::len);
            if entries == 0 {
                assert!(region.is_none(), "{mode} ({what}): {region:?}");
                continue;
            }
            let work = u(region.unwrap(), "work");
            let lo = if label == "atomic" { 0 } else { held };
            assert!(
                work >= lo && work <= lo + 1_000 * entries,
                "{mode} ({what}): {label} {work}"
            );
            if label != "ordered" {
                assert_eq!(sites, 1, "{mode} ({what}): {}", x.json["locks"]);
            }
        }
        let (ra, rg) = (a.region("parallel"), g.region("parallel"));
        assert_eq!(u(ra, "spawns"), u(rg, "spawns"), "{mode}");
        for key in ["work", "span"] {
            let (x, y) = (u(ra, key), u(rg, key));
            assert!(
                x.abs_diff(y) <= overhead(8),
                "{mode}: {key}: clang {x}, gcc {y}"
            );
        }
    }
    for (mode, counter, counted) in [("reduction2", "atomic", 4), ("ordered", "ordered", 8)] {
        let team = ["--openmp", "--omp-team", "4"];
        let a = analyze_with(&clang, &team, &[mode, "8", "100000"]);
        let g = analyze_with(&gcc, &team, &[mode, "8", "100000"]);
        for (x, what) in [(&a, "clang"), (&g, "gcc")] {
            assert_eq!(
                x.stdout(),
                format!("{mode} 28\n"),
                "{mode} ({what}): {}",
                x.stderr()
            );
            assert_eq!(count(x, counter), counted, "{mode} ({what})");
            assert_eq!(count(x, "virtual_team_regions"), 1, "{mode} ({what})");
        }
        let (ra, rg) = (a.region("parallel"), g.region("parallel"));
        assert_eq!(u(ra, "spawns"), u(rg, "spawns"), "{mode}: {ra} {rg}");
    }
}
