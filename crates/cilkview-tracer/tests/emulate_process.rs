//! The emulation backend with processes that fork, exec, signal themselves or cannot be
//! emulated: they run as without the tool, and the report says what was not counted.
mod common;

use std::path::Path;

use cilkview_fixtures::{build, BuildOptions};
use cilkview_tracer::{ExitStatus, TraceEvent};
use common::emulated::*;
use common::*;

#[test]
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
    let probes = probes(&p.exe, &[("probe_c", None), ("probe_d", None)]);
    let mut ev = vec![];
    let (out, notes) = run_emulated_with_notes(
        &opts(&p.exe, &[]),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(
        out.status,
        ExitStatus::Exited(9),
        "the child ran and exited 9"
    );
    assert_eq!(out.hits, 2, "only the parent is counted: {ev:?}");
    assert_eq!(notes.forked_children.len(), 1);
    assert!(
        out.counter.reason.contains("forked"),
        "{}",
        out.counter.reason
    );
}

#[test]
fn exec_is_reported_not_miscounted() {
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
    let probes = probes(&p.exe, &[("probe_a", None)]);
    let mut ev = vec![];
    let (out, notes) = run_emulated_with_notes(
        &opts(&p.exe, &[]),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(4));
    assert_eq!(notes.native_exec.as_deref(), Some(Path::new("/bin/sh")));
    assert!(
        out.counter.reason.contains("natively"),
        "{}",
        out.counter.reason
    );
    assert_costs_add_up(out.total_instructions, &ev);
}

#[test]
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
fn programs_the_emulator_cannot_run_are_one_clear_error() {
    if !have_qemu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = run_emulated(&opts(&script, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(e.to_string().contains("--counter step"), "{e}");
    if cilkview_fixtures::has_tool("gcc") {
        let c = dir.path().join("m32.c");
        std::fs::write(&c, "int main(void){return 0;}").unwrap();
        let exe = dir.path().join("m32");
        let ok = std::process::Command::new("gcc")
            .args(["-m32", "-o"])
            .arg(&exe)
            .arg(&c)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit") && e.to_string().contains("--counter step"),
                "{e}"
            );
        } else {
            // No 32-bit libc here: an x86-64 program whose ELF header says ELFCLASS32.
            let src = build("serial", &BuildOptions::default());
            let mut bytes = std::fs::read(&src).unwrap();
            bytes[4] = 1;
            std::fs::write(&exe, bytes).unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit") && e.to_string().contains("--counter step"),
                "{e}"
            );
        }
    }
    let missing = dir.path().join("nope");
    let e = run_emulated(&opts(&missing, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(matches!(e, cilkview_tracer::TraceError::Exec { .. }), "{e}");
}
