//! What a program does to the world it runs in must not break the emulation (its
//! descriptors, its ids, its signals, its environment), and what emulation cannot give it is
//! said in the report. Real programs, compiled here, under the real cilkview-rs.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

mod common;

use cilkview_fixtures::{compile_source, Lang};
use common::{analyze_with, kill, kill_quietly, program, spawn_to_first_line, std_bin};

/// `None` (said aloud) where no plugin-capable emulator is installed.
fn emulator() -> Option<()> {
    match cilkview_fixtures::emulator() {
        Ok(()) => Some(()),
        Err(why) => {
            cilkview_fixtures::skip(why);
            None
        }
    }
}

/// fib with a spawn per call of n >= 2: fib(n + 1) - 1 spawns.
const FIB: &str = r#"
static long fib(int n) {
    cv_function();
    if (n < 2) return n;
    long a, b;
    cv_spawn(a = fib(n - 1));
    b = fib(n - 2);
    cv_sync();
    return a + b;
}
"#;

fn spawns_of_fib(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n + 1 {
        (a, b) = (b, a + b);
    }
    a - 1
}

fn closing_program() -> PathBuf {
    program(
        "closes_its_fds",
        &format!(
            r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "cilkview.h"
{FIB}
int main(int argc, char **argv) {{
    /* As daemons do: every descriptor but the standard ones. */
    if (syscall(SYS_close_range, 3, ~0U, 0) != 0) return 99;
    if (argc > 2) {{ puts("ready"); fflush(stdout); }}
    printf("%ld\n", fib(atoi(argv[1])));
    return 7;
}}
"#
        ),
    )
}

/// A program that closes every descriptor but 0-2 (the plugin's too) keeps its exit status, and
/// every mark after that is counted: with ~1.5 M mark hits after the close, more than the ring
/// holds (the analyzer once stopped reading there and QEMU waited for room forever).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn closing_every_descriptor_keeps_the_status_and_the_counts() {
    let Some(()) = emulator() else { return };
    let exe = closing_program();
    for n in [5u64, 25] {
        let t = analyze_with(&exe, &["--counter", "emulate"], &[&n.to_string()]);
        assert_eq!(t.code(), Some(7), "{}", t.stderr());
        assert_eq!(t.u("spawns"), spawns_of_fib(n), "{}", t.json);
        assert_eq!(t.json["exit_status"], 7, "{}", t.json);
        assert!(
            common::counter_says(&t.json).contains("closed the emulator's descriptors"),
            "{}",
            t.json
        );
    }
}

/// The processes whose command line names `exe` (its path is unique to its test): the tool and
/// QEMU.
fn processes_running(exe: &std::path::Path) -> Vec<i32> {
    let want = exe.to_string_lossy().into_owned();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .split('\0')
                .any(|a| a == want)
                .then_some(pid)
        })
        .collect()
}

/// Kills (SIGKILL) what a failed test left running of `exe`.
fn kill_leftovers(exe: &std::path::Path) {
    for pid in processes_running(exe) {
        kill_quietly(pid);
    }
}

/// The tool killed (SIGKILL) after the program closed the plugin's descriptors: the program runs
/// on to its end, unharmed, and QEMU does not stay behind waiting for a reader.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn killing_the_tool_after_the_program_closed_the_descriptors_leaves_no_orphan() {
    let Some(()) = emulator() else { return };
    let exe = closing_program();
    let mut tool = std_bin()
        .args(["run", "--counter", "emulate"])
        .arg(&exe)
        .args(["27", "ready"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(tool.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    tool.kill().unwrap();
    tool.wait().unwrap();
    // The program's output ends when QEMU, which holds the pipe, exits.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
        let _ = tx.send(rest);
    });
    let rest = rx.recv_timeout(Duration::from_secs(120));
    if rest.is_err() {
        kill_leftovers(&exe);
    }
    assert_eq!(
        rest.expect("QEMU still running 120 s after the tool was killed"),
        "196418\n"
    );
}

