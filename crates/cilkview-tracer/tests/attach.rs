//! `attach`: real processes started outside the tracer (through `sh`, so the
//! tracer is not their parent, as with `cilkview-rs attach PID`), measured
//! for a while, then detached; they must finish exactly as unattached runs.
mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use cilkview_tracer::{
    attach, attach_breakpoints_only, AttachOptions, AttachOutcome, CounterMode, Ending, ExitStatus,
    Probe, StopFlag, TraceError, TraceEvent,
};
use common::*;

/// Prints a line every 100 ms for `TICKS` ticks, with a probe in a short
/// burst per tick, then a checksum; exits with 7.
const TICKER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int ticks = atoi(argv[1]), burst = atoi(argv[2]);
    unsigned long sum = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (volatile int i = 0; i < ticks; i++) {
        for (volatile int j = 0; j < burst; j++) {
            PROBE(probe_tick);
            sum = sum * 31 + i * j;
        }
        printf("tick %d\n", i);
        usleep(100000);
    }
    printf("sum %lu\n", sum);
    return 7;
}"#;

fn finish(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// Output of an unattached run.
fn reference(exe: &Path, args: &[&str]) -> String {
    let (c, _, _d) = start(exe, args);
    finish(c)
}

struct Ticker {
    prog: Prog,
    probes: Vec<Probe>,
}

fn ticker() -> Ticker {
    let prog = compile(TICKER, &[]);
    let probes = probes(&prog.exe, &[("probe_tick", None)]);
    Ticker { prog, probes }
}

fn opts(pid: i32, duration: Option<Duration>, stop: &StopFlag) -> AttachOptions {
    AttachOptions {
        pid,
        counter: CounterMode::Step,
        duration,
        stop: stop.clone(),
    }
}

/// Request a stop after `after`, from another thread.
fn stop_after(stop: &StopFlag, after: Duration) -> std::thread::JoinHandle<()> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        std::thread::sleep(after);
        stop.request();
    })
}

fn check_costs(out: &AttachOutcome, events: &[TraceEvent]) {
    assert_costs_add_up(out.total_cost, events);
    assert_eq!(out.hits as usize, hit_tids(events).len());
    assert!(matches!(
        events[0],
        TraceEvent::Exec {
            image: 0,
            cost: 0,
            ..
        }
    ));
}

