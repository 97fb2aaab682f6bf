//! The profiler's tables: the call sites, their caller functions and the calling contexts, with
//! the on-work data that go straight to them when an invocation ends, and the profile built from
//! them at the end. An invocation finds its site in a dense table indexed by the site's key (the
//! analysis interns keys as 1, 2, …), its context in its site's one-entry cache (the parent
//! context it was last called from); hashing only for what those miss.

use std::collections::HashMap as StdHashMap;

/// The indexes behind the dense tables: hashed with foldhash's fixed fast hasher (a few
/// instructions for these small integer keys). Nothing iterates them, so their order is never
/// seen.
type HashMap<K, V> = StdHashMap<K, V, foldhash::fast::FixedState>;

use super::context_map::Entry;
use super::{CallSite, ContextProfile, Profile, SiteKind, SiteProfile, WorkSpan};

/// The root context.
pub(super) const ROOT: u32 = 0;
/// No index.
pub(super) const NONE: u32 = u32::MAX;
/// How many calling contexts beyond twice the number of sites are kept as full paths.
pub(crate) const CONTEXT_SLACK: usize = 1 << 16;
/// A site key is put in the dense tables when it is below twice the number of sites plus this
/// (interned keys, 1, 2, … in order of first use, always are; return addresses, say, are hashed),
/// so the tables stay O(sites).
const DENSE_SLACK: u64 = 1 << 10;

/// An open invocation of a call site.
#[derive(Clone, Copy, Debug)]
pub(super) struct Invocation {
    pub(super) site: u32,
    /// No invocation of the same site above it.
    pub(super) top: bool,
    /// Made while the site's caller function had no other active instance.
    pub(super) top_caller: bool,
}

#[derive(Clone, Debug)]
struct SiteState {
    site: CallSite,
    kind: SiteKind,
    /// Invocations of the site open on the stack.
    active: u32,
    /// The context of the outermost open invocation.
    top_ctx: u32,
    /// Index of the site's caller function in `Tables::functions`.
    function: u32,
    top_caller: WorkSpan,
    /// The last parent context a top invocation came from (`NONE`: none yet) and the context
    /// of the site under it: the lookup of a site called again from where it was last called.
    last_parent: u32,
    last_ctx: u32,
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

#[derive(Clone, Debug)]
pub(super) struct Tables {
    sites: Vec<SiteState>,
    /// Site by key, per kind (spawn, call), for small keys (`NONE`: not there; see
    /// `DENSE_SLACK`).
    dense: [Vec<u32>; 2],
    /// Every site by (site, kind).
    site_index: HashMap<(CallSite, SiteKind), u32>,
    contexts: Vec<CtxState>,
    ctx_index: HashMap<(u32, u32), u32>,
    /// Caller functions, by the key the sites carry (sites without one: one each).
    functions: Vec<FunctionState>,
    function_index: HashMap<u64, u32>,
}

impl Tables {
    pub fn new() -> Self {
        Tables {
            sites: Vec::new(),
            dense: [Vec::new(), Vec::new()],
            site_index: HashMap::default(),
            contexts: vec![CtxState {
                parent: NONE,
                site: NONE,
                ..CtxState::default()
            }],
            ctx_index: HashMap::default(),
            functions: Vec::new(),
            function_index: HashMap::default(),
        }
    }

    /// The number S of keys (contexts) a prof may hold.
    #[inline(always)]
    pub fn keys(&self) -> usize {
        self.contexts.len()
    }

    /// The index of `site` of `kind` if the dense table holds it (an index into `sites`).
    #[inline(always)]
    fn dense_site(&self, kind: SiteKind, site: CallSite) -> Option<u32> {
        let s = *self.dense[kind as usize].get(site.key() as usize)?;
        // `NONE` is beyond every table: no site.
        let st = self.sites.get(s as usize)?;
        (st.site == site).then_some(s)
    }

    /// The index of `site` of `kind`, a new one appended at its first invocation.
    #[inline(always)]
    fn site(&mut self, kind: SiteKind, site: CallSite) -> u32 {
        match self.dense_site(kind, site) {
            Some(s) => s,
            None => self.site_slow(kind, site),
        }
    }

