//! `--counter native` through the real `cilkview-rs`: units in the report (nanoseconds, or
//! instructions where the stubs read them with `rdpmc`), parallelism against emulation's on
//! fixtures of known shape, attach (detach leaves the program's output and exit
//! status unchanged), and the tool SIGKILLed in the middle of an attach.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::thread::sleep;
use std::time::Duration;

use cilkview_fixtures::build;
use common::{
    analyze_with, assert_success, bin, finish, kill, native, native_unit, start, static_opts,
    std_bin,
};
use serde_json::Value;

/// Held by each test of this file while it runs: the comparison of times with instruction
/// counts needs the other tests' busy programs and tracers off the CPUs (with them, on 2 CPUs,
/// the tree read 13.1–15.2 against 16: each preemption leaves some of the kernel's time in the
/// strand it cuts).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This test's turn (one at a time), if both the native counter and the emulator run here (a
/// visible skip otherwise).
fn native_beside_emulation() -> Option<std::sync::MutexGuard<'static, ()>> {
    let alone = one_at_a_time();
    if !native() {
        return None;
    }
    if let Err(why) = cilkview_fixtures::emulator() {
        cilkview_fixtures::skip(why);
        return None;
    }
    Some(alone)
}

/// Where the stubs read instructions (`rdpmc`): the report's unit, the default burden in
/// instructions, a time refused as the burden; here a visible skip. Where they read time:
/// [`native_reports_nanoseconds_and_takes_a_time_burden`].
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn with_rdpmc_native_reports_instructions_and_takes_an_instructions_burden() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    if native_unit() != "instructions" {
        cilkview_fixtures::skip("instructions by rdpmc: unavailable here (no user-space rdpmc)");
        return;
    }
    let exe = build("known_spawn", &static_opts());
    let a = analyze_with(&exe, &["--counter", "native"], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.json["unit"], "instructions");
    assert_eq!(a.u("burden"), 15000, "the default burden in instructions");
    assert!(common::counter_says(&a.json).contains("instructions by rdpmc: each thread's own"));
    let wrong = bin()
        .args(["run", "--counter", "native", "--burden", "2.5us"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(common::TOOL_FAILED));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("counts instructions here (rdpmc)"), "{err}");
    // Minimums over runs are for time: instructions are the same every run.
    let repeat = bin()
        .args(["run", "--counter", "native", "--repeat", "3"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(repeat.status.code(), Some(common::TOOL_FAILED));
    let err = String::from_utf8_lossy(&repeat.stderr);
    assert!(err.contains("counts instructions here (rdpmc)"), "{err}");
}

/// Where the stubs read instructions (`rdpmc`), native equals emulation up to the instructions
/// glibc's CPU-dependent routines and the start-up take (README): on the fine-grained stencil,
/// whose parallelism by time is only a lower bound, within 1%, and its work within 1%.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn with_rdpmc_native_parallelism_equals_emulation() {
    let Some(_alone) = native_beside_emulation() else {
        return;
    };
    if native_unit() != "instructions" {
        cilkview_fixtures::skip("instructions by rdpmc: unavailable here (no user-space rdpmc)");
        return;
    }
    let exe = build("stencil_outer", &static_opts());
    let args = ["256", "400"];
    let e = analyze_with(&exe, &["--counter", "emulate"], &args);
    let n = analyze_with(&exe, &["--counter", "native"], &args);
    assert_eq!(n.stdout(), e.stdout());
    for measure in ["parallelism", "work"] {
        let v = |a: &common::Analysis| a.region("stencil")[measure].as_f64().unwrap();
        let (native, emulated) = (v(&n), v(&e));
        eprintln!("stencil {measure}: native {native}, emulate {emulated}");
        assert!(
            (native / emulated - 1.0).abs() < 0.01,
            "{measure}: {native} vs {emulated}"
        );
    }
}

