//! The native counter's instructions path (`rdpmc`) run on a machine without a PMU: a software
//! event (each thread's task clock) stands in for the instructions counter
//! (`native_software_stand_in`, the `testing` feature). Everything but the `rdpmc` instruction
//! itself runs for real — the `perf_event_open`, `mmap`, `close` and `munmap` injected into each
//! thread, the counter pages in the program, `READ` in the stubs, the tool's copies of the events
//! — so these tests check the mechanics (every hit delivered in order, threads, a slot's reuse, an
//! exec, attach and detach leaving the program's descriptors as they were), not the numbers: the
//! stand-in's page has no counter index, so every read gives its `offset`.
//!
//! Its own test binary: the stand-in is set for the whole process, before the clock's first use.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use cilkview_tracer::{
    attach, native_software_stand_in, run, AttachOptions, Backend, CostUnit, CounterMode, Ending,
    ExitStatus, Native, Probe, ProbesError, StopFlag, TraceEvent, TraceOptions,
};
use common::*;

/// The stand-in on, and the native counter available (else a visible skip).
fn stand_in() -> bool {
    native_software_stand_in();
    match Native.check() {
        Ok(info) => {
            assert_eq!(info.unit, CostUnit::Instructions, "{}", info.says());
            assert!(info
                .says()
                .contains("a software event (task clock) standing in"));
            true
        }
        Err(why) => {
            cilkview_fixtures::skip(why);
            false
        }
    }
}

fn in_exe(exe: &Path, probes: &[Probe]) -> impl FnMut(&Path) -> Result<Vec<Probe>, ProbesError> {
    let exe = std::fs::canonicalize(exe).unwrap();
    let probes = probes.to_vec();
    move |image| {
        Ok(if std::fs::canonicalize(image).ok() == Some(exe.clone()) {
            probes.clone()
        } else {
            vec![]
        })
    }
}

const THREADS: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
/* The counter pages mapped in this process. */
static int counter_pages(void) {
    char line[512];
    int n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (fgets(line, sizeof line, f)) n += strstr(line, "perf_event") != 0;
    fclose(f);
    return n;
}
static void *work(void *arg) {
    long id = (long)arg;
    for (long i = 0; i < 20000; i++) {
        PROBE_RDI(t_mark, id * 1000000 + i);
    }
    return 0;
}
int main(int argc, char **argv) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, work, (void *)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    /* One after another: each takes the slot the last one left (its page unmapped first). */
    for (long i = 5; i <= 10; i++) {
        pthread_create(&t[0], 0, work, (void *)i);
        pthread_join(t[0], 0);
    }
    PROBE(m_done);
    if (argc < 2) {
        execl(argv[0], argv[0], "again", (char *)0);
        return 99;
    }
    return counter_pages();
}"#;

#[test]
#[ignore = "slow: traces compiled programs"]
fn threads_a_reused_slot_and_an_exec_deliver_every_hit_in_order() {
    if !stand_in() {
        return;
    }
    let p = compile_with(THREADS, &["-O2", "-pthread"]);
    let probes = probes(&p.exe, &[("t_mark", Some(5)), ("m_done", None)]);
    let opts = TraceOptions {
        program: p.exe.clone(),
        args: vec![],
        counter: CounterMode::Native,
        bind_cpu: false,
        host_dispatch: false,
        env: Vec::new(),
    };
    let mut events = vec![];
    let out = run(&opts, in_exe(&p.exe, &probes), |e| events.push(e)).unwrap();
    // The exec'd image's status: its counter pages, one per slot used, not one per thread
    // (eleven): a reused slot's former page is unmapped. The main thread's slot and at most
    // four (a slot is free from its thread's exit stop: the six threads one after another
    // reuse one, and of the four at once, one that ends before the next starts leaves it its
    // slot, so from one to four).
    let ExitStatus::Exited(pages) = out.status else {
        panic!("{:?}", out.status)
    };
    assert!(
        (2..=5).contains(&pages),
        "counter pages mapped at the end: {pages}"
    );
    assert_eq!(out.counter.unit, CostUnit::Instructions);
    assert_eq!(out.hits, 2 * (10 * 20000 + 1), "every hit of both images");
    assert_costs_add_up(out.total_cost, &events);
    // Each thread's operands in order: its id, then 0, 1, 2, ...
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
    assert_eq!(next.len(), 20, "ten threads in each image");
    assert!(next.values().all(|&(_, n)| n == 20000));
}

const TICKER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int ticks = atoi(argv[1]);
    unsigned long sum = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (volatile int i = 0; i < ticks; i++) {
        for (volatile int j = 0; j < 1000; j++) {
            PROBE(probe_tick);
            sum = sum * 31 + i * j;
        }
        printf("tick %d\n", i);
        usleep(20000);
    }
    printf("sum %lu\n", sum);
    return 7;
}"#;

/// The program's open descriptors (`/proc/PID/fd`), as (number, target).
fn descriptors(pid: i32) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let target = std::fs::read_link(e.path()).unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                target.display().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "slow: attaches the tracer to compiled programs"]
fn attach_and_detach_leave_the_programs_descriptors_and_output_unchanged() {
    if !stand_in() {
        return;
    }
    let p = compile(TICKER, &[]);
    let probes = probes(&p.exe, &[("probe_tick", None)]);
    let args = ["40"];
    let (c, _, _d) = start(&p.exe, &args);
    let want = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap();
    assert!(want.ends_with("status=7\n"), "{want}");
    let (child, pid, _d) = start(&p.exe, &args);
    std::thread::sleep(Duration::from_millis(100));
    let before = descriptors(pid);
    let opts = AttachOptions {
        pid,
        counter: CounterMode::Native,
        duration: Some(Duration::from_millis(300)),
        stop: StopFlag::new(),
    };
    let mut events = vec![];
    let out = attach(&opts, in_exe(&p.exe, &probes), |e| events.push(e)).unwrap();
    assert_eq!(out.ending, Ending::TimeUp);
    assert_eq!(out.counter.unit, CostUnit::Instructions);
    assert!(out.hits >= 1000, "hits {}", out.hits);
    assert_costs_add_up(out.total_cost, &events);
    assert!(matches!(events.last(), Some(TraceEvent::ThreadExit { tid, .. }) if *tid == pid));
    assert_eq!(
        descriptors(pid),
        before,
        "the counter's descriptor closed in the program"
    );
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        maps.contains("[perf_event]") || maps.contains("anon_inode:[perf_event]"),
        "the thread's counter page stays mapped (a stub may still read it): {maps}"
    );
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), want);
}
