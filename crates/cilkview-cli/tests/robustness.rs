//! Robustness: the program is never harmed, the user's files are never lost, no input makes the
//! tool panic or hang, and the words say what is wrong.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

mod common;

use common::{bin, fixture, kill, program, spawn_to_first_line, std_bin};
use serde_json::Value;

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Runs cilkview-rs (60 s at most); returns exit code and stderr, asserting no panic.
fn tool(args: &[&std::ffi::OsStr]) -> (Option<i32>, String, String) {
    let out = bin()
        .args(args)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !err.contains("panicked") && out.status.code() != Some(101),
        "{args:?}: {err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code(), stdout, err)
}

/// One `error: …` line and exit status 125.
fn one_error(args: &[&std::ffi::OsStr]) -> String {
    one_error_with(common::TOOL_FAILED, args)
}

/// One `error: …` line and exit status `status`.
fn one_error_with(status: i32, args: &[&std::ffi::OsStr]) -> String {
    let (code, _, err) = tool(args);
    assert_eq!(code, Some(status), "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.lines().count() == 1,
        "{err}"
    );
    err
}

const PRINT_ARGS: &str = r#"
#include <stdio.h>
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) printf("%s%s", argv[i], i + 1 < argc ? " " : "");
    putchar('\n');
    return 0;
}
"#;

/// Item 4: `run ./app --json in.json` passes `--json in.json` to the app (as perf, strace and
/// valgrind do) instead of overwriting the user's `in.json` with the report.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn options_after_program_are_the_programs() {
    let exe = program("print_args", PRINT_ARGS);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, "the user's data").unwrap();
    let (code, out, err) = tool(&[
        "run".as_ref(),
        exe.as_os_str(),
        "--json".as_ref(),
        input.as_os_str(),
        "--max-cores".as_ref(),
        "2".as_ref(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, format!("--json {} --max-cores 2\n", input.display()));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "the user's data");
    assert!(
        err.contains("32 processors"),
        "the default --max-cores: {err}"
    );
    // The `--` separator after PROGRAM is still accepted (and dropped); a second one is the
    // program's.
    let (_, out, _) = tool(&[
        "run".as_ref(),
        exe.as_os_str(),
        "--".as_ref(),
        "--".as_ref(),
        "-x".as_ref(),
    ]);
    assert_eq!(out, "-- -x\n");
}

/// Item 5: an output path naming the program (or a hard link to it) is refused before running.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn an_output_that_is_the_program_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    std::fs::copy(fixture("known_spawn"), &exe).unwrap();
    let original = std::fs::read(&exe).unwrap();
    let link = dir.path().join("link");
    std::fs::hard_link(&exe, &link).unwrap();
    for (flag, out) in [("--json", &exe), ("--json", &link)] {
        let err = one_error(&[
            "run".as_ref(),
            flag.as_ref(),
            out.as_os_str(),
            exe.as_os_str(),
        ]);
        assert!(err.contains("is the program"), "{err}");
    }
    let prefix = dir.path().join("plot");
    let dat = dir.path().join("plot.dat");
    std::fs::hard_link(&exe, &dat).unwrap();
    let err = one_error(&[
        "run".as_ref(),
        "--gnuplot".as_ref(),
        prefix.as_os_str(),
        exe.as_os_str(),
    ]);
    assert!(err.contains("plot.dat is the program"), "{err}");
    assert_eq!(
        std::fs::read(&exe).unwrap(),
        original,
        "the program is intact"
    );
}

/// Item 6: no input panics. A huge --duration is bounded, a full or closed stdout/stderr is an
/// error line (or a quiet exit for a reader that left), never exit 101.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn no_panics_on_huge_durations_or_closed_and_full_outputs() {
    let err = one_error_clap(&["attach", "--duration", "1e20", "1"]);
    assert!(err.contains("at most 1000000000 seconds"), "{err}");

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std_bin().arg("header").stdout(full).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{err}");
    assert_eq!(
        err,
        "error: cannot write the header to standard output: No space left on device (os error 28)\n"
    );

    // A reader that went away: the header is no longer wanted.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std_bin().arg("header").stdout(writer).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // The report, and an error, to a closed stderr.
    let figure6 = cilkview_fixtures::repo_root().join("fixtures/figure6.json");
    for (args, code) in [
        (vec!["report".into(), figure6.into_os_string()], 0),
        (
            vec!["report".into(), "/nonexistent.json".into()],
            common::TOOL_FAILED,
        ),
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std_bin().args(&args).stderr(writer).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
    }
}

