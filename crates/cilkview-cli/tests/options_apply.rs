//! An option that does not apply to what will run is an error before the run, never silently
//! dropped: the counter `auto` chooses is resolved first, and a cost (`--burden`, `--task-cost`)
//! in another unit than it counts in, `--no-cpu-binding` where it binds nothing, or
//! `--plot-region` with nothing drawn is refused in one line naming the counter chosen and what
//! to write instead. The counter named is the one a run of the same command line uses.

mod common;

use std::path::Path;

use common::{bin, fixture, TOOL_FAILED};
use serde_json::Value;

/// `cilkview-rs ARGS` that must fail before running anything: its one error line.
fn refused(args: &[&str], exe: &Path) -> String {
    let out = bin().args(args).arg(exe).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(TOOL_FAILED), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}: the program ran");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    err
}

/// The JSON report of `cilkview-rs ARGS --json - EXE`, which must succeed.
fn report(args: &[&str], exe: &Path) -> Value {
    let out = bin()
        .args(args)
        .args(["--json", "-"])
        .arg(exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // known_spawn prints nothing: standard output is the report.
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `run --burden 5us` under `auto`, which chooses a counter of instructions for a run: refused,
/// naming the counter a run chooses (emulate here), with what to write instead. It ran and
/// reported a burden of 15,000 instructions before.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled program"]
fn run_refuses_a_time_burden_when_auto_chooses_a_counter_of_instructions() {
    let exe = fixture("known_spawn");
    let ran = report(&["run", "--burden", "1000"], &exe);
    let chosen = ran["counter"]["mode"].as_str().unwrap();
    assert_eq!(
        ran["unit"], "instructions",
        "auto counts instructions for a run"
    );
    assert_eq!(ran["burden"], 1000);
    let err = refused(&["run", "--burden", "5us"], &exe);
    let expected = format!(
        "error: --burden 5000ns is a time, but --counter auto chose {chosen}, which counts \
         instructions: give a number of instructions, e.g. --burden 15000"
    );
    assert!(err.starts_with(&expected), "{err}");
}

/// `run --openmp --task-cost 2.5us` under `auto`: refused as `--burden` is (it became 10000
/// instructions before).
#[test]
#[ignore = "slow: compiles an OpenMP program, runs cilkview-rs"]
fn run_refuses_a_time_task_cost_when_auto_chooses_a_counter_of_instructions() {
    let exe = fixture("known_spawn");
    let chosen = report(&["run"], &exe)["counter"]["mode"]
        .as_str()
        .unwrap()
        .to_string();
    let omp = common::openmp("omp_fine");
    let err = refused(&["run", "--openmp", "--task-cost", "2.5us"], &omp);
    let expected = format!(
        "error: --task-cost 2500ns is a time, but --counter auto chose {chosen}, which counts \
         instructions: give a number of instructions, e.g. --task-cost 10000"
    );
    assert!(err.starts_with(&expected), "{err}");
}

/// `attach` under `auto` (hardware counter, else native, else single-stepping): a burden in the
/// chosen counter's unit is used; one in the other unit is refused, naming the counter. Before,
/// `--burden 15000` under a native counter of time was reported as 5,000 ns.
#[test]
#[ignore = "slow: attaches cilkview-rs to a sleeping process"]
fn attach_refuses_a_burden_in_the_other_unit_than_the_counter_auto_chooses() {
    let mut sleeper = cilkview_fixtures::command("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let attach = |burden: &str| {
        bin()
            .args([
                "attach",
                "--duration",
                "0.3",
                "--burden",
                burden,
                "--json",
                "-",
            ])
            .arg(&pid)
            .output()
            .unwrap()
    };
    let (time, count) = (attach("2us"), attach("1000"));
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    // Exactly one of them measured: the one in the unit of the counter chosen.
    let (used, wrong) = match (time.status.success(), count.status.success()) {
        (true, false) => (time, count),
        (false, true) => (count, time),
        _ => panic!(
            "one burden must be refused, the other used: {}; {}",
            String::from_utf8_lossy(&time.stderr),
            String::from_utf8_lossy(&count.stderr)
        ),
    };
    let r: Value = serde_json::from_slice(&used.stdout).unwrap();
    let chosen = r["counter"]["mode"].as_str().unwrap();
    let (burden, unit) = (r["burden"].as_u64().unwrap(), r["unit"].as_str().unwrap());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(TOOL_FAILED), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let said = format!("but --counter auto chose {chosen}, which ");
    assert!(err.contains(&said), "{err}");
    match unit {
        "nanoseconds" => {
            assert_eq!(burden, 2000);
            assert!(
                err.starts_with("error: --burden 1000 is a number of instructions")
                    && err.contains("give a time, e.g. --burden 5us"),
                "{err}"
            );
        }
        _ => {
            assert_eq!(burden, 1000);
            assert!(
                err.starts_with("error: --burden 2000ns is a time")
                    && err.contains("e.g. --burden 15000"),
                "{err}"
            );
        }
    }
}

/// `--no-cpu-binding` is single-stepping's: with a counter that binds nothing (the one `auto`
/// chooses, unless it is single-stepping; or one named) it is refused, not dropped.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled program"]
fn no_cpu_binding_is_refused_where_the_counter_binds_nothing() {
    let exe = fixture("known_spawn");
    let chosen = report(&["run"], &exe)["counter"]["mode"]
        .as_str()
        .unwrap()
        .to_string();
    if chosen == "step" {
        // Single-stepping binds: the option applies.
        report(&["run", "--no-cpu-binding"], &exe);
    } else {
        let err = refused(&["run", "--no-cpu-binding"], &exe);
        assert_eq!(
            err,
            format!(
                "error: --no-cpu-binding applies to --counter step (which binds the program to \
                 one CPU), but --counter auto chose {chosen}, which does not bind it: leave \
                 --no-cpu-binding out\n"
            )
        );
    }
    if common::native() {
        let err = refused(&["run", "--counter", "native", "--no-cpu-binding"], &exe);
        assert!(
            err.contains("but --counter native does not bind it: leave --no-cpu-binding out"),
            "{err}"
        );
    }
    // Where it applies, it is used: the counter's reason says no more that the program was bound.
    let step = report(&["run", "--counter", "step", "--no-cpu-binding"], &exe);
    assert_eq!(step["counter"]["mode"], "step");
    assert_eq!(step["counter"]["reason"], "single-step requested");
}

/// `--plot-region` draws a region in `--plot` or `--gnuplot`: without either it is a usage
/// error (it was ignored).
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn plot_region_without_a_plot_is_refused() {
    let exe = fixture("known_regions");
    for command in [
        &["run", "--plot-region", "step"][..],
        &["report", "--plot-region", "step"],
    ] {
        let out = bin().args(command).arg(&exe).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(TOOL_FAILED), "{err}");
        assert!(
            err.contains("the following required arguments were not provided")
                && err.contains("<--plot <FILE>|--gnuplot <PREFIX>>"),
            "{err}"
        );
    }
}
