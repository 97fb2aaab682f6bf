//! The profiling half of the engine: Cilkprof's algorithm (paper Figure 3 with a prof per span
//! variable, §4) over a shadow of the engine's frame stack. The engine calls one hook per event;
//! each costs O(1) amortized. See docs/engine.md, "Call-site profiles".

use std::collections::HashMap as StdHashMap;

/// The profiler's indexes, looked up on every profiled call and spawn: hashed with foldhash's
/// fixed fast hasher (a few instructions for these small integer keys; SipHash was ~13% of a
/// profiled run's instructions). Nothing iterates them, so their order is never seen.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::FixedState>;

use super::context_map::{Arena, ContextMap, Entry};
use super::path_tree::{FramePaths, PathTree, Start};
use super::{CallSite, ContextProfile, Profile, SiteKind, SiteProfile, WorkSpan};
use crate::frame::FrameKind;

/// A path (a span variable of Figure 3) and the on-span data of the invocations on it.
#[derive(Clone, Debug, Default)]
pub(super) struct PathProf {
    pub(super) span: u64,
    /// Length of the path's strands that ran under no call site nested in the frame's context:
    /// the local span of the invocation that will own it.
    pub(super) own: u64,
    pub(super) prof: ContextMap,
}

impl PathProf {
    /// `self` followed by `o` in series.
    #[inline]
    pub(super) fn then(&mut self, arena: &mut Arena, keys: usize, mut o: PathProf) {
        self.span = self.span.saturating_add(o.span);
        self.own = self.own.saturating_add(o.own);
        // Most paths that follow hold no invocation (a strand, a call of an unprofiled
        // function): nothing to union.
        if !o.prof.is_empty() {
            self.prof.union(arena, keys, &mut o.prof);
        }
    }

    pub(super) fn free(self, arena: &mut Arena) {
        let mut p = self.prof;
        p.free(arena);
    }
}

/// A parallel loop: its critical path runs through its longest chunk (the divide-and-conquer tree
/// adds nothing to the unburdened span), so it keeps the open chunk, the loop control not yet in a
/// chunk, and the longest chunk so far — mirroring the engine's `LoopState`.
#[derive(Clone, Debug)]
struct LoopProf {
    grain: u64,
    in_chunk: u64,
    chunk: Option<PathProf>,
    control: PathProf,
    best: Option<PathProf>,
}

impl LoopProf {
    fn serial(&mut self, arena: &mut Arena, keys: usize, x: PathProf) {
        match &mut self.chunk {
            Some(c) => c.then(arena, keys, x),
            None => self.control.then(arena, keys, x),
        }
    }

    fn strand(&mut self, cost: u64) {
        let p = self.chunk.as_mut().unwrap_or(&mut self.control);
        p.span = p.span.saturating_add(cost);
        p.own = p.own.saturating_add(cost);
    }

    fn flush(&mut self, arena: &mut Arena) {
        if let Some(chunk) = self.chunk.take() {
            self.in_chunk = 0;
            match self.best.take() {
                Some(best) if best.span >= chunk.span => {
                    chunk.free(arena);
                    self.best = Some(best);
                }
                other => {
                    if let Some(b) = other {
                        b.free(arena);
                    }
                    self.best = Some(chunk);
                }
            }
        }
    }
}

/// An open invocation of a call site.
#[derive(Clone, Copy, Debug)]
struct Invocation {
    site: u32,
    /// No invocation of the same site above it.
    top: bool,
    /// Made while the site's caller function had no other active instance.
    top_caller: bool,
}

#[derive(Clone, Debug)]
struct PFrame {
    /// The calling context the frame's strands belong to.
    ctx: u32,
    /// The function instance the frame's code runs in: the stack index of the innermost
    /// function frame (itself for a function frame; the root is 0).
    instance: u32,
    /// For a frame that is an invocation of a call site.
    invocation: Option<Invocation>,
    /// Work in the frame outside nested call sites.
    local_work: u64,
    /// Figure 3's span variables: the prefix p, the continuation c, the paths since the last
    /// sync in the profiler's tree.
    paths: FramePaths,
    /// For a spawned frame: where it starts in its parent.
    from: Start,
    lp: Option<Box<LoopProf>>,
}

impl PFrame {
    /// A frame whose paths since its last sync will begin at the top of `tree`.
    fn new(ctx: u32, instance: u32, invocation: Option<Invocation>, tree: &PathTree) -> Self {
        PFrame {
            ctx,
            instance,
            invocation,
            local_work: 0,
            paths: FramePaths::new(tree),
            from: Start::default(),
            lp: None,
        }
    }

