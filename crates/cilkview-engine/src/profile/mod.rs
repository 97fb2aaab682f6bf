//! Call-site profiles (Cilkprof, Schardl et al., SPAA 2015, §6): what the profiling engine reports,
//! per call site and per calling context (this file); the algorithm that computes it
//! (`cilkprof.rs`, the hooks the engine calls), its frames and paths (`frames.rs`), the sites,
//! caller functions and contexts it counts in (`tables.rs`), its sparse per-path map
//! (`context_map.rs`, the paper's *prof*) and the paths of a frame since its last sync that
//! dependences between siblings need (`path_tree.rs`). Formulas: docs/engine.md, "Call-site
//! profiles".

pub(crate) mod cilkprof;
mod context_map;
mod frames;
mod path_tree;
mod tables;

use std::collections::HashMap;
use std::num::NonZeroU64;

/// An opaque call-site key carried by a `FunctionEnter` or `Spawn` event: the caller's return
/// address, or any id the producer of the stream interns. The engine never interprets it; two
/// events with the same key (and the same kind) are the same call site.
///
/// A site may also name its *caller function* ([`CallSite::in_function`]): an opaque key of the
/// function whose code contains the call or spawn, the same for every site of that function. It
/// is what the top-caller measurement ([`SiteProfile::top_caller`]) needs; a site without one is
/// counted as the only site of its own function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallSite {
    key: NonZeroU64,
    function: Option<NonZeroU64>,
}

impl CallSite {
    /// The call site with this key; `None` for 0 (no site).
    pub fn new(key: u64) -> Option<CallSite> {
        NonZeroU64::new(key).map(|key| CallSite {
            key,
            function: None,
        })
    }

    pub fn key(self) -> u64 {
        self.key.get()
    }

    /// The same site, in the function with key `function` (0: unknown).
    pub fn in_function(self, function: u64) -> CallSite {
        CallSite {
            function: NonZeroU64::new(function),
            ..self
        }
    }

    /// The key of the function containing the site, if known.
    pub fn function(self) -> Option<u64> {
        self.function.map(NonZeroU64::get)
    }
}

/// Whether a call site spawns or calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SiteKind {
    Spawn,
    Call,
}

/// A work and a span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkSpan {
    pub work: u64,
    pub span: u64,
}

impl WorkSpan {
    pub fn new(work: u64, span: u64) -> Self {
        WorkSpan { work, span }
    }

    /// work / span, with 0 / 0 = 1 (as for the whole program).
    pub fn parallelism(&self) -> f64 {
        match (self.work, self.span) {
            (0, 0) => 1.0,
            (_, 0) => f64::INFINITY,
            (w, s) => w as f64 / s as f64,
        }
    }

    pub(crate) fn add(&mut self, o: WorkSpan) {
        self.work = self.work.saturating_add(o.work);
        self.span = self.span.saturating_add(o.span);
    }
}

/// The profile of one call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SiteProfile {
    pub site: CallSite,
    pub kind: SiteKind,
    /// Every invocation of the site (recursive ones included).
    pub invocations: u64,
    /// Invocations of the site on the critical path (recursive ones included).
    pub invocations_on_span: u64,
    /// Sum of the work and of the span of the site's top-call-site invocations (those with no
    /// invocation of the same site above them).
    pub on_work: WorkSpan,
    /// The same over the top-call-site invocations on the critical path.
    pub on_span: WorkSpan,
    /// Over all the site's invocations on the critical path: their work, and the length of the
    /// critical path's strands that ran in them, both excluding what ran under call sites nested
    /// in them.
    pub local_on_span: WorkSpan,
    /// Sum of the work and of the span of the site's top-caller invocations: those made while
    /// the site's caller function has no other active instance (no invocation from the same
    /// function above them, Cilkprof §6). For fib, only the calls made by the outermost fib.
    pub top_caller: WorkSpan,
}

/// A node of the calling-context tree: a path of call sites from the root, with recursion folded
/// (an invocation of a site that is already active belongs to the context of its outermost
/// active invocation). Context 0 is the root: the code under no call site.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextProfile {
    /// The parent context (`None` for the root).
    pub parent: Option<usize>,
    /// The call site, an index into [`Profile::sites`] (`None` for the root).
    pub site: Option<usize>,
    pub invocations: u64,
    pub invocations_on_span: u64,
    /// As [`SiteProfile::on_work`], for the invocations in this context.
    pub on_work: WorkSpan,
    /// Work of all the invocations in this context, excluding nested call sites (the "self" cost).
    pub local_work: u64,
    pub on_span: WorkSpan,
    pub local_on_span: WorkSpan,
}

