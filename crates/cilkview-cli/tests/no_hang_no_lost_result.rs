//! Outside the emulated world: no hang, no lost result, no unsafe output. Real programs under the
//! real cilkview-rs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;

use common::{kill, kill_quietly, program, std_bin, within};

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

const TINY: &str = r#"
#include "cilkview.h"
static void child(void) { cv_function(); }
int main(void) { cv_function(); cv_spawn(child()); cv_sync(); return 0; }
"#;

/// A `qemu-x86_64` in PATH that never answers: the probe has a time limit, `auto` goes on
/// without emulation and says why, `--counter emulate` is one clear error.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn an_emulator_that_never_answers_does_not_hang_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "qemu-x86_64", "#!/bin/sh\nexec sleep 1000\n");
    let exe = program("tiny_spawn", TINY);
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut cmd = std_bin();
    cmd.env("PATH", &path)
        .args(["run", "--counter", "emulate"])
        .arg(&exe);
    let out = within(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert!(err.contains("did not answer `--version`"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // Nothing it started is left behind.
    let leftover = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x001000\x00"))
    });
    assert!(!leftover, "the emulator's `sleep 1000` is still running");
}

/// `sh -c 'exec cilkview-rs attach $$'`: the pid is the tool's own (its visible process, whose
/// worker would trace it): refused at once.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn attaching_to_the_tools_own_visible_process_is_refused() {
    let mut cmd = cilkview_fixtures::command("sh");
    cmd.arg("-c").arg(format!(
        "exec {} attach $$",
        assert_cmd::cargo::cargo_bin("cilkview-rs").display()
    ));
    let out = within(cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert!(err.contains("is cilkview-rs itself"), "{err}");
}

/// Marked; natively under a benchmark (CILK_NWORKERS set) it writes its pid to argv[1] and
/// then hangs (argv[2] == "hang") or fails with status 3.
const BENCHED: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cilkview.h"
static void child(void) { cv_function(); }
int main(int argc, char **argv) {
    cv_function(); cv_spawn(child()); cv_sync();
    if (getenv("CILK_NWORKERS")) {
        FILE *f = fopen(argv[1], "w");
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        if (!strcmp(argv[2], "hang")) for (;;) pause();
        return 3;
    }
    return 0;
}
"#;

/// Waits (30 s at most) for the benchmarked program to write its pid.
fn benched_pid(file: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < until, "the benchmark never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// A signal to the tool while it benchmarks (`run --bench`, `bench`): the benchmarked program is
/// killed, the tool ends with 128 + the signal, and `run --bench` writes the analysis it has.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_signal_in_the_benchmark_phase_kills_the_program_and_keeps_the_analysis() {
    let exe = program("benched", BENCHED);
    for (sub, sig, number) in [
        ("run", "-TERM", 15),
        ("run", "-HUP", 1),
        ("bench", "-TERM", 15),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (json, marker) = (dir.path().join("r.json"), dir.path().join("pid"));
        let mut cmd = std_bin();
        if sub == "run" {
            cmd.args(["run", "--bench"]).arg("--json").arg(&json);
        } else {
            cmd.arg("bench");
        }
        let child = cmd
            .args(["--cores", "1", "--trials", "1", "--warmup", "0"])
            .arg(&exe)
            .arg(&marker)
            .arg("hang")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = benched_pid(&marker);
        kill(sig, child.id());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = rx.recv_timeout(Duration::from_secs(60));
        let still = alive(pid);
        if still {
            kill_quietly(pid);
        }
        let out = out.expect("the tool did not end").unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !still,
            "{sub} {sig}: the benchmarked program was left running"
        );
        assert_eq!(out.status.code(), Some(128 + number), "{sub} {sig}: {err}");
        assert!(err.contains("interrupted by signal"), "{err}");
        if sub == "run" {
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            assert_eq!(report["spawns"], 1, "{report}");
            assert!(err.contains("Spawns: 1"), "{err}");
        }
    }
}

/// `run --bench` whose benchmarked run fails: the finished analysis is still written; the exit
/// status is the failed run's.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_failing_trial_keeps_the_analysis() {
    let exe = program("benched", BENCHED);
    let dir = tempfile::tempdir().unwrap();
    let (json, marker) = (dir.path().join("r.json"), dir.path().join("pid"));
    let mut cmd = std_bin();
    cmd.args([
        "run", "--bench", "--cores", "1", "--trials", "1", "--warmup", "0",
    ])
    .arg("--json")
    .arg(&json)
    .arg(&exe)
    .arg(&marker)
    .arg("fail");
    let out = within(cmd, Duration::from_secs(120));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("the program failed at P=1"), "{err}");
    assert!(err.contains("Spawns: 1"), "{err}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["spawns"], 1, "{report}");
}

