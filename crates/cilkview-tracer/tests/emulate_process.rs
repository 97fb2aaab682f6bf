//! The emulation backend with processes that fork, exec, signal themselves or cannot be
//! emulated: they run as without the tool, and the report says what was not counted.
mod common;

use std::path::PathBuf;

use cilkview_fixtures::{build, BuildOptions};
use cilkview_tracer::{CounterMode, ExitStatus, TraceEvent};
use common::emulated::*;
use common::*;

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn forked_child_runs_unharmed() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t c = fork();
    PROBE(probe_c);
    if (c == 0) _exit(9);
    int st = 0;
    waitpid(c, &st, 0);
    PROBE(probe_d);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}"#,
        &[],
    );
    let (out, notes, ev, _) = emulate_with_probes(&p.exe, &[("probe_c", None), ("probe_d", None)]);
    assert_eq!(
        out.status,
        ExitStatus::Exited(9),
        "the child ran and exited 9"
    );
    assert_eq!(out.hits, 2, "only the parent is counted: {ev:?}");
    assert_eq!(notes.forked_children.len(), 1);
    assert!(
        out.counter.says().contains("forked"),
        "{}",
        out.counter.says()
    );
}

/// An exec is followed under the emulator: the new image is counted, its marks asked for with
/// the numbering restarted, and the exec'ing thread's count goes with its `Exec` event.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn exec_is_followed_under_the_emulator() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <unistd.h>
int main(void) {
    PROBE(probe_a);
    execl("/bin/sh", "sh", "-c", "exit 4", (char *)0);
    return 1;
}"#,
        &[],
    );
    let (out, notes, ev, asked) = emulate_with_probes(&p.exe, &[("probe_a", None)]);
    assert_eq!(out.status, ExitStatus::Exited(4));
    assert_eq!(notes.native_exec, None);
    assert_eq!(notes.followed_execs, [PathBuf::from("/bin/sh")]);
    assert!(
        out.counter.says().contains("counted"),
        "{}",
        out.counter.says()
    );
    // The shell's files were asked for after the program's.
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    assert!(asked.contains(&sh), "{asked:?}");
    let images: Vec<(u32, u64)> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Exec { image, cost, .. } => Some((image, cost)),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 2, "{ev:?}");
    assert_eq!(images[0], (0, 0));
    // From probe_a through execl to the syscall: more than a few, fewer than a start-up's.
    assert_eq!(images[1].0, 1);
    assert!((10..20_000).contains(&images[1].1), "{images:?}");
    // The shell's instructions are counted: tens of thousands at the least.
    assert!(out.total_cost > 100_000, "{}", out.total_cost);
    assert_costs_add_up(out.total_cost, &ev);
}

/// An exec made by a thread that is not the first: the other threads end at the exec (their
/// marks before it counted), the exec'd image goes on as the process's only thread.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn exec_from_a_second_thread_is_followed() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <pthread.h>
#include <unistd.h>
static void *second(void *arg) {
    (void)arg;
    PROBE(probe_b);
    execl("/bin/sh", "sh", "-c", "exit 6", (char *)0);
    return 0;
}
int main(void) {
    PROBE(probe_a);
    pthread_t t;
    pthread_create(&t, 0, second, 0);
    for (;;)
        pause();
}"#,
        &["-pthread"],
    );
    let (out, notes, ev, _) = emulate_with_probes(&p.exe, &[("probe_a", None), ("probe_b", None)]);
    assert_eq!(out.status, ExitStatus::Exited(6));
    assert_eq!(notes.followed_execs, [PathBuf::from("/bin/sh")]);
    assert_eq!(out.hits, 2);
    let pid = ev
        .iter()
        .find_map(|e| match *e {
            TraceEvent::Hit { probe: 0, tid, .. } => Some(tid),
            _ => None,
        })
        .unwrap();
    // Both threads ended (the second with nothing more: its count went to the new image), and
    // the process went on as the exec'd shell, whose exit ends it.
    let exits: Vec<i32> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::ThreadExit { tid, .. } => Some(tid),
            _ => None,
        })
        .collect();
    assert_eq!(exits.len(), 3, "{ev:?}");
    assert_eq!(exits.iter().filter(|&&t| t == pid).count(), 2, "{ev:?}");
    assert!(matches!(
        ev.iter().rev().find(|e| matches!(e, TraceEvent::Exec { .. })),
        Some(TraceEvent::Exec { image: 1, tid, cost, .. }) if *tid == pid && *cost > 10
    ));
    assert_costs_add_up(out.total_cost, &ev);
}