    fn serial(&mut self, arena: &mut Arena, keys: usize, x: PathProf) {
        match &mut self.lp {
            Some(lp) => lp.serial(arena, keys, x),
            None => self.paths.c.then(arena, keys, x),
        }
    }

    /// The frame spawns a child: where it starts (none in a loop's control code, whose spawns
    /// are serial).
    fn spawning(&mut self, tree: &mut PathTree) -> Start {
        match self.lp {
            Some(_) => Start::default(),
            None => self.paths.spawning(tree),
        }
    }

    /// A spawned child that started at `from` returned with path `x`.
    fn spawned(
        &mut self,
        arena: &mut Arena,
        keys: usize,
        tree: &mut PathTree,
        from: Start,
        x: PathProf,
    ) {
        match self.lp {
            Some(_) => self.serial(arena, keys, x),
            None => self.paths.spawned(tree, from, x),
        }
    }

    fn sync(&mut self, arena: &mut Arena, keys: usize, tree: &mut PathTree) {
        if self.lp.is_none() {
            self.paths.sync(arena, keys, tree);
        }
    }
}

#[derive(Clone, Debug)]
struct SiteState {
    site: CallSite,
    kind: SiteKind,
    /// Invocations of the site open on the stack.
    active: u32,
    /// The context of the outermost open invocation.
    top_ctx: u32,
    /// Index of the site's caller function in `Profiler::functions`.
    function: u32,
    top_caller: WorkSpan,
}

/// A caller function: how many invocations from its sites are open, and the function instance
/// that made the outermost of them.
#[derive(Clone, Copy, Debug)]
struct FunctionState {
    open: u32,
    outer_instance: u32,
}

#[derive(Clone, Debug, Default)]
struct CtxState {
    parent: u32,
    site: u32,
    invocations: u64,
    on_work: WorkSpan,
    local_work: u64,
}

const ROOT: u32 = 0;
/// How many calling contexts beyond twice the number of sites are kept as full paths.
pub(crate) const CONTEXT_SLACK: usize = 1 << 16;
const NONE: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub(crate) struct Profiler {
    sites: Vec<SiteState>,
    site_index: HashMap<(CallSite, SiteKind), u32>,
    contexts: Vec<CtxState>,
    ctx_index: HashMap<(u32, u32), u32>,
    /// Caller functions, by the key the sites carry (sites without one: one each).
    functions: Vec<FunctionState>,
    function_index: HashMap<u64, u32>,
    arena: Arena,
    /// The frames' paths since their last syncs.
    tree: PathTree,
    stack: Vec<PFrame>,
}

impl Profiler {
    pub fn new() -> Self {
        Profiler {
            sites: Vec::new(),
            site_index: HashMap::default(),
            contexts: vec![CtxState {
                parent: NONE,
                site: NONE,
                ..CtxState::default()
            }],
            ctx_index: HashMap::default(),
            functions: Vec::new(),
            function_index: HashMap::default(),
            arena: Arena::new(),
            tree: PathTree::default(),
            stack: vec![PFrame::new(ROOT, 0, None, &PathTree::default())],
        }
    }

    fn top(&mut self) -> &mut PFrame {
        self.stack.last_mut().expect("root frame")
    }

    /// A strand of `cost` ran in the current frame.
    pub fn strand(&mut self, cost: u64) {
        let f = self.top();
        f.local_work = f.local_work.saturating_add(cost);
        match &mut f.lp {
            Some(lp) => lp.strand(cost),
            None => {
                let c = &mut f.paths.c;
                c.span = c.span.saturating_add(cost);
                c.own = c.own.saturating_add(cost);
            }
        }
    }

