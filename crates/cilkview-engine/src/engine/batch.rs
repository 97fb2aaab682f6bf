//! The unprofiled engine's batch loop: the common events (calls, spawns, their returns, syncs,
//! a loop's iterations) handled in line with the running total and the pending frame held in
//! locals, a region that holds one strand out of line with its end, every other event, and every
//! common one in an unusual state, by the general step (docs/engine.md, "Batches").

use super::{Engine, Pending};
use crate::event::{Event, EventKind, RegionId};
use crate::frame::{Frame, FrameKind};
use crate::observer::Observer;
use crate::paths::Paths;

impl Engine {
    /// Consumes a batch of events in order: the same as [`Engine::process`] on each, faster.
    pub fn process_batch(&mut self, events: &[Event]) {
        if self.profiler.is_some() {
            self.process_batch_profiled(events);
            return;
        }
        self.events += events.len() as u64;
        let (mut acc, mut pending) = (self.acc, self.pending);
        for e in events {
            if !self.step_common(e, &mut acc, &mut pending) {
                (self.acc, self.pending) = (acc, pending);
                self.step_rare(e, &events);
                (acc, pending) = (self.acc, self.pending);
            }
        }
        (self.acc, self.pending) = (acc, pending);
    }

    /// The state a caller's own loop holds in locals to hand the engine one event at a time
    /// as a batch's loop does (see [`Steps`]). Unprofiled engines only.
    #[inline(always)]
    pub fn steps(&self) -> Steps {
        debug_assert!(self.profiler.is_none());
        Steps {
            acc: self.acc,
            pending: self.pending,
            events: self.events,
        }
    }

    /// Consumes one event, the engine's running total and pending frame being `steps`'s: the
    /// same as [`Engine::process`], with a batch loop's code for the common events (inlined
    /// into the caller: an event whose kind is a constant there takes its arm alone). Whether
    /// it took the general step: only that step counts anomalies, so a caller that watches
    /// [`Engine::anomaly_count`] need look only then.
    #[inline(always)]
    pub fn step_in(&mut self, steps: &mut Steps, event: Event) -> bool {
        steps.events += 1;
        if self.step_common(&event, &mut steps.acc, &mut steps.pending) {
            return false;
        }
        // Through a copy: `steps` itself has no address taken (the caller's stays in registers).
        let mut copy = *steps;
        self.step_general(&mut copy, event);
        *steps = copy;
        true
    }

    /// Gives the engine back the state `steps` held: its running total, pending frame and count
    /// of events are those of every event [`Engine::step_in`] took. Before any other call of
    /// the engine.
    #[inline(always)]
    pub fn settle(&mut self, steps: Steps) {
        (self.acc, self.pending, self.events) = (steps.acc, steps.pending, steps.events);
    }

    /// [`Engine::step_in`] for an event the batch loop's code does not handle: the general
    /// step, out of line.
    #[cold]
    #[inline(never)]
    fn step_general(&mut self, steps: &mut Steps, event: Event) {
        self.settle(*steps);
        self.apply(&mut (), event);
        *steps = self.steps();
    }

    /// One event of a batch, if it is a common one in a usual state, the running total being
    /// `acc` and the pending frame `pending` (the batch's locals): whether it was (if not,
    /// nothing was done). Each arm that handles its event adds its strand to the running total.
    #[inline(always)]
    fn step_common(&mut self, e: &Event, acc: &mut u64, pending: &mut Pending) -> bool {
        let (cost, kind, start, waiting) = (e.cost, e.kind, *acc, *pending);
        match kind {
            EventKind::FunctionEnter => {
                if waiting != Pending::None {
                    self.push_at(waiting.kind(), start);
                }
                (*acc, *pending) = (start.wrapping_add(cost), Pending::Function);
                true
            }
            EventKind::Spawn => {
                self.spawns += 1;
                self.push_spawn(waiting, start, cost);
                (*acc, *pending) = (start.wrapping_add(cost), Pending::None);
                true
            }
            // A leaf call (see `Engine::pending`): its strand is its caller's.
            EventKind::FunctionExit if waiting == Pending::Function => {
                (*acc, *pending) = (start.wrapping_add(cost), Pending::None);
                true
            }
            EventKind::FunctionExit
                if waiting == Pending::None
                    && self.pop_plain(FrameKind::Function, start.wrapping_add(cost)) =>
            {
                *acc = start.wrapping_add(cost);
                true
            }
            EventKind::SpawnReturn
                if waiting == Pending::None
                    && self.pop_plain(FrameKind::Spawn, start.wrapping_add(cost)) =>
            {
                *acc = start.wrapping_add(cost);
                true
            }
            EventKind::Sync
                if waiting == Pending::None && self.sync_plain(start.wrapping_add(cost)) =>
            {
                *acc = start.wrapping_add(cost);
                true
            }
            EventKind::IterationBegin if waiting == Pending::None && self.top_is_loop() => {
                (*acc, *pending) = (start.wrapping_add(cost), Pending::Iteration);
                true
            }
            EventKind::LoopBegin { grain } => {
                if waiting != Pending::None {
                    self.push_at(waiting.kind(), start);
                    *pending = Pending::None;
                }
                self.begin_loop(grain, start.wrapping_add(cost));
                *acc = start.wrapping_add(cost);
                true
            }
            EventKind::LoopEnd
                if waiting == Pending::None && self.end_loop_plain(start.wrapping_add(cost)) =>
            {
                *acc = start.wrapping_add(cost);
                true
            }
            EventKind::IterationEnd if waiting == Pending::Iteration => {
                self.leaf_iteration_ended(start, cost);
                (*acc, *pending) = (start.wrapping_add(cost), Pending::None);
                true
            }
            // Every kind named (not `_`): the jump on the kind then needs no range check.
            EventKind::FunctionExit | EventKind::SpawnReturn | EventKind::Sync => false,
            EventKind::IterationBegin | EventKind::IterationEnd | EventKind::LoopEnd => false,
            EventKind::SpawnAfter { .. } | EventKind::WaitFor { .. } => false,
            EventKind::RegionBegin(_) | EventKind::RegionEnd(_) => false,
        }
    }

