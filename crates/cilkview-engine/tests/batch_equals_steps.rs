//! Property tests: the engine's batch loops (`Engine::process_batch`: unprofiled, which handles the
//! common events in line and the others by the general step; profiling, which takes the profiler
//! out once per batch and handles leaf calls and iterations and regions that hold one strand in
//! line) give the same report, profile included, anomalies and intermediate snapshots as the events
//! given one by one (`Engine::process`), on arbitrary streams — unbalanced, closers without
//! openers, stray iterations, dependences on siblings that do not exist, regions that hold one
//! strand — cut into batches anywhere; and the same for events stepped one by one with the batch
//! loop's code (`Engine::step_in`, as the session's hot loop hands them over).

use cilkview_engine::{CallSite, Config, Engine, Event, EventKind, RegionId};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        4 => Just(EventKind::FunctionEnter),
        4 => Just(EventKind::FunctionExit),
        3 => Just(EventKind::Spawn),
        3 => Just(EventKind::SpawnReturn),
        2 => Just(EventKind::Sync),
        1 => prop_oneof![0u64..4, Just(u64::MAX)].prop_map(|sibling| EventKind::SpawnAfter { sibling }),
        1 => prop_oneof![0u64..4, Just(u64::MAX)].prop_map(|sibling| EventKind::WaitFor { sibling }),
        1 => (0u64..3).prop_map(|grain| EventKind::LoopBegin { grain }),
        3 => Just(EventKind::IterationBegin),
        3 => Just(EventKind::IterationEnd),
        1 => Just(EventKind::LoopEnd),
        1 => (0u32..2).prop_map(|r| EventKind::RegionBegin(RegionId(r))),
        1 => (0u32..2).prop_map(|r| EventKind::RegionEnd(RegionId(r))),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    (0u64..1000, kind()).prop_map(|(cost, kind)| Event::new(cost, kind))
}

/// One event, or a region's begin and its end back to back (a region that holds one strand,
/// which the batch loop measures at its begin), as often.
fn event_or_strand_region() -> impl Strategy<Value = Vec<Event>> {
    prop_oneof![
        event().prop_map(|e| vec![e]),
        (0u64..1000, 0u64..1000, 0u32..2).prop_map(|(begin, end, r)| vec![
            Event::new(begin, EventKind::RegionBegin(RegionId(r))),
            Event::new(end, EventKind::RegionEnd(RegionId(r))),
        ]),
    ]
}

/// An event at one of four call sites, or none.
fn event_at_site() -> impl Strategy<Value = Event> {
    (0u64..1000, kind(), prop::option::of(1u64..5))
        .prop_map(|(cost, kind, site)| Event::at(cost, kind, site.and_then(CallSite::new)))
}

/// An event at a site (or none), or a region that holds one strand, as often.
fn event_at_site_or_strand_region() -> impl Strategy<Value = Vec<Event>> {
    prop_oneof![
        event_at_site().prop_map(|e| vec![e]),
        event_or_strand_region(),
    ]
}

/// `events` given to `one` one by one and to `batched` in batches ending at `cuts`, then `tail`
/// charged to both: their states after each batch and their reports are the same.
fn batches_agree(
    mut one: Engine,
    mut batched: Engine,
    events: &[Event],
    cuts: Vec<usize>,
    tail: u64,
) -> Result<(), TestCaseError> {
    let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(events.len())).collect();
    cuts.sort_unstable();
    cuts.push(events.len());
    let mut from = 0;
    for &to in &cuts {
        for e in &events[from..to] {
            one.process(*e);
        }
        batched.process_batch(&events[from..to]);
        from = to;
        prop_assert_eq!(one.events(), batched.events());
        prop_assert_eq!(one.cost_so_far(), batched.cost_so_far());
        prop_assert_eq!(one.anomalies(), batched.anomalies());
        prop_assert_eq!(one.depth(), batched.depth());
        prop_assert_eq!(one.children_out(), batched.children_out());
        prop_assert_eq!(one.snapshot(), batched.snapshot());
    }
    one.charge(tail);
    batched.charge(tail);
    prop_assert_eq!(one.finish(), batched.finish());
    Ok(())
}

/// `events` given to `one` one by one and to `stepped` by [`Engine::step_in`], its state held in
/// a [`cilkview_engine::Steps`] settled at `cuts`: the anomaly count agrees after each event
/// (a caller reads it between steps, unsettled) and moves only when the step says it took the
/// general step, the rest agrees at each cut and in the reports.
fn steps_agree(
    mut one: Engine,
    mut stepped: Engine,
    events: &[Event],
    cuts: &[usize],
) -> Result<(), TestCaseError> {
    let mut steps = stepped.steps();
    for (i, e) in events.iter().enumerate() {
        one.process(*e);
        let before = stepped.anomaly_count();
        let general = stepped.step_in(&mut steps, *e);
        prop_assert_eq!(one.anomaly_count(), stepped.anomaly_count());
        // Only the general step counts anomalies (a caller looks for them only after it).
        prop_assert!(
            general || stepped.anomaly_count() == before,
            "{:?} at {}",
            e,
            i
        );
        if cuts.contains(&i) {
            stepped.settle(steps);
            prop_assert_eq!(one.cost_so_far(), stepped.cost_so_far());
            prop_assert_eq!(one.depth(), stepped.depth());
            prop_assert_eq!(one.children_out(), stepped.children_out());
            prop_assert_eq!(one.snapshot(), stepped.snapshot());
            steps = stepped.steps();
        }
    }
    stepped.settle(steps);
    prop_assert_eq!(one.events(), stepped.events());
    prop_assert_eq!(one.anomalies(), stepped.anomalies());
    prop_assert_eq!(one.finish(), stepped.finish());
    Ok(())
}