    /// A frame is pushed; `site` only for function enters and spawns.
    pub fn push(&mut self, kind: FrameKind, site: Option<CallSite>) {
        let (ctx, caller) = (self.top().ctx, self.top().instance);
        // A function frame is a new function instance; any other frame runs in its parent's.
        let instance = if kind == FrameKind::Function {
            self.stack.len() as u32
        } else {
            caller
        };
        let from = if kind == FrameKind::Spawn {
            let tree = &mut self.tree;
            self.stack.last_mut().expect("root frame").spawning(tree)
        } else {
            Start::default()
        };
        let (ctx, invocation) = match site {
            None => (ctx, None),
            Some(site) => {
                let kind = if kind == FrameKind::Spawn {
                    SiteKind::Spawn
                } else {
                    SiteKind::Call
                };
                let next = self.sites.len() as u32;
                let s = *self.site_index.entry((site, kind)).or_insert(next);
                if s == next {
                    let function = self.function(site);
                    self.sites.push(SiteState {
                        site,
                        kind,
                        active: 0,
                        top_ctx: NONE,
                        function,
                        top_caller: WorkSpan::default(),
                    });
                }
                let top = self.sites[s as usize].active == 0;
                let ctx = if top {
                    let c = self.context(ctx, s);
                    self.sites[s as usize].top_ctx = c;
                    c
                } else {
                    self.sites[s as usize].top_ctx
                };
                self.sites[s as usize].active += 1;
                self.contexts[ctx as usize].invocations += 1;
                // Top-caller: every open invocation from the same caller function was made by
                // this invocation's caller instance (then that instance is the function's only
                // active one). Nested invocations of one site never both count.
                let f = &mut self.functions[self.sites[s as usize].function as usize];
                if f.open == 0 {
                    f.outer_instance = caller;
                }
                f.open += 1;
                let top_caller = top && f.outer_instance == caller;
                let invocation = Invocation {
                    site: s,
                    top,
                    top_caller,
                };
                (ctx, Some(invocation))
            }
        };
        // (Its ~150 bytes are still built aside and copied by a `memcpy` call into the stack.)
        self.stack.push(PFrame {
            from,
            ..PFrame::new(ctx, instance, invocation, &self.tree)
        });
    }

    /// The index of the caller function of a new site.
    fn function(&mut self, site: CallSite) -> u32 {
        let next = self.functions.len() as u32;
        let f = match site.function() {
            Some(key) => *self.function_index.entry(key).or_insert(next),
            None => next,
        };
        if f == next {
            self.functions.push(FunctionState {
                open: 0,
                outer_instance: 0,
            });
        }
        f
    }

    /// The context of site `s` called from context `parent`. Beyond [`CONTEXT_SLACK`] more
    /// contexts than twice the sites, a new path is cut short: its context is the site's directly
    /// under the root (at most one more per site), so memory stays O(sites).
    fn context(&mut self, parent: u32, s: u32) -> u32 {
        if let Some(&c) = self.ctx_index.get(&(parent, s)) {
            return c;
        }
        let parent = if self.contexts.len() >= 2 * self.sites.len() + CONTEXT_SLACK {
            ROOT
        } else {
            parent
        };
        let next = self.contexts.len() as u32;
        let c = *self.ctx_index.entry((parent, s)).or_insert(next);
        if c == next {
            self.contexts.push(CtxState {
                parent,
                site: s,
                ..CtxState::default()
            });
        }
        c
    }

    pub fn push_loop(&mut self, grain: u64) {
        let (ctx, instance) = (self.top().ctx, self.top().instance);
        let mut f = PFrame::new(ctx, instance, None, &self.tree);
        f.lp = Some(Box::new(LoopProf {
            grain: grain.max(1),
            in_chunk: 0,
            chunk: None,
            control: PathProf::default(),
            best: None,
        }));
        self.stack.push(f);
    }

    /// The top frame is a loop and an iteration begins.
    pub fn begin_iteration(&mut self) {
        if let Some(lp) = &mut self.top().lp {
            if lp.chunk.is_none() {
                lp.chunk = Some(std::mem::take(&mut lp.control));
            }
        }
    }

    pub fn sync(&mut self) {
        let keys = self.contexts.len();
        let f = self.stack.last_mut().expect("root frame");
        f.sync(&mut self.arena, keys, &mut self.tree);
    }

    /// `SpawnAfter{sibling}` in the top frame.
    pub fn spawn_after(&mut self, sibling: u64) {
        let f = self.stack.last_mut().expect("root frame");
        if f.lp.is_none() {
            f.paths.spawn_after(&self.tree, sibling);
        }
    }

    /// `WaitFor{sibling}` in the top frame.
    pub fn wait_for(&mut self, sibling: u64) {
        let f = self.stack.last_mut().expect("root frame");
        if f.lp.is_none() {
            f.paths.wait_for(&mut self.arena, &self.tree, sibling);
        }
    }

