//! Engine throughput and memory: streams N synthetic events (recursive fib-shaped spawns and calls,
//! parallel loops and regions) through the engine, then prints events per second and the
//! process's peak resident memory. The events are generated in batches of 4096, as a backend hands
//! them over, and given to `Engine::process_batch`: the time per event is the engine's alone
//! (the generator's is apart, printed as `generated in`).
//!
//!     cargo run --release -p cilkview-engine --example throughput -- 100000000
//!     … -- 100000000 --per-event            (each event given to `Engine::process` as it is
//!                                           generated: the time is the generator's and the
//!                                           engine's together)
//!     … -- 100000000 --profile              (call-site profiles: 3 sites, as fib's)
//!     … -- 100000000 --profile --sites 1000000
//!                                           (fib(2)s called from 10^6 distinct sites in turn)
//!     … -- 100000000 --profile --children 1000000
//!                                           (frames of 10^6 spawned calls each, then a sync: the
//!                                           children out at once, whose ends are kept until it)
//!     … -- 100000000 --calls-only           (fib's calls, spawns and syncs alone, as a fully
//!                                           marked fib gives them: no loops or regions at leaves)

use std::time::{Duration, Instant};

use cilkview_engine::{CallSite, Config, Engine, Event, EventKind::*, RegionId};

const SPAWN_SITE: u64 = 1;
const CALL_SITE: u64 = 2;
/// The functions holding the sites (the analysis names each site's function, so the stream
/// does too): fib's own two sites are in fib; the others in main (`children`: its frame).
const FIB: u64 = 1;
const MAIN: u64 = 2;

/// The call site `key` in function `function`.
fn site_in(key: u64, function: u64) -> Option<CallSite> {
    CallSite::new(key).map(|s| s.in_function(function))
}

/// What the synthetic stream holds besides fib's calls, spawns and syncs.
#[derive(Clone, Copy)]
struct Shape {
    /// Call sites on calls and spawns (for `--profile`).
    sites: bool,
    /// A parallel loop at each fib(1), a region at each fib(0).
    leaves: bool,
}

/// How many events a batch holds.
const BATCH: usize = 4096;

/// Where the generator's events go: batches for `Engine::process_batch` (or each to
/// `Engine::process` at once, `--per-event`), and the time the engine took.
struct Sink {
    engine: Engine,
    batch: Vec<Event>,
    per_event: bool,
    emitted: u64,
    engine_time: Duration,
}

impl Sink {
    #[inline(always)]
    fn process(&mut self, e: Event) {
        self.emitted += 1;
        if self.per_event {
            self.engine.process(e);
            return;
        }
        self.batch.push(e);
        if self.batch.len() == BATCH {
            self.flush();
        }
    }

    #[inline(never)]
    fn flush(&mut self) {
        let start = Instant::now();
        self.engine.process_batch(&self.batch);
        self.engine_time += start.elapsed();
        self.batch.clear();
    }
}

/// Emits the events of fib(n) (spawn fib(n-1), call fib(n-2), sync) until `budget` runs out;
/// `site` is the call site of this invocation (None: unprofiled stream, as before).
fn fib(n: u32, site: Option<CallSite>, engine: &mut Sink, budget: &mut u64, shape: Shape) {
    if *budget == 0 {
        return;
    }
    let (spawn_site, call_site) = if shape.sites {
        (site_in(SPAWN_SITE, FIB), site_in(CALL_SITE, FIB))
    } else {
        (None, None)
    };
    engine.process(Event::at(3, FunctionEnter, site));
    *budget = budget.saturating_sub(1);
    if n >= 2 {
        engine.process(Event::at(5, Spawn, spawn_site));
        fib(n - 1, None, engine, budget, shape);
        engine.process(Event::new(2, SpawnReturn));
        fib(n - 2, call_site, engine, budget, shape);
        engine.process(Event::new(1, Sync));
        *budget = budget.saturating_sub(3);
    } else if shape.leaves && n == 1 {
        engine.process(Event::new(1, LoopBegin { grain: 4 }));
        for _ in 0..8 {
            engine.process(Event::new(1, IterationBegin));
            engine.process(Event::new(7, IterationEnd));
        }
        engine.process(Event::new(1, LoopEnd));
        *budget = budget.saturating_sub(18);
    } else if shape.leaves {
        engine.process(Event::new(1, RegionBegin(RegionId(0))));
        engine.process(Event::new(4, RegionEnd(RegionId(0))));
        *budget = budget.saturating_sub(2);
    }
    engine.process(Event::new(2, FunctionExit));
    *budget = budget.saturating_sub(1);
}