/// A clap usage error: exit 125, starts with `error: `, no panic.
fn one_error_clap(args: &[&str]) -> String {
    let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    let (code, _, err) = tool(&args);
    assert_eq!(code, Some(common::TOOL_FAILED), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    err
}

/// Item 8: a FIFO as PROGRAM is refused at once (reading its header would wait for a writer).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_fifo_as_program_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(cilkview_fixtures::command("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = one_error_with(common::NOT_EXECUTABLE, &["run".as_ref(), fifo.as_os_str()]);
    assert!(
        err.contains("is a FIFO (named pipe), not a program"),
        "{err}"
    );
}

/// Item 9: a name without a slash is searched in PATH only, as execvp does: a folder `true` in
/// the current directory does not shadow /usr/bin/true.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_name_without_slash_is_searched_in_path_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("print_args")).unwrap();
    let exe = program("print_args", PRINT_ARGS);
    let path = exe.parent().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .env("PATH", path)
        .args(["run", "print_args", "hello"])
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert!(
        err.contains("cilkview-rs: print_args hello (exited with status 0)"),
        "{err}"
    );
    // And a program only in the current directory is not found without ./
    script(dir.path(), "only_here", "#!/bin/sh\necho ran\n");
    let out = bin()
        .current_dir(dir.path())
        .env("PATH", path)
        .args(["run", "only_here"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not found in PATH (give a path such as ./only_here)"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(common::NOT_FOUND), "{err}");
    assert!(out.stdout.is_empty());
}

/// Item 10: a script whose interpreter is missing names the interpreter, not the script.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_missing_interpreter_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let s = script(dir.path(), "tool.sh", "#!/no/such/shell -e\necho hi\n");
    let err = one_error_with(common::NOT_FOUND, &["run".as_ref(), s.as_os_str()]);
    assert!(
        err.contains("its interpreter (on its #! line) /no/such/shell: no such file"),
        "{err}"
    );
}

/// Item 13: each cause once ("No such file or directory (os error 2)" was printed twice).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn error_causes_are_printed_once() {
    let err = one_error(&["report".as_ref(), "/nonexistent/r.json".as_ref()]);
    assert_eq!(
        err,
        "error: cannot read /nonexistent/r.json: No such file or directory (os error 2)\n"
    );
}

/// Item 12: a zombie has exited; saying "permission denied … run as root" sent users astray.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn attaching_to_a_zombie_says_it_has_exited() {
    // `sleep 0.5` exits after its parent has exec'd `sleep 30`, which never reaps it. (With
    // `sleep 0`, the shell reaped the child before its exec about once in 20 runs.)
    let mut parent = cilkview_fixtures::command("sh")
        .args(["-c", "sleep 0.5 & echo $!; exec sleep 30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(parent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let zombie = line.trim().to_string();
    let status = format!("/proc/{zombie}/status");
    for _ in 0..100 {
        let state = std::fs::read_to_string(&status).unwrap_or_default();
        if state.contains("State:\tZ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, _, err) = tool(&["attach".as_ref(), zombie.as_ref()]);
    let _ = parent.kill();
    let _ = parent.wait();
    assert_eq!(code, Some(common::TOOL_FAILED), "{err}");
    assert!(err.contains("it has already exited (a zombie"), "{err}");
    assert!(!err.contains("root"), "{err}");
}

/// Item 3: `kill PID` of the tool (SIGTERM, SIGHUP, SIGUSR1…) goes to the program, which ends as it would
/// without the tool; the report of what was measured is written, no empty file is left.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn sigterm_sighup_sigusr1_to_run_reach_the_program_and_the_report_is_written() {
    let exe = program(
        "wait_for_term",
        r#"
#include <stdio.h>
#include <unistd.h>
#include "cilkview.h"
#include "work.h"
static void child(void) { CV_WORK(500); }
static void f(void) { cv_function(); cv_spawn(child()); CV_WORK(100); cv_sync(); }
int main(void) { f(); puts("ready"); fflush(stdout); for (;;) pause(); }
"#,
    );
    for (sig, name, number) in [
        ("-TERM", "SIGTERM", 15),
        ("-HUP", "SIGHUP", 1),
        ("-USR1", "SIGUSR1", 10),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        // Single-stepping: exact counts up to the signal (under emulation the last buffered
        // marks of a program killed from outside are missing, see faults.rs).
        let (child, first) = spawn_to_first_line(
            std_bin()
                .args(["run", "--counter", "step"])
                .arg("--json")
                .arg(&json)
                .arg(&exe),
        );
        assert_eq!(first, "ready\n");
        // To the tool's pid alone, as `kill PID` or a closed terminal does.
        kill(sig, child.id());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + number), "{err}");
        assert!(
            err.contains(&format!("killed by signal {number} ({name})"))
                && err.contains("Spawns: 1"),
            "{err}"
        );
        let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(report["signal"], number);
        assert_eq!(report["spawns"], 1);
    }
}

