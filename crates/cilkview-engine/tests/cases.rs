//! Hand-checked cases: every expected number here is worked out in the comment above it.

use cilkview_engine::{Config, Engine, Event, EventKind, EventKind::*, RegionId, Report};

fn run(burden: u64, events: &[(u64, EventKind)]) -> Report {
    let mut engine = Engine::new(Config { burden });
    for &(cost, kind) in events {
        engine.process(Event::new(cost, kind));
    }
    engine.finish()
}

/// fib(n) with both calls spawned and every Cilk thread of unit cost, as in the dag-model slides:
/// thread 1 runs to the first spawn, thread 2 between the spawns, thread 3 after the sync.
fn fib_spawned(n: u32, out: &mut Vec<(u64, EventKind)>) {
    if n < 2 {
        out.push((1, SpawnReturn)); // the leaf's only thread
        return;
    }
    out.push((1, Spawn)); // thread 1
    fib_spawned(n - 1, out);
    out.push((1, Spawn)); // thread 2
    fib_spawned(n - 2, out);
    out.push((0, Sync)); // nothing runs between the second spawn and the sync
    out.push((1, SpawnReturn)); // thread 3
}

#[test]
fn fib_4_of_the_dag_model_slides() {
    // The top-level fib(4) is itself spawned from an empty root.
    let mut events = vec![(0, Spawn)];
    fib_spawned(4, &mut events);
    let r = run(0, &events);
    assert_eq!(r.total.work, 17);
    assert_eq!(r.total.span, 8);
    assert_eq!(format!("{:.3}", r.total.parallelism()), "2.125");
    // fib(4) spawns fib(3), fib(2); fib(3) spawns 2; each fib(2) spawns 2: 8, plus the root's spawn.
    assert_eq!(r.total.spawns, 9);
    assert!(r.anomalies.is_clean());
}

/// Cilk's fib: spawn fib(n-1), *call* fib(n-2), sync. Function frames make the scoping visible.
fn fib_called(n: u32, out: &mut Vec<(u64, EventKind)>) {
    out.push((0, FunctionEnter));
    if n >= 2 {
        out.push((1, Spawn));
        fib_called(n - 1, out);
        out.push((0, SpawnReturn));
        fib_called(n - 2, out);
        out.push((1, Sync));
    }
    out.push((1, FunctionExit));
}

#[test]
fn fib_with_a_called_second_half_has_the_recurrence_span() {
    // For n ≥ 2: 1 (to the spawn), then the spawned fib(n-1) in parallel with the continuation
    // (the called fib(n-2) and the strand of 1 ending at the sync), then 1 to the exit:
    // span(n) = 1 + max(span(n-1), span(n-2) + 1) + 1; work(n) = work(n-1) + work(n-2) + 3;
    // span(0) = span(1) = work(0) = work(1) = 1.
    for n in 0..15u32 {
        let mut events = Vec::new();
        fib_called(n, &mut events);
        let r = run(0, &events);
        let (mut w, mut s) = (vec![1u64, 1], vec![1u64, 1]);
        for k in 2..=n as usize {
            w.push(w[k - 1] + w[k - 2] + 3);
            s.push(2 + s[k - 1].max(s[k - 2] + 1));
        }
        assert_eq!(
            (r.total.work, r.total.span),
            (w[n as usize], s[n as usize]),
            "fib({n})"
        );
    }
}

#[test]
fn a_callee_sync_does_not_join_the_callers_child() {
    // caller: spawn A (cost 100); call g: { spawn B (10); sync }; then 5; sync.
    // g's sync joins only B. A runs in parallel with everything up to the caller's sync:
    // span = max(100, 10 + 5) = 100 (plus the zero-cost strands), work = 115.
    let events = [
        (0, FunctionEnter),
        (0, Spawn),
        (100, SpawnReturn),
        (0, FunctionEnter), // g
        (0, Spawn),
        (10, SpawnReturn),
        (0, Sync),
        (0, FunctionExit),
        (5, Sync),
        (0, FunctionExit),
    ];
    let r = run(7, &events);
    assert_eq!(r.total.work, 115);
    assert_eq!(r.total.span, 100);
    // Burdened: A's path has no burden (100); the continuation carries 7, then g's path
    // max(10, 0 + 7) = 10, then 5: 7 + 10 + 5 = 22; max(100, 22) = 100.
    assert_eq!(r.total.burdened_span, 100);
    // Had g's sync joined A (the bug this test guards against), the span would be 100 + 5 = 105.
}

