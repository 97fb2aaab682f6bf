//! Call-site profiles whose numbers are known by construction: a serial helper on the critical
//! path, a spawned sibling off it, nested calls, fib (sites that call themselves: top-call-site
//! semantics), the Cilkprof paper's quicksort (Figure 1), profiling off, threads side by side.

mod common;

use cilkview_engine::{
    CallSite, Config, Engine, Event, EventKind::*, Profile, Report, SiteKind, SiteProfile, WorkSpan,
};
use common::{fib_ws, ws, Stream};

fn site(k: u64) -> Option<CallSite> {
    CallSite::new(k)
}

fn find(p: &Profile, key: u64) -> SiteProfile {
    *p.sites
        .iter()
        .find(|s| s.site.key() == key)
        .unwrap_or_else(|| panic!("no site {key}"))
}

/// Local spans on span of all sites plus the root's add up to the span, and so do the contexts'.
fn assert_local_spans_add_up(r: &Report) {
    let p = r.profile.as_ref().unwrap();
    let sites: u64 = p.sites.iter().map(|s| s.local_on_span.span).sum();
    assert_eq!(sites + p.root().local_on_span.span, r.total.span);
    let contexts: u64 = p.contexts.iter().map(|c| c.local_on_span.span).sum();
    assert_eq!(contexts, r.total.span);
}

#[test]
fn serial_helper_on_the_span_and_spawned_sibling_off_it() {
    // root: 1; spawn A (10); call H (50); sync.  span 1 + max(10, 50) = 51, work 61.
    let mut s = Stream::default();
    s.work(1);
    s.ev(Spawn, site(0xA));
    s.work(10);
    s.ev(SpawnReturn, None);
    s.ev(FunctionEnter, site(0x4));
    s.work(50);
    s.ev(FunctionExit, None);
    s.ev(Sync, None);
    let r = s.run();
    assert_eq!((r.total.work, r.total.span), (61, 51));
    let p = r.profile.as_ref().unwrap();
    let a = find(p, 0xA);
    assert_eq!(a.kind, SiteKind::Spawn);
    assert_eq!((a.invocations, a.invocations_on_span), (1, 0));
    assert_eq!(a.on_work, ws(10, 10));
    assert_eq!((a.on_span, a.local_on_span), (ws(0, 0), ws(0, 0)));
    let h = find(p, 0x4);
    assert_eq!(h.kind, SiteKind::Call);
    assert_eq!(
        (h.on_work, h.on_span, h.local_on_span),
        (ws(50, 50), ws(50, 50), ws(50, 50))
    );
    assert_eq!(p.root().local_on_span, ws(1, 1));
    assert_local_spans_add_up(&r);
}

#[test]
fn nested_calls_and_sites_without_a_key() {
    // root: call F { 2; call G { 5 }; 3; call (no site) { 7 } }; 4
    let mut s = Stream::default();
    s.ev(FunctionEnter, site(1));
    s.work(2);
    s.ev(FunctionEnter, site(2));
    s.work(5);
    s.ev(FunctionExit, None);
    s.work(3);
    s.ev(FunctionEnter, None);
    s.work(7);
    s.ev(FunctionExit, None);
    s.ev(FunctionExit, None);
    s.work(4);
    let r = s.run();
    assert_eq!((r.total.work, r.total.span), (21, 21));
    let p = r.profile.as_ref().unwrap();
    let (f, g) = (find(p, 1), find(p, 2));
    assert_eq!((f.on_work, f.on_span), (ws(17, 17), ws(17, 17)));
    // The unsited call's strands belong to F.
    assert_eq!(f.local_on_span, ws(12, 12));
    assert_eq!((g.on_work, g.local_on_span), (ws(5, 5), ws(5, 5)));
    assert_eq!(p.root().local_on_span, ws(4, 4));
    assert_eq!(
        p.stack(p.contexts.iter().position(|c| c.site == Some(1)).unwrap()),
        [0, 1]
    );
    assert_local_spans_add_up(&r);
}

// ---------------------------------------------------------------- fib (paper Figure 5)

const MAIN: u64 = 13;
const SPAWN: u64 = 4;
const CALL: u64 = 5;