    /// The top frame, of `kind`, ends with the engine's measures (`work`, `span`) and folds into
    /// its parent the way the engine's `pop` does. (The frame is worked on where it lies and
    /// dropped there: moved out whole, its ~160 bytes were a `memcpy` call per pop.)
    pub fn pop(&mut self, kind: FrameKind, work: u64, span: u64) {
        let keys = self.contexts.len();
        let arena = &mut self.arena;
        let depth = self.stack.len() - 1;
        let (f, rest) = self.stack.split_last_mut().expect("root frame");
        let parent = rest.last_mut().expect("never pops the root");
        if let Some(mut lp) = f.lp.take() {
            lp.flush(arena);
            let tree = lp.best.take().unwrap_or_default();
            parent.local_work = parent.local_work.saturating_add(f.local_work);
            parent.serial(arena, keys, tree);
            parent.serial(arena, keys, lp.control);
            self.stack.truncate(depth);
            return;
        }
        f.sync(arena, keys, &mut self.tree);
        let mut path = std::mem::take(&mut f.paths.p);
        debug_assert_eq!(path.span, span, "profiler and engine disagree on a span");
        match f.invocation {
            Some(Invocation {
                site: s,
                top,
                top_caller,
            }) => {
                let site = &mut self.sites[s as usize];
                site.active -= 1;
                self.functions[site.function as usize].open -= 1;
                if top_caller {
                    site.top_caller.add(WorkSpan::new(work, span));
                }
                let ctx = &mut self.contexts[f.ctx as usize];
                ctx.local_work = ctx.local_work.saturating_add(f.local_work);
                if top {
                    ctx.on_work.add(WorkSpan::new(work, span));
                }
                let entry = Entry {
                    on_span_work: if top { work } else { 0 },
                    on_span_span: if top { span } else { 0 },
                    local_work: f.local_work,
                    local_span: path.own,
                    count: 1,
                };
                path.own = 0;
                path.prof.update(arena, keys, f.ctx, entry);
            }
            None => parent.local_work = parent.local_work.saturating_add(f.local_work),
        }
        match kind {
            FrameKind::Spawn => parent.spawned(arena, keys, &mut self.tree, f.from, path),
            FrameKind::Iteration => match &mut parent.lp {
                Some(lp) => {
                    lp.serial(arena, keys, path);
                    lp.in_chunk += 1;
                    if lp.in_chunk >= lp.grain {
                        lp.flush(arena);
                    }
                }
                None => parent.serial(arena, keys, path),
            },
            FrameKind::Function | FrameKind::Root | FrameKind::Loop => {
                parent.serial(arena, keys, path)
            }
        }
        self.stack.truncate(depth);
    }

    /// Nodes of the arena (its high-water mark), for memory tests.
    #[allow(dead_code)]
    pub fn arena_capacity(&self) -> usize {
        self.arena.capacity()
    }

    /// Ends the root (every other frame has been popped) whose measures are `work`, `span`.
    pub fn finish(mut self, work: u64, span: u64) -> Profile {
        debug_assert_eq!(self.stack.len(), 1);
        let keys = self.contexts.len();
        let mut root = self.stack.pop().expect("root frame");
        root.sync(&mut self.arena, keys, &mut self.tree);
        debug_assert_eq!(
            root.paths.p.span, span,
            "profiler and engine disagree on the span"
        );
        let mut contexts: Vec<ContextProfile> = self
            .contexts
            .iter()
            .map(|c| ContextProfile {
                parent: (c.parent != NONE).then_some(c.parent as usize),
                site: (c.site != NONE).then_some(c.site as usize),
                invocations: c.invocations,
                on_work: c.on_work,
                local_work: c.local_work,
                ..ContextProfile::default()
            })
            .collect();
        let r = &mut contexts[0];
        r.invocations = 1;
        r.invocations_on_span = 1;
        r.on_work = WorkSpan::new(work, span);
        r.on_span = WorkSpan::new(work, span);
        r.local_work = root.local_work;
        r.local_on_span = WorkSpan::new(root.local_work, root.paths.p.own);
        for (k, e) in root.paths.p.prof.drain(&mut self.arena, keys) {
            let c = &mut contexts[k as usize];
            c.invocations_on_span += e.count;
            c.on_span.add(WorkSpan::new(e.on_span_work, e.on_span_span));
            c.local_on_span
                .add(WorkSpan::new(e.local_work, e.local_span));
        }
        let mut sites: Vec<SiteProfile> = self
            .sites
            .iter()
            .map(|s| SiteProfile {
                site: s.site,
                kind: s.kind,
                invocations: 0,
                invocations_on_span: 0,
                on_work: WorkSpan::default(),
                on_span: WorkSpan::default(),
                local_on_span: WorkSpan::default(),
                top_caller: s.top_caller,
            })
            .collect();
        for c in &contexts {
            if let Some(s) = c.site {
                let s = &mut sites[s];
                s.invocations += c.invocations;
                s.invocations_on_span += c.invocations_on_span;
                s.on_work.add(c.on_work);
                s.on_span.add(c.on_span);
                s.local_on_span.add(c.local_on_span);
            }
        }
        Profile { sites, contexts }
    }
}