#[test]
fn a_function_returning_with_children_out_syncs_implicitly() {
    // f: spawn a child of 50, continue with 20, return without cv_sync; then 30 in the caller.
    // The return joins the child: span = max(50, 20) + 30 = 80; burdened = max(50, 9 + 20) + 30.
    let events = [
        (0, FunctionEnter),
        (0, Spawn),
        (50, SpawnReturn),
        (20, FunctionExit),
        (30, Sync),
    ];
    let r = run(9, &events);
    assert_eq!(
        (r.total.work, r.total.span, r.total.burdened_span),
        (100, 80, 80)
    );
    // The implicit sync at the return counts; the caller's explicit sync counts too.
    assert_eq!((r.total.spawns, r.total.syncs), (1, 2));
}

#[test]
fn a_region_that_ends_with_children_out_includes_them_but_does_not_sync_the_program() {
    // begin R; spawn a child of 100; continue 10; end R; continue 200; sync.
    // Region R: work 110, span max(100, 10) = 100 — its measures see an implicit sync.
    // The program is not synced at the region end: span = max(100, 10 + 200) = 210.
    let r = run(
        0,
        &[
            (0, RegionBegin(RegionId(3))),
            (0, Spawn),
            (100, SpawnReturn),
            (10, RegionEnd(RegionId(3))),
            (200, Sync),
        ],
    );
    assert_eq!((r.total.work, r.total.span), (310, 210));
    assert_eq!(r.regions.len(), 1);
    let region = r.regions[0];
    assert_eq!(region.id, RegionId(3));
    assert_eq!((region.measures.work, region.measures.span), (110, 100));
    assert_eq!((region.measures.spawns, region.measures.syncs), (1, 0));
    // Its events: the spawn, the child's return and its end (its three strands).
    assert_eq!(region.events, 3);
}

#[test]
fn repeated_and_nested_regions_accumulate() {
    // outer { inner {spawn 40; 10; sync} 5 } twice. inner: work 50, span 40; outer: 55, 45.
    let mut events = Vec::new();
    for _ in 0..2 {
        events.extend([
            (0, RegionBegin(RegionId(0))),
            (0, RegionBegin(RegionId(1))),
            (0, Spawn),
            (40, SpawnReturn),
            (10, Sync),
            (0, RegionEnd(RegionId(1))),
            (5, RegionEnd(RegionId(0))),
        ]);
    }
    let r = run(0, &events);
    let outer = r.regions[0];
    let inner = r.regions[1];
    assert_eq!(
        (outer.count, outer.measures.work, outer.measures.span),
        (2, 110, 90)
    );
    assert_eq!(
        (inner.count, inner.measures.work, inner.measures.span),
        (2, 100, 80)
    );
    assert_eq!((inner.measures.spawns, inner.measures.syncs), (2, 2));
    assert_eq!((r.total.work, r.total.span), (110, 90));
    // Events after each begin through its end: the inner region's 4 (spawn, return, sync, end),
    // the outer one's those, the inner begin and its own end: 6; twice each.
    assert_eq!((outer.events, inner.events), (12, 8));
}

#[test]
fn a_regions_events_are_its_strands_in_steps_and_in_batches() {
    // f { R { 7 } ; S { spawn 30; 5 } exit } : R holds one strand (its end's), S ends implicitly
    // at f's exit after 3 events (spawn, return, exit); a region around it all sees its 8.
    let events = [
        (0, RegionBegin(RegionId(2))),
        (1, FunctionEnter),
        (0, RegionBegin(RegionId(0))),
        (7, RegionEnd(RegionId(0))),
        (0, RegionBegin(RegionId(1))),
        (0, Spawn),
        (30, SpawnReturn),
        (5, FunctionExit),
        (0, RegionEnd(RegionId(2))),
    ];
    let stepped = run(0, &events);
    let mut engine = Engine::new(Config { burden: 0 });
    let batch: Vec<Event> = events.iter().map(|&(c, k)| Event::new(c, k)).collect();
    engine.process_batch(&batch[..4]);
    engine.process_batch(&batch[4..]);
    let batched = engine.finish();
    for r in [&stepped, &batched] {
        let events: Vec<u64> = r.regions.iter().map(|m| m.events).collect();
        assert_eq!(events, [1, 3, 8]);
        assert_eq!(r.regions[0].measures.work, 7);
        assert_eq!(r.anomalies.implicit_region_ends, 1);
    }
}

