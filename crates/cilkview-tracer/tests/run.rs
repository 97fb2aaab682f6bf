mod common;

use std::path::Path;

use cilkview_tracer::{run, CounterMode, ExitStatus, TraceEvent, TraceOptions};
use common::*;

fn opts(exe: &Path, mode: CounterMode) -> TraceOptions {
    TraceOptions { program: exe.to_path_buf(), args: vec![], counter: mode }
}

#[test]
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
    let out = run(&opts(&p.exe, CounterMode::Step), |_| Ok(probes.clone()), |e| events.push(e)).unwrap();
    eprintln!("{out:?}\n{events:?}");
    assert_eq!(out.status, ExitStatus::Exited(3));
    let hits: Vec<_> = events.iter().filter_map(|e| match e { TraceEvent::Hit { probe, cost, .. } => Some((*probe, *cost)), _ => None }).collect();
    assert_eq!(hits.len(), 2);
    assert_eq!(hits[1], (1, 2002), "nop + mov + 1000*(dec+jnz)");
    assert_eq!(out.total_instructions, events.iter().map(|e| e.cost()).sum::<u64>());
}