/// fib(n): n < 2 costs n + 1 (so no two paths tie); else 1, spawn fib(n-1) at line 4,
/// call fib(n-2) at line 5, sync, 1.
fn fib(s: &mut Stream, n: u64) {
    if n < 2 {
        s.work(n + 1);
        return;
    }
    s.work(1);
    s.ev(Spawn, site(SPAWN));
    fib(s, n - 1);
    s.ev(SpawnReturn, None);
    s.ev(FunctionEnter, site(CALL));
    fib(s, n - 2);
    s.ev(FunctionExit, None);
    s.ev(Sync, None);
    s.work(1);
}

#[test]
fn fib_top_call_sites_do_not_double_count_recursion() {
    let n = 12;
    let mut s = Stream::default();
    s.ev(FunctionEnter, site(MAIN));
    fib(&mut s, n);
    s.ev(FunctionExit, None);
    let r = s.run();
    let whole = fib_ws(n);
    assert_eq!((r.total.work, r.total.span), (whole.work, whole.span));
    assert_eq!(whole.span, 2 * n);
    let p = r.profile.as_ref().unwrap();

    let main = find(p, MAIN);
    assert_eq!(
        (main.invocations, main.on_work, main.on_span),
        (1, whole, whole)
    );
    assert_eq!(main.local_on_span, ws(2, 2));

    // Top-call-site invocations of line 4: the spawns of fib(n - 2k) reached from main through
    // line-5 calls only; of line 5: the calls of fib(n - k) reached through line-4 spawns only.
    let mut top4 = WorkSpan::default();
    for k in (0..).map(|k| 2 * k).take_while(|&k| k + 2 <= n) {
        let c = fib_ws(n - k - 1);
        top4 = ws(top4.work + c.work, top4.span + c.span);
    }
    let mut top5 = WorkSpan::default();
    for k in (0..).take_while(|&k| k + 2 <= n) {
        let c = fib_ws(n - k - 2);
        top5 = ws(top5.work + c.work, top5.span + c.span);
    }
    let (l4, l5) = (find(p, SPAWN), find(p, CALL));
    assert_eq!(l4.on_work, top4);
    assert_eq!(l5.on_work, top5);
    // Every invocation is counted, recursive ones included.
    assert_eq!(l4.invocations + l5.invocations + 1, count_fibs(n));

    // The critical path is main → fib(n) → 4 → fib(n-1) → … → 4 → fib(1): line 5 is off it.
    assert_eq!(l4.invocations_on_span, n - 1);
    assert_eq!(
        l4.on_span,
        fib_ws(n - 1),
        "only the top invocation of line 4 on the span"
    );
    assert_eq!(l4.local_on_span, ws(2 * (n - 1), 2 * (n - 1)));
    assert_eq!(
        (l5.invocations_on_span, l5.on_span, l5.local_on_span),
        (0, ws(0, 0), ws(0, 0))
    );
    assert_eq!(p.root().local_on_span, ws(0, 0));
    assert_local_spans_add_up(&r);
    // Recursion is folded: contexts root, 13, 13→4, 13→5, 13→4→5, 13→5→4.
    assert_eq!(p.contexts.len(), 6);
}

fn count_fibs(n: u64) -> u64 {
    if n < 2 {
        1
    } else {
        1 + count_fibs(n - 1) + count_fibs(n - 2)
    }
}

// ---------------------------------------------------------------- quicksort (paper Figure 1)

const PARTITION: u64 = 20;
const LEFT: u64 = 21;
const RIGHT: u64 = 22;
const TOP: u64 = 31;
const COARSENING: u64 = 32;

/// pqsort of n elements: base case n (insertion sort); else 1, partition (n), spawn pqsort of the
/// smaller or larger part (alternating by depth, so both recursive sites reach the span), call the
/// rest, sync.
fn pqsort(s: &mut Stream, n: u64, depth: u32) {
    if n < COARSENING {
        s.work(n);
        return;
    }
    s.work(1);
    s.ev(FunctionEnter, site(PARTITION));
    s.work(n);
    s.ev(FunctionExit, None);
    let (a, b) = split(n, depth);
    s.ev(Spawn, site(LEFT));
    pqsort(s, a, depth + 1);
    s.ev(SpawnReturn, None);
    s.ev(FunctionEnter, site(RIGHT));
    pqsort(s, b, depth + 1);
    s.ev(FunctionExit, None);
    s.ev(Sync, None);
}