/// A loop of `n` iterations of cost `c` each, grain `g`, no loop-control cost.
fn flat_loop(n: u64, g: u64, c: u64) -> Vec<(u64, EventKind)> {
    let mut events = vec![(0, LoopBegin { grain: g })];
    for _ in 0..n {
        events.push((0, IterationBegin));
        events.push((c, IterationEnd));
    }
    events.push((0, LoopEnd));
    events
}

#[test]
fn parallel_loop_formula() {
    // 8 iterations, grain 1: 8 chunks under a perfect tree of depth 3. span = c;
    // burdened span = c + 3 burdens (the rightmost leaf takes 3 continuation edges).
    let r = run(1000, &flat_loop(8, 1, 10));
    assert_eq!(
        (r.total.work, r.total.span, r.total.burdened_span),
        (80, 10, 3010)
    );
    assert_eq!((r.total.spawns, r.total.syncs), (7, 7));
    // grain 3: chunks of 3, 3, 2 iterations: span 30; tree = [4 leaves? no: 3 chunks] = left 2
    // (perfect, 1 burden on its right leaf) and right 1 (1 burden): bspan = max(30 + 1000,
    // 20 + 1000) = 1030.
    let r = run(1000, &flat_loop(8, 3, 10));
    assert_eq!((r.total.span, r.total.burdened_span), (30, 1030));
    assert_eq!(r.total.spawns, 2);
    // grain 0 is grain 1; an empty loop is nothing.
    assert_eq!(run(5, &flat_loop(2, 0, 1)).total.burdened_span, 6);
    assert_eq!(run(5, &flat_loop(0, 4, 1)).total, Default::default());
}

#[test]
fn a_loop_in_a_loops_control_code_is_serial_code_of_that_loop() {
    // An outer loop of grain 1 with iterations of 100 and 10, whose control code between them
    // runs 5, an inner loop of two iterations of 7 (its tree: work 14, span 7, bspan 7 + B) with
    // 2 of control after them, then 3 before the second iteration. No chunk is open between
    // the iterations, so all of it (work 24, span 17, bspan 17 + B) goes to the second chunk:
    // (34, 27, 27 + B). The outer tree: chunk 1 (100) spawned, chunk 2 the continuation:
    // work 134, span 100, bspan max(100, 27 + 2B); one spawn per loop. (Chunk 1 holds the
    // span, so control code counted twice in chunk 2 would show.)
    let events = [
        (0, LoopBegin { grain: 1 }),
        (0, IterationBegin),
        (100, IterationEnd),
        (5, LoopBegin { grain: 1 }),
        (0, IterationBegin),
        (7, IterationEnd),
        (0, IterationBegin),
        (7, IterationEnd),
        (2, LoopEnd),
        (3, IterationBegin),
        (10, IterationEnd),
        (0, LoopEnd),
    ];
    let r = run(1000, &events);
    assert_eq!(
        (r.total.work, r.total.span, r.total.burdened_span),
        (134, 100, 2027)
    );
    assert_eq!((r.total.spawns, r.total.syncs), (2, 2));
    assert_eq!(r.anomalies, Default::default());
}

#[test]
fn paper_figure_4_snippets() {
    // Snippet A: a parallel loop of 2 iterations around a serial loop of n calls of cost 1.
    // Snippet B: a serial loop of n around a parallel loop of 2 iterations of cost 1.
    let n = 1000;
    let a = run(15_000, &flat_loop(2, 1, n));
    let mut b_events = Vec::new();
    for _ in 0..n {
        b_events.extend(flat_loop(2, 1, 1));
    }
    let b = run(15_000, &b_events);
    assert_eq!((a.total.work, b.total.work), (2 * n, 2 * n));
    assert_eq!((a.total.span, b.total.span), (n, n));
    assert_eq!(a.total.burdened_span, n + 15_000);
    assert_eq!(b.total.burdened_span, n * (1 + 15_000));
    assert!(a.total.burdened_parallelism() > 100.0 * b.total.burdened_parallelism());
}