/// Where the stubs read time: nanoseconds, a time as the burden, instructions refused.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn native_reports_nanoseconds_and_takes_a_time_burden() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    if native_unit() != "nanoseconds" {
        cilkview_fixtures::skip("the native counter reads instructions here (rdpmc)");
        return;
    }
    let exe = build("known_spawn", &static_opts());
    let a = analyze_with(&exe, &["--counter", "native", "--burden", "2.5us"], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.json["counter"]["mode"], "native");
    assert_eq!(a.json["unit"], "nanoseconds");
    assert_eq!(a.u("burden"), 2500);
    assert_eq!(a.u("spawns"), 2);
    // known_spawn's marked part is 70006 instructions: tens of µs, not ms or ns.
    assert!(
        a.u("work") > 10_000 && a.u("work") < 100_000_000,
        "{}",
        a.json
    );
    // The text says times in human units (JSON keeps nanoseconds): `Work: 14.95 ms`.
    let work_line = a
        .stderr()
        .lines()
        .find(|l| l.starts_with("Work: "))
        .map(str::to_string);
    assert!(
        work_line
            .as_deref()
            .is_some_and(|l| l.ends_with(" µs") || l.ends_with(" ms")),
        "{}",
        a.stderr()
    );
    assert!(
        a.stderr()
            .contains("Model: burden 2.50 µs per continuation"),
        "{}",
        a.stderr()
    );
    // The instruction counters keep instructions.
    let s = analyze_with(&exe, &["--counter", "step"], &[]);
    assert_eq!(s.json["unit"], "instructions");
    // A burden in the wrong unit for an explicit counter: one clear line.
    let wrong = bin()
        .args(["run", "--counter", "native", "--burden", "15000"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(common::TOOL_FAILED));
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("--burden 15000 is a number of instructions"),
        "{err}"
    );
}

/// Region `label`'s parallelism of `exe ARGS` under emulation, then under native with
/// `--repeat runs` until it is within `within` of it (three tries: time is the machine's). If
/// none is: a failure where a try was quiet ([`QUIET_SPREAD`]), a visible skip (with every try's values) where, in every try, the runs' own work — the same program,
/// the same strands — differed by more than that (the longest run against the shortest): the
/// machine took CPU time from whole runs (on a VM, a busy sibling vCPU slows this one by up to
/// 2x for stretches), so no strand estimate could be held to it. Measured in the try
/// (`counter.noise`), not by the load average, which lags and counts the test's own tool and
/// program.
fn native_parallelism_within(exe: &Path, args: &[&str], label: &str, runs: u32, within: Within) {
    let p = |a: &common::Analysis| a.region(label)["parallelism"].as_f64().unwrap();
    let e = analyze_with(exe, &["--counter", "emulate"], args);
    let emulated = p(&e);
    let runs = runs.to_string();
    let mut seen = vec![];
    let mut quiet = false;
    for _ in 0..3 {
        let n = analyze_with(exe, &["--counter", "native", "--repeat", &runs], args);
        assert_eq!(n.stdout(), e.stdout().repeat(runs.parse().unwrap()));
        let native = p(&n);
        let spread = run_work_range(&n.json);
        seen.push(format!(
            "{native:.2} (runs' work spread {:.1}%)",
            100.0 * spread
        ));
        if within.holds(native / emulated - 1.0) {
            eprintln!(
                "{label}: native {} (--repeat {runs}), emulate {emulated:.3}",
                seen.last().unwrap()
            );
            return;
        }
        quiet |= spread <= QUIET_SPREAD;
    }
    let what = format!(
        "{label}: native parallelism (--repeat {runs}, each try) {seen:?} vs emulated {emulated:.3}"
    );
    if !quiet {
        cilkview_fixtures::skip(format!(
            "the machine took CPU time from whole runs in every try (the longest run's work \
             exceeded the shortest's by more than {:.0}%): {what}",
            100.0 * QUIET_SPREAD
        ));
        return;
    }
    panic!("{what}");
}

