//! Faults of the program under test: crashes, kills, forks, execs, signals, stripped and hardened
//! binaries. Whatever happens, the program behaves as without the tool and the report of what was
//! measured is still written.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

mod common;

use cilkview_fixtures::build;
use common::{analyze_with, kill, program, spawn_to_first_line, static_opts, std_bin};
use serde_json::Value;

/// The exact counters' behaviour: single-stepping (the ptrace backend). Under emulation a
/// program killed by a signal it did not send itself loses its last buffered marks, and an image
/// it execs runs natively: those cases are checked apart (`emulation_says_what_it_missed`).
fn trace(exe: &Path, args: &[&str]) -> common::Analysis {
    analyze_with(exe, &["--counter", "step"], args)
}

/// stdout and the shell's exit status (128 + N for a signal), as cilkview-rs passes it on.
fn native(exe: &Path, args: &[&str]) -> (String, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    let out = cilkview_fixtures::command(exe).args(args).output().unwrap();
    let code = out.status.code().or(out.status.signal().map(|s| 128 + s));
    (String::from_utf8_lossy(&out.stdout).into_owned(), code)
}

/// `cilkview-rs run --json` of a program that waits to be signalled, in a process group of its
/// own (as a shell starts a foreground job, and the group Ctrl-C would signal), started once the
/// program printed its first line.
struct Job {
    child: std::process::Child,
    first_line: String,
    json: PathBuf,
    _dir: tempfile::TempDir,
}

impl Job {
    fn start(exe: &Path) -> Job {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        // SIGINT's default action, as at a terminal, whatever this test inherited: a job that a
        // non-interactive shell starts in the background ignores SIGINT, and ignored it stays
        // across exec (the tool and the program would then never see the Ctrl-C sent below).
        let (child, first_line) = spawn_to_first_line(
            cilkview_fixtures::command("env")
                .arg("--default-signal=INT")
                .arg(std_bin().get_program())
                .args(["run", "--counter", "step"])
                .arg("--json")
                .arg(&json)
                .arg(exe)
                .process_group(0),
        );
        Job {
            child,
            first_line,
            json,
            _dir: dir,
        }
    }

    /// The tool's exit code, its stderr, and the JSON report it wrote.
    fn finish(self) -> (Option<i32>, String, Value) {
        let out = self.child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let text =
            std::fs::read_to_string(&self.json).unwrap_or_else(|_| panic!("no report: {err}"));
        (out.status.code(), err, serde_json::from_str(&text).unwrap())
    }
}