/// A copy of `exe` owned by `nobody` (uid/gid 65534) with mode `mode` (set-user-ID and/or
/// set-group-ID). `None`, said aloud, where the test cannot give a file away (not root).
fn owned_by_nobody(exe: &std::path::Path, dir: &std::path::Path, mode: u32) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.join("ids");
    std::fs::copy(exe, &copy).unwrap();
    if euid() != 0 || std::os::unix::fs::chown(&copy, Some(65534), Some(65534)).is_err() {
        cilkview_fixtures::skip("not root: cannot make a set-user-ID file of another user");
        return None;
    }
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
    Some(copy)
}

const PRINT_IDS: &str = r#"
#include <stdio.h>
#include <unistd.h>
#include "cilkview.h"
static void child(void) { cv_function(); }
int main(void) {
    cv_function();
    cv_spawn(child());
    cv_sync();
    printf("%d %d\n", (int)geteuid(), (int)getegid());
    return 0;
}
"#;

/// A set-user-ID / set-group-ID program: `auto` does not emulate it (QEMU would run it with
/// the caller's ids) and says why; `--counter emulate` runs it and says what emulation changed.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn set_id_programs_are_not_emulated_silently() {
    let Some(()) = emulator() else { return };
    let exe = program("print_ids", PRINT_IDS);
    for (mode, native_ids, what) in [
        (0o4755, "65534 0\n", "set-user-ID (owner uid 65534)"),
        (0o2755, "0 65534\n", "set-group-ID (gid 65534)"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let Some(copy) = owned_by_nobody(&exe, dir.path(), mode) else {
            return;
        };
        let auto = analyze_with(&copy, &[], &[]);
        assert_eq!(auto.code(), Some(0), "{}", auto.stderr());
        assert_eq!(auto.json["counter"]["mode"], "step", "{}", auto.json);
        let reason = &common::counter_says(&auto.json);
        assert!(
            reason.contains(what) && reason.contains("your ids"),
            "{reason}"
        );
        assert_eq!(auto.stdout(), native_ids, "the ids it has natively");
        assert_eq!(auto.u("spawns"), 1);

        let emulated = analyze_with(&copy, &["--counter", "emulate"], &[]);
        assert_eq!(emulated.json["counter"]["mode"], "emulate");
        assert_eq!(
            emulated.stdout(),
            "0 0\n",
            "QEMU runs it with the caller's ids"
        );
        let reason = &common::counter_says(&emulated.json);
        assert!(
            reason.contains(what) && reason.contains("the caller's user and group ids (euid 0)"),
            "{reason}"
        );
        assert!(emulated.stderr().contains(what), "{}", emulated.stderr());
    }
}

fn euid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    uid.split_whitespace().nth(2).unwrap().parse().unwrap()
}

const PRINT_ENV: &str = r#"
#include <stdio.h>
extern char **environ;
int main(void) {
    for (char **e = environ; *e; e++) puts(*e);
    return 0;
}
"#;

/// The program's environment arrives in its order, and `QEMU_*` variables reach the program,
/// not QEMU (which took `QEMU_STRACE=1` as -strace on the program's stderr, `QEMU_GDB=1234` as
/// waiting forever for a debugger).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn the_environment_is_the_programs_in_order_and_qemu_variables_are_not_qemus() {
    let Some(()) = emulator() else { return };
    let exe = program("print_env", PRINT_ENV);
    let vars = [
        ("PATH", "/usr/bin:/bin"),
        ("ZA", "1"),
        ("QEMU_STRACE", "1"),
        ("ZB", "2"),
        ("QEMU_GDB", "1234"),
        ("ZC", "3"),
    ];
    let mut cmd = cilkview_fixtures::command("env");
    cmd.arg("-i");
    for (k, v) in vars {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(assert_cmd::cargo::cargo_bin("cilkview-rs"))
        .args(["run", "--counter", "emulate"])
        .arg(&exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(Duration::from_secs(60)) else {
        kill_leftovers(&exe);
        kill_quietly(pid);
        panic!("the run did not end (QEMU_GDB reached QEMU?)");
    };
    let out = out.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("write(") && !err.contains("exit_group"),
        "strace output: {err}"
    );
    let got = String::from_utf8_lossy(&out.stdout);
    // The QEMU_* ones first (QEMU puts -E variables at the front), each in its order; last,
    // the pinned glibc dispatch (docs/emulation.md, "One glibc path on every host").
    let (got, pinned) = got.split_at(got.find("GLIBC_TUNABLES=").unwrap_or(got.len()));
    assert_eq!(
        got,
        "QEMU_STRACE=1\nQEMU_GDB=1234\nPATH=/usr/bin:/bin\nZA=1\nZB=2\nZC=3\n"
    );
    assert!(
        pinned.starts_with("GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,") && pinned.ends_with('\n'),
        "{pinned}"
    );
    assert_eq!(pinned.lines().count(), 1, "{pinned}");
}

