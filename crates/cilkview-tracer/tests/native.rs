//! `--counter native`: the program at native speed, its marks patched into jumps to stubs that
//! record the time-stamp counter (or, where user space can read it with `rdpmc`, the thread's
//! instructions). Real programs, real clocks: strand times proportional to the work, every hit
//! delivered (threads, signals arriving inside stubs), the program's output unchanged (a leaf
//! function's red zone included); instructions equal to single-stepping's where `rdpmc` works.

mod common;

use std::collections::HashMap;
use std::path::Path;

use cilkview_tracer::{
    run, Backend, CounterMode, ExitStatus, Native, Outcome, Probe, ProbesError, TraceEvent,
    TraceOptions,
};
use common::*;

fn available() -> bool {
    match Native.check() {
        Ok(_) => true,
        Err(why) => {
            cilkview_fixtures::skip(why);
            false
        }
    }
}

/// The probes source of a run: `probes` in the executable `exe_name` (canonical), none elsewhere.
fn in_exe<'a>(
    exe_name: &'a Path,
    probes: &'a [Probe],
) -> impl FnMut(&Path) -> Result<Vec<Probe>, ProbesError> + 'a {
    move |image| {
        Ok(
            if std::fs::canonicalize(image).ok().as_deref() == Some(exe_name) {
                probes.to_vec()
            } else {
                vec![]
            },
        )
    }
}

fn opts_with(exe: &Path, args: &[&str], counter: CounterMode) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: args.iter().map(Into::into).collect(),
        counter,
        bind_cpu: false,
        env: Vec::new(),
    }
}

/// Runs `exe` with `--counter native`, `probes` in the executable only; returns the outcome,
/// the events and the program's stdout (captured through a file).
fn trace(exe: &Path, args: &[&str], probes: Vec<Probe>) -> (Outcome, Vec<TraceEvent>) {
    trace_with(CounterMode::Native, exe, args, probes)
}

fn trace_with(
    counter: CounterMode,
    exe: &Path,
    args: &[&str],
    probes: Vec<Probe>,
) -> (Outcome, Vec<TraceEvent>) {
    let mut events = vec![];
    let exe_name = std::fs::canonicalize(exe).unwrap();
    let out = run(
        &opts_with(exe, args, counter),
        in_exe(&exe_name, &probes),
        |e| events.push(e),
    )
    .unwrap();
    assert_costs_add_up(out.total_instructions, &events);
    (out, events)
}

const BURN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) static void burn(long n) {
    __asm__ volatile("1: dec %0\n jnz 1b" : "+r"(n) :: "cc");
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    for (int r = 0; r < 20; r++) {
        PROBE(p0);
        burn(n);
        PROBE(p1);
        burn(2 * n);
        PROBE(p2);
        burn(4 * n);
        PROBE(p3);
    }
    printf("burned\n");
    return 7;
}"#;