const SPAWN_THEN: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "cilkview.h"
#include "work.h"
static void child(void) { CV_WORK(500); }
static void f(void) { cv_function(); cv_spawn(child()); CV_WORK(100); cv_sync(); }
"#;

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_segfault_still_writes_the_report_and_exits_128_plus_11() {
    let exe = program(
        "segv",
        &format!("{SPAWN_THEN} int main(void) {{ f(); puts(\"before\"); fflush(stdout); *(volatile int *)0 = 1; return 0; }}"),
    );
    let t = trace(&exe, &[]);
    assert_eq!(t.code(), Some(128 + 11));
    assert_eq!(t.stdout(), "before\n");
    assert_eq!(t.json["signal"], 11);
    assert_eq!(t.json["spawns"], 1);
    assert!(
        t.stderr().contains("killed by signal 11 (SIGSEGV)"),
        "{}",
        t.stderr()
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn sigkill_from_outside_still_writes_the_report() {
    let exe = program(
        "wait_for_kill",
        &format!(
            "{SPAWN_THEN} int main(void) {{ f(); printf(\"%d\\n\", getpid()); fflush(stdout); \
             for (;;) pause(); }}"
        ),
    );
    let job = Job::start(&exe);
    let pid: i32 = job.first_line.trim().parse().unwrap();
    kill("-KILL", pid);
    let (code, err, report) = job.finish();
    assert_eq!(code, Some(128 + 9));
    assert_eq!(report["signal"], 9);
    assert_eq!(report["spawns"], 1);
    assert!(err.contains("killed by signal 9 (SIGKILL)"), "{err}");
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn forks_vforks_and_system_behave_as_without_the_tool() {
    let exe = program(
        "forker",
        &format!(
            r#"{SPAWN_THEN}
#include <spawn.h>
#include <sys/wait.h>
extern char **environ;
int main(void) {{
    f();
    pid_t p = fork();
    if (p == 0) {{ f(); printf("child ran f\n"); fflush(stdout); _exit(3); }}
    int st; waitpid(p, &st, 0);
    printf("fork child exit %d\n", WEXITSTATUS(st));
    fflush(stdout);
    p = vfork();
    if (p == 0) {{ execl("/bin/sh", "sh", "-c", "echo vfork exec", (char *)0); _exit(9); }}
    waitpid(p, &st, 0);
    char *argv[] = {{"sh", "-c", "echo posix_spawn; exit 4", 0}};
    posix_spawn(&p, "/bin/sh", 0, 0, argv, environ);
    waitpid(p, &st, 0);
    printf("posix_spawn exit %d\n", WEXITSTATUS(st));
    fflush(stdout);
    printf("system %d\n", WEXITSTATUS(system("echo from system; exit 5")));
    f();
    return 0;
}}"#
        ),
    );
    let (out, code) = native(&exe, &[]);
    let t = trace(&exe, &[]);
    assert_eq!(t.stdout(), out);
    assert_eq!(t.code(), code);
    assert!(
        out.contains("fork child exit 3") && out.contains("system 5"),
        "{out}"
    );
    // Only the traced process is measured: two calls of f in it.
    assert_eq!(t.json["spawns"], 2, "{}", t.json);
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_wrapper_that_execs_the_program_is_not_part_of_the_measure() {
    let exe = build("known_spawn", &static_opts());
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("wrapper.sh");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec {} \"$@\"\n", exe.display()),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let direct = trace(&exe, &[]);
    let exe_arg = exe.to_str().unwrap();
    for (launcher, wrapped) in [
        ("a #! script", trace(&wrapper, &[])),
        ("env", trace(Path::new("/usr/bin/env"), &[exe_arg])),
    ] {
        for key in ["spawns", "syncs", "events"] {
            assert_eq!(wrapped.json[key], direct.json[key], "{launcher}: {key}");
        }
        // The C start-up runs more or fewer instructions with another argv[0] and environment,
        // but the parallel part (work − span) is the same, and the launcher's hundred thousand
        // instructions before the exec are not counted. With glibc's dispatch pinned
        // (GLIBC_TUNABLES, the default of every instruction counter) the exec'd program's
        // start-up measured +5,837 and +9,224 instructions after a #! script on AMD EPYC (0
        // with --host-dispatch); a few hundred before the pinning.
        assert_eq!(
            wrapped.parallel_part(),
            direct.parallel_part(),
            "{launcher}"
        );
        let (w, d) = (
            wrapped.json["work"].as_u64().unwrap(),
            direct.json["work"].as_u64().unwrap(),
        );
        assert!(
            w.abs_diff(d) < 15_000,
            "{launcher}: wrapped work {w}, direct {d}"
        );
        assert_eq!(wrapped.code(), Some(0), "{launcher}");
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn signals_the_program_uses_are_delivered_as_without_the_tool() {
    let exe = program(
        "signals",
        &format!(
            r#"{SPAWN_THEN}
#include <string.h>
#include <errno.h>
#include <sys/time.h>
#include <sys/wait.h>
static volatile sig_atomic_t usr1, alrm, chld;
static void on_usr1(int s) {{ (void)s; usr1++; f(); }}
static void on_alrm(int s) {{ (void)s; alrm++; }}
static void on_chld(int s) {{ (void)s; chld++; }}
int main(void) {{
    signal(SIGUSR1, on_usr1);
    signal(SIGALRM, on_alrm);
    signal(SIGCHLD, on_chld);
    raise(SIGUSR1);
    struct itimerval it = {{{{0, 0}}, {{0, 20000}}}};
    setitimer(ITIMER_REAL, &it, 0);
    while (!alrm) pause();
    pid_t p = fork();
    if (p == 0) _exit(0);
    while (!chld) pause();
    waitpid(p, 0, 0);
    int fds[2]; pipe(fds); close(fds[0]);
    signal(SIGPIPE, SIG_IGN);
    int r = write(fds[1], "x", 1);
    printf("usr1 %d alrm %d chld %d write %d %s\n", usr1, alrm, chld, r, strerror(errno));
    fflush(stdout);
    signal(SIGPIPE, SIG_DFL);
    write(fds[1], "x", 1); /* dies of SIGPIPE */
    return 0;
}}"#
        ),
    );
    let (out, code) = native(&exe, &[]);
    assert_eq!(out, "usr1 1 alrm 1 chld 1 write -1 Broken pipe\n");
    let t = trace(&exe, &[]);
    assert_eq!((t.stdout().as_str(), t.code()), (out.as_str(), code));
    assert_eq!(code, Some(128 + 13), "native run dies of SIGPIPE");
    assert_eq!(t.json["signal"], 13);
    // The marks in the SIGUSR1 handler were measured.
    assert_eq!(t.json["spawns"], 1);
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn stripped_static_pie_and_cet_binaries_measure_the_same() {
    let base = static_opts();
    let reference = trace(&build("known_scope", &base), &[]);
    let dir = tempfile::tempdir().unwrap();
    let mut variants: Vec<(String, PathBuf)> = Vec::new();
    for strip_flag in ["--strip-debug", "--strip-all"] {
        let stripped = dir.path().join(format!("stripped{strip_flag}"));
        std::fs::copy(build("known_scope", &base), &stripped).unwrap();
        let ok = cilkview_fixtures::command("strip")
            .arg(strip_flag)
            .arg(&stripped)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        variants.push((format!("strip {strip_flag}"), stripped));
    }
    variants.push((
        "-fcf-protection".into(),
        build("known_scope", &base.clone().flag("-fcf-protection=full")),
    ));
    variants.push((
        "-static-pie".into(),
        build("known_scope", &base.clone().pie(true)),
    ));
    for (what, exe) in variants {
        let t = trace(&exe, &[]);
        assert_eq!(t.code(), Some(0), "{what}: {}", t.stderr());
        assert_eq!(
            (&t.json["spawns"], &t.json["syncs"]),
            (&reference.json["spawns"], &reference.json["syncs"]),
            "{what}"
        );
        let (w, s) = (
            t.json["work"].as_u64().unwrap(),
            t.json["span"].as_u64().unwrap(),
        );
        if what.starts_with("strip") {
            // Same code: the parallel part is identical to the instruction (the start-up differs
            // by a few instructions with the length of argv[0]).
            assert_eq!(w - s, reference.parallel_part(), "{what}");
            assert_eq!(t.json["events"], reference.json["events"], "{what}");
        }
        // Whatever the build, the marked part has work 100008 and span 60002.
        assert!(
            (w - s).abs_diff(100008 - 60002) <= 64,
            "{what}: work {w} span {s}"
        );
    }
}

/// Ctrl-C at the terminal sends SIGINT to the whole foreground process group: the program gets it
/// (and here dies of it, as it would without the tool), the tool survives to write its report.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn ctrl_c_reaches_the_program_and_the_report_is_still_written() {
    let exe = program(
        "wait_for_ctrl_c",
        &format!("{SPAWN_THEN} int main(void) {{ f(); puts(\"ready\"); fflush(stdout); for (;;) pause(); }}"),
    );
    let job = Job::start(&exe);
    assert_eq!(job.first_line, "ready\n");
    let group = format!("-{}", job.child.id());
    cilkview_fixtures::command("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    let (code, err, report) = job.finish();
    assert_eq!(code, Some(128 + 2), "{err}");
    assert!(
        err.contains("killed by signal 2 (SIGINT)") && err.contains("Spawns: 1"),
        "{err}"
    );
    assert_eq!(report["signal"], 2);
}

/// Ctrl-C while the program is inside a marked function: the report says the run was
/// interrupted there, not that the marks did not nest (a missing exit or sync).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn ctrl_c_inside_a_marked_function_is_said_to_interrupt_it() {
    let exe = program(
        "ctrl_c_inside",
        &format!(
            "{SPAWN_THEN} static void g(void) {{ cv_function(); cv_spawn(f()); puts(\"ready\"); \
             fflush(stdout); for (;;) pause(); }} int main(void) {{ g(); return 0; }}"
        ),
    );
    let job = Job::start(&exe);
    assert_eq!(job.first_line, "ready\n");
    let group = format!("-{}", job.child.id());
    cilkview_fixtures::command("kill")
        .args(["-INT", "--", &group])
        .status()
        .unwrap();
    let (code, err, _) = job.finish();
    assert_eq!(code, Some(128 + 2), "{err}");
    assert!(!err.contains("did not nest"), "{err}");
    assert!(
        err.contains(
            "warning: the run ended (killed by signal 2 (SIGINT)) inside an open function, \
             spawn, loop or region"
        ),
        "{err}"
    );
}

/// A fork-join depth of 100,000 (fixtures/deep.c): measured right, in bounded memory. This is the
/// slowest test (~1.5 million instructions single-stepped where there is no hardware counter).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn deep_recursion_of_depth_100_000() {
    let exe = build("deep", &static_opts());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    // GNU time reports the tool's peak resident memory.
    let out = cilkview_fixtures::command("/usr/bin/time")
        .args(["-f", "maxrss_kib %M"])
        .arg(assert_cmd::cargo::cargo_bin("cilkview-rs"))
        .arg("run")
        .arg("--json")
        .arg(&json)
        .arg(&exe)
        .output();
    let Ok(out) = out else {
        cilkview_fixtures::skip(
            "/usr/bin/time is not installed (apt-get install time; .ci/run does)",
        );
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "100000\n");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        (&r["spawns"], &r["syncs"]),
        (&Value::from(100_000), &Value::from(100_000))
    );
    let parallelism = r["parallelism"].as_f64().unwrap();
    assert!((1.0..1.2).contains(&parallelism), "{r}");
    let rss: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kib "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maxrss in {err}"));
    // 200,000 open frames at the bottom: a few tens of MB at most.
    assert!(rss < 200 * 1024, "cilkview-rs peaked at {rss} KiB");
}

/// A wrapper that execs a dynamically linked program: at that exec the tracer asks for the
/// probes of the program and then of its loader; the program's marks must still be the ones hit.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_wrapper_that_execs_a_dynamically_linked_program() {
    let exe = build(
        "known_spawn",
        &cilkview_fixtures::BuildOptions::default()
            .compiler("gcc")
            .opt(2),
    );
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("wrapper.sh");
    std::fs::write(&wrapper, format!("#!/bin/sh\nexec {}\n", exe.display())).unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let direct = trace(&exe, &[]);
    let wrapped = trace(&wrapper, &[]);
    assert_eq!(
        (direct.u("spawns"), direct.u("events")),
        (2, 7),
        "{}",
        direct.json
    );
    assert_eq!(
        (wrapped.u("spawns"), wrapped.u("events")),
        (2, 7),
        "{}",
        wrapped.json
    );
    assert_eq!(wrapped.parallel_part(), direct.parallel_part());
}

