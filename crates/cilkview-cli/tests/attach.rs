//! `cilkview-rs attach PID` on real running processes: measure a window, detach, and the process
//! finishes exactly as if it had never been traced.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::thread::sleep;
use std::time::Duration;

use cilkview_fixtures::build;
use common::{finish, kill, program, start, static_opts, std_bin};
use serde_json::Value;

fn long_running() -> std::path::PathBuf {
    build("long_running", &static_opts().flag("-pthread"))
}

fn sorted_lines(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = s.lines().filter(|l| !l.starts_with("done")).collect();
    v.sort();
    v
}

fn cilkview_attach(pid: u32, flags: &[&str], json: &Path) -> Child {
    std_bin()
        .arg("attach")
        .args(flags)
        .arg("--json")
        .arg(json)
        .arg(pid.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn report(tool: Child, json: &Path) -> (Value, String, Option<i32>) {
    let out = tool.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let text = std::fs::read_to_string(json).unwrap_or_else(|_| panic!("no report: {err}"));
    (serde_json::from_str(&text).unwrap(), err, out.status.code())
}

/// What a run that was never attached prints, and its exit status.
fn unattached(exe: &Path, args: &[&str]) -> (String, Option<i32>) {
    let out = cilkview_fixtures::command(exe).args(args).output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn ctrl_c_detaches_and_the_program_finishes_unharmed() {
    let exe = long_running();
    let args = ["25", "3"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(running.child.id(), &[], &json);
    sleep(Duration::from_millis(1500));
    kill("-INT", tool.id());
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(finish(running), expected);
    assert_eq!(r["attach"]["ended"], "stopped", "{err}");
    assert!(r.get("exit_status").is_none() && r.get("signal").is_none());
    // Each round: a step with 2 spawns and parallelism 2.5, then serial printing and sleeping.
    let spawns = r["spawns"].as_u64().unwrap();
    assert!(spawns >= 2, "{r}");
    let parallelism = r["parallelism"].as_f64().unwrap();
    assert!((1.0..=2.5).contains(&parallelism), "{r}");
    assert!(
        err.contains("attached to process") && err.contains("only that window"),
        "{err}"
    );
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn staying_until_the_process_exits_reports_its_status() {
    let exe = long_running();
    let expected = unattached(&exe, &["4", "5"]);
    let running = start(&exe, &["4", "5"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(running.child.id(), &[], &json);
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(finish(running), expected);
    assert_eq!(expected.1, Some(5));
    assert_eq!(r["attach"]["ended"], "exited");
    assert_eq!(r["exit_status"], 5);
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn duration_ends_the_window() {
    let exe = long_running();
    let args = ["20", "0"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(running.child.id(), &["--duration", "0.8"], &json);
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(r["attach"]["ended"], "duration");
    let seconds = r["attach"]["seconds"].as_f64().unwrap();
    assert!((0.7..5.0).contains(&seconds), "{seconds}");
    assert_eq!(finish(running), expected);
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn a_multithreaded_process_is_measured_over_all_threads() {
    let exe = long_running();
    let args = ["15", "0", "2"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(running.child.id(), &["--duration", "1.5"], &json);
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    let (out, status) = finish(running);
    assert_eq!(status, expected.1);
    // The two threads interleave their lines (and so the checksum) differently from run to run.
    assert_eq!(sorted_lines(&out), sorted_lines(&expected.0));
    assert!(r["spawns"].as_u64().unwrap() >= 2, "{r}");
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn a_missing_pid_or_the_tool_itself_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = std_bin()
        .args(["attach", "--json"])
        .arg(&json)
        .arg("999999999")
        .output()
        .unwrap();
    // The output file reserved before the attach is not left behind, empty.
    assert!(!json.exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("no process with pid 999999999"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn an_unmarked_process_is_measured_as_serial_code_with_a_warning() {
    let mut sleeper = cilkview_fixtures::command("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(sleeper.id(), &["--duration", "0.3"], &json);
    let (r, err, code) = report(tool, &json);
    sleeper.kill().unwrap();
    let _ = sleeper.wait();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("has no cilkview marks"), "{err}");
    assert_eq!(r["parallelism"].as_f64(), Some(1.0));
}

/// Whatever ends the tool — SIGKILL (or an OOM kill) included — the process it attached to must
/// finish as if never traced. Single-stepped threads whose tracer vanished used to keep their
/// trap flag and die of SIGTRAP (exit 133) at their next instruction.
#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn killing_the_tool_in_any_way_leaves_the_process_unharmed() {
    let exe = long_running();
    let args = ["18", "3"];
    let expected = unattached(&exe, &args);
    for sig in ["KILL", "USR1", "QUIT", "TERM"] {
        let running = start(&exe, &args);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let tool = cilkview_attach(running.child.id(), &["--counter", "step"], &json);
        sleep(Duration::from_millis(800));
        kill(&format!("-{sig}"), tool.id());
        let out = tool.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            finish(running),
            expected,
            "after SIG{sig} to the tool: {err}"
        );
        if sig == "KILL" {
            assert_eq!(out.status.code(), None, "{err}");
        } else {
            // A catchable signal ends the window like Ctrl-C: a report, exit status 0.
            assert_eq!(out.status.code(), Some(0), "SIG{sig}: {err}");
            let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            assert_eq!(r["attach"]["ended"], "stopped", "SIG{sig}: {err}");
        }
    }
}

/// `--profile` on `attach`: the window's call sites, named from the running executable (each
/// round of fixtures/long_running.c calls step(), which spawns child() twice).
#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn attach_profiles_the_call_sites_of_the_window() {
    let exe = long_running();
    let args = ["12", "0"];
    let expected = unattached(&exe, &args);
    let running = start(&exe, &args);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let prefix = dir.path().join("p");
    let tool = cilkview_attach(
        running.child.id(),
        // Instructions (auto would take native, in nanoseconds, without a PMU).
        &[
            "--counter",
            "step",
            "--duration",
            "0.8",
            "--profile",
            prefix.to_str().unwrap(),
        ],
        &json,
    );
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(finish(running), expected);
    let sites = r["call_sites"].as_array().unwrap_or_else(|| panic!("{r}"));
    let spawn = sites
        .iter()
        .find(|s| s["kind"] == "spawn")
        .unwrap_or_else(|| panic!("{r}"));
    // step() spawns child() at lines 28 and 29, once each per round: on work, a spawn's work is
    // 2002 per invocation (a few more for the call); the window saw at least one round. The
    // window may end inside a child (detaching ends its invocation there): one invocation may
    // be cut short.
    let (n, work) = (
        spawn["invocations"].as_u64().unwrap(),
        spawn["on_work"]["work"].as_u64().unwrap(),
    );
    assert!(
        n >= 1 && work > 2002 * (n - 1) && work < 2100 * n,
        "{spawn}"
    );
    assert_eq!(spawn["function"], "step", "{spawn}");
    let location = spawn["location"].as_str().unwrap();
    assert!(
        location.contains("long_running")
            && (location.ends_with(":28") || location.ends_with(":29")),
        "{spawn}"
    );
    assert!(err.contains("call sites on the span"), "{err}");
    for ext in ["csv", "folded", "svg", "callgrind"] {
        assert!(dir.path().join(format!("p.{ext}")).is_file(), "p.{ext}");
    }
}

/// fixtures/popf_rounds.c: rounds of strands that run `pushfq; popfq`; with "1" as the third
/// argument each round also forks a child that prints and exits with 7, and reports how it ended.
fn popf_rounds() -> std::path::PathBuf {
    build("popf_rounds", &static_opts())
}

/// A single-stepped `popf` of the program's (`--counter step` steps every instruction of the
/// window) made the kernel take the trap flag set for the step as the program's own: after the
/// detach the process trapped at its next instruction and died of SIGTRAP (after round 9 of 40),
/// and children it forked in the window, detached at once, did the same. Each counter that can
/// run here leaves the program its own output and exit status.
#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn a_stepped_popf_leaves_the_program_and_its_children_running_after_the_detach() {
    let exe = popf_rounds();
    let args = ["40", "5", "1"];
    let expected = unattached(&exe, &args);
    assert_eq!(expected.1, Some(5));
    assert!(expected.0.contains("child 39 exited 7\n"), "{}", expected.0);
    for counter in ["step", "native", "hw"] {
        let running = start(&exe, &args);
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let flags = ["--counter", counter, "--duration", "0.5"];
        let tool = cilkview_attach(running.child.id(), &flags, &json);
        let out = tool.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        if counter == "hw" && out.status.code() == Some(common::TOOL_FAILED) {
            // The attach was refused (no PMU): the program runs on all the same.
            assert_eq!(finish(running), expected, "after a refused attach: {err}");
            cilkview_fixtures::skip(format!("--counter hw cannot run here: {err}"));
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "--counter {counter}: {err}");
        let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(r["attach"]["ended"], "duration", "--counter {counter}: {r}");
        // The window ran strands of `popfq` (two spawns a round).
        assert!(
            r["spawns"].as_u64().unwrap() >= 2,
            "--counter {counter}: {r}"
        );
        assert_eq!(
            finish(running),
            expected,
            "after attach --counter {counter}: {err}"
        );
    }
}

/// Attached while the program is inside a region that ends in the window: the report says the
/// window began inside the region, not that the marks did not nest.
#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn attaching_inside_a_region_says_so() {
    let exe = program(
        "attach_mid_region",
        r#"
#include <stdio.h>
#include <time.h>
#include "cilkview.h"
#include "work.h"
static void child(void) { CV_WORK(1000); }
static void step(void) { cv_function(); cv_spawn(child()); CV_WORK(500); cv_sync(); }
static void rounds(int n) {
    struct timespec pause = {0, 100 * 1000 * 1000};
    for (int i = 0; i < n; i++) { step(); nanosleep(&pause, NULL); }
}
int main(void) {
    cv_region_begin("phase");
    puts("ready");
    fflush(stdout);
    rounds(10);
    cv_region_end("phase");
    rounds(15);
    puts("done");
    return 0;
}
"#,
    );
    let running = start(&exe, &[]);
    assert_eq!(running.seen, "ready\n");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let tool = cilkview_attach(running.child.id(), &["--duration", "2"], &json);
    let (r, err, code) = report(tool, &json);
    assert_eq!(code, Some(0), "{err}");
    let _ = finish(running);
    assert_eq!(r["attach"]["ended"], "duration", "{err}");
    assert!(!err.contains("did not nest"), "{err}");
    assert!(
        err.contains("warning: a region was open when the attach began or ended"),
        "{err}"
    );
}