/// `kill -ABRT` / `kill -ILL` sent to the program from outside: its death by that signal, as
/// natively (134 / 132), with the report of what was measured.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn abrt_and_ill_from_outside_are_the_programs_death_with_the_report() {
    let Some(()) = emulator() else { return };
    let exe = program(
        "waits_for_a_signal",
        r#"
#include <stdio.h>
#include <unistd.h>
#include "cilkview.h"
static void child(void) { cv_function(); }
int main(void) {
    cv_function(); cv_spawn(child()); cv_sync();
    printf("%d\n", (int)getpid());
    fflush(stdout);
    for (;;) pause();
}
"#,
    );
    for (sig, number) in [("-ABRT", 6), ("-ILL", 4)] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let (tool, line) = spawn_to_first_line(
            std_bin()
                .args(["run", "--counter", "emulate", "--json"])
                .arg(&json)
                .arg(&exe),
        );
        // The program's pid, as the world outside sees it.
        kill(sig, line.trim());
        let out = tool.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + number), "{sig}: {err}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["signal"], number, "{report}");
        assert_eq!(report["spawns"], 1, "{report}");
        assert!(
            err.contains("did not come from the program itself"),
            "{err}"
        );
    }
}

/// Real-time signals: QEMU 7.2 cannot deliver SIGRTMAX-1 and SIGRTMAX (the report says so when
/// the program installs a handler for one or sends one to itself), and a death by SIGRTMIN is
/// reported with its own number (34, exit 162), not QEMU's host signal (36).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn real_time_signals_are_reported_with_their_numbers_and_what_qemu_cannot_deliver() {
    let Some(()) = emulator() else { return };
    let exe = program(
        "real_time_signals",
        r#"
#include <signal.h>
#include <stdlib.h>
#include <string.h>
static void on(int sig) { (void)sig; }
int main(int argc, char **argv) {
    if (!strcmp(argv[1], "die")) raise(SIGRTMIN + atoi(argv[2]));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on;
    sigaction(SIGRTMAX, &sa, 0);
    raise(SIGRTMAX);
    return 0;
}
"#,
    );
    for k in [0, 3] {
        let t = analyze_with(&exe, &["--counter", "emulate"], &["die", &k.to_string()]);
        assert_eq!(t.code(), Some(128 + 34 + k), "{}", t.stderr());
        assert_eq!(t.json["signal"], 34 + k, "{}", t.json);
    }
    let t = analyze_with(&exe, &["--counter", "emulate"], &["handle", "0"]);
    let reason = &common::counter_says(&t.json);
    assert!(
        reason.contains("installed a handler for signal 64 (SIGRTMAX)")
            && reason.contains("sent itself signal 64 (SIGRTMAX)"),
        "{reason}"
    );
}

/// System calls QEMU 7.2 lacks (seccomp, io_uring, openat2, ptrace) fail under emulation: the
/// run says which, in the report and the JSON.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn system_calls_the_emulator_lacks_are_reported() {
    let Some(()) = emulator() else { return };
    let exe = program(
        "lacking_syscalls",
        r#"
#define _GNU_SOURCE
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <linux/seccomp.h>
#include <linux/filter.h>
#include <sys/ptrace.h>
int main(void) {
    struct sock_filter f[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
    struct sock_fprog p = { 1, f };
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &p);
    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &p);
    char params[120] = {0}, how[24] = {0};
    syscall(SYS_io_uring_setup, 4, params);
    syscall(SYS_openat2, -100, "/", how, 24);
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    return 0;
}
"#,
    );
    let t = analyze_with(&exe, &["--counter", "emulate"], &[]);
    assert_eq!(t.code(), Some(0), "{}", t.stderr());
    let reason = &common::counter_says(&t.json);
    for what in [
        "refused the program's seccomp filter",
        "seccomp returned ENOSYS",
        "io_uring_setup returned ENOSYS",
        "openat2 returned ENOSYS",
        "ptrace returned ENOSYS",
    ] {
        assert!(reason.contains(what), "{what}: {reason}");
    }
    assert!(
        !reason.contains("system call 334"),
        "glibc's rseq probe: {reason}"
    );
    assert!(t.stderr().contains("openat2 returned ENOSYS"));
}