fn hit_tids(events: &[TraceEvent]) -> Vec<i32> {
    events
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Hit { tid, .. } => Some(tid),
            _ => None,
        })
        .collect()
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn stop_flag_detaches_and_program_finishes_unchanged() {
    let t = ticker();
    let args = ["20", "20"];
    let want = reference(&t.prog.exe, &args);
    assert!(want.ends_with("status=7\n"), "{want}");
    let (child, pid, _d) = start(&t.prog.exe, &args);
    std::thread::sleep(Duration::from_millis(250));
    let stop = StopFlag::new();
    let timer = stop_after(&stop, Duration::from_millis(500));
    let mut events = vec![];
    let mut seen: Vec<PathBuf> = vec![];
    let out = attach(
        &opts(pid, None, &stop),
        |p| {
            seen.push(p.to_path_buf());
            Ok(t.probes.clone())
        },
        |e| events.push(e),
    )
    .unwrap();
    timer.join().unwrap();
    eprintln!("{out:?}");
    assert_eq!(out.ending, Ending::Stopped);
    assert_eq!(seen, vec![t.prog.exe.canonicalize().unwrap()]);
    assert!(out.hits >= 20, "hits {}", out.hits);
    assert!(out.elapsed >= Duration::from_millis(400));
    check_costs(&out, &events);
    // The tail of the thread at detach.
    assert!(matches!(events.last(), Some(TraceEvent::ThreadExit { tid, .. }) if *tid == pid));
    assert_eq!(finish(child), want);
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn duration_detaches() {
    let t = ticker();
    let args = ["15", "20"];
    let want = reference(&t.prog.exe, &args);
    let (child, pid, _d) = start(&t.prog.exe, &args);
    std::thread::sleep(Duration::from_millis(150));
    let mut events = vec![];
    let out = attach(
        &opts(pid, Some(Duration::from_millis(400)), &StopFlag::new()),
        |_| Ok(t.probes.clone()),
        |e| events.push(e),
    )
    .unwrap();
    assert_eq!(out.ending, Ending::TimeUp);
    assert!(out.elapsed >= Duration::from_millis(400), "{out:?}");
    assert!(out.elapsed < Duration::from_millis(1500), "{out:?}");
    assert!(out.hits > 0);
    check_costs(&out, &events);
    assert_eq!(finish(child), want);
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn stays_until_exit_and_reports_status() {
    let t = ticker();
    let args = ["5", "10"];
    let want = reference(&t.prog.exe, &args);
    let (child, pid, _d) = start(&t.prog.exe, &args);
    std::thread::sleep(Duration::from_millis(150));
    let mut events = vec![];
    let out = attach(
        &opts(pid, None, &StopFlag::new()),
        |_| Ok(t.probes.clone()),
        |e| events.push(e),
    )
    .unwrap();
    assert_eq!(out.ending, Ending::Exited(ExitStatus::Exited(7)));
    assert!(out.hits >= 30, "{out:?}");
    check_costs(&out, &events);
    assert!(matches!(events.last(), Some(TraceEvent::ThreadExit { tid, .. }) if *tid == pid));
    assert_eq!(finish(child), want);
}

/// The int3 path (as in hardware mode, without a counter): several
/// attach/detach cycles on one process with dense probe bursts, so detaching
/// regularly finds threads at or just past a patched probe.
#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn breakpoints_restored_across_attach_cycles() {
    let t = ticker();
    let args = ["25", "3000"];
    let want = reference(&t.prog.exe, &args);
    let (child, pid, _d) = start(&t.prog.exe, &args);
    std::thread::sleep(Duration::from_millis(100));
    let mut total_hits = 0;
    for i in 0..4 {
        let mut events = vec![];
        let out = attach_breakpoints_only(
            &opts(
                pid,
                Some(Duration::from_millis(150 + 37 * i)),
                &StopFlag::new(),
            ),
            |_| Ok(t.probes.clone()),
            |e| events.push(e),
        )
        .unwrap();
        assert_eq!(out.ending, Ending::TimeUp);
        check_costs(&out, &events);
        total_hits += out.hits;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(total_hits > 1000, "hits {total_hits}");
    assert_eq!(finish(child), want);
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn two_threads_both_hit() {
    let p = compile(
        r#"
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static volatile unsigned long sums[2];
static void *work(void *arg) {
    long k = (long)arg;
    for (volatile int i = 0; i < 12; i++) {
        for (volatile int j = 0; j < 10; j++) {
            if (k) { PROBE(probe_t1); } else { PROBE(probe_t0); }
            sums[k] = sums[k] * 7 + i + j;
        }
        usleep(100000);
    }
    return 0;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, work, (void *)1);
    work((void *)0);
    pthread_join(t, 0);
    printf("%lu %lu\n", sums[0], sums[1]);
    return 3;
}"#,
        &["-pthread"],
    );
    let probes = probes(&p.exe, &[("probe_t0", None), ("probe_t1", None)]);
    let want = reference(&p.exe, &[]);
    let (child, pid, _d) = start(&p.exe, &[]);
    std::thread::sleep(Duration::from_millis(250));
    let mut events = vec![];
    let out = attach(
        &opts(pid, Some(Duration::from_millis(500)), &StopFlag::new()),
        |_| Ok(probes.clone()),
        |e| events.push(e),
    )
    .unwrap();
    eprintln!("{out:?}");
    assert_eq!(out.ending, Ending::TimeUp);
    assert_eq!(out.threads, 2);
    check_costs(&out, &events);
    let mut by_probe = [vec![], vec![]];
    for e in &events {
        if let TraceEvent::Hit { probe, tid, .. } = *e {
            by_probe[probe].push(tid);
        }
    }
    assert!(by_probe[0].iter().all(|&t| t == pid) && !by_probe[0].is_empty());
    assert!(by_probe[1].iter().all(|&t| t != pid) && !by_probe[1].is_empty());
    assert!(events.contains(&TraceEvent::ThreadStart {
        tid: by_probe[1][0]
    }));
    assert_eq!(finish(child), want);
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn missing_pid_is_an_error() {
    let mut c = cilkview_fixtures::command("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    let e = attach(&opts(pid, None, &StopFlag::new()), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(matches!(e, TraceError::NoSuchProcess { .. }), "{e}");
    eprintln!("{e}");
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn own_pid_is_an_error() {
    let pid = std::process::id() as i32;
    let e = attach(&opts(pid, None, &StopFlag::new()), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(matches!(e, TraceError::AttachSelf { .. }), "{e}");
    eprintln!("{e}");
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn second_tracer_is_told_who_holds_the_process() {
    let t = ticker();
    let (child, pid, _d) = start(&t.prog.exe, &["8", "5"]);
    std::thread::sleep(Duration::from_millis(100));
    let stop = StopFlag::new();
    let first = {
        let stop = stop.clone();
        let probes = t.probes.clone();
        std::thread::spawn(move || {
            attach(&opts(pid, None, &stop), |_| Ok(probes.clone()), |_| {}).unwrap()
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let e = attach(&opts(pid, None, &StopFlag::new()), |_| Ok(vec![]), |_| {}).unwrap_err();
    eprintln!("{e}");
    assert!(matches!(e, TraceError::AttachDenied { .. }), "{e}");
    assert!(e.to_string().contains("another tracer"), "{e}");
    stop.request();
    assert_eq!(first.join().unwrap().ending, Ending::Stopped);
    assert!(finish(child).ends_with("status=7\n"));
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn sigterm_to_the_tool_detaches_cleanly() {
    let t = ticker();
    let args = ["10", "10"];
    let want = reference(&t.prog.exe, &args);
    let (child, pid, _d) = start(&t.prog.exe, &args);
    std::thread::sleep(Duration::from_millis(100));
    let stop = StopFlag::new();
    let guard = stop
        .on_signals(&cilkview_tracer::ATTACH_STOP_SIGNALS)
        .unwrap();
    let killer = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(400));
        nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGTERM).unwrap();
    });
    let out = attach(&opts(pid, None, &stop), |_| Ok(t.probes.clone()), |_| {}).unwrap();
    killer.join().unwrap();
    drop(guard);
    // Stopped (not Exited): the signal ended the window before the program's end. (No bound on
    // the elapsed time: on a loaded 2-CPU machine single-stepping can lag by seconds.)
    assert_eq!(out.ending, Ending::Stopped, "{out:?}");
    assert_eq!(finish(child), want);
}
