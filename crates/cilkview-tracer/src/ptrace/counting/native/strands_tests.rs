//! The thread's clock: strands, hit costs, empty strands, what strands owe.

use super::*;

/// Strands ending at `ends` (ticks from 0), each with `skip` taken off: their costs.
fn costs(ends: &[u64], skip: u64) -> Vec<u64> {
    let mut th = StrandState::new(0);
    ends.iter()
        .map(|&tsc| {
            let cost = th.end(tsc, skip, TickScale::new(1.0));
            th.last = tsc;
            cost
        })
        .collect()
}

#[test]
fn a_strand_shorter_than_the_hit_cost_owes_the_rest_to_the_next() {
    // Strands of 5, 5, 30 and 40 ticks, 10 taken off each: 0, 0, 30 - 10 - 10, 40 - 10.
    assert_eq!(costs(&[5, 10, 40, 80], 10), [0, 0, 10, 30]);
    // The thread's work is its ticks less what was taken off, not more.
    assert_eq!(costs(&[5, 10, 40, 80], 10).iter().sum::<u64>(), 80 - 4 * 10);
    // Strands long enough lose exactly the skip.
    assert_eq!(costs(&[100, 250], 10), [90, 140]);
}

#[test]
fn ticks_scale_exactly_at_one_per_tick_and_within_a_ns_otherwise() {
    assert_eq!(TickScale::new(1.0).of(u64::MAX / 2), u64::MAX / 2);
    // A 2.445 GHz TSC: 10^12 ticks (409 s) as the f64 product, within 3·10^-10 of it.
    let k = 1.0 / 2.445;
    let by_f64 = (1e12 * k) as u64;
    let diff = TickScale::new(k).of(1_000_000_000_000).abs_diff(by_f64);
    assert!(
        diff as f64 <= 3e-10 * by_f64 as f64,
        "{diff} ns off {by_f64}"
    );
    assert_eq!(TickScale::new(k).of(0), 0);
}

#[test]
fn off_cpu_intervals_are_taken_off_the_strands_they_cut() {
    let mut th = Strands::new(0);
    th.off.extend([(10, 20), (30, u64::MAX)]);
    th.off_moved();
    // Before any interval: nothing, nothing forgotten.
    assert_eq!(th.state.off_between(&mut th.off, 0, 5), 0);
    assert_eq!(th.off.len(), 2);
    // The first whole and the open one's start up to 40.
    assert_eq!(th.state.off_between(&mut th.off, 5, 40), 10 + 10);
    assert_eq!(
        th.off.len(),
        1,
        "the ended interval is forgotten, the open one kept"
    );
}

#[test]
fn a_hit_costs_the_mean_of_the_clock_steps_with_its_fraction() {
    // A hit of ~12 ticks on a clock moving in steps of 10: gaps of 10 and 20; the gap of
    // an interruption (5000) is left out.
    let cost = HitCost::mean_below(&[10, 10, 10, 20, 10, 5000], 1000);
    assert_eq!(cost, HitCost(12 << 8));
    assert_eq!(HitCost::mean_below(&[], 1000), HitCost(0));
    // 10.5 ticks off each of 4 strands: 10, 11, 10, 11 — 42 in all, not 40 or 44.
    let mut th = StrandState::new(0);
    let half = HitCost((10 << 8) + 128);
    let skips: Vec<u64> = (0..4)
        .map(|i| th.hit_skip(i, FOLLOWS_NONE, half, (100, 0, 1000)))
        .collect();
    assert_eq!(skips, [10, 11, 10, 11]);
}

