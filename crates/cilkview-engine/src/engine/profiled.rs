//! The profiling engine's step and batch loop: the profiler taken out of the engine once per
//! batch (not once per event), and the events that begin or end a leaf (a call or iteration
//! whose frame is never pushed, see `Engine::pending`) handled in line, with the profiler told
//! the same (docs/engine.md, "Call-site profiles").

use super::batch::StrandRegionPart;
use super::{Engine, Pending};
use crate::event::{Event, EventKind};
use crate::frame::FrameKind;
use crate::profile::cilkprof::Profiler;

impl Engine {
    /// [`Engine::process_batch`] for a profiling engine: the running total and the pending
    /// frame held in locals, as the unprofiled batch loop holds them.
    pub(super) fn process_batch_profiled(&mut self, events: &[Event]) {
        let Some(mut p) = self.profiler.take() else {
            return;
        };
        self.events += events.len() as u64;
        let (mut acc, mut pending) = (self.acc, self.pending);
        for e in events {
            if !self.step_common_profiled(&mut p, e, events, &mut acc, &mut pending) {
                (self.acc, self.pending) = (acc, pending);
                self.apply_general(&mut p, e, events);
                (acc, pending) = (self.acc, self.pending);
            }
        }
        (self.acc, self.pending) = (acc, pending);
        self.profiler = Some(p);
    }

    /// [`Engine::process_batch`] up to and including the first event after which
    /// [`Engine::anomaly_count`] has changed: how many events it consumed (all of them when none
    /// raised an anomaly). For a caller that names each anomaly's event (the session's nesting
    /// warnings): it hands over the rest again.
    pub fn process_batch_until_anomaly(&mut self, events: &[Event]) -> usize {
        let before = self.anomaly_count;
        let Some(mut p) = self.profiler.take() else {
            for (i, e) in events.iter().enumerate() {
                self.process_unprofiled(*e);
                if self.anomaly_count != before {
                    return i + 1;
                }
            }
            return events.len();
        };
        let mut done = events.len();
        self.events += done as u64;
        let (mut acc, mut pending) = (self.acc, self.pending);
        for (i, e) in events.iter().enumerate() {
            if !self.step_common_profiled(&mut p, e, events, &mut acc, &mut pending) {
                (self.acc, self.pending) = (acc, pending);
                self.apply_general(&mut p, e, events);
                (acc, pending) = (self.acc, self.pending);
            }
            if self.anomaly_count != before {
                done = i + 1;
                break;
            }
        }
        (self.acc, self.pending) = (acc, pending);
        self.events -= (events.len() - done) as u64;
        self.profiler = Some(p);
        done
    }

    /// One event `e` of `events` (empty: a single event) for a profiling engine, but for the
    /// count of events: [`Engine::step_common_profiled`] with the engine's own running total
    /// and pending frame, else the general step.
    #[inline(always)]
    pub(super) fn apply_profiled(&mut self, p: &mut Profiler, e: &Event, events: &[Event]) {
        let (mut acc, mut pending) = (self.acc, self.pending);
        if self.step_common_profiled(p, e, events, &mut acc, &mut pending) {
            (self.acc, self.pending) = (acc, pending);
        } else {
            self.apply_general(p, e, events);
        }
    }