/// What emulation cannot see, or saw differently, is said in the report's counter line: a fault
/// that killed the program (its last marks are recovered from the plugin's shared buffers), an
/// image the program execs (followed under the emulator and counted).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn emulation_says_what_it_missed() {
    if let Err(why) = cilkview_fixtures::emulator() {
        cilkview_fixtures::skip(format!("emulation: {why}"));
        return;
    }
    let segv = program(
        "segv",
        &format!("{SPAWN_THEN} int main(void) {{ f(); puts(\"before\"); fflush(stdout); *(volatile int *)0 = 1; return 0; }}"),
    );
    let t = analyze_with(&segv, &["--counter", "emulate"], &[]);
    assert_eq!(t.code(), Some(128 + 11));
    assert_eq!(t.stdout(), "before\n");
    assert_eq!(t.json["signal"], 11);
    let reason = &common::counter_says(&t.json);
    // The program's own fault: nothing says it came from outside its code (QEMU ends the same
    // way for both, so the note says only what is known).
    assert!(reason.contains("signal 11 ended the program"), "{reason}");
    assert!(!reason.contains("outside its own code"), "{reason}");
    let note = t.json["counter"]["notes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["id"] == "ended-without-exit"))
        .unwrap_or_else(|| panic!("an ended-without-exit note: {}", t.json));
    assert!(note["detail"]
        .as_str()
        .unwrap()
        .contains("QEMU ran no exit path"));
    assert!(
        t.stderr().contains("\nnote: signal 11 ended the program"),
        "{}",
        t.stderr()
    );
    // QEMU ran no exit path, but the marks the program hit were in the plugin's shared buffers.
    assert_eq!(t.json["spawns"], 1, "{}", t.json);

    let exe = build("known_spawn", &static_opts());
    let t = analyze_with(
        Path::new("/usr/bin/env"),
        &["--counter", "emulate"],
        &[exe.to_str().unwrap()],
    );
    assert_eq!(t.code(), Some(0));
    let reason = &common::counter_says(&t.json);
    assert!(
        reason.contains(&format!("exec'd `{}`, counted", exe.display())),
        "{reason}"
    );
    assert_eq!(t.json["spawns"], 2, "the exec'd image is counted");
}