    /// [`Tables::site`] of a site the dense table does not hold yet.
    #[cold]
    #[inline(never)]
    fn site_slow(&mut self, kind: SiteKind, site: CallSite) -> u32 {
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
                last_parent: NONE,
                last_ctx: NONE,
            });
        }
        if site.key() < 2 * self.sites.len() as u64 + DENSE_SLACK {
            let (key, dense) = (site.key() as usize, &mut self.dense[kind as usize]);
            if dense.len() <= key {
                dense.resize(key + 1, NONE);
            }
            if dense[key] == NONE {
                dense[key] = s;
            }
        }
        s
    }

    /// Whether an invocation of site `s` from context `ctx` is its site's top (outermost open)
    /// one, and its context: the top invocation's if one is open, else the last one's where
    /// the parent context is the same, else looked up.
    #[inline(always)]
    fn invocation_context(&mut self, s: u32, ctx: u32) -> (bool, u32) {
        let st = &self.sites[s as usize];
        if st.active != 0 {
            (false, st.top_ctx)
        } else if st.last_parent == ctx {
            (true, st.last_ctx)
        } else {
            (true, self.context(ctx, s))
        }
    }

    /// An invocation of `site` (of `kind`) opens, made by function instance `caller` in context
    /// `ctx`: its context, and whether it is top-call-site and top-caller.
    #[inline(always)]
    pub fn open(
        &mut self,
        kind: SiteKind,
        site: CallSite,
        ctx: u32,
        caller: u32,
    ) -> (u32, Invocation) {
        match self.dense_site(kind, site) {
            Some(s) => self.open_at(s, ctx, caller),
            None => self.open_slow(kind, site, ctx, caller),
        }
    }

    /// [`Tables::open`] of a site the dense table does not hold.
    #[cold]
    #[inline(never)]
    fn open_slow(
        &mut self,
        kind: SiteKind,
        site: CallSite,
        ctx: u32,
        caller: u32,
    ) -> (u32, Invocation) {
        let s = self.site_slow(kind, site);
        self.open_at(s, ctx, caller)
    }

    /// [`Tables::open`] of site `s` ([`Tables::invocation_context`]).
    #[inline(always)]
    fn open_at(&mut self, s: u32, ctx: u32, caller: u32) -> (u32, Invocation) {
        let (top, ctx) = self.invocation_context(s, ctx);
        let st = &mut self.sites[s as usize];
        st.active += 1;
        if top {
            st.top_ctx = ctx;
        }
        let function = st.function;
        // Top-caller: every open invocation from the same caller function was made by this
        // invocation's caller instance (then that instance is the function's only active one).
        // Nested invocations of one site never both count.
        let f = &mut self.functions[function as usize];
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
        (ctx, invocation)
    }

    /// An invocation of call site `site` made by function instance `caller` in context `ctx`
    /// that held one strand of `cost` (no frame, nothing nested in it): [`Tables::open`] then
    /// [`Tables::close`], without the counts of open invocations that the two would raise and
    /// lower again. Its context, and its on-span entry.
    #[inline(always)]
    pub fn leaf(&mut self, site: CallSite, ctx: u32, caller: u32, cost: u64) -> (u32, Entry) {
        let s = self.site(SiteKind::Call, site);
        let (top, ctx) = self.invocation_context(s, ctx);
        let st = &mut self.sites[s as usize];
        let f = &self.functions[st.function as usize];
        let ws = WorkSpan::new(cost, cost);
        // Top-caller as `open` decides it: no other open invocation from the same function, or
        // all of them made by this caller instance.
        if top && (f.open == 0 || f.outer_instance == caller) {
            st.top_caller.add(ws);
        }
        let c = &mut self.contexts[ctx as usize];
        c.invocations += 1;
        c.local_work = c.local_work.wrapping_add(cost);
        if top {
            c.on_work.add(ws);
        }
        let on_span = if top { cost } else { 0 };
        let entry = Entry {
            on_span_work: on_span,
            on_span_span: on_span,
            local_work: cost,
            local_span: cost,
            count: 1,
        };
        (ctx, entry)
    }

    /// The invocation `inv` in context `ctx` ends, with (`work`, `span`) and `local_work`: its
    /// on-work data into its context and site; returns its on-span entry, whose local span is
    /// `local_span`.
    #[inline(always)]
    pub fn close(
        &mut self,
        ctx: u32,
        inv: Invocation,
        ws: WorkSpan,
        local_work: u64,
        local_span: u64,
    ) -> Entry {
        let site = &mut self.sites[inv.site as usize];
        site.active -= 1;
        self.functions[site.function as usize].open -= 1;
        if inv.top_caller {
            site.top_caller.add(ws);
        }
        // The invocation counted in its context when it ends (every open one ends before the
        // profile is read: the engine ends every frame at its finish).
        let c = &mut self.contexts[ctx as usize];
        c.invocations += 1;
        c.local_work = c.local_work.wrapping_add(local_work);
        if inv.top {
            c.on_work.add(ws);
        }
        Entry {
            on_span_work: if inv.top { ws.work } else { 0 },
            on_span_span: if inv.top { ws.span } else { 0 },
            local_work,
            local_span,
            count: 1,
        }
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
    /// under the root (at most one more per site), so memory stays O(sites). A context found
    /// under its own parent is the site's cache (a cut-short one is not: the path may get its
    /// own context once more sites raise the cap).
    #[cold]
    #[inline(never)]
    fn context(&mut self, parent: u32, s: u32) -> u32 {
        let c = match self.ctx_index.get(&(parent, s)) {
            Some(&c) => c,
            None => {
                let cut = self.contexts.len() >= 2 * self.sites.len() + CONTEXT_SLACK;
                let under = if cut { ROOT } else { parent };
                let next = self.contexts.len() as u32;
                let c = *self.ctx_index.entry((under, s)).or_insert(next);
                if c == next {
                    self.contexts.push(CtxState {
                        parent: under,
                        site: s,
                        ..CtxState::default()
                    });
                }
                c
            }
        };
        if self.contexts[c as usize].parent == parent {
            let site = &mut self.sites[s as usize];
            site.last_parent = parent;
            site.last_ctx = c;
        }
        c
    }

    /// The profile: the contexts' and sites' data, the root's (the run's `work` and `span`,
    /// its `local_work` and local span `local_span`) and the critical path's on-span entries
    /// by context.
    pub fn into_profile(
        self,
        ws: WorkSpan,
        local_work: u64,
        local_span: u64,
        on_span: Vec<(u32, Entry)>,
    ) -> Profile {
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
        r.on_work = ws;
        r.on_span = ws;
        r.local_work = local_work;
        r.local_on_span = WorkSpan::new(local_work, local_span);
        for (k, e) in on_span {
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
