//! A long run: 10^8 events through the engine in bounded memory. (This test binary runs alone in
//! its process, so the process's peak resident memory is the engine's.)

use cilkview_engine::{Engine, Event, EventKind::*, RegionId};

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
#[ignore = "slow: streams 10^8 events through the engine"]
fn a_hundred_million_events_in_bounded_memory() {
    let mut engine = Engine::default();
    let before = peak_rss_kib();
    // Rounds of: a call that spawns 4 children and syncs, inside a region, then a parallel loop
    // of 8 iterations with grain 2: 1 + 1 + 4·2 + 1 + 1 + 1 + 1 + 8·2 + 1 = 31 events.
    let rounds = 100_000_000 / 31 + 1;
    for _ in 0..rounds {
        engine.process(Event::new(3, RegionBegin(RegionId(0))));
        engine.process(Event::new(1, FunctionEnter));
        for _ in 0..4 {
            engine.process(Event::new(2, Spawn));
            engine.process(Event::new(10, SpawnReturn));
        }
        engine.process(Event::new(1, Sync));
        engine.process(Event::new(1, FunctionExit));
        engine.process(Event::new(1, RegionEnd(RegionId(0))));
        engine.process(Event::new(1, LoopBegin { grain: 2 }));
        for _ in 0..8 {
            engine.process(Event::new(1, IterationBegin));
            engine.process(Event::new(5, IterationEnd));
        }
        engine.process(Event::new(1, LoopEnd));
        assert_eq!(engine.depth(), 0);
    }
    let grown = peak_rss_kib().saturating_sub(before);
    let r = engine.finish();
    assert_eq!(r.events, 31 * rounds);
    assert!(r.events >= 100_000_000);
    // Each round: work 3+1+4·12+1+1+1+1+8·6+1 = 105; 4 spawns + 3 for the loop's 4 chunks.
    assert_eq!(r.total.work, 105 * rounds);
    assert_eq!(r.total.spawns, 7 * rounds);
    assert_eq!(r.regions[0].count, rounds);
    // Memory: nothing per event. A leak of even one byte per event would be ~100 MB.
    assert!(
        grown < 8 * 1024,
        "peak RSS grew by {grown} KiB over 10^8 events"
    );
}