/// Under `auto` a `#!` script is emulated: its interpreter runs under the emulator, which
/// follows its exec of the program. A script whose interpreter is a script itself is
/// single-stepped, and the reason says what to do for emulation's speed.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn auto_emulates_a_script_and_single_steps_a_script_interpreter() {
    let exe = build("known_spawn", &static_opts());
    let dir = tempfile::tempdir().unwrap();
    let executable = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let wrapper = executable(
        "wrapper.sh",
        format!("#!/bin/sh\nexec {} \"$@\"\n", exe.display()),
    );
    let t = common::analyze(&wrapper, &[]);
    assert_eq!(t.json["spawns"], 2, "{}", t.json);
    let nested = executable("nested", format!("#!{}\n", wrapper.display()));
    let n = common::analyze(&nested, &[]);
    assert_eq!(n.json["spawns"], 2, "{}", n.json);
    if cilkview_fixtures::emulator().is_ok() {
        assert_eq!(t.json["counter"]["mode"], "emulate", "{}", t.json);
        let direct = analyze_with(&exe, &["--counter", "emulate"], &[]);
        assert_eq!(t.parallel_part(), direct.parallel_part());
        assert_eq!(n.json["counter"]["mode"], "step", "{}", n.json);
        let reason = &common::counter_says(&n.json);
        assert!(reason.contains("interpreter is not an x86-64"), "{reason}");
        // What to do instead, not "use --counter step", which is what happened.
        assert!(reason.contains("run that program itself"), "{reason}");
        assert!(!reason.contains("use --counter step"), "{reason}");
    }
}