    /// A loop of chunks of `grain` begins, the running total being `acc`.
    #[inline(always)]
    pub(super) fn begin_loop(&mut self, grain: u64, acc: u64) {
        let mut frame = Frame::new_loop(grain, acc, &mut self.spares);
        self.loops_open += 1;
        // Its paths in a coordinate of their own (no `Engine::push`): a loop's parts go to its
        // state, and its iterations' paths are measured against the loop's, whatever they are.
        frame.base = self.ends.len();
        self.stack.push(frame);
    }

    /// A loop's end when the top frame is that loop: it ends, the running total being `acc`.
    /// Whether it was that case (if not, nothing was done).
    #[inline(always)]
    fn end_loop_plain(&mut self, acc: u64) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
        let ends_loop = top.kind == FrameKind::Loop;
        if ends_loop {
            self.acc = acc;
            self.end_top_loop();
        }
        ends_loop
    }

    /// The top frame, a loop, ends: `Engine::pop_general` for a loop's frame (which has neither
    /// regions nor children of its own out: spawns in its control code are measured as its
    /// serial code), without the frame's move or its fold's tests.
    #[inline(never)]
    pub(super) fn end_top_loop(&mut self) {
        let top = self.stack.last_mut().expect("root frame is never popped");
        match top.extra.take() {
            Some(mut x) if x.lp.is_loop() => {
                self.stack.truncate(self.stack.len() - 1);
                self.loops_open -= 1;
                self.fold_loop(&mut x.lp);
                self.spares.keep_extra(x);
            }
            other => {
                top.extra = other;
                self.pop_general(&mut ());
            }
        }
    }

    /// An event `e` of `events` that the batch loop does not handle in line: a region that
    /// holds one strand (its begin, then its end next) at its begin with its end (which is
    /// then passed over), else by the general step.
    #[cold]
    #[inline(never)]
    fn step_rare(&mut self, e: &Event, events: &&[Event]) {
        match self.strand_region_part(e, events) {
            StrandRegionPart::Begin(id, end) => {
                self.acc = self.acc.wrapping_add(e.cost).wrapping_add(end.cost);
                self.record_strand_region(id, end.cost);
            }
            StrandRegionPart::End => {}
            StrandRegionPart::Neither => self.apply_in_batch(&mut (), e, events),
        }
    }

    /// What event `e` of batch `events` is to a batch loop (the loop keeps no index: where `e`
    /// is, by its address; a single event, `events` empty, is neither): the begin of a region
    /// that holds one strand, its end the next event, measured at the begin with its end; that
    /// end, passed over (the state that decided so is the same now); or neither.
    #[inline(always)]
    pub(super) fn strand_region_part<'a>(
        &self,
        e: &Event,
        events: &'a [Event],
    ) -> StrandRegionPart<'a> {
        let Some(at) = position_in(e, events) else {
            return StrandRegionPart::Neither;
        };
        match e.kind {
            EventKind::RegionBegin(_) => {
                let next = events.get(at + 1);
                if let Some((id, end)) = next.and_then(|n| Some((self.strand_region(e, n)?, n))) {
                    return StrandRegionPart::Begin(id, end);
                }
            }
            EventKind::RegionEnd(_) => {
                let taken = |begin| self.strand_region(begin, e).is_some();
                if events.get(at.wrapping_sub(1)).is_some_and(taken) {
                    return StrandRegionPart::End;
                }
            }
            _ => {}
        }
        StrandRegionPart::Neither
    }

    /// The general step of event `e` of batch `events` (empty: a single event, counted already),
    /// told to `o`, with the events counted through `e`, as a step counts them (a region's begin
    /// and end read them), not through the batch's end as a batch loop counts them.
    #[inline(never)]
    pub(super) fn apply_in_batch<O: Observer>(&mut self, o: &mut O, e: &Event, events: &[Event]) {
        let after = position_in(e, events).map_or(0, |at| (events.len() - at - 1) as u64);
        self.events -= after;
        self.apply(o, *e);
        self.events += after;
    }

    /// If `begin` and `end` are a region's begin and its end, and the region is one measured at
    /// its begin with no frame pushed or region opened (it holds one strand): its id. So is a
    /// region that begins in the frame pending, or in the top frame if that is no loop (there a
    /// region is an anomaly).
    #[inline(always)]
    pub(super) fn strand_region(&self, begin: &Event, end: &Event) -> Option<RegionId> {
        match (begin.kind, end.kind) {
            (EventKind::RegionBegin(id), EventKind::RegionEnd(end))
                if id == end && (self.pending != Pending::None || !self.top_is_loop()) =>
            {
                Some(id)
            }
            _ => None,
        }
    }

    /// A frame of `kind` begins, the running total being `acc`: `Engine::push` of a new frame,
    /// written apart for the loop (through `push`, 1.7-2.4 more instructions per event).
    #[inline(always)]
    pub(super) fn push_at(&mut self, kind: FrameKind, acc: u64) {
        self.push_with_base(kind, acc, self.ends.len());
    }

    /// [`Engine::push_at`], the length of `ends` being `base`.
    #[inline(always)]
    pub(super) fn push_with_base(&mut self, kind: FrameKind, acc: u64, base: usize) {
        let top = self.stack.last().expect("root frame is never popped");
        let frame = Frame {
            kind,
            paths: Paths::child_of(&top.paths, acc),
            base,
            extra: None,
        };
        self.stack.push(frame);
    }

    /// A spawn whose strand of `cost` began at the running total `start`: its frame pushed,
    /// over the pending frame `waiting` if any, pushed first (both frames' children begin where
    /// `ends` is now, and both frames' paths where the top frame's are: read once).
    #[inline(always)]
    pub(super) fn push_spawn(&mut self, waiting: Pending, start: u64, cost: u64) {
        let base = self.ends.len();
        let top = self.stack.last().expect("root frame is never popped");
        let paths = top.paths;
        let frame = |kind, acc| Frame {
            kind,
            paths: Paths::child_of(&paths, acc),
            base,
            extra: None,
        };
        if waiting != Pending::None {
            self.stack.push(frame(waiting.kind(), start));
        }
        self.stack
            .push(frame(FrameKind::Spawn, start.wrapping_add(cost)));
    }

    /// A closer of frames of `kind` when the top frame is one, without regions or loop, and its
    /// parent has none either: that frame ends, the running total being `acc`. Whether it was
    /// that case (if not, nothing was done).
    #[inline(always)]
    fn pop_plain(&mut self, kind: FrameKind, acc: u64) -> bool {
        // The top two frames as `pop_in_place` reads them: the same test of the stack's length.
        let [.., _, top] = &self.stack[..] else {
            return false;
        };
        top.kind == kind && self.pop_in_place(&mut (), acc)
    }

    /// A sync of a top frame without regions or loop, the running total being `acc`. Whether it
    /// was that case (if not, nothing was done).
    #[inline(always)]
    fn sync_plain(&mut self, acc: u64) -> bool {
        let top = self.stack.last_mut().expect("root frame is never popped");
        if top.extra.is_some() {
            return false;
        }
        self.syncs += 1;
        self.ends.truncate(top.base);
        top.paths.sync(acc);
        true
    }

    /// Whether the top frame is a loop: an iteration's begin then only makes the iteration's
    /// frame pending (the loop's state learns of the iteration at its end).
    #[inline(always)]
    pub(super) fn top_is_loop(&self) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
        top.kind == FrameKind::Loop
    }
}

