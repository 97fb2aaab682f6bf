//! The event stream the engine consumes.

use crate::profile::CallSite;

/// Identifies a labeled region. The producer of the stream (the CLI, from the marks' labels) assigns
/// ids; the engine reports measures per id and never sees label strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RegionId(pub u32);

/// What happened at a parallel control point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A function that uses fork-join control was entered (a call, serial with its caller).
    FunctionEnter,
    /// That function returns. Implies a sync of the children it still has out.
    FunctionExit,
    /// A spawned child begins.
    Spawn,
    /// The spawned child ended (implicitly syncing its own children); the parent's continuation begins.
    SpawnReturn,
    /// Join every child spawned by the current function instance since its last sync.
    Sync,
    /// The next child the current frame spawns may start only after its sibling number `sibling`
    /// ends (0 = the first child it spawned since its last sync): a dependence edge from that
    /// sibling's last strand to the child's first. One event per edge, before the `Spawn`; a
    /// sibling that does not exist (already synced) is no constraint.
    SpawnAfter { sibling: u64 },
    /// The current frame's strand that begins here starts only after its child number `sibling`
    /// (0 = the first spawned since its last sync) ends: an edge from that child's last strand,
    /// a wait for it alone (the others stay out, joined at the next sync). A child that does not
    /// exist (already synced) is no constraint.
    WaitFor { sibling: u64 },
    /// A parallel loop begins; `grain` iterations form one chunk (0 is treated as 1).
    LoopBegin { grain: u64 },
    /// One iteration of the innermost parallel loop begins.
    IterationBegin,
    /// That iteration ends (implicitly syncing the children it spawned).
    IterationEnd,
    /// The innermost parallel loop ends (the loop's implicit sync).
    LoopEnd,
    /// A labeled region begins in the current function instance.
    RegionBegin(RegionId),
    /// The innermost open region with this label in the current function instance ends.
    RegionEnd(RegionId),
}

/// One event: `cost` is the cost (instructions, or any additive unit such as cycles) of the strand
/// that ends at this event, i.e. everything executed since the previous event of the stream.
/// `site` identifies the call site of a `FunctionEnter` or `Spawn` for call-site profiles
/// ([`crate::Engine::with_profile`]); it is ignored on other events and when not profiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub cost: u64,
    pub kind: EventKind,
    pub site: Option<CallSite>,
}

impl Event {
    pub fn new(cost: u64, kind: EventKind) -> Self {
        Event {
            cost,
            kind,
            site: None,
        }
    }

    /// An event at call site `site` (a `FunctionEnter` or a `Spawn`).
    pub fn at(cost: u64, kind: EventKind, site: Option<CallSite>) -> Self {
        Event { cost, kind, site }
    }
}
