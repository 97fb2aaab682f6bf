//! `--counter native` and signals: a signal arriving while a thread is inside a stub (or waits in
//! one for room) is delivered after it, once, with its own siginfo; the program's SIGTRAPs too; a
//! thread stepped out of a stub runs on without the tracer's trap flag.

mod common;

use std::path::Path;

use cilkview_tracer::{run, CounterMode, ExitStatus, TraceEvent, TraceOptions};
use common::native::*;
use common::*;

#[test]
#[ignore = "slow: traces compiled programs"]
fn signals_arriving_inside_stubs_are_delivered_after_them() {
    if !available() {
        return;
    }
    // A 50 µs interval timer interrupts a loop of marks (most of its time is in stubs); the
    // handler hits a mark of its own. Every hit of both must arrive, the output must be right.
    let p = compile_with(
        r#"
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
static volatile long handled;
static void on_alarm(int s) { (void)s; PROBE(h_mark); handled++; }
int main(void) {
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, 0);
    long sum = 0;
    for (long i = 0; i < 3000000; i++) {
        PROBE_RDI(l_mark, i);
        sum += i;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    printf("%ld %ld\n", sum, handled);
    return 0;
}"#,
        &["-O1"],
    );
    let out_file = p.dir.path().join("out");
    let probes = probes(&p.exe, &[("l_mark", Some(5)), ("h_mark", None)]);
    // Capture the program's stdout through sh.
    let sh = Path::new("/bin/sh");
    let mut events = vec![];
    let exe = p.exe.to_str().unwrap().to_string();
    let exe_name = std::fs::canonicalize(&p.exe).unwrap();
    let out = run(
        &TraceOptions {
            program: sh.to_path_buf(),
            args: vec![
                "-c".into(),
                format!("exec {exe} > {}", out_file.display()).into(),
            ],
            counter: CounterMode::Native,
            bind_cpu: false,
            host_dispatch: false,
            env: Vec::new(),
        },
        in_exe(&exe_name, &probes),
        |e| events.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(0));
    let printed = std::fs::read_to_string(&out_file).unwrap();
    let mut words = printed.split_whitespace();
    let sum: i64 = words.next().unwrap().parse().unwrap();
    let handled: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(sum, 3000000 * 2999999 / 2, "the program's result");
    eprintln!("{handled} signals handled");
    assert!(handled > 10, "the timer fired during the loop: {handled}");
    every_loop_and_handler_hit(&events, handled);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn a_sigtrap_sent_while_a_thread_is_stepped_out_of_a_stub_is_delivered() {
    if !available() {
        return;
    }
    // A 50 µs timer keeps stopping the marking thread inside stubs, where the tracer steps it
    // out; another thread sends it SIGTRAP after SIGTRAP, each once the last was handled. A
    // SIGTRAP that stops the thread during those steps (it cannot be blocked: the step's own
    // trap is one) must be delivered, not taken for the step's nor held while the timer's
    // signals keep coming: else the sender waits (seen lost at the 32nd-157th). And the
    // program's SIGTRAP handler must survive the calls injected in its new thread, which
    // starts with every signal blocked (a step's trap found blocked resets the handler: the
    // program was killed by the first SIGTRAP). Each SIGTRAP reaches the handler with its own
    // siginfo (`SI_TKILL`), not the trap of the tracer's last step.
    let p = compile_with(
        r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
static volatile long trapped, tkill, alarms, done;
static pthread_t marker;
static void on_trap(int s, siginfo_t *si, void *uc) {
    (void)s; (void)uc;
    tkill += si->si_code == SI_TKILL;
    trapped++;
}
static void on_alarm(int s) { (void)s; PROBE(h_mark); alarms++; }
static void *send(void *arg) {
    (void)arg;
    struct timespec t0, t;
    for (long i = 1; i <= 500; i++) {
        pthread_kill(marker, SIGTRAP);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (trapped < i) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 5) { printf("lost SIGTRAP %ld\n", i); fflush(stdout); _exit(2); }
        }
    }
    done = 1;
    return 0;
}
int main(void) {
    marker = pthread_self();
    struct sigaction sa = {0};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGTRAP, &sa, 0);
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 50}, {0, 50}};
    setitimer(ITIMER_REAL, &it, 0);
    pthread_t s;
    pthread_create(&s, 0, send, 0);
    long i = 0;
    while (!done) { PROBE_RDI(l_mark, i); i++; }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    pthread_join(s, 0);
    printf("%ld %ld %ld\n", trapped, alarms, tkill);
    return 0;
}"#,
        &["-O1", "-pthread"],
    );
    let out_file = p.dir.path().join("out");
    let probes = probes(&p.exe, &[("l_mark", Some(5)), ("h_mark", None)]);
    let exe = p.exe.to_str().unwrap().to_string();
    let exe_name = std::fs::canonicalize(&p.exe).unwrap();
    let out = run(
        &native_with_stdout(&exe, &[], &out_file),
        in_exe(&exe_name, &probes),
        |_| {},
    )
    .unwrap();
    let printed = std::fs::read_to_string(&out_file).unwrap();
    eprintln!("{printed}");
    assert_eq!(out.status, ExitStatus::Exited(0), "{printed}");
    let mut words = printed.split_whitespace();
    assert_eq!(
        words.next(),
        Some("500"),
        "every SIGTRAP handled: {printed}"
    );
    let alarms: u64 = words.next().unwrap().parse().unwrap();
    assert!(alarms > 10, "the timer fired meanwhile: {alarms}");
    assert_eq!(
        words.next(),
        Some("500"),
        "each with its siginfo: {printed}"
    );
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn a_thread_stepped_out_of_a_stubs_wait_for_room_runs_on_without_the_trap_flag() {
    if !available() {
        return;
    }
    // The analysis is held up (the event callback sleeps), so the loop's stubs fill the ring
    // and wait for room in the slow path, where a 2 ms timer (slow enough for the loop to fill
    // the ring between two signals) stops the thread; the tracer steps it out, through the
    // slow path's `popf`. A trap flag left set after that made the program trap after every
    // instruction: SIGTRAPs it was never sent (its handler counts them, and clears the flag so
    // that the run goes on; 26-35 per run here). Each of the timer's signals reaches the
    // handler with its own siginfo (`SI_KERNEL`), not the trap of the tracer's last step.
    let p = compile_with(
        r#"
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include <ucontext.h>
static volatile long trapped, handled, from_kernel;
static void on_trap(int s, siginfo_t *si, void *uc) {
    (void)s; (void)si;
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] &= ~0x100L;
    trapped++;
}
static void on_alarm(int s, siginfo_t *si, void *uc) {
    (void)s; (void)uc;
    PROBE(h_mark);
    from_kernel += si->si_code == SI_KERNEL;
    handled++;
}
int main(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, 0);
    sa.sa_sigaction = on_alarm;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval it = {{0, 2000}, {0, 2000}};
    setitimer(ITIMER_REAL, &it, 0);
    for (long i = 0; i < 3000000; i++) PROBE_RDI(l_mark, i);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    printf("%ld %ld %ld\n", trapped, handled, from_kernel);
    return 0;
}"#,
        &["-O1"],
    );
    let out_file = p.dir.path().join("out");
    let probes = probes(&p.exe, &[("l_mark", Some(5)), ("h_mark", None)]);
    let exe = p.exe.to_str().unwrap().to_string();
    let exe_name = std::fs::canonicalize(&p.exe).unwrap();
    let mut events = vec![];
    let mut seen = 0u64;
    let out = run(
        &native_with_stdout(&exe, &[], &out_file),
        in_exe(&exe_name, &probes),
        |e| {
            if matches!(e, TraceEvent::Hit { .. }) {
                seen += 1;
                if seen % 200_000 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
            events.push(e)
        },
    )
    .unwrap();
    let printed = std::fs::read_to_string(&out_file).unwrap();
    assert_eq!(out.status, ExitStatus::Exited(0), "{printed}");
    let waits: u64 = out
        .counter
        .says()
        .split("waited for the analysis at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        waits > 0,
        "the stubs waited for room: {}",
        out.counter.says()
    );
    let mut words = printed.split_whitespace();
    assert_eq!(words.next(), Some("0"), "SIGTRAPs never sent: {printed}");
    let handled: u64 = words.next().unwrap().parse().unwrap();
    assert!(handled > 10, "the timer fired during the loop: {handled}");
    let from_kernel: u64 = words.next().unwrap().parse().unwrap();
    assert_eq!(
        from_kernel, handled,
        "each signal with its siginfo (the timer's)"
    );
    every_loop_and_handler_hit(&events, handled);
}

/// The signal fixtures' hits: probe 0 the loop's 3,000,000 in order (its index as operand),
/// probe 1 one per signal `handled`.
fn every_loop_and_handler_hit(events: &[TraceEvent], handled: u64) {
    let h = hits(events);
    let loop_hits: Vec<u64> = h
        .iter()
        .filter(|x| x.0 == 0)
        .map(|x| x.3.unwrap())
        .collect();
    assert_eq!(loop_hits.len(), 3000000, "every loop hit");
    assert!(
        loop_hits.iter().enumerate().all(|(i, &v)| v == i as u64),
        "in order, operands right"
    );
    assert_eq!(
        h.iter().filter(|x| x.0 == 1).count() as u64,
        handled,
        "every handler hit"
    );
}