/// `events` given to `one` one by one and to `stopping` by
/// [`Engine::process_batch_until_anomaly`], again from where it stopped: it stops after each
/// event that raised the anomaly count (and after the last event), nowhere else, and the two
/// engines agree there and in their reports.
fn stops_agree(
    mut one: Engine,
    mut stopping: Engine,
    events: &[Event],
) -> Result<(), TestCaseError> {
    let mut from = 0;
    while from < events.len() {
        let n = stopping.process_batch_until_anomaly(&events[from..]);
        prop_assert!(n >= 1 && from + n <= events.len());
        for (i, e) in events[from..from + n].iter().enumerate() {
            let before = one.anomaly_count();
            one.process(*e);
            let raised = one.anomaly_count() != before;
            let last = i + 1 == n;
            prop_assert!(!raised || last, "went on after an anomaly at {}", from + i);
            prop_assert!(
                raised || !last || from + n == events.len(),
                "stopped at {}",
                from + i
            );
        }
        from += n;
        prop_assert_eq!(one.events(), stopping.events());
        prop_assert_eq!(one.anomaly_count(), stopping.anomaly_count());
        prop_assert_eq!(one.anomalies(), stopping.anomalies());
        prop_assert_eq!(one.snapshot(), stopping.snapshot());
    }
    prop_assert_eq!(stopping.process_batch_until_anomaly(&[]), 0);
    prop_assert_eq!(one.finish(), stopping.finish());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn batches_equal_single_events(
        events in prop::collection::vec(event(), 0..80),
        cuts in prop::collection::vec(0usize..80, 0..4),
        burden in prop_oneof![Just(0u64), 1u64..40, Just(15_000)],
        tail in 0u64..1000,
    ) {
        let config = Config { burden };
        batches_agree(Engine::new(config), Engine::new(config), &events, cuts, tail)?;
    }

    #[test]
    fn steps_equal_single_events(
        events in prop::collection::vec(event(), 0..80),
        cuts in prop::collection::vec(0usize..80, 0..4),
        burden in prop_oneof![Just(0u64), 1u64..40, Just(15_000)],
    ) {
        let config = Config { burden };
        steps_agree(Engine::new(config), Engine::new(config), &events, &cuts)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn batches_equal_single_events_with_strand_regions(
        parts in prop::collection::vec(event_or_strand_region(), 0..60),
        cuts in prop::collection::vec(0usize..100, 0..4),
        burden in prop_oneof![Just(0u64), 1u64..40, Just(15_000)],
        tail in 0u64..1000,
    ) {
        let config = Config { burden };
        let events = parts.concat();
        batches_agree(Engine::new(config), Engine::new(config), &events, cuts, tail)?;
    }

    #[test]
    fn profiled_batches_equal_single_events(
        events in prop::collection::vec(event_at_site(), 0..80),
        cuts in prop::collection::vec(0usize..80, 0..4),
        tail in 0u64..1000,
    ) {
        let one = Engine::with_profile(Config::default());
        let batched = Engine::with_profile(Config::default());
        batches_agree(one, batched, &events, cuts, tail)?;
    }

    #[test]
    fn profiled_batches_equal_single_events_with_strand_regions(
        parts in prop::collection::vec(event_at_site_or_strand_region(), 0..60),
        cuts in prop::collection::vec(0usize..100, 0..4),
        tail in 0u64..1000,
    ) {
        let events = parts.concat();
        let one = Engine::with_profile(Config::default());
        let batched = Engine::with_profile(Config::default());
        batches_agree(one, batched, &events, cuts, tail)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn batches_stop_at_each_anomaly(
        events in prop::collection::vec(event_at_site(), 0..80),
        profiled in any::<bool>(),
    ) {
        let engine = || match profiled {
            true => Engine::with_profile(Config::default()),
            false => Engine::new(Config::default()),
        };
        stops_agree(engine(), engine(), &events)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn profiled_batches_stop_at_each_anomaly_with_strand_regions(
        parts in prop::collection::vec(event_at_site_or_strand_region(), 0..60),
    ) {
        let events = parts.concat();
        let engine = || Engine::with_profile(Config::default());
        stops_agree(engine(), engine(), &events)?;
    }
}