/// Killing the tool while it counts by emulation leaves the program running to its end, its
/// output whole: the plugin finds the analyzer gone (waiting for room in the record ring, or
/// ringing the analyzer awake) and stops writing, and SIGPIPE never reaches the program.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn killing_the_tool_under_emulation_leaves_the_program_unharmed() {
    use std::io::Read;
    if let Err(why) = cilkview_fixtures::emulator() {
        cilkview_fixtures::skip(format!("emulation: {why}"));
        return;
    }
    // The analyzer waits for records while the program sleeps (the plugin will ring it awake),
    // then the program hits enough marks to fill its buffer after the tool is gone.
    let quiet_then_marks = program(
        "quiet_then_marks",
        &format!(
            "{SPAWN_THEN} int main(void) {{ f(); puts(\"before\"); fflush(stdout); \
             usleep(600000); for (int i = 0; i < 20000; i++) f(); puts(\"after\"); return 0; }}"
        ),
    );
    // Marks from the start: the ring fills, the plugin waits for room when the tool dies.
    let busy = build("fib_cutoff", &static_opts());
    let cases: [(&Path, &str, u64, &str); 2] = [
        (&quiet_then_marks, "", 300, "before\nafter\n"),
        (&busy, "32", 300, "fib(32) = 2178309\n"),
    ];
    for (exe, arg, after_ms, expected) in cases {
        let mut tool = std_bin()
            .args(["run", "--counter", "emulate"])
            .arg(exe)
            .args((!arg.is_empty()).then_some(arg))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        tool.kill().unwrap();
        tool.wait().unwrap();
        // The program (QEMU) holds our stdout pipe until it ends.
        let mut out = String::new();
        tool.stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, expected, "{}", exe.display());
    }
}