#[test]
fn partial_streams_are_absorbed_by_the_root() {
    // A stream that starts inside a function that has a child out: its return, a stray sync,
    // iteration and loop ends — never a panic, and work is still the sum of the costs.
    let r = run(
        10,
        &[
            (5, SpawnReturn),
            (5, Sync),
            (5, FunctionExit),
            (5, IterationEnd),
            (5, LoopEnd),
            (5, IterationBegin),
            (5, RegionEnd(RegionId(9))),
            (5, Spawn),
            (5, SpawnReturn),
            (5, FunctionExit),
        ],
    );
    assert_eq!(r.total.work, 50);
    assert_eq!(r.anomalies.unmatched_closers, 5);
    assert_eq!(r.anomalies.stray_iterations, 1);
    assert_eq!(r.anomalies.unmatched_regions, 1);
    // 40 at the root up to the spawn, then the child (5) in parallel with the continuation (5),
    // joined by the last, unmatched, FunctionExit.
    assert_eq!(r.total.span, 45);
}

#[test]
fn closers_skip_over_frames_left_open() {
    // A function exit while a spawned child and a loop are still open (e.g. a longjmp out of
    // them): those frames end implicitly at that point.
    let r = run(
        0,
        &[
            (0, FunctionEnter),
            (0, Spawn),
            (7, LoopBegin { grain: 1 }),
            (0, IterationBegin),
            (3, RegionBegin(RegionId(1))),
            (4, FunctionExit),
        ],
    );
    assert_eq!(r.total.work, 14);
    assert_eq!(r.anomalies.implicit_frame_ends, 3);
    assert_eq!(r.anomalies.implicit_region_ends, 1);
    assert_eq!(r.regions[0].measures.work, 4);
}

#[test]
fn memory_stays_bounded_by_depth() {
    // 10^6 spawns in a flat loop and a loop of 10^6 iterations: depth returns to 0 and the engine
    // can be cloned cheaply (its size does not grow with the number of events).
    let mut engine = Engine::default();
    for _ in 0..1_000_000 {
        engine.process(Event::new(1, Spawn));
        engine.process(Event::new(1, SpawnReturn));
        assert!(engine.depth() == 0);
    }
    engine.process(Event::new(1, LoopBegin { grain: 1 }));
    for _ in 0..1_000_000 {
        engine.process(Event::new(1, IterationBegin));
        engine.process(Event::new(1, IterationEnd));
        assert!(engine.depth() == 1);
    }
    engine.process(Event::new(1, LoopEnd));
    let r = engine.snapshot();
    assert_eq!(r.total.work, 4_000_002);
    assert_eq!(r.total.spawns, 1_000_000 + 999_999);
    assert_eq!(r.events, 4_000_002);
}

#[test]
fn deep_recursion_of_100_000_nested_spawns() {
    // A chain of 100,000 nested spawned calls f: 1 before its spawn, then the spawned f(child),
    // then a continuation strand of 1 that ends at the sync, then 1 at the return. The innermost f
    // is just its return (1). span(f_k) = 1 + max(span(f_k+1), 1) + 1, so span = 2·depth at the
    // root (whose own continuation runs beside the chain); work = 3·depth. The burden of a
    // continuation is hidden by the longer child chain except at the deepest level: burdened
    // span = span + burden.
    let depth = 100_000u64;
    let mut engine = Engine::default();
    for _ in 0..depth {
        engine.process(Event::new(1, Spawn));
        engine.process(Event::new(0, FunctionEnter));
    }
    assert_eq!(engine.depth() as u64, 2 * depth);
    for _ in 0..depth {
        engine.process(Event::new(1, FunctionExit));
        engine.process(Event::new(0, SpawnReturn));
        engine.process(Event::new(1, Sync));
    }
    assert_eq!(engine.depth(), 0);
    let r = engine.finish();
    assert_eq!((r.total.work, r.total.span), (3 * depth, 2 * depth));
    assert_eq!((r.total.spawns, r.total.syncs), (depth, depth));
    assert_eq!(r.total.burdened_span, 2 * depth + 15_000);
}

