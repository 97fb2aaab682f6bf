//! The profiling engine's step and batch loop: the profiler taken out of the engine once per
//! batch (not once per event), and the events that begin or end a leaf (a call or iteration
//! whose frame is never pushed, see `Engine::pending`) handled in line, with the profiler told
//! the same (docs/engine.md, "Call-site profiles").

use super::batch::StrandRegionPart;
use super::{Engine, Pending};
use crate::event::{Event, EventKind};
use crate::frame::{Frame, FrameKind};
use crate::profile::cilkprof::Profiler;

impl Engine {
    /// [`Engine::process_batch`] for a profiling engine.
    pub(super) fn process_batch_profiled(&mut self, events: &[Event]) {
        let Some(mut p) = self.profiler.take() else {
            return;
        };
        self.events += events.len() as u64;
        for e in events {
            self.apply_profiled(&mut p, e, events);
        }
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
        for (i, e) in events.iter().enumerate() {
            self.apply_profiled(&mut p, e, events);
            if self.anomaly_count != before {
                done = i + 1;
                break;
            }
        }
        self.events -= (events.len() - done) as u64;
        self.profiler = Some(p);
        done
    }

    /// One event for a profiling engine, but for the count of events. Leaf calls and iterations
    /// take the unprofiled path's shortcut (no frame pushed when the next event is their end):
    /// the profiler holds what began (as the engine's `pending`), and either ends it at once
    /// (`end_held_call`, `end_held_iteration`) or pushes its frame when the engine pushes its own.
    /// A region that holds one strand (its begin, then its end next in `events`, the batch `e`
    /// is in, if any) is measured at its begin as the unprofiled batch does, its end then passed
    /// over.
    #[inline(always)]
    pub(super) fn apply_profiled(&mut self, p: &mut Profiler, e: &Event, events: &[Event]) {
        let cost = e.cost;
        match e.kind {
            EventKind::FunctionEnter => {
                // What the unprofiled step does: the frame begun is pending.
                self.push_held(p);
                self.acc = self.acc.wrapping_add(cost);
                self.pending = Pending::Function;
                p.hold_call(e.site);
            }
            // A leaf call: its strand is its caller's.
            EventKind::FunctionExit if self.pending == Pending::Function => {
                self.pending = Pending::None;
                self.acc = self.acc.wrapping_add(cost);
                p.end_held_call(cost);
            }
            EventKind::IterationEnd if self.pending == Pending::Iteration => {
                self.pending = Pending::None;
                let closes = self.leaf_iteration_closing(cost);
                p.end_held_iteration(self.acc, closes);
            }
            // An iteration of the loop that is the top frame (with a frame held, the top frame
            // is that one's parent: the general step; with no loop there, too).
            EventKind::IterationBegin if self.pending == Pending::None && self.top_is_loop() => {
                // What the general step does then (the iteration's frame held).
                self.acc = self.acc.wrapping_add(cost);
                self.pending = Pending::Iteration;
            }
            // What the general step does for a frame's begin, or its end or a sync with no
            // frame held (one jump on the kind, not two).
            EventKind::Spawn => {
                self.frame_event_strand(p, cost);
                self.spawns += 1;
                self.push(Frame::new(FrameKind::Spawn, self.acc));
                p.push(FrameKind::Spawn, e.site, self.acc);
            }
            EventKind::LoopBegin { grain } => {
                self.frame_event_strand(p, cost);
                self.begin_loop(grain, self.acc);
                p.push_loop(self.acc);
            }
            EventKind::FunctionExit
                if self.pending == Pending::None && self.ends_no_region(FrameKind::Function) =>
            {
                self.frame_event_strand(p, cost);
                self.close(p, FrameKind::Function);
            }
            EventKind::SpawnReturn
                if self.pending == Pending::None && self.ends_no_region(FrameKind::Spawn) =>
            {
                self.frame_event_strand(p, cost);
                self.close(p, FrameKind::Spawn);
            }
            // A loop's frame holds no region (one begun there is an anomaly).
            EventKind::LoopEnd if self.pending == Pending::None && self.top_is_loop() => {
                self.frame_event_strand(p, cost);
                // What the general step's pop of a loop does, the engine's part as the
                // unprofiled batch's.
                if self.top_loop_chunk_open() {
                    p.chunk_closed(self.acc);
                }
                p.pop(FrameKind::Loop, 0, 0, self.acc);
                self.end_top_loop();
            }
            EventKind::Sync if self.pending == Pending::None => {
                self.frame_event_strand(p, cost);
                self.syncs += 1;
                p.sync(self.acc);
                let top = self.stack.last_mut().expect("root frame is never popped");
                top.sync(self.acc, &mut self.ends);
            }
            // Every kind named (not `_`): the jump on the kind then needs no range check.
            EventKind::FunctionExit | EventKind::SpawnReturn | EventKind::Sync => {
                self.apply_general(p, e, events)
            }
            EventKind::IterationBegin | EventKind::IterationEnd | EventKind::LoopEnd => {
                self.apply_general(p, e, events)
            }
            EventKind::SpawnAfter { .. } | EventKind::WaitFor { .. } => {
                self.apply_general(p, e, events)
            }
            EventKind::RegionBegin(_) | EventKind::RegionEnd(_) => self.region_event(p, e, events),
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

    /// The strand that ends at an event the general step would handle: the frame held, if any,
    /// pushed first (the engine's and the profiler's), the strand then in the top frame.
    #[inline(always)]
    fn frame_event_strand(&mut self, p: &mut Profiler, cost: u64) {
        self.push_held(p);
        self.acc = self.acc.wrapping_add(cost);
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