/// Runs the tool in `dir` (60 s at most): exit code and stderr.
fn tool_in(dir: &Path, args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut cmd = std_bin();
    cmd.current_dir(dir).args(args);
    let out = within(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code(), err)
}

/// Two outputs naming one file, and a prefix that is a folder, are one clear error before the
/// run, and no file is left behind.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn outputs_that_collide_or_are_folders_are_refused_before_the_run() {
    let exe = program("tiny_spawn", TINY);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("outdir")).unwrap();
    let os = |s: &str| std::ffi::OsString::from(s);
    for (flags, says) in [
        (
            vec!["--profile", "P", "--plot", "P.svg"],
            "the same file P.svg",
        ),
        (
            vec!["--profile", "P", "--json", "P.csv"],
            "the same file P.csv",
        ),
        (
            vec![
                "--json",
                "r.json",
                "--plot",
                "./r.json.svg",
                "--profile",
                "r.json",
            ],
            "same file",
        ),
        (
            vec!["--gnuplot", "g", "--json", "./g.dat"],
            "g.dat: give them different names",
        ),
        (
            vec!["--profile", "outdir/"],
            "--profile outdir/: a prefix of file names",
        ),
        (
            vec!["--profile", "/"],
            "--profile /: a prefix of file names",
        ),
        (
            vec!["--gnuplot", "outdir/"],
            "--gnuplot outdir/: a prefix of file names",
        ),
    ] {
        let mut args: Vec<std::ffi::OsString> = vec![os("run")];
        args.extend(flags.iter().map(|f| os(f)));
        args.push(exe.clone().into_os_string());
        let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
        let (code, err) = tool_in(dir.path(), &args);
        assert_eq!(code, Some(common::TOOL_FAILED), "{flags:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.lines().count() == 1,
            "{err}"
        );
        assert!(err.contains(says), "{flags:?}: {err}");
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n != "outdir")
            .collect();
        assert!(left.is_empty(), "{flags:?} left {left:?}");
        assert_eq!(
            std::fs::read_dir(dir.path().join("outdir"))
                .unwrap()
                .count(),
            0
        );
    }
    assert!(!Path::new("/.csv").exists());
}

/// A burden whose burdened sums wrap at 2^64 is refused (a wrapped burdened span once made a
/// `--fail-below burdened_parallelism` gate pass).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_burden_that_would_wrap_is_refused() {
    let exe = program("tiny_spawn", TINY);
    let dir = tempfile::tempdir().unwrap();
    for burden in ["18446744073709551615", "1000000001"] {
        let (code, err) = tool_in(
            dir.path(),
            &[
                "run".as_ref(),
                "--burden".as_ref(),
                burden.as_ref(),
                "--fail-below".as_ref(),
                "burdened_parallelism=1".as_ref(),
                exe.as_os_str(),
            ],
        );
        assert_eq!(code, Some(common::TOOL_FAILED), "{err}");
        assert!(err.contains("at most 1000000000 instructions"), "{err}");
    }
}

/// `report` on a JSON whose measures are undefined (span 0: `"parallelism": null`) reads it
/// back; names and arguments from a JSON are printed with their control characters escaped.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn report_reads_nulls_back_and_escapes_what_it_prints() {
    let dir = tempfile::tempdir().unwrap();
    let figure6 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(figure6).unwrap()).unwrap();
    for key in ["work", "span", "burdened_span"] {
        json[key] = 0.into();
    }
    json["parallelism"] = serde_json::Value::Null;
    json["burdened_parallelism"] = serde_json::Value::Null;
    json["average_maximal_strand"] = serde_json::Value::Null;
    json["program"] = "evil\u{1b}[2J\nerror: forged".into();
    json["args"] = serde_json::json!(["a\u{1b}]0;title\u{7}", "b\nc"]);
    json["counter"]["reason"] = "r\u{1b}[31m".into();
    let file = dir.path().join("span0.json");
    std::fs::write(&file, json.to_string()).unwrap();
    let (code, err) = tool_in(
        dir.path(),
        &[
            "report".as_ref(),
            file.as_os_str(),
            "--json".as_ref(),
            "again.json".as_ref(),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(!err.lines().any(|l| l.starts_with("error:")), "{err}");
    assert!(err.contains(r"evil\u{1b}[2J\nerror: forged"), "{err}");
    // What `report` wrote reads back too.
    let (code, err) = tool_in(dir.path(), &["report".as_ref(), "again.json".as_ref()]);
    assert_eq!(code, Some(0), "{err}");
}
