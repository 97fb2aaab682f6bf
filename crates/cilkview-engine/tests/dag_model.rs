//! Property test: random series-parallel programs are turned into (a) the event stream a serial run
//! would produce and (b) an explicit dag built independently from the program text. Work, span and
//! burdened span (longest paths found by a topological sweep) must equal the engine's, for the whole
//! program and label by label. A spawn may depend on earlier siblings (`SpawnAfter`): an edge from
//! the sibling's last strand to the child's first; a strand may wait for one child alone
//! (`WaitFor`): an edge from the child's last strand to it.

use std::collections::BTreeMap;

use cilkview_engine::{Config, Engine, Event, EventKind, Measures, RegionId};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Stmt {
    Work(u64),
    Call(Vec<Stmt>),
    /// A spawned child that starts after the siblings `after` (ordinals among the children spawned
    /// since the frame's last sync; one that does not exist is no constraint).
    Spawn {
        after: Vec<u64>,
        body: Vec<Stmt>,
    },
    Sync,
    /// The strand after it starts after the child `0` (an ordinal as `Spawn`'s `after`) ends.
    WaitFor(u64),
    /// `iterations[i] = (cost of the loop control before iteration i, body)`; `tail` runs after the
    /// last iteration.
    Loop {
        grain: u64,
        iterations: Vec<(u64, Vec<Stmt>)>,
        tail: u64,
    },
    Region {
        label: u32,
        body: Vec<Stmt>,
    },
}

// ---------------------------------------------------------------- (a) the event stream

#[derive(Default)]
struct Emitter {
    pending: u64,
    events: Vec<Event>,
}

impl Emitter {
    fn emit(&mut self, kind: EventKind) {
        self.events
            .push(Event::new(std::mem::take(&mut self.pending), kind));
    }

    fn run(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Work(c) => self.pending += c,
                Stmt::Call(body) => {
                    self.emit(EventKind::FunctionEnter);
                    self.run(body);
                    self.emit(EventKind::FunctionExit);
                }
                Stmt::Spawn { after, body } => {
                    for &sibling in after {
                        self.emit(EventKind::SpawnAfter { sibling });
                    }
                    self.emit(EventKind::Spawn);
                    self.run(body);
                    self.emit(EventKind::SpawnReturn);
                }
                Stmt::Sync => self.emit(EventKind::Sync),
                Stmt::WaitFor(sibling) => self.emit(EventKind::WaitFor { sibling: *sibling }),
                Stmt::Loop {
                    grain,
                    iterations,
                    tail,
                } => {
                    self.emit(EventKind::LoopBegin { grain: *grain });
                    for (control, body) in iterations {
                        self.pending += control;
                        self.emit(EventKind::IterationBegin);
                        self.run(body);
                        self.emit(EventKind::IterationEnd);
                    }
                    self.pending += tail;
                    self.emit(EventKind::LoopEnd);
                }
                Stmt::Region { label, body } => {
                    self.emit(EventKind::RegionBegin(RegionId(*label)));
                    self.run(body);
                    self.emit(EventKind::RegionEnd(RegionId(*label)));
                }
            }
        }
    }
}

// ---------------------------------------------------------------- (b) the explicit dag

#[derive(Default)]
struct Dag {
    weight: Vec<u64>,
    /// Region instances each node belongs to.
    inside: Vec<Vec<usize>>,
    /// (from, to, is a continuation edge carrying a burden)
    edges: Vec<(usize, usize, bool)>,
    /// Label of each region instance.
    instances: Vec<u32>,
    active: Vec<usize>,
    spawns: u64,
    syncs: u64,
    instance_spawns: Vec<u64>,
    instance_syncs: Vec<u64>,
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

    fn edge(&mut self, from: usize, to: usize, burden: bool) {
        self.edges.push((from, to, burden));
    }

    fn count_spawn(&mut self) {
        self.spawns += 1;
        for &r in &self.active {
            self.instance_spawns[r] += 1;
        }
    }

    fn count_sync(&mut self) {
        self.syncs += 1;
        for &r in &self.active {
            self.instance_syncs[r] += 1;
        }
    }

    /// A new strand after the current one (every event ends a strand).
    fn step(&mut self, f: &mut Frame) {
        let n = self.node(0);
        self.edge(f.cur, n, false);
        f.cur = n;
    }

    fn join(&mut self, f: &mut Frame, explicit: bool) {
        if explicit || !f.children.is_empty() {
            self.count_sync();
        }
        let n = self.node(0);
        self.edge(f.cur, n, false);
        for c in std::mem::take(&mut f.children) {
            self.edge(c, n, false);
        }
        f.cur = n;
    }

    /// Runs `body` as a new function instance starting after `f.cur` (and the nodes `after`);
    /// returns its last node.
    fn instance(&mut self, from: usize, after: &[usize], body: &[Stmt]) -> usize {
        let start = self.node(0);
        self.edge(from, start, false);
        for &a in after {
            self.edge(a, start, false);
        }
        let mut g = Frame {
            cur: start,
            children: Vec::new(),
        };
        self.exec(body, &mut g);
        self.join(&mut g, false);
        g.cur
    }