fn split(n: u64, depth: u32) -> (u64, u64) {
    let a = if depth % 2 == 0 { 2 * n / 5 } else { 3 * n / 5 };
    (a, n - a)
}

/// (span, partition's share of it along the critical path).
fn pqsort_span(n: u64, depth: u32) -> (u64, u64) {
    if n < COARSENING {
        return (n, 0);
    }
    let (a, b) = split(n, depth);
    let (sa, pa) = pqsort_span(a, depth + 1);
    let (sb, pb) = pqsort_span(b, depth + 1);
    assert_ne!(sa, sb, "no ties by construction");
    let (s, p) = if sa > sb { (sa, pa) } else { (sb, pb) };
    (1 + n + s, n + p)
}

#[test]
fn quicksort_partition_holds_the_span() {
    let n = 100_000;
    let mut s = Stream::default();
    s.ev(FunctionEnter, site(TOP));
    pqsort(&mut s, n, 0);
    s.ev(FunctionExit, None);
    let r = s.run();
    let (span, partition_span) = pqsort_span(n, 0);
    assert_eq!(r.total.span, span);
    let p = r.profile.as_ref().unwrap();
    let part = find(p, PARTITION);
    assert_eq!(part.local_on_span.span, partition_span);
    assert_eq!(
        part.on_span.parallelism(),
        1.0,
        "partition is serial on the span"
    );
    assert!(
        part.local_on_span.span as f64 > 0.99 * span as f64,
        "{} of {span}",
        part.local_on_span.span
    );
    let top = find(p, TOP);
    assert_eq!((top.on_work.work, top.on_work.span), (r.total.work, span));
    // The recursive sites are both on the span, and parallel there.
    for k in [LEFT, RIGHT] {
        let rec = find(p, k);
        assert!(rec.invocations_on_span > 0, "{k}");
        assert!(rec.on_span.parallelism() > 1.5, "{k}: {:?}", rec.on_span);
        assert!(rec.on_span.parallelism() < top.on_work.parallelism() + 1.0);
    }
    // The paper's reading: lines 20, 21, 22, 31 account for the span of line 31.
    let locals: u64 = [PARTITION, LEFT, RIGHT, TOP]
        .iter()
        .map(|&k| find(p, k).local_on_span.span)
        .sum();
    assert_eq!(locals, top.on_work.span);
    assert_local_spans_add_up(&r);
}

#[test]
fn profiling_off_reports_no_profile_and_the_same_measures() {
    let mut s = Stream::default();
    s.ev(FunctionEnter, site(MAIN));
    fib(&mut s, 8);
    s.ev(FunctionExit, None);
    let profiled = s.run();
    let mut plain = Engine::new(Config::default());
    plain.process_batch(&s.events);
    let plain = plain.finish();
    assert!(plain.profile.is_none());
    assert_eq!(plain.total, profiled.total);
}

#[test]
fn snapshots_and_partial_streams_keep_the_identity() {
    let mut s = Stream::default();
    s.ev(FunctionEnter, site(MAIN));
    fib(&mut s, 9);
    let mut e = Engine::with_profile(Config::default());
    // A stream that begins inside a frame: an unmatched exit first.
    e.process(Event::new(5, FunctionExit));
    e.process_batch(&s.events[..s.events.len() / 2]);
    let snap = e.snapshot();
    assert_local_spans_add_up(&snap);
    e.process_batch(&s.events[s.events.len() / 2..]);
    let r = e.finish();
    assert_local_spans_add_up(&r);
}

#[test]
fn threads_side_by_side_keep_the_longer_span() {
    let thread = |n: u64| {
        let mut s = Stream::default();
        s.ev(FunctionEnter, site(MAIN));
        fib(&mut s, n);
        s.ev(FunctionExit, None);
        s.run()
    };
    let (a, b) = (thread(6), thread(9));
    let main_b = find(b.profile.as_ref().unwrap(), MAIN);
    let r = a.clone().beside(b.clone());
    let p = r.profile.as_ref().unwrap();
    let main = find(p, MAIN);
    assert_eq!(main.invocations, 2);
    assert_eq!(main.on_work.work, a.total.work + b.total.work);
    assert_eq!(main.on_span, main_b.on_span);
    assert_local_spans_add_up(&r);
}