/// The costs of each probe's hits, in order.
fn costs(events: &[TraceEvent]) -> HashMap<usize, Vec<u64>> {
    let mut m: HashMap<usize, Vec<u64>> = HashMap::new();
    for (probe, _, cost, _) in hits(events) {
        m.entry(probe).or_default().push(cost);
    }
    m
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn burn_is_proportional(extra: &[&str]) {
    if !available() {
        return;
    }
    let p = compile_with(BURN, &[&["-O2"], extra].concat());
    let probes = probes(
        &p.exe,
        &[("p0", None), ("p1", None), ("p2", None), ("p3", None)],
    );
    // burn(n): n iterations of dec+jnz, ~1 cycle each: 200000 is ~50-100 µs. Three tries: a
    // strand preempted on a busy machine keeps ~15 µs of the kernel's time around the switch
    // (measured: the tool's own wake-ups, every 100 µs while marks were hit, used to cut every
    // burn(4n) twice: 4n/n read 4.5 under load; see `next_sleep`). Every try checks that every
    // hit came, in order.
    let mut last = String::new();
    for _ in 0..3 {
        let (out, events) = trace(&p.exe, &["200000"], probes.clone());
        assert_eq!(out.status, ExitStatus::Exited(7));
        assert_eq!(out.hits, 80, "every hit delivered");
        assert_eq!(out.counter.kind, CounterMode::Native);
        // The median over the 20 rounds of each round's ratios: a round whose thread was
        // interrupted does not decide.
        let m = costs(&events);
        let ratio = |p: usize| median((0..20).map(|r| m[&p][r] as f64 / m[&1][r] as f64).collect());
        let (two, four) = (ratio(2), ratio(3));
        let one = median(m[&1].iter().map(|&c| c as f64).collect());
        let turn = median(m[&0][1..].iter().map(|&c| c as f64).collect());
        last = format!(
            "burn(n) {one} ns; burn(2n)/burn(n) {two:.3}, burn(4n)/burn(n) {four:.3}; loop turn {turn} ns"
        );
        eprintln!("{last}");
        assert!(one > 10_000.0, "burn(200000) takes tens of µs: {one} ns");
        assert!(
            turn < 1000.0,
            "the loop's turn between p3 and p0 is a few ns: {turn}"
        );
        if (two - 2.0).abs() < 0.1 && (four - 4.0).abs() < 0.2 {
            return;
        }
    }
    panic!("strand times not proportional to n (within 5%): {last}");
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn strands_of_burn_are_proportional_to_n_static() {
    burn_is_proportional(&["-static"]);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn strands_of_burn_are_proportional_to_n_dynamic_pie() {
    burn_is_proportional(&["-pie", "-fPIE"]);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn strands_of_burn_are_proportional_to_n_non_pie() {
    burn_is_proportional(&["-no-pie"]);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn threads_deliver_every_hit_with_operands() {
    if !available() {
        return;
    }
    let p = compile_with(
        r#"
#include <pthread.h>
#include <stdio.h>
static void *work(void *arg) {
    long id = (long)arg;
    for (long i = 0; i < 200000; i++) {
        PROBE_RDI(t_mark, id * 1000000 + i);
    }
    return 0;
}
int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, work, (void *)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    PROBE(m_done);
    printf("joined\n");
    return 0;
}"#,
        &["-O2", "-pthread"],
    );
    let probes = probes(&p.exe, &[("t_mark", Some(5)), ("m_done", None)]);
    let (out, events) = trace(&p.exe, &[], probes);
    assert_eq!(out.status, ExitStatus::Exited(0));
    assert_eq!(out.threads, 5);
    assert_eq!(
        out.hits,
        4 * 200000 + 1,
        "no hit dropped: the slots are drained while the threads run"
    );
    // Each thread's operands come in order: its id and 0, 1, 2, ...
    let mut next: HashMap<i32, (u64, u64)> = HashMap::new();
    for (probe, tid, _, operand) in hits(&events) {
        if probe != 0 {
            continue;
        }
        let v = operand.unwrap();
        let e = next.entry(tid).or_insert((v / 1_000_000, 0));
        assert_eq!(v, e.0 * 1_000_000 + e.1, "thread {tid}'s hits in order");
        e.1 += 1;
    }
    assert_eq!(next.len(), 4);
    assert!(next.values().all(|&(_, n)| n == 200000));
    let ends = events
        .iter()
        .filter(|e| matches!(e, TraceEvent::ThreadExit { .. }))
        .count();
    assert_eq!(ends, 5);
}

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
        .reason
        .split("waited for the analysis at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        waits > 0,
        "the stubs waited for room: {}",
        out.counter.reason
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

/// Instructions at native speed (`rdpmc` in the stubs) need a CPU PMU whose counter user space
/// may read: where the check passes the counter counts instructions, else time, and its reason
/// says which and why. Where it measures time, the instructions path is said to be skipped.
#[test]
#[ignore = "slow: traces compiled programs"]
fn the_counter_reads_instructions_where_rdpmc_is_readable_else_time() {
    if !available() {
        return;
    }
    let info = Native.check().unwrap();
    let pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists()
        || std::path::Path::new("/sys/bus/event_source/devices/cpu_core").exists();
    let said = info
        .reason
        .split("; ")
        .find(|p| p.contains("rdpmc"))
        .unwrap_or_else(|| panic!("no word on rdpmc: {}", info.reason))
        .to_string();
    if info.unit == cilkview_tracer::CostUnit::Instructions {
        assert!(
            said.starts_with("native: instructions by rdpmc: each thread's own"),
            "{said}"
        );
        return;
    }
    assert_eq!(info.unit, cilkview_tracer::CostUnit::Nanoseconds);
    assert!(
        info.reason.starts_with("native: time on the CPU"),
        "{}",
        info.reason
    );
    assert!(
        said.starts_with("instructions by rdpmc: unavailable ("),
        "{said}"
    );
    if !pmu {
        assert!(said.contains("no CPU PMU"), "{said}");
    }
    cilkview_fixtures::skip(format!(
        "the native counter measures time here, not instructions: {said}"
    ));
}

/// Where the stubs read instructions (`rdpmc`): every strand of the burn program equals
/// single-stepping's count of it, to within 2 instructions (a hit's own instructions are taken
/// off exactly; a retry of the counter page's seqlock, when the thread was switched out inside
/// its read, adds ~15) — and the runs' parallelism-relevant totals agree.
#[test]
#[ignore = "slow: traces compiled programs"]
fn with_rdpmc_strands_equal_single_stepping() {
    if !available() {
        return;
    }
    let info = Native.check().unwrap();
    if info.unit != cilkview_tracer::CostUnit::Instructions {
        cilkview_fixtures::skip(format!(
            "instructions by rdpmc in the native counter not run here: {}",
            info.reason
        ));
        return;
    }
    let p = compile_with(BURN, &["-O2", "-static"]);
    let syms = [("p0", None), ("p1", None), ("p2", None), ("p3", None)];
    let probes = probes(&p.exe, &syms);
    let (native, n_events) = trace(&p.exe, &["1000"], probes.clone());
    let (step, s_events) = trace_with(CounterMode::Step, &p.exe, &["1000"], probes);
    assert_eq!((native.hits, step.hits), (80, 80));
    assert_eq!(native.counter.unit, cilkview_tracer::CostUnit::Instructions);
    let (n, s) = (costs(&n_events), costs(&s_events));
    for probe in 0..4 {
        // p0's first hit ends the start-up strand (the loader's and libc's start-up): counted
        // by both from the exec, but the native counter from its set-up after it.
        for (round, (a, b)) in n[&probe]
            .iter()
            .zip(&s[&probe])
            .enumerate()
            .skip(usize::from(probe == 0))
        {
            assert!(
                a.abs_diff(*b) <= 2,
                "p{probe} round {round}: native {a}, step {b}"
            );
        }
    }
    // burn(n) is 2n instructions (dec, jnz): the strands differ by exactly that.
    let m = |probe: usize| n[&probe][5];
    assert!((m(2) - m(1)).abs_diff(2000) <= 2 && (m(3) - m(2)).abs_diff(4000) <= 2);
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn a_leaf_functions_red_zone_is_untouched() {
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (cc, opt) in [("gcc", "-O2"), ("clang", "-O2")] {
        if !cilkview_fixtures::has_compiler(cc) {
            cilkview_fixtures::skip(format!("{cc} not installed"));
            continue;
        }
        let exe = cilkview_fixtures::build(
            "red_zone",
            &cilkview_fixtures::BuildOptions::default()
                .compiler(cc)
                .opt(opt.trim_start_matches("-O")),
        );
        let native = cilkview_fixtures::run(&exe, &["200000"]);
        let img = cilkview_marks::read_marks(&exe).unwrap();
        let probes: Vec<Probe> = img
            .marks
            .iter()
            .map(|m| Probe::new(m.offset(&img), m.operand))
            .collect();
        assert!(probes.len() >= 2);
        let out_file = dir.path().join(format!("out-{cc}"));
        let exe_name = std::fs::canonicalize(&exe).unwrap();
        let mut n = 0u64;
        let o = run(
            &native_with_stdout(&exe.display().to_string(), &["200000"], &out_file),
            in_exe(&exe_name, &probes),
            |e| n += matches!(e, TraceEvent::Hit { .. }) as u64,
        )
        .unwrap();
        assert_eq!(o.status, ExitStatus::Exited(0));
        assert!(n >= 400000, "{cc}: the marks were hit: {n}");
        assert_eq!(
            std::fs::read_to_string(&out_file).unwrap(),
            native,
            "{cc}: the checksum of the red-zone data is the native run's"
        );
    }
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

/// `EXE ARGS` measured natively through `sh -c 'exec EXE ARGS > OUT'` (its standard output in
/// the file `out`, read after the run).
fn native_with_stdout(exe: &str, args: &[&str], out: &Path) -> TraceOptions {
    TraceOptions {
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            format!("exec {exe} {} > {}", args.join(" "), out.display()).into(),
        ],
        counter: CounterMode::Native,
        bind_cpu: false,
        env: Vec::new(),
    }
}
