//! Property test: random series-parallel programs are turned into (a) the event stream a serial run
//! would produce and (b) an explicit dag built independently from the program text (the model of
//! `common/dag.rs`). Work, span and
//! burdened span (longest paths found by a topological sweep) must equal the engine's, for the whole
//! program and label by label. A spawn may depend on earlier siblings (`SpawnAfter`): an edge from
//! the sibling's last strand to the child's first; a strand may wait for one child alone
//! (`WaitFor`): an edge from the child's last strand to it.

use std::collections::BTreeMap;

use cilkview_engine::{Config, Engine, Measures};
use proptest::prelude::*;

mod common;
use common::dag::{Dag, Emitter, Stmt};

fn explicit(program: &[Stmt], burden: u64) -> (Measures, BTreeMap<u32, (u64, Measures)>) {
    let dag = Dag::of(program);
    let all = dag.measure(burden, |_| true);
    let total = Measures {
        work: all.work,
        span: all.span,
        burdened_span: all.burdened_span,
        spawns: dag.spawns,
        syncs: dag.syncs,
    };
    let mut regions: BTreeMap<u32, (u64, Measures)> = BTreeMap::new();
    for (i, &label) in dag.instances.iter().enumerate() {
        let inside = dag.measure(burden, |v| dag.in_regions[v].contains(&i));
        let m = Measures {
            work: inside.work,
            span: inside.span,
            burdened_span: inside.burdened_span,
            spawns: dag.instance_spawns[i],
            syncs: dag.instance_syncs[i],
        };
        let e = regions.entry(label).or_default();
        e.0 += 1;
        e.1 = e.1.then(&m);
    }
    (total, regions)
}

fn engine(
    program: &[Stmt],
    burden: u64,
    tail: u64,
) -> (Measures, BTreeMap<u32, (u64, Measures)>, u64) {
    let mut em = Emitter::default();
    em.run(program);
    em.pending += tail;
    let mut engine = Engine::new(Config { burden });
    // Feed in two batches to exercise the batch path as well.
    let half = em.events.len() / 2;
    engine.process_batch(&em.events[..half]);
    engine.process_batch(&em.events[half..]);
    engine.charge(em.pending);
    let report = engine.finish();
    assert!(report.anomalies.is_clean(), "{:?}", report.anomalies);
    let regions = report
        .regions
        .iter()
        .map(|r| (r.id.0, (r.count, r.measures)))
        .collect();
    (report.total, regions, em.events.len() as u64)
}

fn program() -> impl Strategy<Value = Vec<Stmt>> {
    let leaf = prop_oneof![
        3 => (0u64..20).prop_map(Stmt::Work),
        1 => Just(Stmt::Sync),
        1 => (0u64..4).prop_map(Stmt::WaitFor),
    ];
    let stmt = leaf.prop_recursive(5, 96, 6, |inner| {
        let body = prop::collection::vec(inner, 0..6);
        prop_oneof![
            1 => body.clone().prop_map(|body| Stmt::Call(None, body)),
            2 => (prop::collection::vec(0u64..4, 0..3), body.clone())
                .prop_map(|(after, body)| Stmt::Spawn { site: None, after, body }),
            1 => (0u64..4, prop::collection::vec((0u64..5, body.clone()), 0..9), 0u64..5).prop_map(
                |(grain, iterations, tail)| Stmt::Loop {
                    grain,
                    iterations,
                    tail
                }
            ),
            1 => (0u32..3, body).prop_map(|(label, body)| Stmt::Region { label, body }),
        ]
    });
    prop::collection::vec(stmt, 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn engine_equals_explicit_dag(program in program(), burden in prop_oneof![Just(0u64), 1u64..40, Just(15_000)], tail in 0u64..5) {
        let mut with_tail = program.clone();
        with_tail.push(Stmt::Work(tail));
        let (expected, expected_regions) = explicit(&with_tail, burden);
        let (got, got_regions, _) = engine(&program, burden, tail);
        prop_assert_eq!(got, expected);
        prop_assert_eq!(got_regions, expected_regions);
    }
}