/// The runs' own work spread (longest over shortest, less 1) within which a try counts as
/// quiet: where no try is, the accuracy checks skip visibly.
const QUIET_SPREAD: f64 = 0.05;

/// How far under and over the exact parallelism a time-based one may read, as fractions.
#[derive(Clone, Copy)]
struct Within {
    under: f64,
    over: f64,
}

impl Within {
    /// Strands whose time varies only by the machine's noise.
    const FIVE_PERCENT: Within = Within {
        under: 0.05,
        over: 0.05,
    };
    /// The longest of many equal strands: time reads under the instruction count (the span
    /// takes the longest, and equal strands differ in time), never over it.
    const LONGEST_OF_MANY: Within = Within {
        under: 0.10,
        over: 0.05,
    };

    fn holds(self, relative_error: f64) -> bool {
        -self.under <= relative_error && relative_error <= self.over
    }
}

/// How much more work the longest of a `--repeat` report's runs measured than its shortest,
/// relative to it (`counter.noise`). Not the median's: beside a busy sibling vCPU, one run in
/// five slowed 2x while the median stayed within 5% still left the tree at 14.1 against 16.
fn run_work_range(report: &Value) -> f64 {
    let noise = &report["counter"]["noise"];
    let (least, most) = (
        noise["run_work_least"]
            .as_f64()
            .expect("counter.noise.run_work_least"),
        noise["run_work_most"]
            .as_f64()
            .expect("counter.noise.run_work_most"),
    );
    most / least - 1.0
}

/// Coarse strands, each estimated over 5 runs: a spawn tree of 16 leaves of ~1.5 ms of
/// arithmetic, rounds of 8 double-precision matrix multiplies of ~1.7 ms. Equal in
/// instructions, their strands are not quite equal in time (the matrix chunks by 1–3% from round
/// to round, measured by the program's own clock; the leaves less), and the span takes the
/// longest, so time reads under the instruction count, never over it: held within 10% under
/// and 5% over. Measured at load 0.6 (each strand's median): the tree 15.1–15.6 against
/// 16.000, the rounds 7.3–7.9 against 8.000 (the earlier rule: 15.3–16.0, 7.43–7.73); at load 3–4 (other builds running) the tree 14.7–15.7 with the runs' work
/// within 1–4% in some tries; CI read the rounds at 7.38–7.59. A try whose runs' own work
/// differs by more than 5% is not quiet; where no try is, the test skips visibly.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn coarse_parallelism_matches_emulation() {
    let Some(_alone) = native_beside_emulation() else {
        return;
    };
    let tree = build("coarse_tree", &static_opts());
    native_parallelism_within(&tree, &["4", "2000000"], "tree", 5, Within::LONGEST_OF_MANY);
    let matmul = build("coarse_matmul", &static_opts());
    native_parallelism_within(&matmul, &["4"], "rounds", 5, Within::LONGEST_OF_MANY);
}

/// Fine-grained strands (the 256² stencil: 400 sweeps of 254 rows of ~180 ns). One run's
/// parallelism by time is a lower bound — every outlier (a 15–40 µs timer tick, the spread of
/// noisy row times) lengthens the span, none shortens it (measured 21–54 against 252; above the
/// exact value would mean strands shortened by the tool: a hit cost or an off-CPU interval taken
/// off twice). Each strand estimated over 100 runs (28 ms each) should leave the rows' own times,
/// within 5%: measured 241–245 against 252 with each row's minimum, 183–185 with the median (the runs 44–190% apart)
/// (docs/tracer.md, "How exact"); skipped where the runs' own work differs by more than 5%, as on
/// this project's 2-vCPU VM (40–200% over 100 runs).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn fine_grained_parallelism_by_time() {
    let Some(_alone) = native_beside_emulation() else {
        return;
    };
    let exe = build("stencil_outer", &static_opts());
    let args = ["256", "400"];
    let p = |a: &common::Analysis| a.region("stencil")["parallelism"].as_f64().unwrap();
    let e = analyze_with(&exe, &["--counter", "emulate"], &args);
    let emulated = p(&e);
    assert!(emulated > 240.0, "{}", e.json);
    for _ in 0..3 {
        let n = analyze_with(&exe, &["--counter", "native"], &args);
        assert_eq!(n.stdout(), e.stdout());
        let native = p(&n);
        eprintln!("stencil: native {native:.2}, emulate {emulated:.2}");
        assert!(native > 1.0 && native < emulated * 1.05, "{}", n.json);
    }
    native_parallelism_within(&exe, &args, "stencil", 100, Within::FIVE_PERCENT);
}