/// The call-site profile of a run. The local spans on span of all contexts (root included) add up
/// to the span exactly; so do those of all sites plus the root's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// In order of first invocation.
    pub sites: Vec<SiteProfile>,
    /// In order of creation (a parent before its children); `contexts[0]` is the root.
    pub contexts: Vec<ContextProfile>,
}

impl Profile {
    /// The root context: the whole run (`on_work`, `on_span` = work and span of the run) and its
    /// code outside every call site (`local_work`, `local_on_span`).
    pub fn root(&self) -> ContextProfile {
        self.contexts.first().copied().unwrap_or_default()
    }

    /// The call sites from the root to `context` (indices into `sites`).
    pub fn stack(&self, context: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut c = Some(context);
        while let Some(i) = c {
            if let Some(s) = self.contexts[i].site {
                out.push(s);
            }
            c = self.contexts[i].parent;
        }
        out.reverse();
        out
    }

    /// The profile of two streams that ran in parallel from start to end (the threads of one
    /// process): on-work data add up; on-span data are those of the stream with the longer span.
    pub fn beside(mut self, mut other: Profile) -> Profile {
        let (a, b) = (self.root(), other.root());
        if b.on_span.span > a.on_span.span {
            self.clear_on_span();
        } else {
            other.clear_on_span();
        }
        let mut both = self.merge(other);
        both.contexts[0].on_work.span = a.on_work.span.max(b.on_work.span);
        both
    }

    /// The profile of two computations run one after the other (the instances of a region, as
    /// its measures combine): everything adds up, the critical path runs through both.
    pub fn then(self, other: Profile) -> Profile {
        let mut both = self.merge(other);
        both.contexts[0].invocations_on_span = 1;
        both
    }

    /// `other`'s sites and contexts added to `self`'s (matched by site, and by parent and site);
    /// the root counts one invocation.
    fn merge(mut self, other: Profile) -> Profile {
        let mut site_map = Vec::with_capacity(other.sites.len());
        let mut site_index: HashMap<(CallSite, SiteKind), usize> = self
            .sites
            .iter()
            .enumerate()
            .map(|(i, m)| ((m.site, m.kind), i))
            .collect();
        for s in &other.sites {
            let i = match site_index.get(&(s.site, s.kind)).copied() {
                Some(i) => {
                    let m = &mut self.sites[i];
                    m.invocations += s.invocations;
                    m.invocations_on_span += s.invocations_on_span;
                    m.on_work.add(s.on_work);
                    m.on_span.add(s.on_span);
                    m.local_on_span.add(s.local_on_span);
                    m.top_caller.add(s.top_caller);
                    i
                }
                None => {
                    self.sites.push(*s);
                    site_index.insert((s.site, s.kind), self.sites.len() - 1);
                    self.sites.len() - 1
                }
            };
            site_map.push(i);
        }
        if self.contexts.is_empty() {
            self.contexts.push(ContextProfile::default());
        }
        let mut index: HashMap<(Option<usize>, Option<usize>), usize> = self
            .contexts
            .iter()
            .enumerate()
            .map(|(i, c)| ((c.parent, c.site), i))
            .collect();
        let mut ctx_map: Vec<usize> = Vec::with_capacity(other.contexts.len());
        for c in &other.contexts {
            let key = (c.parent.map(|p| ctx_map[p]), c.site.map(|s| site_map[s]));
            let i = *index.entry(key).or_insert_with(|| {
                self.contexts.push(ContextProfile {
                    parent: key.0,
                    site: key.1,
                    ..ContextProfile::default()
                });
                self.contexts.len() - 1
            });
            let m = &mut self.contexts[i];
            m.invocations += c.invocations;
            m.invocations_on_span += c.invocations_on_span;
            m.on_work.add(c.on_work);
            m.local_work += c.local_work;
            m.on_span.add(c.on_span);
            m.local_on_span.add(c.local_on_span);
            ctx_map.push(i);
        }
        self.contexts[0].invocations = 1;
        self
    }

    fn clear_on_span(&mut self) {
        for s in &mut self.sites {
            s.invocations_on_span = 0;
            s.on_span = WorkSpan::default();
            s.local_on_span = WorkSpan::default();
        }
        for c in &mut self.contexts {
            c.invocations_on_span = 0;
            c.on_span = WorkSpan::default();
            c.local_on_span = WorkSpan::default();
        }
    }
}