/// Item 11: corrupt marks in an image a wrapper script execs are the same error as when that image
/// is run directly (they were silently taken for "no marks").
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn corrupt_marks_behind_a_wrapper_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let Some(corrupt) = common::with_corrupt_marks(&fixture("known_spawn"), dir.path(), "corrupt")
    else {
        return;
    };
    let direct = one_error(&["run".as_ref(), corrupt.as_os_str()]);
    let cause = direct
        .split_once(&format!("cannot analyze {}: ", corrupt.display()))
        .map(|(_, c)| c.trim_end().to_string())
        .unwrap_or_else(|| panic!("{direct}"));
    assert!(cause.starts_with("malformed"), "{direct}");
    let wrapper = script(
        dir.path(),
        "wrapper.sh",
        &format!("#!/bin/sh\nexec {} \"$@\"\n", corrupt.display()),
    );
    let json = dir.path().join("r.json");
    let (code, _, err) = tool(&[
        "run".as_ref(),
        "--json".as_ref(),
        json.as_os_str(),
        wrapper.as_os_str(),
    ]);
    assert_eq!(code, Some(common::TOOL_FAILED), "{err}");
    assert!(err.starts_with("error: ") && err.contains(&cause), "{err}");
    assert!(
        err.contains(&corrupt.display().to_string()),
        "names the image: {err}"
    );
    assert!(!json.exists(), "no empty report left");
}

/// Item 14: `report` derives the speedup table and parallelisms from the measures and the model,
/// accepts --max-cores and --span-coefficient, and refuses a --burden it cannot honour.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn report_rederives_from_the_measures_and_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("measures.json");
    std::fs::write(
        &saved,
        r#"{"work": 1000000, "span": 10000, "burdened_span": 40000, "spawns": 100, "syncs": 50}"#,
    )
    .unwrap();
    let (code, _, err) = tool(&["report".as_ref(), saved.as_os_str()]);
    assert_eq!(code, Some(0), "{err}");
    for line in [
        "Parallelism: 100.00\n",
        "Burdened parallelism: 25.00\n",
        "2 processors: 1.87 – 2.00\n",
        "32 processors: 10.30 – 32.00\n",
    ] {
        assert!(err.contains(line), "{line} in:\n{err}");
    }
    let out = dir.path().join("out.json");
    let (code, _, err) = tool(&[
        "report".as_ref(),
        saved.as_os_str(),
        "--max-cores".as_ref(),
        "4".as_ref(),
        "--span-coefficient".as_ref(),
        "1".as_ref(),
        "--json".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    // 1e6 / (1e6/4 + 2·1·(3/4)·40000) = 3.23
    assert!(
        err.contains("4 processors: 3.23 – 4.00\n") && !err.contains("8 processors"),
        "{err}"
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(json["span_coefficient"], 1.0);
    assert_eq!(json["parallelism"], 100.0);
    assert_eq!(json["speedup"].as_array().unwrap().len(), 2);
    let err = one_error(&[
        "report".as_ref(),
        saved.as_os_str(),
        "--burden".as_ref(),
        "100".as_ref(),
    ]);
    assert!(
        err.contains("run the program again with --burden 100"),
        "{err}"
    );
    // The burden it was measured with is fine.
    let (code, _, _) = tool(&[
        "report".as_ref(),
        saved.as_os_str(),
        "--burden".as_ref(),
        "15000".as_ref(),
    ]);
    assert_eq!(code, Some(0));
}