#[test]
fn empty_strands_measure_the_hit_cost_in_the_program() {
    // Probe 1's mark follows probe 0's. Hits alternate 0, 1, 2: the gap from a hit of 0 to
    // one of 1 is 13 ticks, every third gap 26 (13.0 + 13 / 3 on average), strands to 2 of
    // 100 ticks; the start-up cost is 10.
    let startup = HitCost::whole(10);
    let mut th = StrandState::new(0);
    let mut tsc = 0;
    let mut skips = Vec::new();
    for i in 0..3 * EMPTY_STRANDS_TRUSTED as u32 + 3 {
        let (probe, follows, gap) = match i % 3 {
            0 => (0, FOLLOWS_NONE, 100),
            1 => (1, 0, if i % 9 == 1 { 26 } else { 13 }),
            _ => (2, FOLLOWS_NONE, 100),
        };
        tsc += gap;
        let skip = th.hit_skip(probe, follows, startup, (tsc, 0, 1000));
        th.end(tsc, skip, TickScale::new(1.0));
        th.last = tsc;
        skips.push(skip);
    }
    // The start-up cost until 1024 empty strands were measured, then their mean.
    assert!(skips[..3 * 1000].iter().all(|&s| s == 10));
    let (sum, n) = th.empty_gaps();
    assert_eq!(n, EMPTY_STRANDS_TRUSTED + 1);
    let last: u64 = skips[skips.len() - 3..].iter().sum();
    assert!(
        (last as f64 - 3.0 * sum as f64 / n as f64).abs() <= 1.0,
        "{skips:?}"
    );
    // An interruption in an empty strand is not the hit's cost; a gap from another probe
    // (not the one before the mark) is a strand, not measured.
    let mut th = StrandState::new(0);
    th.hit_skip(0, FOLLOWS_NONE, startup, (10, 0, 1000));
    th.last = 10;
    th.hit_skip(1, 0, startup, (5000, 0, 1000));
    th.last = 5000;
    th.hit_skip(1, 0, startup, (5013, 0, 1000));
    assert_eq!(th.empty.totals(), (0, 0));
}

#[test]
fn the_short_path_gives_what_the_general_one_does() {
    // Hits of probes 0-2 (1 follows 0) at gaps from 0 to 4999 ticks (some interruptions,
    // some strands shorter than the hit's cost): each cost, the hit ticks taken off and the
    // empty strands measured are the same by `end_simple` as by `hit_skip` then `end`.
    let (startup, scale) = (HitCost((12 << 8) + 77), TickScale::new(0.4));
    let (mut general, mut short) = (StrandState::new(0), StrandState::new(0));
    let mut tsc = 0;
    for i in 0..20_000u64 {
        let probe = (i * 7 % 3) as u32;
        let follows = if probe == 1 { 0 } else { FOLLOWS_NONE };
        tsc += i * i % 41 + if i % 997 == 0 { 4000 } else { 0 };
        let skip = general.hit_skip(probe, follows, startup, (tsc, 0, 1000));
        let cost = general.end(tsc, skip, scale);
        general.last = tsc;
        assert!(short.is_simple(tsc));
        let at = (tsc, 1000, if i % 2 == 0 { 1001 } else { 21 });
        let by_short = short
            .end_simple((probe, follows, startup), at, scale)
            .cost();
        assert_eq!(by_short, cost, "hit {i}");
    }
    assert_eq!(short.hit_ticks(), general.hit_ticks());
    assert_eq!(short.empty_gaps(), general.empty_gaps());
    assert!(short.empty_gaps().1 > EMPTY_STRANDS_TRUSTED);
}

#[test]
fn a_paused_strand_takes_the_general_path_once() {
    // A pause leaves ticks before `last`: the next hit is not simple; once it is reported
    // (its strand ended), the ones after it are.
    let mut th = Strands::new(0);
    th.state.pause(&mut th.off, 100, 200);
    assert!(!th.state.is_simple(250));
    // The general path's steps (`hits::general`): 100 ticks before the pause, 50 after.
    let off_cpu = th.state.off_between(&mut th.off, 200, 250);
    assert_eq!(th.state.end(250, off_cpu, TickScale::new(1.0)), 150);
    th.state.last = 250;
    assert!(th.state.is_simple(300));
}

#[test]
fn what_strands_owe_is_bounded() {
    // 10,000 empty strands owe at most OWED_AT_MOST to the long one after them.
    let mut ends: Vec<u64> = vec![0; 10_000];
    ends.push(1_000_000);
    let costs = costs(&ends, 10);
    assert_eq!(costs[10_000], 1_000_000 - 10 - OWED_AT_MOST);
}