/// A followed exec passes the signal mask and the ignored signals on, as the kernel's exec does.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn a_followed_exec_keeps_the_signal_mask_and_ignored_signals() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <signal.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc > 1) {
        sigset_t old;
        struct sigaction hup;
        sigprocmask(SIG_SETMASK, 0, &old);
        sigaction(SIGHUP, 0, &hup);
        return 40 + 2 * sigismember(&old, SIGUSR1) + (hup.sa_handler == SIG_IGN);
    }
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, 0);
    signal(SIGHUP, SIG_IGN);
    execl(argv[0], argv[0], "exec'd", (char *)0);
    return 1;
}"#,
        &[],
    );
    let (out, notes) = run_emulated_with_notes(&opts(&p.exe, &[]), |_| Ok(vec![]), |_| {}).unwrap();
    assert_eq!(notes.followed_execs, std::slice::from_ref(&p.exe));
    assert_eq!(
        out.status,
        ExitStatus::Exited(43),
        "USR1 blocked and HUP ignored"
    );
}

/// What cannot be followed runs natively, as qemu-user runs it, and the report says so: a
/// set-user-ID file would lose its privileges under the emulator.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn exec_of_a_setuid_file_runs_natively_and_is_reported() {
    if !have_qemu() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let setuid = dir.path().join("true-setuid");
    std::fs::copy("/bin/true", &setuid).unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let p = compile(
        &format!(
            r#"
#include <unistd.h>
int main(void) {{
    PROBE(probe_a);
    execl("{}", "true", (char *)0);
    return 1;
}}"#,
            setuid.display()
        ),
        &[],
    );
    let (out, notes, ev, _) = emulate_with_probes(&p.exe, &[("probe_a", None)]);
    assert_eq!(out.status, ExitStatus::Exited(0));
    assert_eq!(notes.native_exec.as_deref(), Some(setuid.as_path()));
    assert!(notes.followed_execs.is_empty());
    assert!(
        out.counter.says().contains("natively"),
        "{}",
        out.counter.says()
    );
    assert_costs_add_up(out.total_cost, &ev);
}

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn signals_and_exit_status_pass_through() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <signal.h>
#include <unistd.h>
static volatile int got;
static void on_usr1(int s) { PROBE(probe_handler); got = s; }
int main(int argc, char **argv) {
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    PROBE(probe_after);
    if (argc > 1) kill(getpid(), SIGTERM);
    return got == SIGUSR1 ? 5 : 1;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_handler", None), ("probe_after", None)]);
    for (args, status) in [
        (vec![], ExitStatus::Exited(5)),
        (vec!["x"], ExitStatus::Signaled(15)),
    ] {
        let mut ev = vec![];
        let out = run_emulated(
            &opts(&p.exe, &args),
            |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
            |e| ev.push(e),
        )
        .unwrap();
        assert_eq!(out.status, status);
        let hits: Vec<usize> = ev
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::Hit { probe, .. } => Some(probe),
                _ => None,
            })
            .collect();
        assert_eq!(hits, vec![0, 1]);
    }
}

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn programs_the_emulator_cannot_run_are_one_clear_error() {
    if !have_qemu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A script runs through its interpreter, under the emulator; one whose interpreter is a
    // script itself (the kernel allows it) cannot.
    let script = dir.path().join("s.sh");
    write_executable(&script, "#!/bin/sh -e\nexit 3\n");
    let (out, _) = run_emulated_with_notes(&opts(&script, &[]), |_| Ok(vec![]), |_| {}).unwrap();
    assert_eq!(out.status, ExitStatus::Exited(3));
    let nested = dir.path().join("nested.sh");
    write_executable(&nested, format!("#!{}\nexit 0\n", script.display()));
    let e = run_emulated(&opts(&nested, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(
        e.to_string().contains("interpreter")
            && e.to_string()
                .contains(&cilkview_tracer::use_instead(CounterMode::Emulate)),
        "{e}"
    );
    if cilkview_fixtures::has_tool("gcc") {
        let c = dir.path().join("m32.c");
        std::fs::write(&c, "int main(void){return 0;}").unwrap();
        let exe = dir.path().join("m32");
        let ok = cilkview_fixtures::command("gcc")
            .args(["-m32", "-o"])
            .arg(&exe)
            .arg(&c)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit")
                    && e.to_string()
                        .contains(&cilkview_tracer::use_instead(CounterMode::Emulate)),
                "{e}"
            );
        } else {
            // No 32-bit libc here: an x86-64 program whose ELF header says ELFCLASS32.
            let src = build("serial", &BuildOptions::default());
            let mut bytes = std::fs::read(&src).unwrap();
            bytes[4] = 1;
            write_executable(&exe, bytes);
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit")
                    && e.to_string()
                        .contains(&cilkview_tracer::use_instead(CounterMode::Emulate)),
                "{e}"
            );
        }
    }
    let missing = dir.path().join("nope");
    let e = run_emulated(&opts(&missing, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(matches!(e, cilkview_tracer::TraceError::Exec { .. }), "{e}");
}