#[test]
fn the_anomaly_count_moves_with_every_anomaly() {
    // The session names the mark that caused an anomaly by comparing this one count before and
    // after each event: it must change exactly when some anomaly counter does.
    let mut engine = Engine::default();
    let events = [
        (5, SpawnReturn),
        (0, FunctionEnter),
        (0, Spawn),
        (7, LoopBegin { grain: 1 }),
        (0, IterationBegin),
        (3, RegionBegin(RegionId(1))),
        (4, FunctionExit),
        (5, IterationBegin),
        (5, RegionEnd(RegionId(9))),
        (1, FunctionEnter),
        (1, FunctionExit),
    ];
    let total = |a: cilkview_engine::Anomalies| {
        a.unmatched_closers
            + a.stray_iterations
            + a.unmatched_regions
            + a.implicit_region_ends
            + a.implicit_frame_ends
    };
    let mut changed = 0;
    for (cost, kind) in events {
        let (before, count) = (engine.anomalies(), engine.anomaly_count());
        engine.process(Event::new(cost, kind));
        assert_eq!(
            engine.anomaly_count(),
            total(engine.anomalies()),
            "{kind:?}"
        );
        assert_eq!(
            engine.anomaly_count() != count,
            engine.anomalies() != before,
            "{kind:?}"
        );
        changed += usize::from(engine.anomaly_count() != count);
    }
    // The first return, the exit that closed three frames and a region, the stray iteration and
    // the unmatched region end.
    assert_eq!(changed, 4);
}

#[test]
fn a_spawn_after_one_of_two_siblings_waits_for_that_one_only() {
    // Three children of one frame: A (cost 10), B (cost 100), then C (cost 10) after A only;
    // the parent's strands cost nothing. C starts when A ends (10) and ends at 20; B ends at
    // 100: span 100. Waiting for both (a sync before C) would give 110. Burdened, with burden
    // 1,000: A ends at 10, B starts after one continuation (1,000) and ends at 1,100, C starts
    // at max(2,000 after two continuations, 10) and ends at 2,010; the continuation after C is
    // at 3,000: burdened span 3,000.
    let events = [
        (0, Spawn),
        (10, SpawnReturn),
        (0, Spawn),
        (100, SpawnReturn),
        (0, SpawnAfter { sibling: 0 }),
        (0, Spawn),
        (10, SpawnReturn),
        (0, Sync),
    ];
    let r = run(1_000, &events);
    assert_eq!(r.total.work, 120);
    assert_eq!(r.total.span, 100);
    assert_eq!(r.total.burdened_span, 3_000);
    // After B (sibling 1) instead: C ends at 110.
    let mut after_b = events;
    after_b[4].1 = SpawnAfter { sibling: 1 };
    assert_eq!(run(1_000, &after_b).total.span, 110);
    // A sibling that does not exist (2: only two are out) is no constraint.
    let mut none = events;
    none[4].1 = SpawnAfter { sibling: 2 };
    assert_eq!(run(1_000, &none).total.span, 100);
    assert!(r.anomalies.is_clean());
}

#[test]
fn a_wait_for_one_of_two_children_waits_for_that_one_only() {
    // A (cost 10) and B (cost 100) spawned; the parent waits for A alone, then runs 50, then
    // syncs. The 50 start at 10 and end at 60; B ends at 100: span 100 (a sync instead of the
    // wait would give 150). Waiting for B: 100 + 50 = 150. Burdened (1,000): the parent's strand
    // after two continuations is at 2,000, past both ends: burdened span 2,050.
    let events = [
        (0, Spawn),
        (10, SpawnReturn),
        (0, Spawn),
        (100, SpawnReturn),
        (0, WaitFor { sibling: 0 }),
        (50, Sync),
    ];
    let r = run(1_000, &events);
    assert_eq!(r.total.work, 160);
    assert_eq!(r.total.span, 100);
    assert_eq!(r.total.burdened_span, 2_050);
    let mut on_b = events;
    on_b[4].1 = WaitFor { sibling: 1 };
    assert_eq!(run(1_000, &on_b).total.span, 150);
    // A child that does not exist is no constraint: the 50 start at 0.
    let mut none = events;
    none[4].1 = WaitFor { sibling: 2 };
    assert_eq!(run(1_000, &none).total.span, 100);
    assert!(r.anomalies.is_clean());
}
