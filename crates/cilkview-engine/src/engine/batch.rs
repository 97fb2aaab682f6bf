//! The unprofiled engine's batch loop: the common events (calls, spawns, their returns, syncs,
//! a loop's iterations) handled in line with the running total and the pending frame held in
//! locals, every other event, and every common one in an unusual state, by the general step
//! (docs/engine.md, "Batches").

use super::{Engine, Pending};
use crate::event::{Event, EventKind};
use crate::frame::{Frame, FrameKind};

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
            let (cost, kind) = (e.cost, e.kind);
            let after = acc.wrapping_add(cost);
            let done = match kind {
                EventKind::FunctionEnter => {
                    if pending != Pending::None {
                        self.push_at(pending.kind(), acc);
                    }
                    pending = Pending::Function;
                    true
                }
                EventKind::Spawn => {
                    if pending != Pending::None {
                        self.push_at(pending.kind(), acc);
                        pending = Pending::None;
                    }
                    self.spawns += 1;
                    self.push_at(FrameKind::Spawn, after);
                    true
                }
                // A leaf call (see `Engine::pending`): its strand is its caller's.
                EventKind::FunctionExit if pending == Pending::Function => {
                    pending = Pending::None;
                    true
                }
                EventKind::FunctionExit if pending == Pending::None => {
                    self.pop_plain(FrameKind::Function, after)
                }
                EventKind::SpawnReturn if pending == Pending::None => {
                    self.pop_plain(FrameKind::Spawn, after)
                }
                EventKind::Sync if pending == Pending::None => self.sync_plain(after),
                EventKind::IterationBegin if pending == Pending::None => {
                    let begun = self.begin_iteration_plain();
                    if begun {
                        pending = Pending::Iteration;
                    }
                    begun
                }
                EventKind::LoopBegin { grain } => {
                    if pending != Pending::None {
                        self.push_at(pending.kind(), acc);
                        pending = Pending::None;
                    }
                    self.begin_loop(grain, after);
                    true
                }
                EventKind::LoopEnd if pending == Pending::None => self.end_loop_plain(after),
                EventKind::IterationEnd if pending == Pending::Iteration => {
                    pending = Pending::None;
                    self.leaf_iteration_ended(acc, cost);
                    true
                }
                _ => false,
            };
            if done {
                acc = after;
                continue;
            }
            (self.acc, self.pending) = (acc, pending);
            self.apply_rare(*e);
            (acc, pending) = (self.acc, self.pending);
        }
        (self.acc, self.pending) = (acc, pending);
    }

    /// A loop of chunks of `grain` begins, the running total being `acc`.
    #[inline(always)]
    pub(super) fn begin_loop(&mut self, grain: u64, acc: u64) {
        let frame = Frame::new_loop(grain, acc, &mut self.spares);
        self.loops_open += 1;
        self.push(frame);
    }

    /// A loop's end when the top frame is that loop: it ends, the running total being `acc`.
    /// Whether it was that case (if not, nothing was done).
    #[inline(always)]
    fn end_loop_plain(&mut self, acc: u64) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
        let ends_loop = top.kind == FrameKind::Loop;
        if ends_loop {
            self.acc = acc;
            self.pop_general(&mut ());
        }
        ends_loop
    }

    /// An event the batch loop does not handle in line, by the general step.
    #[inline(never)]
    fn apply_rare(&mut self, e: Event) {
        self.apply(&mut (), e);
    }

    /// A frame of `kind` begins, the running total being `acc`: `Engine::push` of a new frame,
    /// written apart for the loop (through `push`, 1.7-2.4 more instructions per event).
    #[inline(always)]
    fn push_at(&mut self, kind: FrameKind, acc: u64) {
        let mut frame = Frame::new(kind, acc);
        frame.base = self.ends.len();
        self.stack.push(frame);
    }

    /// A closer of frames of `kind` when the top frame is one, without regions or loop, and its
    /// parent has none either: that frame ends, the running total being `acc`. Whether it was
    /// that case (if not, nothing was done).
    #[inline(always)]
    fn pop_plain(&mut self, kind: FrameKind, acc: u64) -> bool {
        let top = self.stack.last().expect("root frame is never popped");
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

    /// An iteration of the loop that is the top frame begins (its frame pending). Whether the
    /// top frame was a loop (if not, nothing was done).
    #[inline(always)]
    fn begin_iteration_plain(&mut self) -> bool {
        let top = self.stack.last_mut().expect("root frame is never popped");
        if top.kind != FrameKind::Loop {
            return false;
        }
        if let Some(lp) = top.extra.as_mut().and_then(|x| x.lp.as_mut()) {
            lp.begin_iteration();
        }
        true
    }
}

impl Pending {
    /// The kind of the frame pending (not `Pending::None`).
    #[inline(always)]
    pub(super) fn kind(self) -> FrameKind {
        match self {
            Pending::Iteration => FrameKind::Iteration,
            _ => FrameKind::Function,
        }
    }
}