fn unattached(exe: &Path, args: &[&str]) -> (String, Option<i32>) {
    let out = cilkview_fixtures::command(exe).args(args).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn attach_native_measures_every_spawn_and_detaches_unharmed() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    let exe = build("spawn_rounds", &static_opts());
    let args = ["40", "20000", "5"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = std_bin()
        .args([
            "attach",
            "--counter",
            "native",
            "--duration",
            "0.6",
            "--json",
        ])
        .arg(&json)
        .arg(running.child.id().to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["counter"]["mode"], "native");
    assert_eq!(r["unit"].as_str(), Some(native_unit().as_str()));
    assert_eq!(r["attach"]["ended"], "duration");
    // Rounds of 20000 spawns every ~50 ms: a 0.6 s window sees several whole rounds, every
    // spawn of them (single-stepping saw a handful).
    let spawns = r["spawns"].as_u64().unwrap();
    assert!(spawns >= 3 * 20000, "{spawns} spawns in the window: {r}");
    assert_eq!(
        finish(running),
        expected,
        "output and exit status unchanged"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn attach_auto_without_a_pmu_picks_native() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    let exe = build("spawn_rounds", &static_opts());
    let args = ["15", "2000", "0"];
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = std_bin()
        .args(["attach", "--duration", "0.3", "--json"])
        .arg(&json)
        .arg(running.child.id().to_string())
        .output()
        .unwrap();
    assert_success(&out);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mode = r["counter"]["mode"].as_str().unwrap().to_string();
    if mode == "hw" {
        cilkview_fixtures::skip("a hardware counter is available: auto takes it first");
    } else {
        assert_eq!(mode, "native", "{r}");
    }
    assert_eq!(finish(running).1, Some(0));
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn the_tool_sigkilled_mid_attach_leaves_the_program_running_correctly() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    let exe = build("spawn_rounds", &static_opts());
    // 40 rounds of 20000 spawns: after the kill, the patched marks fill their slot (65536
    // records) in the first round; the stubs then find the tool gone and drop records.
    let args = ["40", "20000", "3"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let pid = running.child.id();
    let mut tool = std_bin()
        .args(["attach", "--counter", "native"])
        .arg(pid.to_string())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the program is traced and measured for a while, then SIGKILL its tracer (the
    // worker of `attach`, not the process the user sees, which would detach cleanly).
    let status = format!("/proc/{pid}/status");
    let mut tracer = 0;
    for _ in 0..200 {
        let s = std::fs::read_to_string(&status).unwrap();
        tracer = s
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if tracer != 0 {
            break;
        }
        sleep(Duration::from_millis(10));
    }
    assert_ne!(tracer, 0, "the program was never traced");
    sleep(Duration::from_millis(400));
    kill("-KILL", tracer);
    let _ = tool.wait();
    assert_eq!(
        finish(running),
        expected,
        "output and exit status unchanged"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn native_measures_linked_and_dlopened_libraries_and_leaves_forked_and_vforked_children_alone() {
    let _alone = one_at_a_time();
    if !native() {
        return;
    }
    use cilkview_fixtures::{compile_source, BuildOptions, Lang};
    let opts = || BuildOptions::default().compiler("gcc").opt(2);
    let lib = compile_source(
        "libcvnative.so",
        r#"
#include "cilkview.h"
#include "work.h"
__attribute__((noinline)) static void leaf(void) { CV_WORK(20000); }
void lib_spawns(int n) { cv_function(); for (int i = 0; i < n; i++) cv_spawn(leaf()); cv_sync(); }
"#,
        Lang::C,
        &opts().flag("-shared").flag("-fPIC"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let copy = lib.with_file_name("libcvnative_dl.so");
    std::fs::copy(&lib, &copy).unwrap();
    let exe = compile_source(
        "uses_libcvnative",
        r#"
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
void lib_spawns(int n);
int main(int argc, char **argv) {
    lib_spawns(8);                                   /* DT_NEEDED: 8 spawns */
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) return 1;
    ((void (*)(int))dlsym(h, "lib_spawns"))(16);     /* dlopen'd: 16 spawns */
    pid_t p = fork();
    if (p == 0) { lib_spawns(1000); printf("child done\n"); return 3; } /* not measured */
    int st;
    waitpid(p, &st, 0);
    /* A vfork child shares the parent's memory, patched marks included: not measured either
     * (its hits went to the parent's record slot). */
    pid_t v = vfork();
    if (v == 0) { lib_spawns(500); _exit(4); }
    int vst;
    waitpid(v, &vst, 0);
    printf("parent done, child %d, vfork child %d\n", WEXITSTATUS(st), WEXITSTATUS(vst));
    return 0;
}"#,
        Lang::C,
        &opts()
            .flag("-Wl,--no-as-needed")
            .flag(lib.to_str().unwrap())
            .flag(&format!("-Wl,-rpath,{}", lib.parent().unwrap().display())),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let a = analyze_with(&exe, &["--counter", "native"], &[copy.to_str().unwrap()]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(
        a.stdout(),
        "child done\nparent done, child 3, vfork child 4\n"
    );
    assert_eq!((a.u("spawns"), a.u("syncs")), (24, 2), "{}", a.json);
    assert_eq!(a.json["unit"].as_str(), Some(native_unit().as_str()));
}

/// `run --openmp --counter native` measuring time: libgomp's cost per task is a time too (default
/// 2.5 µs, or `--task-cost` as a time), in the report, its text and the per-spawn warning; a cost
/// in the other unit for an explicit counter is refused before the run.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn openmp_task_cost_is_a_time_with_native_time() {
    let _alone = one_at_a_time();
    if !native() || native_unit() != "nanoseconds" {
        return;
    }
    let exe = common::openmp("omp_fine");
    let a = analyze_with(
        &exe,
        &["--openmp", "--counter", "native"],
        &["2000", "20", "2"],
    );
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!(a.json["unit"], "nanoseconds");
    assert_eq!(a.json["runtime"]["task_cost"], 2500);
    let err = a.stderr();
    assert!(
        err.contains("a task costs 2500 nanoseconds of work in the lower bound"),
        "{err}"
    );
    assert!(
        err.contains(
            "nanoseconds of work per spawn, below libgomp's cost per task (~2500 nanoseconds"
        ),
        "{err}"
    );
    let given = analyze_with(
        &exe,
        &["--openmp", "--counter", "native", "--task-cost", "1.5us"],
        &["2000", "20", "2"],
    );
    assert_eq!(given.json["runtime"]["task_cost"], 1500);
    for (counter, cost, wrong) in [
        ("native", "10000", "--task-cost 10000 is a number of instructions, but --counter native measures time here (no user-space rdpmc): give a time, e.g. --task-cost 2.5us"),
        ("emulate", "2us", "--task-cost 2000ns is a time, but --counter emulate counts instructions: give a number of instructions, e.g. --task-cost 10000"),
    ] {
        let out = bin()
            .args(["run", "--openmp", "--counter", counter, "--task-cost", cost])
            .arg(&exe)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(common::TOOL_FAILED));
        assert_eq!(String::from_utf8_lossy(&out.stderr), format!("error: {wrong}\n"));
    }
}
