//! Property test: the profiling engine's batch loop (`Engine::process_batch` with profiles, which
//! takes the profiler out once per batch and handles leaf calls and iterations in line) gives
//! the same report, profile included, anomalies and intermediate snapshots as the events given
//! one by one (`Engine::process`), on arbitrary streams cut into batches anywhere.

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
    (0u64..1000, kind(), prop::option::of(1u64..5))
        .prop_map(|(cost, kind, site)| Event::at(cost, kind, site.and_then(CallSite::new)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn profiled_batches_equal_single_events(
        events in prop::collection::vec(event(), 0..80),
        cuts in prop::collection::vec(0usize..80, 0..4),
        tail in 0u64..1000,
    ) {
        let mut one = Engine::with_profile(Config::default());
        let mut batched = Engine::with_profile(Config::default());
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
    }
}