/// See [`Engine::strand_region_part`].
pub(super) enum StrandRegionPart<'a> {
    /// The begin of a region `RegionId` that holds one strand, and its end (the next event).
    Begin(RegionId, &'a Event),
    /// The end of such a region.
    End,
    Neither,
}

/// Where `e` is in `events`, by its address (none when it is not one of them).
#[inline(always)]
fn position_in(e: &Event, events: &[Event]) -> Option<usize> {
    let at =
        (e as *const Event as usize).wrapping_sub(events.as_ptr() as usize) / size_of::<Event>();
    (at < events.len()).then_some(at)
}

/// An unprofiled engine's running total, pending frame and count of events held by a caller's
/// loop in locals (registers) while it hands the engine events one by one
/// ([`Engine::step_in`]); the engine's own are stale until [`Engine::settle`] gives them back.
#[derive(Clone, Copy, Debug)]
#[must_use = "the engine's state until settled"]
pub struct Steps {
    acc: u64,
    pending: Pending,
    events: u64,
}

impl Pending {
    /// The kind of the frame pending (not `Pending::None`). (`None` gives the root's kind, not
    /// met: each kind then is its number, which the compiler keeps as it is, with no test.)
    #[inline(always)]
    pub(super) fn kind(self) -> FrameKind {
        match self {
            Pending::None => FrameKind::Root,
            Pending::Function => FrameKind::Function,
            Pending::Iteration => FrameKind::Iteration,
        }
    }
}