    /// One event `e` of a profiling engine's batch `events`, if it is a common one in a usual
    /// state or a region's begin or end, the running total being `acc` and the pending frame
    /// `pending` (the batch's locals; the engine's own are stale): whether it was (if not,
    /// nothing was done: the general step's). Leaf calls and
    /// iterations take the unprofiled path's shortcut (no frame pushed when the next event is
    /// their end): the profiler holds what began (as the engine's `pending`), and either ends it
    /// at once (`end_held_call`, `end_held_iteration`) or pushes its frame when the engine
    /// pushes its own.
    #[inline(always)]
    fn step_common_profiled(
        &mut self,
        p: &mut Profiler,
        e: &Event,
        events: &[Event],
        acc: &mut u64,
        pending: &mut Pending,
    ) -> bool {
        let (cost, start, waiting) = (e.cost, *acc, *pending);
        let now = start.wrapping_add(cost);
        match e.kind {
            EventKind::FunctionEnter => {
                // What the unprofiled step does: the frame begun is pending.
                self.push_held_at(p, waiting, start, self.ends.len());
                (*acc, *pending) = (now, Pending::Function);
                p.hold_call(e.site);
            }
            // A leaf call: its strand is its caller's.
            EventKind::FunctionExit if waiting == Pending::Function => {
                (*acc, *pending) = (now, Pending::None);
                p.end_held_call(cost);
            }
            EventKind::IterationEnd if waiting == Pending::Iteration => {
                (*acc, *pending) = (now, Pending::None);
                let closes = self.leaf_iteration_closing(now, cost);
                p.end_held_iteration(now, closes);
            }
            // An iteration of the loop that is the top frame (the iteration's frame held).
            EventKind::IterationBegin if waiting == Pending::None && self.top_is_loop() => {
                (*acc, *pending) = (now, Pending::Iteration);
            }
            // A frame's begin: the frame held, if any, pushed first (the engine's and the
            // profiler's), the strand then in the top frame.
            EventKind::Spawn => {
                if waiting == Pending::Function {
                    // A call's first event: its frame and the spawn's pushed together.
                    p.push_held_call_spawning(start, e.site, now);
                } else {
                    if waiting != Pending::None {
                        p.push_held(waiting.kind(), start);
                    }
                    p.push(FrameKind::Spawn, e.site, now);
                }
                // The engine's frames as the unprofiled batch pushes them (the top frame's
                // paths and the length of `ends` read once for both).
                self.push_spawn(waiting, start, cost);
                (*acc, *pending) = (now, Pending::None);
                self.spawns += 1;
            }
            EventKind::LoopBegin { grain } => {
                (*acc, *pending) = (now, Pending::None);
                self.begin_loop_profiled(p, waiting, start, grain, now);
            }
            EventKind::FunctionExit
                if waiting == Pending::None && self.ends_no_region(FrameKind::Function) =>
            {
                *acc = now;
                self.pop_top_profiled(p, now);
            }
            EventKind::SpawnReturn
                if waiting == Pending::None && self.ends_no_region(FrameKind::Spawn) =>
            {
                *acc = now;
                self.pop_top_profiled(p, now);
            }
            // A loop's frame holds no region (one begun there is an anomaly).
            EventKind::LoopEnd if waiting == Pending::None && self.top_is_loop() => {
                *acc = now;
                self.end_loop_profiled(p, now);
            }
            EventKind::Sync if waiting == Pending::None => {
                *acc = now;
                self.sync_profiled(p, now);
            }
            // Every kind named (not `_`): the jump on the kind then needs no range check.
            EventKind::FunctionExit | EventKind::SpawnReturn | EventKind::Sync => return false,
            EventKind::IterationBegin | EventKind::IterationEnd | EventKind::LoopEnd => {
                return false
            }
            EventKind::SpawnAfter { .. } | EventKind::WaitFor { .. } => return false,
            // A region's begin or end: out of line, with the engine's own running total and
            // pending frame.
            EventKind::RegionBegin(_) | EventKind::RegionEnd(_) => {
                (self.acc, self.pending) = (start, waiting);
                self.region_event(p, e, events);
                (*acc, *pending) = (self.acc, self.pending);
            }
        }
        true
    }

    /// The top frame syncs, the running total being `acc` (no frame held).
    #[inline(always)]
    fn sync_profiled(&mut self, p: &mut Profiler, acc: u64) {
        self.syncs += 1;
        p.sync(acc);
        let top = self.stack.last_mut().expect("root frame is never popped");
        top.sync(acc, &mut self.ends);
    }

