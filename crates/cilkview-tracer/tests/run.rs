mod common;

use std::path::Path;

use cilkview_tracer::{run, CounterMode, ExitStatus, TraceEvent, TraceOptions};
use common::*;

fn opts(exe: &Path, mode: CounterMode) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: vec![],
        counter: mode,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    }
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn step_loop_cost_is_exact() {
    let p = compile(
        r#"
#include <stdio.h>
int main(void) {
    PROBE(probe_a);
    __asm__ volatile("mov $1000,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(probe_b);
    printf("hello\n");
    return 3;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_a", None), ("probe_b", None)]);
    let mut events = vec![];
    let out = run(
        &opts(&p.exe, CounterMode::Step),
        |_| Ok(probes.clone()),
        |e| events.push(e),
    )
    .unwrap();
    eprintln!("{out:?}\n{events:?}");
    assert_eq!(out.status, ExitStatus::Exited(3));
    let hits: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TraceEvent::Hit { probe, cost, .. } => Some((*probe, *cost)),
            _ => None,
        })
        .collect();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[1], (1, 2002), "nop + mov + 1000*(dec+jnz)");
    assert_costs_add_up(out.total_cost, &events);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn step_rep_string_counts_once() {
    let p = compile(
        r#"
char buf[4096];
int main(void) {
    PROBE(probe_a);
    __asm__ volatile("lea buf(%%rip),%%rdi\nmov $1000,%%rcx\nxor %%eax,%%eax\nrep stosb" ::: "rdi", "rcx", "rax", "memory", "cc");
    PROBE(probe_b);
    return 0;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_a", None), ("probe_b", None)]);
    let mut hits = vec![];
    run(
        &opts(&p.exe, CounterMode::Step),
        |_| Ok(probes.clone()),
        |e| {
            if let TraceEvent::Hit { cost, .. } = e {
                hits.push(cost)
            }
        },
    )
    .unwrap();
    assert_eq!(
        hits[1], 5,
        "nop + lea + mov + xor + rep stosb (one instruction)"
    );
}

/// Trace `exe` and return (outcome, events). `probes` are those of `exe`;
/// any other mapped file (loader, libraries) has none.
fn trace(
    exe: &Path,
    mode: CounterMode,
    probes: Vec<cilkview_tracer::Probe>,
) -> (cilkview_tracer::Outcome, Vec<TraceEvent>) {
    let mut events = vec![];
    let out = run(
        &opts(exe, mode),
        |img| Ok(if img == exe { probes.clone() } else { vec![] }),
        |e| events.push(e),
    )
    .unwrap();
    assert_costs_add_up(out.total_cost, &events);
    (out, events)
}

/// Helper "test": when re-executed with CILKVIEW_TRACER_CHILD=<exe>, trace it.
#[test]
#[ignore = "slow: traces compiled programs"]
fn zz_child_entry() {
    if let Some(exe) = std::env::var_os("CILKVIEW_TRACER_CHILD") {
        let out = run(
            &opts(Path::new(&exe), CounterMode::Step),
            |_| Ok(vec![]),
            |_| {},
        )
        .unwrap();
        println!("STATUS={:?}", out.status);
    }
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn exit_status_and_stdio_pass_through() {
    let p = compile(
        r#"
#include <stdio.h>
int main(void) {
    char line[64] = {0};
    if (!fgets(line, sizeof line, stdin)) return 1;
    printf("out:%s", line);
    fprintf(stderr, "err:%s", line);
    return 42;
}"#,
        &[],
    );
    let mut child = cilkview_fixtures::command(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "zz_child_entry",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CILKVIEW_TRACER_CHILD", &p.exe)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"ping\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("out:ping\n"), "{stdout}");
    assert!(stderr.contains("err:ping\n"), "{stderr}");
    assert!(stdout.contains("STATUS=Exited(42)"), "{stdout}");
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn killed_by_signal() {
    let p = compile("#include <signal.h>\n#include <unistd.h>\nint main(void){ kill(getpid(), SIGTERM); return 0; }", &[]);
    let (out, _) = trace(&p.exe, CounterMode::Step, vec![]);
    assert_eq!(out.status, ExitStatus::Signaled(15));
    assert_eq!(out.status.code(), 143);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn exec_failures_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-program");
    let e = run(&opts(&missing, CounterMode::Step), |_| Ok(vec![]), |_| {}).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, cilkview_tracer::TraceError::Exec { source, .. } if source.raw_os_error() == Some(2)),
        "{msg}"
    );
    assert!(
        msg.contains("no-such-program") && msg.contains("No such file"),
        "{msg}"
    );

    let not_exec = dir.path().join("not-executable");
    std::fs::write(&not_exec, "#!/bin/sh\n").unwrap();
    let e = run(&opts(&not_exec, CounterMode::Step), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(
        matches!(&e, cilkview_tracer::TraceError::Exec { source, .. } if source.raw_os_error() == Some(13)),
        "{e}"
    );
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn operand_register_is_read() {
    let p = compile(
        r#"
int main(int argc, char **argv) {
    PROBE_RDI(probe_op, 12345 + argc);
    PROBE_RDI(probe_op2, -1L);
    return 0;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_op", Some(5)), ("probe_op2", Some(5))]);
    let (_, ev) = trace(&p.exe, CounterMode::Step, probes.clone());
    let h = hits(&ev);
    assert_eq!(
        h.iter().map(|h| (h.0, h.3)).collect::<Vec<_>>(),
        vec![(0, Some(12346)), (1, Some(u64::MAX))]
    );
    // The int3 path (as in hardware mode) reads the same values.
    let mut ev = vec![];
    cilkview_tracer::run_breakpoints_only(
        &opts(&p.exe, CounterMode::Hardware),
        |_| Ok(probes.clone()),
        |e| ev.push(e),
    )
    .unwrap();
    let h = hits(&ev);
    assert_eq!(
        h.iter().map(|h| (h.0, h.3)).collect::<Vec<_>>(),
        vec![(0, Some(12346)), (1, Some(u64::MAX))]
    );
}

const THREADS_SRC: &str = r#"
#include <pthread.h>
static void *work(void *arg) {
    PROBE(probe_t);
    __asm__ volatile("mov $500,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(probe_t_end);
    __asm__ volatile("mov $300,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    return arg;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, work, 0);
    work(0);
    pthread_join(t, 0);
    return 0;
}"#;

#[test]
#[ignore = "slow: traces compiled programs"]
fn two_threads_report_hits_and_tails() {
    let p = compile(THREADS_SRC, &["-pthread"]);
    let probes = probes(&p.exe, &[("probe_t", None), ("probe_t_end", None)]);
    let (out, ev) = trace(&p.exe, CounterMode::Step, probes.clone());
    assert_eq!(out.status, ExitStatus::Exited(0));
    assert_eq!(out.threads, 2);
    let h = hits(&ev);
    let tids: std::collections::BTreeSet<i32> = h.iter().map(|h| h.1).collect();
    assert_eq!(tids.len(), 2, "{h:?}");
    for &tid in &tids {
        let mine: Vec<_> = h.iter().filter(|h| h.1 == tid).collect();
        assert_eq!(mine.len(), 2);
        assert_eq!(
            (mine[1].0, mine[1].2),
            (1, 1002),
            "nop + mov + 500*(dec+jnz)"
        );
    }
    let exits: Vec<_> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::ThreadExit { tid, cost } => Some((tid, cost)),
            _ => None,
        })
        .collect();
    assert_eq!(exits.len(), 2);
    assert!(
        exits.iter().all(|&(_, c)| c > 601),
        "tails include the 300-iteration loop: {exits:?}"
    );
    assert_eq!(out.tail_cost, exits.iter().map(|e| e.1).sum::<u64>());
    assert!(ev
        .iter()
        .any(|e| matches!(e, TraceEvent::ThreadStart { .. })));

    // int3 path: same hits per thread.
    let mut ev = vec![];
    cilkview_tracer::run_breakpoints_only(
        &opts(&p.exe, CounterMode::Hardware),
        |_| Ok(probes.clone()),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(hits(&ev).len(), 4);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn signals_are_delivered() {
    let p = compile(
        r#"
#include <signal.h>
#include <unistd.h>
static volatile int got;
static void on_usr1(int s) { PROBE(probe_handler); got = s; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    PROBE(probe_after);
    return got == SIGUSR1 ? 5 : 1;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_handler", None), ("probe_after", None)]);
    let (out, ev) = trace(&p.exe, CounterMode::Step, probes.clone());
    assert_eq!(out.status, ExitStatus::Exited(5));
    assert_eq!(
        hits(&ev).iter().map(|h| h.0).collect::<Vec<_>>(),
        vec![0, 1]
    );
    let mut ev = vec![];
    let out = cilkview_tracer::run_breakpoints_only(
        &opts(&p.exe, CounterMode::Hardware),
        |_| Ok(probes.clone()),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(5));
    assert_eq!(
        hits(&ev).iter().map(|h| h.0).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn bad_probe_is_an_error() {
    let p = compile("int main(void){ PROBE(probe_a); return 0; }", &[]);
    let mut probes = probes(&p.exe, &[("probe_a", None)]);
    probes[0].offset += 1;
    let e = run(
        &opts(&p.exe, CounterMode::Step),
        |_| Ok(probes.clone()),
        |_| {},
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("does not point at a cilkview mark"),
        "{e}"
    );
    let e = run(
        &opts(&p.exe, CounterMode::Step),
        |_| Err("no marks table".into()),
        |_| {},
    )
    .unwrap_err();
    assert!(e.to_string().contains("no marks table"), "{e}");
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn forked_child_runs_untraced_and_unpatched() {
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
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_c", None)]);
    for bp in [false, true] {
        let mut ev = vec![];
        let out = if bp {
            cilkview_tracer::run_breakpoints_only(
                &opts(&p.exe, CounterMode::Hardware),
                |_| Ok(probes.clone()),
                |e| ev.push(e),
            )
        } else {
            run(
                &opts(&p.exe, CounterMode::Step),
                |_| Ok(probes.clone()),
                |e| ev.push(e),
            )
        }
        .unwrap();
        assert_eq!(
            out.status,
            ExitStatus::Exited(9),
            "child must run its probe as a plain nop (int3 mode: {bp})"
        );
        assert_eq!(hits(&ev).len(), 1, "only the parent is traced: {ev:?}");
        assert_eq!(out.threads, 1);
    }
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn wrapper_script_exec_rearms_probes() {
    let p = compile(
        "int main(int argc, char **argv){ PROBE(probe_w); return argc; }",
        &[],
    );
    let script = p.dir.path().join("wrapper.sh");
    write_executable(
        &script,
        format!("#!/bin/sh\nexec {} \"$@\"\n", p.exe.display()),
    );
    let probes = probes(&p.exe, &[("probe_w", None)]);
    let mut images = vec![];
    let mut ev = vec![];
    let o = TraceOptions {
        program: script.clone(),
        args: vec!["a".into(), "b".into()],
        counter: CounterMode::Step,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    };
    let out = run(
        &o,
        |img| {
            images.push(img.to_path_buf());
            Ok(if img == p.exe { probes.clone() } else { vec![] })
        },
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(3));
    // The shell, the files mapped executable in it (loader, libc, …), then
    // the (static) program.
    assert_eq!(
        images[0],
        Path::new("/bin/sh").canonicalize().unwrap(),
        "{images:?}"
    );
    assert_eq!(images.last(), Some(&p.exe), "{images:?}");
    assert_eq!(images.iter().filter(|&i| *i == p.exe).count(), 1);
    let execs: Vec<_> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Exec { image, cost, .. } => Some((image, cost)),
            _ => None,
        })
        .collect();
    assert_eq!(execs.len(), 2);
    assert!(
        execs[1].1 > 1000,
        "the shell's work is reported with the second exec: {execs:?}"
    );
    assert_eq!(hits(&ev).len(), 1);
    assert_costs_add_up(out.total_cost, &ev);
}

/// A dynamically linked PIE: probes are found relative to the randomized load address.
#[test]
#[ignore = "slow: traces compiled programs"]
fn pie_dynamic_executable() {
    let p = compile_with(
        r#"
int main(void) {
    PROBE(probe_a);
    __asm__ volatile("mov $10,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(probe_b);
    return 0;
}"#,
        &["-fPIE", "-pie"],
    );
    let probes = probes(&p.exe, &[("probe_a", None), ("probe_b", None)]);
    let (out, ev) = trace(&p.exe, CounterMode::Step, probes.clone());
    assert_eq!(out.status, ExitStatus::Exited(0));
    let h = hits(&ev);
    assert_eq!(
        h.iter().map(|h| (h.0, h.2)).skip(1).collect::<Vec<_>>(),
        vec![(1, 22)]
    );
    let mut ev = vec![];
    cilkview_tracer::run_breakpoints_only(
        &opts(&p.exe, CounterMode::Hardware),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(hits(&ev).len(), 2);
}
