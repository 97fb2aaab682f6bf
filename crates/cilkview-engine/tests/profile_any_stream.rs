//! Property test: the profiling engine on arbitrary event streams — unbalanced, with dependences
//! on siblings that do not exist, closers without openers, stray iterations — never panics (in
//! debug builds the profiler checks its spans against the engine's at every frame end), and its
//! local spans on span, of the sites plus the root's and of the contexts, add up to the span.

use cilkview_engine::{CallSite, Config, Engine, Event, EventKind, RegionId};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        3 => Just(EventKind::FunctionEnter),
        3 => Just(EventKind::FunctionExit),
        3 => Just(EventKind::Spawn),
        3 => Just(EventKind::SpawnReturn),
        2 => Just(EventKind::Sync),
        2 => prop_oneof![0u64..4, Just(u64::MAX)].prop_map(|sibling| EventKind::SpawnAfter { sibling }),
        2 => prop_oneof![0u64..4, Just(u64::MAX)].prop_map(|sibling| EventKind::WaitFor { sibling }),
        1 => (0u64..3).prop_map(|grain| EventKind::LoopBegin { grain }),
        1 => Just(EventKind::IterationBegin),
        1 => Just(EventKind::IterationEnd),
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
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn any_stream_profiles_without_panic_and_adds_up(
        events in prop::collection::vec(event(), 0..60),
        tail in 0u64..1000,
    ) {
        let mut e = Engine::with_profile(Config::default());
        e.process_batch(&events);
        let snap = e.snapshot();
        e.charge(tail);
        for r in [snap, e.finish()] {
            let p = r.profile.as_ref().expect("profiling");
            let sites: u64 = p.sites.iter().map(|s| s.local_on_span.span).sum();
            prop_assert_eq!(sites + p.root().local_on_span.span, r.total.span);
            let contexts: u64 = p.contexts.iter().map(|c| c.local_on_span.span).sum();
            prop_assert_eq!(contexts, r.total.span);
        }
    }
}
