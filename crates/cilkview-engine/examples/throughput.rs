//! Engine throughput and memory: streams N synthetic events (recursive fib-shaped spawns and calls,
//! parallel loops and regions) through the engine without storing them, then prints events per
//! second and the process's peak resident memory.
//!
//!     cargo run --release -p cilkview-engine --example throughput -- 100000000

use std::time::Instant;

use cilkview_engine::{Engine, Event, EventKind::*, RegionId};

/// Emits the events of fib(n) (spawn fib(n-1), call fib(n-2), sync) until `budget` runs out.
fn fib(n: u32, engine: &mut Engine, budget: &mut u64) {
    if *budget == 0 {
        return;
    }
    engine.process(Event::new(3, FunctionEnter));
    *budget = budget.saturating_sub(1);
    if n >= 2 {
        engine.process(Event::new(5, Spawn));
        fib(n - 1, engine, budget);
        engine.process(Event::new(2, SpawnReturn));
        fib(n - 2, engine, budget);
        engine.process(Event::new(1, Sync));
        *budget = budget.saturating_sub(3);
    } else if n == 1 {
        engine.process(Event::new(1, LoopBegin { grain: 4 }));
        for _ in 0..8 {
            engine.process(Event::new(1, IterationBegin));
            engine.process(Event::new(7, IterationEnd));
        }
        engine.process(Event::new(1, LoopEnd));
        *budget = budget.saturating_sub(18);
    } else {
        engine.process(Event::new(1, RegionBegin(RegionId(0))));
        engine.process(Event::new(4, RegionEnd(RegionId(0))));
        *budget = budget.saturating_sub(2);
    }
    engine.process(Event::new(2, FunctionExit));
    *budget = budget.saturating_sub(1);
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let target: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let mut engine = Engine::default();
    let start = Instant::now();
    while engine.events() < target {
        let mut budget = target - engine.events();
        fib(30, &mut engine, &mut budget);
    }
    let elapsed = start.elapsed();
    let report = engine.finish();
    println!(
        "events {}  time {:.3}s  {:.1} M events/s  {:.1} ns/event  peak RSS {} KiB  parallelism {:.2}",
        report.events,
        elapsed.as_secs_f64(),
        report.events as f64 / elapsed.as_secs_f64() / 1e6,
        elapsed.as_nanos() as f64 / report.events as f64,
        peak_rss_kib().map_or("?".into(), |k| k.to_string()),
        report.total.parallelism(),
    );
}