    /// The frame held, `waiting` (if any), pushed, the engine's and the profiler's, begun at
    /// the running total `start`, its children where `ends` is `base` long.
    #[inline(always)]
    fn push_held_at(&mut self, p: &mut Profiler, waiting: Pending, start: u64, base: usize) {
        if waiting != Pending::None {
            p.push_held(waiting.kind(), start);
            self.push_with_base(waiting.kind(), start, base);
        }
    }

    /// A loop of `grain` begins at the running total `now`, its strand having begun at `start`
    /// with the frame `waiting` held, pushed first (out of line: the batch's loop keeps its
    /// registers for the common events).
    #[inline(never)]
    fn begin_loop_profiled(
        &mut self,
        p: &mut Profiler,
        waiting: Pending,
        start: u64,
        grain: u64,
        now: u64,
    ) {
        self.push_held_at(p, waiting, start, self.ends.len());
        self.begin_loop(grain, now);
        p.push_loop(now);
    }

    /// The top frame, a loop, ends, the running total being `acc`: what the general step's pop
    /// of a loop does, the engine's part as the unprofiled batch's.
    #[inline(always)]
    fn end_loop_profiled(&mut self, p: &mut Profiler, acc: u64) {
        if self.top_loop_chunk_open() {
            p.chunk_closed(acc);
        }
        p.pop(FrameKind::Loop, 0, 0, acc);
        self.acc = acc;
        self.end_top_loop();
    }

    /// The top frame, which holds no region, ends, the running total being `acc`: in place
    /// when its parent holds none either (see [`Engine::pop_in_place`]), else generally.
    #[inline(always)]
    fn pop_top_profiled(&mut self, p: &mut Profiler, acc: u64) {
        if !self.pop_in_place(p, acc) {
            self.acc = acc;
            self.pop_general(p);
        }
    }

    /// The general step for an event `e` of a profiling engine, the frame held, if any, pushed
    /// first; `events` its batch (see [`Engine::apply_in_batch`]).
    #[inline(never)]
    fn apply_general(&mut self, p: &mut Profiler, e: &Event, events: &[Event]) {
        if self.pending != Pending::None {
            p.push_held(self.pending.kind(), self.acc);
        }
        self.apply_in_batch(p, e, events);
    }

    /// Whether the top frame, a loop, has a chunk open.
    #[inline(always)]
    fn top_loop_chunk_open(&self) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
        top.extra.as_ref().is_some_and(|x| x.lp.chunk_open())
    }

    /// Whether a close of a frame of `kind` ends no region: the top frame is of that kind and
    /// holds none (else the general step ends them, with the events counted through the close).
    #[inline(always)]
    fn ends_no_region(&self, kind: FrameKind) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
        top.kind == kind && top.extra.as_ref().is_none_or(|x| x.regions.is_empty())
    }

    /// The frame held, if any, pushed now, the engine's and the profiler's.
    #[inline(always)]
    pub(super) fn push_held(&mut self, p: &mut Profiler) {
        if self.pending != Pending::None {
            p.push_held(self.pending.kind(), self.acc);
            self.push_pending();
        }
    }

    /// A region's begin or end `e` of `events`: a region that holds one strand measured at its
    /// begin (see [`Engine::strand_region_part`]), in the frame held, if any, which stays held
    /// (the profiler counts the strands in it; the engine, as its unprofiled batch, in its
    /// parent: the same measures), its end then passed over; else the general step.
    #[inline(never)]
    fn region_event(&mut self, p: &mut Profiler, e: &Event, events: &[Event]) {
        match self.strand_region_part(e, events) {
            StrandRegionPart::Begin(id, end) => {
                let cost = e.cost.wrapping_add(end.cost);
                self.acc = self.acc.wrapping_add(cost);
                if self.pending != Pending::None {
                    p.strand_in_held(cost);
                }
                self.record_strand_region(id, end.cost);
            }
            StrandRegionPart::End => {}
            StrandRegionPart::Neither => self.apply_general(p, e, events),
        }
    }
}
