//! Property test of call-site profiles against an explicit dag (as tests/dag_model.rs does for work
//! and span): random series-parallel programs with call sites (the same site nested in itself
//! often, so top-call-site semantics are exercised) become both an event stream and a dag whose
//! nodes know the invocations they ran in. Per site: invocations, on-work, on-span and local on
//! span must equal the dag's, and the local spans on span of all sites plus the root's must add up
//! to the span exactly. Sites 0 and 2 are in one caller function, 1 in another: the top-caller
//! sums must equal a scan of the dag's open invocations (every open invocation from the same
//! function made by the same function instance, i.e. the same innermost open call).
//!
//! Strand costs are random 40-bit numbers and every invocation begins with one, so the critical
//! path is unique (ties have negligible probability) and "on the span" is well defined.

use std::collections::BTreeMap;

use cilkview_engine::{
    CallSite, Config, Engine, Event, EventKind, SiteKind, SiteProfile, WorkSpan,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Stmt {
    Work(u64),
    Call(Option<u64>, Vec<Stmt>),
    Spawn(Option<u64>, Vec<Stmt>),
    Sync,
    Loop {
        grain: u64,
        iterations: Vec<(u64, Vec<Stmt>)>,
        tail: u64,
    },
}

// ---------------------------------------------------------------- (a) the event stream

#[derive(Default)]
struct Emitter {
    pending: u64,
    events: Vec<Event>,
}

impl Emitter {
    fn emit(&mut self, kind: EventKind, site: Option<u64>) {
        let cost = std::mem::take(&mut self.pending);
        let site = site.and_then(|s| Some(CallSite::new(s + 1)?.in_function(function(s))));
        self.events.push(Event::at(cost, kind, site));
    }

    fn run(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Work(c) => self.pending += c,
                Stmt::Call(site, body) => {
                    self.emit(EventKind::FunctionEnter, *site);
                    self.run(body);
                    self.emit(EventKind::FunctionExit, None);
                }
                Stmt::Spawn(site, body) => {
                    self.emit(EventKind::Spawn, *site);
                    self.run(body);
                    self.emit(EventKind::SpawnReturn, None);
                }
                Stmt::Sync => self.emit(EventKind::Sync, None),
                Stmt::Loop {
                    grain,
                    iterations,
                    tail,
                } => {
                    self.emit(EventKind::LoopBegin { grain: *grain }, None);
                    for (control, body) in iterations {
                        self.pending += control;
                        self.emit(EventKind::IterationBegin, None);
                        self.run(body);
                        self.emit(EventKind::IterationEnd, None);
                    }
                    self.pending += tail;
                    self.emit(EventKind::LoopEnd, None);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- (b) the explicit dag

type Key = (SiteKind, u64);

/// The caller function of site `s`: sites 0 and 2 share one.
fn function(s: u64) -> u64 {
    s % 2 + 1
}

struct Invocation {
    key: Key,
    top: bool,
    top_caller: bool,
    /// The function instance that made it: the innermost open call (0: the root).
    caller: usize,
    start: usize,
}

#[derive(Default)]
struct Dag {
    weight: Vec<u64>,
    /// Sited invocations each node ran in (outermost first).
    inside: Vec<Vec<usize>>,
    edges: Vec<(usize, usize)>,
    invocations: Vec<Invocation>,
    active: Vec<usize>,
    /// Open calls (function instances), innermost last, and how many calls began so far.
    calls: Vec<usize>,
    called: usize,
}

struct Frame {
    cur: usize,
    children: Vec<usize>,
}

impl Dag {
    fn node(&mut self, weight: u64) -> usize {
        self.weight.push(weight);
        self.inside.push(self.active.clone());
        self.weight.len() - 1
    }

    fn join(&mut self, f: &mut Frame) {
        let n = self.node(0);
        self.edges.push((f.cur, n));
        for c in std::mem::take(&mut f.children) {
            self.edges.push((c, n));
        }
        f.cur = n;
    }

    fn instance(&mut self, from: usize, key: Option<Key>, call: bool, body: &[Stmt]) -> usize {
        let caller = self.calls.last().copied().unwrap_or(0);
        if let Some(key) = key {
            let top = !self.active.iter().any(|&i| self.invocations[i].key == key);
            let same_caller = self.active.iter().all(|&i| {
                let y = &self.invocations[i];
                function(y.key.1) != function(key.1) || y.caller == caller
            });
            self.invocations.push(Invocation {
                key,
                top,
                top_caller: top && same_caller,
                caller,
                start: self.weight.len(),
            });
            self.active.push(self.invocations.len() - 1);
        }
        if call {
            self.called += 1;
            self.calls.push(self.called);
        }
        let start = self.node(0);
        self.edges.push((from, start));
        let mut g = Frame {
            cur: start,
            children: Vec::new(),
        };
        self.exec(body, &mut g);
        self.join(&mut g);
        if key.is_some() {
            self.active.pop();
        }
        if call {
            self.calls.pop();
        }
        g.cur
    }

    fn exec(&mut self, stmts: &[Stmt], f: &mut Frame) {
        for s in stmts {
            match s {
                Stmt::Work(c) => self.weight[f.cur] += c,
                Stmt::Call(site, body) => {
                    let end = self.instance(f.cur, site.map(|s| (SiteKind::Call, s)), true, body);
                    let after = self.node(0);
                    self.edges.push((end, after));
                    f.cur = after;
                }
                Stmt::Spawn(site, body) => {
                    let end = self.instance(f.cur, site.map(|s| (SiteKind::Spawn, s)), false, body);
                    f.children.push(end);
                    let continuation = self.node(0);
                    self.edges.push((f.cur, continuation));
                    f.cur = continuation;
                }
                Stmt::Sync => self.join(f),
                Stmt::Loop {
                    grain,
                    iterations,
                    tail,
                } => {
                    // Chunks of `grain` iterations run serially; chunks run in parallel (the
                    // divide-and-conquer tree adds no weight to the unburdened dag).
                    let grain = (*grain).max(1) as usize;
                    let fork = self.node(0);
                    self.edges.push((f.cur, fork));
                    let join = self.node(0);
                    let mut cur: Option<usize> = None;
                    for (i, (control, body)) in iterations.iter().enumerate() {
                        let n = self.node(*control);
                        self.edges.push((cur.unwrap_or(fork), n));
                        let end = self.instance(n, None, false, body);
                        cur = Some(end);
                        if (i + 1) % grain == 0 {
                            self.edges.push((end, join));
                            cur = None;
                        }
                    }
                    let t = self.node(*tail);
                    self.edges.push((cur.unwrap_or(fork), t));
                    match cur {
                        Some(_) => self.edges.push((t, join)),
                        None => {
                            // The tail runs after the loop.
                            self.edges.push((join, t));
                        }
                    }
                    let after = self.node(0);
                    self.edges
                        .push((if cur.is_some() { join } else { t }, after));
                    self.edges.push((fork, join));
                    f.cur = after;
                }
            }
        }
    }

    /// Work and span of the nodes `keep` accepts; with the predecessor on a longest path of each.
    fn measure(&self, keep: impl Fn(usize) -> bool) -> (u64, u64, Vec<usize>, usize) {
        let n = self.weight.len();
        let mut indegree = vec![0usize; n];
        let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(a, b) in &self.edges {
            if keep(a) && keep(b) {
                indegree[b] += 1;
                out[a].push(b);
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&v| keep(v) && indegree[v] == 0).collect();
        let mut span = vec![0u64; n];
        let mut pred = vec![usize::MAX; n];
        let (mut work, mut best, mut end) = (0, 0, usize::MAX);
        while let Some(v) = ready.pop() {
            span[v] += self.weight[v];
            work += self.weight[v];
            if span[v] >= best {
                best = span[v];
                end = v;
            }
            for &w in &out[v] {
                if span[v] >= span[w] {
                    span[w] = span[v];
                    pred[w] = v;
                }
                indegree[w] -= 1;
                if indegree[w] == 0 {
                    ready.push(w);
                }
            }
        }
        (work, best, pred, end)
    }
}

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
    let mut dag = Dag::default();
    let mut root = Frame {
        cur: dag.node(0),
        children: Vec::new(),
    };
    dag.exec(program, &mut root);
    dag.join(&mut root);
    let (work, span, pred, end) = dag.measure(|_| true);
    let mut on_path = vec![false; dag.weight.len()];
    let mut v = end;
    while v != usize::MAX {
        on_path[v] = true;
        v = pred[v];
    }
    let owner = |v: usize| dag.inside[v].last().copied();
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
        let (w, s, _, _) = dag.measure(|v| dag.inside[v].contains(&i));
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
    (work, span, sites, root_local)
}

fn program() -> impl Strategy<Value = Vec<Stmt>> {
    let leaf = prop_oneof![
        3 => (1u64..1 << 40).prop_map(Stmt::Work),
        1 => Just(Stmt::Sync),
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
            3 => (site, body.clone()).prop_map(|(s, b)| Stmt::Spawn(s, b)),
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