/// A frame that spawns `k` children (each a call at a site), then syncs, until `budget` runs
/// out.
fn children(k: u64, engine: &mut Sink, budget: &mut u64, sites: bool) {
    let (spawn_site, call_site) = if sites {
        (site_in(SPAWN_SITE, MAIN), site_in(CALL_SITE, MAIN))
    } else {
        (None, None)
    };
    engine.process(Event::new(3, FunctionEnter));
    for _ in 0..k.min(*budget / 4) {
        engine.process(Event::at(5, Spawn, spawn_site));
        engine.process(Event::at(1, FunctionEnter, call_site));
        engine.process(Event::new(7, FunctionExit));
        engine.process(Event::new(2, SpawnReturn));
    }
    engine.process(Event::new(1, Sync));
    engine.process(Event::new(2, FunctionExit));
    *budget = budget.saturating_sub(4 * k + 3);
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target: u64 = args
        .first()
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000_000);
    let profile = args.iter().any(|a| a == "--profile");
    let shape = Shape {
        sites: profile,
        leaves: !args.iter().any(|a| a == "--calls-only"),
    };
    let distinct: Option<u64> = args
        .iter()
        .position(|a| a == "--sites")
        .and_then(|i| args.get(i + 1)?.parse().ok());
    let wide: Option<u64> = args
        .iter()
        .position(|a| a == "--children")
        .and_then(|i| args.get(i + 1)?.parse().ok());
    let engine = if profile {
        Engine::with_profile(Config::default())
    } else {
        Engine::default()
    };
    let per_event = args.iter().any(|a| a == "--per-event");
    let mut sink = Sink {
        engine,
        batch: Vec::with_capacity(BATCH),
        per_event,
        emitted: 0,
        engine_time: Duration::ZERO,
    };
    let start = Instant::now();
    let mut next_site = 0u64;
    while sink.emitted < target {
        let mut budget = target - sink.emitted;
        if let Some(k) = wide {
            children(k.max(1), &mut sink, &mut budget, profile);
            continue;
        }
        match distinct {
            // fib(2) from call sites 1000, 1001, … in turn (each with fib's own inner sites).
            Some(s) => {
                let site = site_in(1000 + next_site % s.max(1), MAIN);
                next_site += 1;
                fib(2, site, &mut sink, &mut budget, shape);
            }
            None => fib(30, site_in(3, MAIN), &mut sink, &mut budget, shape),
        }
    }
    sink.flush();
    let total = start.elapsed();
    // The engine's time alone, or with the generator's (`--per-event`).
    let elapsed = if per_event { total } else { sink.engine_time };
    let report = sink.engine.finish();
    let sites = report.profile.as_ref().map_or(0, |p| p.sites.len());
    let contexts = report.profile.as_ref().map_or(0, |p| p.contexts.len());
    println!(
        "events {}  generated in {}  time {:.3}s  {:.1} M events/s  {:.1} ns/event  peak RSS {} KiB  parallelism {:.2}{}",
        report.events,
        if per_event {
            "(timed with the engine)".to_string()
        } else {
            format!("{:.3}s", (total - sink.engine_time).as_secs_f64())
        },
        elapsed.as_secs_f64(),
        report.events as f64 / elapsed.as_secs_f64() / 1e6,
        elapsed.as_nanos() as f64 / report.events as f64,
        peak_rss_kib().map_or("?".into(), |k| k.to_string()),
        report.total.parallelism(),
        if profile {
            format!("  profile: {sites} sites, {contexts} contexts")
        } else {
            String::new()
        },
    );
}
