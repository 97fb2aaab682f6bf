//! The reference model of the property tests (`dag_model.rs`, `profile_dag.rs`): a random
//! series-parallel program ([`Stmt`]) becomes (a) the event stream a serial run would produce
//! ([`Emitter`]) and (b) an explicit dag built independently from the program text ([`Dag`]),
//! whose longest paths (a topological sweep, [`Dag::measure`]) are what the engine must find.

use cilkview_engine::{CallSite, Event, EventKind, RegionId, SiteKind};

#[derive(Clone, Debug)]
pub enum Stmt {
    Work(u64),
    /// A call, at a call site or none.
    Call(Option<u64>, Vec<Stmt>),
    /// A spawned child (at a call site or none) that starts after the siblings `after`
    /// (ordinals among the children spawned since the frame's last sync; one that does not exist
    /// is no constraint).
    Spawn {
        site: Option<u64>,
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

/// The caller function of call site `s`: sites 0 and 2 share one.
pub fn function(s: u64) -> u64 {
    s % 2 + 1
}

// ---------------------------------------------------------------- (a) the event stream

#[derive(Default)]
pub struct Emitter {
    pub pending: u64,
    pub events: Vec<Event>,
}

impl Emitter {
    fn emit(&mut self, kind: EventKind, site: Option<u64>) {
        let cost = std::mem::take(&mut self.pending);
        let site = site.and_then(|s| Some(CallSite::new(s + 1)?.in_function(function(s))));
        self.events.push(Event::at(cost, kind, site));
    }

    pub fn run(&mut self, stmts: &[Stmt]) {
        for s in stmts {
            match s {
                Stmt::Work(c) => self.pending += c,
                Stmt::Call(site, body) => {
                    self.emit(EventKind::FunctionEnter, *site);
                    self.run(body);
                    self.emit(EventKind::FunctionExit, None);
                }
                Stmt::Spawn { site, after, body } => {
                    for &sibling in after {
                        self.emit(EventKind::SpawnAfter { sibling }, None);
                    }
                    self.emit(EventKind::Spawn, *site);
                    self.run(body);
                    self.emit(EventKind::SpawnReturn, None);
                }
                Stmt::Sync => self.emit(EventKind::Sync, None),
                Stmt::WaitFor(sibling) => self.emit(EventKind::WaitFor { sibling: *sibling }, None),
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
                Stmt::Region { label, body } => {
                    self.emit(EventKind::RegionBegin(RegionId(*label)), None);
                    self.run(body);
                    self.emit(EventKind::RegionEnd(RegionId(*label)), None);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- (b) the explicit dag

/// A call site's kind and number.
pub type Key = (SiteKind, u64);

/// An invocation at a call site.
pub struct Invocation {
    pub key: Key,
    /// No invocation of the same site is open around it.
    pub top: bool,
    /// Top, and every open invocation from the same caller function was made by the same
    /// function instance.
    pub top_caller: bool,
    /// The function instance that made it: the innermost open call (0: the root).
    pub caller: usize,
    /// Its first node.
    pub start: usize,
}

#[derive(Default)]
pub struct Dag {
    pub weight: Vec<u64>,
    /// Region instances each node belongs to.
    pub in_regions: Vec<Vec<usize>>,
    /// Sited invocations each node ran in (outermost first).
    pub in_invocations: Vec<Vec<usize>>,
    /// (from, to, is a continuation edge carrying a burden)
    pub edges: Vec<(usize, usize, bool)>,
    /// Label of each region instance.
    pub instances: Vec<u32>,
    pub invocations: Vec<Invocation>,
    pub spawns: u64,
    pub syncs: u64,
    pub instance_spawns: Vec<u64>,
    pub instance_syncs: Vec<u64>,
    active_regions: Vec<usize>,
    active_invocations: Vec<usize>,
    /// Open calls (function instances), innermost last, and how many calls began so far.
    calls: Vec<usize>,
    called: usize,
}

struct Frame {
    cur: usize,
    children: Vec<usize>,
}

/// What [`Dag::measure`] finds in a sub-dag.
pub struct Paths {
    pub work: u64,
    pub span: u64,
    pub burdened_span: u64,
    /// The predecessor of each node on a longest (unburdened) path to it (`usize::MAX`: none).
    pub pred: Vec<usize>,
    /// The last node of a longest path.
    pub end: usize,
}

impl Dag {
    /// The dag of `program` run from a root frame.
    pub fn of(program: &[Stmt]) -> Dag {
        let mut dag = Dag::default();
        let mut root = Frame {
            cur: dag.node(0),
            children: Vec::new(),
        };
        dag.exec(program, &mut root);
        dag.join(&mut root, false);
        dag
    }

    fn node(&mut self, weight: u64) -> usize {
        self.weight.push(weight);
        self.in_regions.push(self.active_regions.clone());
        self.in_invocations.push(self.active_invocations.clone());
        self.weight.len() - 1
    }

    fn edge(&mut self, from: usize, to: usize, burden: bool) {
        self.edges.push((from, to, burden));
    }

    fn count_spawn(&mut self) {
        self.spawns += 1;
        for &r in &self.active_regions {
            self.instance_spawns[r] += 1;
        }
    }

    fn count_sync(&mut self) {
        self.syncs += 1;
        for &r in &self.active_regions {
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

    /// Runs `body` as a new function instance (a call when `call`) at call site `key`, starting
    /// after `from` (and the nodes `after`); returns its last node.
    fn instance(
        &mut self,
        from: usize,
        after: &[usize],
        key: Option<Key>,
        call: bool,
        body: &[Stmt],
    ) -> usize {
        let caller = self.calls.last().copied().unwrap_or(0);
        if let Some(key) = key {
            let open = || {
                self.active_invocations
                    .iter()
                    .map(|&i| &self.invocations[i])
            };
            let top = !open().any(|y| y.key == key);
            let same_caller =
                open().all(|y| function(y.key.1) != function(key.1) || y.caller == caller);
            self.invocations.push(Invocation {
                key,
                top,
                top_caller: top && same_caller,
                caller,
                start: self.weight.len(),
            });
            self.active_invocations.push(self.invocations.len() - 1);
        }
        if call {
            self.called += 1;
            self.calls.push(self.called);
        }
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
        if key.is_some() {
            self.active_invocations.pop();
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
                    let key = site.map(|s| (SiteKind::Call, s));
                    let end = self.instance(f.cur, &[], key, true, body);
                    let after = self.node(0);
                    self.edge(end, after, false);
                    f.cur = after;
                }
                Stmt::Spawn { site, after, body } => {
                    // Each dependence is an event: a strand ends there.
                    for _ in after {
                        self.step(f);
                    }
                    let after: Vec<usize> = after
                        .iter()
                        .filter_map(|&j| f.children.get(j as usize).copied())
                        .collect();
                    self.count_spawn();
                    let key = site.map(|s| (SiteKind::Spawn, s));
                    let end = self.instance(f.cur, &after, key, false, body);
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
                    self.active_regions.push(self.instances.len() - 1);
                    self.step(f);
                    self.exec(body, f);
                    self.active_regions.pop();
                    self.step(f);
                }
            }
        }
    }

    /// Chunks of `grain` iterations run serially; chunks run in parallel, under a
    /// divide-and-conquer tree ([`Dag::tree`]).
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
            let end = self.instance(cur, &[], None, false, body);
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

    /// Work, span and burdened span of the sub-dag induced by the nodes `keep` accepts, with a
    /// longest path.
    pub fn measure(&self, burden: u64, keep: impl Fn(usize) -> bool) -> Paths {
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
        let mut pred = vec![usize::MAX; n];
        let (mut work, mut best, mut bbest, mut end) = (0, 0, 0, usize::MAX);
        while let Some(v) = ready.pop() {
            span[v] += self.weight[v];
            bspan[v] += self.weight[v];
            work += self.weight[v];
            if span[v] >= best {
                best = span[v];
                end = v;
            }
            bbest = bbest.max(bspan[v]);
            for &(w, burdened) in &out[v] {
                if span[v] >= span[w] {
                    span[w] = span[v];
                    pred[w] = v;
                }
                bspan[w] = bspan[w].max(bspan[v] + if burdened { burden } else { 0 });
                indegree[w] -= 1;
                if indegree[w] == 0 {
                    ready.push(w);
                }
            }
        }
        Paths {
            work,
            span: best,
            burdened_span: bbest,
            pred,
            end,
        }
    }
}