#[test]
fn calling_contexts_stay_proportional_to_sites() {
    // root → i → j for 400 × 400 site pairs: 160,400 paths, more than the 2·sites + 65,536
    // contexts kept as paths; the rest are cut short under the root. The identities still hold.
    let n = 400;
    let mut s = Stream::default();
    for i in 1..=n {
        s.ev(FunctionEnter, site(i));
        for j in 1..=n {
            s.work(1);
            s.ev(FunctionEnter, site(1000 + j));
            s.work(2);
            s.ev(FunctionExit, None);
        }
        s.ev(FunctionExit, None);
    }
    let r = s.run();
    let p = r.profile.as_ref().unwrap();
    assert_eq!(p.sites.len(), 2 * n as usize);
    // At most one more context per site once the cap is reached (its path cut under the root).
    assert!(
        p.contexts.len() <= 3 * p.sites.len() + (1 << 16),
        "{}",
        p.contexts.len()
    );
    assert!(p.contexts.len() > 1 << 16);
    assert_eq!(find(p, 1005).local_on_span, ws(2 * n, 2 * n));
    assert_eq!(find(p, 7).local_on_span, ws(n, n));
    assert_local_spans_add_up(&r);
}

#[test]
fn a_spawn_after_one_sibling_puts_that_sibling_on_the_span() {
    // root: spawn A (100) at 1; spawn B (10) at 2; C (50) at 3 after A; sync. The span is
    // A then C: 150 (without the edge it would be 100); B is off it.
    let mut s = Stream::default();
    s.ev(Spawn, site(1));
    s.work(100);
    s.ev(SpawnReturn, None);
    s.ev(Spawn, site(2));
    s.work(10);
    s.ev(SpawnReturn, None);
    s.ev(SpawnAfter { sibling: 0 }, None);
    s.ev(Spawn, site(3));
    s.work(50);
    s.ev(SpawnReturn, None);
    s.ev(Sync, None);
    let r = s.run();
    assert_eq!((r.total.work, r.total.span), (160, 150));
    let p = r.profile.as_ref().unwrap();
    assert_eq!(find(p, 1).local_on_span, ws(100, 100));
    assert_eq!(find(p, 2).invocations_on_span, 0);
    assert_eq!(find(p, 3).on_span, ws(50, 50));
    assert_local_spans_add_up(&r);
}

#[test]
fn a_wait_for_one_child_puts_it_before_the_strands_after() {
    // root: spawn A (100) at 1; spawn B (200) at 2; wait for A; 5; call H (30) at 4; sync.
    // Paths: A, 5, H = 135 against B = 200: the span is B's. With 300 in A instead, the
    // span is A, the strand of 5 (the root's), H: 335.
    let run = |a: u64| {
        let mut s = Stream::default();
        s.ev(Spawn, site(1));
        s.work(a);
        s.ev(SpawnReturn, None);
        s.ev(Spawn, site(2));
        s.work(200);
        s.ev(SpawnReturn, None);
        s.ev(WaitFor { sibling: 0 }, None);
        s.work(5);
        s.call(site(4), |s| s.work(30));
        s.ev(Sync, None);
        s.run()
    };
    let r = run(100);
    assert_eq!(r.total.span, 200);
    assert_eq!(find(r.profile.as_ref().unwrap(), 2).on_span, ws(200, 200));
    assert_local_spans_add_up(&r);
    let r = run(300);
    assert_eq!(r.total.span, 335);
    let p = r.profile.as_ref().unwrap();
    assert_eq!(find(p, 1).local_on_span, ws(300, 300));
    assert_eq!(find(p, 4).local_on_span, ws(30, 30));
    assert_eq!(find(p, 2).invocations_on_span, 0);
    assert_eq!(p.root().local_on_span.span, 5);
    assert_local_spans_add_up(&r);
}