/// The program's process is named after it (/proc/self/comm, ps, pgrep: not `qemu-x86_64`), it
/// sees its own core-dump limit, and a crash under emulation leaves no core file of QEMU's
/// (QEMU's own `core` and `qemu_<prog>_*.core`), which the report says.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn the_process_has_the_programs_name_and_core_limit_and_no_qemu_core_files() {
    let Some(()) = emulator() else { return };
    let exe = program(
        "name_and_core_limit",
        r#"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
int main(int argc, char **argv) {
    char comm[64] = {0};
    FILE *f = fopen("/proc/self/comm", "r");
    fgets(comm, sizeof comm, f);
    fclose(f);
    struct rlimit rl;
    getrlimit(RLIMIT_CORE, &rl);
    printf("%s%llu\n", comm, (unsigned long long)rl.rlim_cur);
    fflush(stdout);
    if (argc > 1) raise(SIGSEGV);
    return 0;
}
"#,
    );
    let dir = tempfile::tempdir().unwrap();
    // Natively: its name, and the limit as the shell set it (no crash: no core file here).
    let native = cilkview_fixtures::command("sh")
        .arg("-c")
        .arg(r#"ulimit -c 4096 && exec "$@""#)
        .arg("sh")
        .arg(&exe)
        .output()
        .unwrap();
    let native = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(native.starts_with("name_and_core_l\n") && !native.ends_with("\n0\n"));
    for crash in [false, true] {
        let mut cmd = cilkview_fixtures::command("sh");
        cmd.arg("-c")
            .arg(r#"ulimit -c 4096 && exec "$@""#)
            .arg("sh")
            .arg(assert_cmd::cargo::cargo_bin("cilkview-rs"))
            .args(["run", "--counter", "emulate"])
            .arg(&exe)
            .args(crash.then_some("crash"))
            .current_dir(dir.path());
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(String::from_utf8_lossy(&out.stdout), native, "{err}");
        if crash {
            assert_eq!(out.status.code(), Some(139), "{err}");
            assert!(err.contains("no core dump was written"), "{err}");
        }
        let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert!(files.is_empty(), "core files left: {files:?}");
    }
}

/// The plugin's descriptors are moved out of a `close` of one of them (the program gets EBADF,
/// as natively, where nothing is open there); after `close_range(3, ~0)` a library the program
/// loads is not instrumented, and the report names it.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs under QEMU"]
fn a_close_of_a_plugin_descriptor_is_ebadf_and_later_libraries_are_named() {
    let Some(()) = emulator() else { return };
    let exe = compile_source(
        "closes_then_loads",
        r#"
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    int r = close(513);
    printf("close: %d %d\n", r, r ? errno : 0);
    syscall(SYS_close_range, 3, ~0U, 0);
    printf("dlopen: %s\n", dlopen("libm.so.6", RTLD_NOW) ? "ok" : dlerror());
    return 0;
}
"#,
        Lang::C,
        &cilkview_fixtures::BuildOptions::default()
            .compiler("gcc")
            .opt(2),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let native = cilkview_fixtures::command(&exe).output().unwrap();
    let t = analyze_with(&exe, &["--counter", "emulate"], &[]);
    assert_eq!(t.code(), Some(0), "{}", t.stderr());
    assert_eq!(t.stdout(), String::from_utf8_lossy(&native.stdout));
    assert_eq!(t.stdout(), "close: -1 9\ndlopen: ok\n");
    let reason = &common::counter_says(&t.json);
    assert!(
        reason.contains("were not instrumented") && reason.contains("libm.so.6"),
        "{reason}"
    );
}
