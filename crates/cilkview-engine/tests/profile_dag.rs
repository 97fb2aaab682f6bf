//! Property test of call-site profiles against an explicit dag (the model of `common/dag.rs`, as
//! tests/dag_model.rs uses it for work and span): random programs with call sites (the same site
//! nested in itself often, so top-call-site semantics are exercised), series-parallel but for
//! dependences between siblings (a spawn after earlier siblings, `SpawnAfter`; a strand waiting
//! for one child, `WaitFor`), become both an event stream and a dag whose nodes know the
//! invocations they ran in. Per site: invocations, on-work, on-span and local on
//! span must equal the dag's, and the local spans on span of all sites plus the root's must add up
//! to the span exactly. Sites 0 and 2 are in one caller function, 1 in another: the top-caller
//! sums must equal a scan of the dag's open invocations (every open invocation from the same
//! function made by the same function instance, i.e. the same innermost open call).
//!
//! Strand costs are random 40-bit numbers and every invocation begins with one, so the critical
//! path is unique (ties have negligible probability) and "on the span" is well defined.

use std::collections::BTreeMap;

use cilkview_engine::{Config, Engine, SiteProfile, WorkSpan};
use proptest::prelude::*;

mod common;
use common::dag::{Dag, Emitter, Key, Stmt};

#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
struct Expected {
    invocations: u64,
    invocations_on_span: u64,
    on_work: WorkSpan,
    on_span: WorkSpan,
    local_on_span: WorkSpan,
    top_caller: WorkSpan,
}

fn add(a: &mut WorkSpan, work: u64, span: u64) {
    a.work += work;
    a.span += span;
}

/// Per site key, and the root's local on span, from the dag.
fn explicit(program: &[Stmt]) -> (u64, u64, BTreeMap<Key, Expected>, WorkSpan) {
    let dag = Dag::of(program);
    let all = dag.measure(0, |_| true);
    let mut on_path = vec![false; dag.weight.len()];
    let mut v = all.end;
    while v != usize::MAX {
        on_path[v] = true;
        v = all.pred[v];
    }
    let owner = |v: usize| dag.in_invocations[v].last().copied();
    let mut sites: BTreeMap<Key, Expected> = BTreeMap::new();
    let mut root_local = WorkSpan::default();
    for (v, (&weight, &on)) in dag.weight.iter().zip(&on_path).enumerate() {
        if owner(v).is_none() {
            root_local.work += weight;
            if on {
                root_local.span += weight;
            }
        }
    }
    for (i, inv) in dag.invocations.iter().enumerate() {
        let inside = dag.measure(0, |v| dag.in_invocations[v].contains(&i));
        let (w, s) = (inside.work, inside.span);
        let on = on_path[inv.start];
        let e = sites.entry(inv.key).or_default();
        e.invocations += 1;
        if inv.top_caller {
            add(&mut e.top_caller, w, s);
        }
        if inv.top {
            add(&mut e.on_work, w, s);
            if on {
                add(&mut e.on_span, w, s);
            }
        }
        if on {
            e.invocations_on_span += 1;
            for v in (0..dag.weight.len()).filter(|&v| owner(v) == Some(i)) {
                e.local_on_span.work += dag.weight[v];
                if on_path[v] {
                    e.local_on_span.span += dag.weight[v];
                }
            }
        }
    }
    (all.work, all.span, sites, root_local)
}

fn program() -> impl Strategy<Value = Vec<Stmt>> {
    let leaf = prop_oneof![
        3 => (1u64..1 << 40).prop_map(Stmt::Work),
        1 => Just(Stmt::Sync),
        1 => (0u64..4).prop_map(Stmt::WaitFor),
    ];
    let stmt = leaf.prop_recursive(5, 96, 6, |inner| {
        let site = prop_oneof![1 => Just(None), 4 => (0u64..3).prop_map(Some)];
        // Every invocation begins with a strand of random cost: it is on the span iff its first
        // strand is.
        let body = (1u64..1 << 40, prop::collection::vec(inner, 0..6)).prop_map(|(c, mut b)| {
            b.insert(0, Stmt::Work(c));
            b
        });
        prop_oneof![
            2 => (site.clone(), body.clone()).prop_map(|(s, b)| Stmt::Call(s, b)),
            3 => (site, prop::collection::vec(0u64..4, 0..3), body.clone())
                .prop_map(|(site, after, body)| Stmt::Spawn { site, after, body }),
            1 => (0u64..4, prop::collection::vec((0u64..5, body), 0..7), 0u64..5).prop_map(
                |(grain, iterations, tail)| Stmt::Loop { grain, iterations, tail }
            ),
        ]
    });
    prop::collection::vec(stmt, 0..8)
}

fn got(program: &[Stmt]) -> (u64, u64, BTreeMap<Key, Expected>, WorkSpan, u64) {
    let mut em = Emitter::default();
    em.run(program);
    let mut engine = Engine::with_profile(Config::default());
    engine.process_batch(&em.events);
    engine.charge(em.pending);
    let r = engine.finish();
    assert!(r.anomalies.is_clean());
    let p = r.profile.expect("profiling");
    let sites = p
        .sites
        .iter()
        .map(|s: &SiteProfile| {
            let e = Expected {
                invocations: s.invocations,
                invocations_on_span: s.invocations_on_span,
                on_work: s.on_work,
                on_span: s.on_span,
                local_on_span: s.local_on_span,
                top_caller: s.top_caller,
            };
            ((s.kind, s.site.key() - 1), e)
        })
        .collect();
    let contexts_local: u64 = p.contexts.iter().map(|c| c.local_on_span.span).sum();
    (
        r.total.work,
        r.total.span,
        sites,
        p.root().local_on_span,
        contexts_local,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn profile_equals_explicit_dag(program in program()) {
        let (work, span, expected, root) = explicit(&program);
        let (got_work, got_span, sites, got_root, contexts_local) = got(&program);
        prop_assert_eq!((got_work, got_span), (work, span));
        prop_assert_eq!(&sites, &expected);
        prop_assert_eq!(got_root, root);
        let locals: u64 = sites.values().map(|e| e.local_on_span.span).sum();
        prop_assert_eq!(locals + got_root.span, span);
        prop_assert_eq!(contexts_local, span);
    }
}