    fn exec(&mut self, stmts: &[Stmt], f: &mut Frame) {
        for s in stmts {
            match s {
                Stmt::Work(c) => self.weight[f.cur] += c,
                Stmt::Call(body) => {
                    let end = self.instance(f.cur, &[], body);
                    let after = self.node(0);
                    self.edge(end, after, false);
                    f.cur = after;
                }
                Stmt::Spawn { after, body } => {
                    // Each dependence is an event: a strand ends there.
                    for _ in after {
                        self.step(f);
                    }
                    let after: Vec<usize> = after
                        .iter()
                        .filter_map(|&j| f.children.get(j as usize).copied())
                        .collect();
                    self.count_spawn();
                    let end = self.instance(f.cur, &after, body);
                    f.children.push(end);
                    let continuation = self.node(0);
                    self.edge(f.cur, continuation, true);
                    f.cur = continuation;
                }
                Stmt::Sync => self.join(f, true),
                Stmt::WaitFor(j) => {
                    self.step(f);
                    if let Some(&child) = f.children.get(*j as usize) {
                        self.edge(child, f.cur, false);
                    }
                }
                Stmt::Loop {
                    grain,
                    iterations,
                    tail,
                } => self.parallel_loop(f, (*grain).max(1), iterations, *tail),
                Stmt::Region { label, body } => {
                    self.instances.push(*label);
                    self.instance_spawns.push(0);
                    self.instance_syncs.push(0);
                    self.active.push(self.instances.len() - 1);
                    self.step(f);
                    self.exec(body, f);
                    self.active.pop();
                    self.step(f);
                }
            }
        }
    }

    fn parallel_loop(
        &mut self,
        f: &mut Frame,
        grain: u64,
        iterations: &[(u64, Vec<Stmt>)],
        tail: u64,
    ) {
        let mut chunks: Vec<(usize, usize)> = Vec::new();
        let mut open: Option<(usize, usize)> = None; // (entry, current)
        for (i, (control, body)) in iterations.iter().enumerate() {
            let (entry, cur) = match open {
                None => {
                    let s = self.node(*control);
                    (s, s)
                }
                Some((entry, cur)) => {
                    let n = self.node(*control);
                    self.edge(cur, n, false);
                    (entry, n)
                }
            };
            let end = self.instance(cur, &[], body);
            open = Some((entry, end));
            if (i as u64 + 1) % grain == 0 {
                chunks.push(open.take().unwrap());
            }
        }
        let after_weight = match open {
            Some((entry, cur)) => {
                let t = self.node(tail);
                self.edge(cur, t, false);
                chunks.push((entry, t));
                0
            }
            None => tail,
        };
        let after = self.node(after_weight);
        if chunks.is_empty() {
            self.edge(f.cur, after, false);
        } else {
            let (entry, exit) = self.tree(&chunks);
            self.edge(f.cur, entry, false);
            self.edge(exit, after, false);
        }
        f.cur = after;
        self.step(f);
    }

    /// The divide-and-conquer tree: the left part (the largest power of two of chunks smaller than
    /// the whole) is spawned, the right part is the continuation.
    fn tree(&mut self, chunks: &[(usize, usize)]) -> (usize, usize) {
        if chunks.len() == 1 {
            return chunks[0];
        }
        let mut left = 1;
        while left * 2 < chunks.len() {
            left *= 2;
        }
        let (le, lx) = self.tree(&chunks[..left]);
        let (re, rx) = self.tree(&chunks[left..]);
        self.count_spawn();
        self.count_sync();
        let p = self.node(0);
        let j = self.node(0);
        self.edge(p, le, false);
        self.edge(p, re, true);
        self.edge(lx, j, false);
        self.edge(rx, j, false);
        (p, j)
    }

    /// Work, span and burdened span of the sub-dag induced by the nodes `keep` accepts.
    fn measure(&self, burden: u64, keep: impl Fn(usize) -> bool) -> (u64, u64, u64) {
        let n = self.weight.len();
        let mut indegree = vec![0usize; n];
        let mut out: Vec<Vec<(usize, bool)>> = vec![Vec::new(); n];
        for &(a, b, burdened) in &self.edges {
            if keep(a) && keep(b) {
                indegree[b] += 1;
                out[a].push((b, burdened));
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&v| keep(v) && indegree[v] == 0).collect();
        let mut span = vec![0u64; n];
        let mut bspan = vec![0u64; n];
        let (mut work, mut best, mut bbest) = (0, 0, 0);
        while let Some(v) = ready.pop() {
            span[v] += self.weight[v];
            bspan[v] += self.weight[v];
            work += self.weight[v];
            best = best.max(span[v]);
            bbest = bbest.max(bspan[v]);
            for &(w, burdened) in &out[v] {
                span[w] = span[w].max(span[v]);
                bspan[w] = bspan[w].max(bspan[v] + if burdened { burden } else { 0 });
                indegree[w] -= 1;
                if indegree[w] == 0 {
                    ready.push(w);
                }
            }
        }
        (work, best, bbest)
    }
}

fn explicit(program: &[Stmt], burden: u64) -> (Measures, BTreeMap<u32, (u64, Measures)>) {
    let mut dag = Dag::default();
    let mut root = Frame {
        cur: dag.node(0),
        children: Vec::new(),
    };
    dag.exec(program, &mut root);
    dag.join(&mut root, false);
    let (work, span, burdened_span) = dag.measure(burden, |_| true);
    let total = Measures {
        work,
        span,
        burdened_span,
        spawns: dag.spawns,
        syncs: dag.syncs,
    };
    let mut regions: BTreeMap<u32, (u64, Measures)> = BTreeMap::new();
    for (i, &label) in dag.instances.iter().enumerate() {
        let (work, span, burdened_span) = dag.measure(burden, |v| dag.inside[v].contains(&i));
        let m = Measures {
            work,
            span,
            burdened_span,
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
            1 => body.clone().prop_map(Stmt::Call),
            2 => (prop::collection::vec(0u64..4, 0..3), body.clone())
                .prop_map(|(after, body)| Stmt::Spawn { after, body }),
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
