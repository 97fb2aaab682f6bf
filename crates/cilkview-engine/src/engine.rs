//! The Cilkview algorithm (paper Figure 13) over a stack of frames, extended with parallel loops,
//! regions and robustness for partial streams. See docs/engine.md for the model.

use crate::event::{Event, EventKind};
use crate::frame::{Frame, FrameExtra, FrameKind, Spares};
use crate::loops::LoopState;
use crate::measures::{Anomalies, Measures, RegionMeasures, Report};
use crate::observer::Observer;
use crate::paths::{Cost, End};
use crate::profile::cilkprof::Profiler;
use crate::profile::CallSite;

mod batch;
mod profiled;
mod regions;

pub use batch::Steps;

/// Cilkview's default burden: the cost of a steal, in instructions, put on every continuation edge.
pub const DEFAULT_BURDEN: u64 = 15_000;
/// The default burden when costs are nanoseconds (`--counter native` measuring time): 5 µs, what the default
/// 15,000 instructions take at one instruction per cycle at 3 GHz, and the order of a measured
/// steal in a work-stealing runtime (docs/engine.md, "The burden").
pub const DEFAULT_BURDEN_NS: u64 = 5_000;

/// Engine settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Cost added on every continuation edge of the burdened dag.
    pub burden: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            burden: DEFAULT_BURDEN,
        }
    }
}

/// The counting engine: feed it events, read measures.
///
/// Cost: O(1) per event plus O(r) for the r regions open in the current function instance;
/// memory O(fork-join depth + log(chunks) per open loop), independent of the number of events.
/// Exact for any run [`Engine::sums_fit`] accepts.
#[derive(Clone, Debug)]
pub struct Engine {
    config: Config,
    /// `stack[0]` is the implicit root frame and is never popped.
    stack: Vec<Frame>,
    /// Loop frames on `stack` (an `IterationBegin` with none is stray).
    loops_open: usize,
    spawns: u64,
    syncs: u64,
    events: u64,
    /// The running total: the cost of every strand so far. A strand adds to it and to nothing
    /// else (see `Paths`).
    acc: u64,
    /// Where the children spawned since their frame's last sync end, for `SpawnAfter`: those of
    /// each frame of the stack from its `base`, the top frame's last (O(1) per spawn and sync).
    ends: Vec<End>,
    /// A frame begun whose push waits for the next event: a function entered, or an iteration
    /// begun. If that event is its end (a leaf call, half of all calls in a recursion; an
    /// iteration with no marks inside), the frame would have held that one strand, so the strand
    /// goes to the parent and no frame is pushed or popped (a profiling engine too: its profiler
    /// holds the same frame, see `process_profiled`).
    pending: Pending,
    /// The measures of the regions ended so far, by id (sorted: a region's end finds its entry
    /// by a binary search, a new id is inserted in place).
    regions: Vec<RegionMeasures>,
    anomalies: Anomalies,
    /// How many anomalies were absorbed (the sum of `anomalies`' counts).
    anomaly_count: u64,
    /// Call-site profiling state, when enabled (boxed: the unprofiled engine stays as it was).
    profiler: Option<Box<Profiler>>,
    /// Frame extras of ended frames, reused: no allocation per loop or region.
    spares: Spares,
}

/// What frame, begun, waits for the next event to be pushed (see `Engine::pending`): its
/// `FrameKind`'s number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Pending {
    None = 0,
    Function = FrameKind::Function as u8,
    Iteration = FrameKind::Iteration as u8,
}

impl Default for Engine {
    fn default() -> Self {
        Engine::new(Config::default())
    }
}

impl Engine {
    pub fn new(config: Config) -> Self {
        Engine {
            config,
            stack: vec![Frame::new(FrameKind::Root, 0)],
            loops_open: 0,
            spawns: 0,
            syncs: 0,
            events: 0,
            acc: 0,
            ends: Vec::new(),
            pending: Pending::None,
            regions: Vec::new(),
            anomalies: Anomalies::default(),
            anomaly_count: 0,
            profiler: None,
            spares: Spares::default(),
        }
    }

    /// An engine that also computes call-site profiles (Cilkprof) from the events' sites, in the
    /// same pass: O(1) amortized more per event. The report then has a [`crate::Profile`].
    pub fn with_profile(config: Config) -> Self {
        Engine {
            profiler: Some(Box::new(Profiler::new())),
            ..Engine::new(config)
        }
    }

    /// Whether this engine computes call-site profiles.
    pub fn profiling(&self) -> bool {
        self.profiler.is_some()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the measures of a run are exact: its event costs add up to `total_cost` and it
    /// spawned `spawns` times (loop chunks included) with `burden` per continuation. Every path
    /// length is at most `total_cost + burden × spawns`, and the engine's sums wrap at 2^64
    /// (no saturation checks on the hot path). Instruction counts never get there (2^64
    /// instructions: centuries of CPU time); an absurd burden can.
    pub fn sums_fit(total_cost: u64, spawns: u64, burden: u64) -> bool {
        u128::from(total_cost) + u128::from(burden) * u128::from(spawns) <= u128::from(u64::MAX)
    }

    /// Events consumed so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The cost of every strand so far (events' and [`Engine::charge`]'s), wrapping at 2^64: a
    /// caller that compares it before and after some events has their total cost.
    pub fn cost_so_far(&self) -> u64 {
        self.acc
    }

    /// The malformed-stream situations absorbed so far (a caller comparing them before and after
    /// an event knows which event caused one).
    pub fn anomalies(&self) -> Anomalies {
        self.anomalies
    }

    /// How many anomalies were absorbed so far, of any kind: a caller that compares it before
    /// and after an event (one word) knows whether to look at [`Engine::anomalies`].
    #[inline]
    pub fn anomaly_count(&self) -> u64 {
        self.anomaly_count
    }

    /// How many children the current frame spawned since its last sync (a `SpawnAfter`'s
    /// sibling numbers count from its first).
    pub fn children_out(&self) -> u64 {
        if self.pending != Pending::None {
            return 0; // the frame of a function or iteration just begun
        }
        let top = self.stack.last().expect("root frame is never popped");
        (self.ends.len() - top.base) as u64
    }

    /// Current fork-join nesting depth (frames open above the implicit root).
    pub fn depth(&self) -> usize {
        self.stack.len() - 1 + usize::from(self.pending != Pending::None)
    }

    /// Consumes one event. (Inlined whole into a caller's loop: the unprofiled path is the hot
    /// path of the analysis.)
    #[inline(always)]
    pub fn process(&mut self, event: Event) {
        if self.profiler.is_none() {
            self.process_unprofiled(event);
        } else {
            // The fields apart: an `Event` passed whole would be stored to memory for the call
            // before the branch, on the unprofiled path too.
            self.process_profiled(event.cost, event.kind, event.site);
        }
    }

    /// [`Engine::process`] for an engine that computes no profile (see [`Engine::profiling`]):
    /// a caller that checked once for a run of events.
    #[inline(always)]
    pub fn process_unprofiled(&mut self, event: Event) {
        debug_assert!(self.profiler.is_none());
        self.step(&mut (), event);
    }

    /// [`Engine::process`] for a profiling engine (`engine/profiled.rs`).
    #[inline(never)]
    fn process_profiled(&mut self, cost: u64, kind: EventKind, site: Option<CallSite>) {
        let Some(mut p) = self.profiler.take() else {
            return;
        };
        self.events += 1;
        self.apply_profiled(&mut p, &Event::at(cost, kind, site), &[]);
        self.profiler = Some(p);
    }

    /// Consumes one event, telling `o` what happens to the frames.
    #[inline(always)]
    fn step<O: Observer>(&mut self, o: &mut O, event: Event) {
        self.events += 1;
        self.apply(o, event);
    }

    /// [`Engine::step`] but for the count of events (a batch counts its events at once).
    #[inline(always)]
    fn apply<O: Observer>(&mut self, o: &mut O, event: Event) {
        if self.pending != Pending::None {
            if event.kind == EventKind::FunctionExit && self.pending == Pending::Function {
                self.pending = Pending::None;
                // A leaf call: its frame's measures would be this strand, serial in the parent.
                self.acc = self.acc.wrapping_add(event.cost);
                return;
            }
            if event.kind == EventKind::IterationEnd && self.pending == Pending::Iteration {
                self.pending = Pending::None;
                self.acc = self.leaf_iteration_ended(self.acc, event.cost);
                return;
            }
            // The frame began at its entry, before this event's strand.
            self.push_pending();
        }
        // The strand that ends here ran in the current frame: it adds as much to the frame's
        // work as to its paths, which only the running total records (see `Paths`).
        self.acc = self.acc.wrapping_add(event.cost);
        match event.kind {
            EventKind::FunctionEnter if !O::FRAMES => self.pending = Pending::Function,
            EventKind::FunctionEnter => {
                o.push(FrameKind::Function, event.site, self.acc);
                self.push_at(FrameKind::Function, self.acc);
            }
            EventKind::Spawn => {
                self.spawns += 1;
                self.push_at(FrameKind::Spawn, self.acc);
                o.push(FrameKind::Spawn, event.site, self.acc);
            }
            EventKind::LoopBegin { grain } => {
                self.begin_loop(grain, self.acc);
                o.push_loop(self.acc);
            }
            EventKind::FunctionExit => self.close(o, FrameKind::Function),
            EventKind::SpawnReturn => self.close(o, FrameKind::Spawn),
            EventKind::IterationEnd => self.close(o, FrameKind::Iteration),
            EventKind::LoopEnd => self.close(o, FrameKind::Loop),
            EventKind::IterationBegin => {
                if self.loops_open == 0 {
                    self.anomaly().stray_iterations += 1;
                    return;
                }
                while self.top().kind != FrameKind::Loop {
                    self.pop_implicit(o);
                }
                // The iteration opens a chunk (or continues the open one): its end, counted by
                // the loop, says so (`LoopState::in_chunk`).
                let acc = self.acc;
                if !O::FRAMES {
                    self.pending = Pending::Iteration;
                    return;
                }
                self.push_at(FrameKind::Iteration, acc);
                o.push(FrameKind::Iteration, None, acc);
            }
            EventKind::Sync => {
                self.syncs += 1;
                self.sync_top(o);
            }
            EventKind::SpawnAfter { sibling } => {
                o.spawn_after(sibling);
                let top = self.stack.last_mut().expect("root frame is never popped");
                top.spawn_after(sibling, &self.ends);
            }
            EventKind::WaitFor { sibling } => {
                o.wait_for(sibling, self.acc);
                let top = self.stack.last_mut().expect("root frame is never popped");
                top.wait_for(sibling, self.acc, &self.ends);
            }
            EventKind::RegionBegin(id) => self.begin_region(id),
            EventKind::RegionEnd(id) => self.end_region(id),
        }
    }

    /// Charges the cost of a strand that no event ended: the tail of a run after its last event,
    /// or instructions of threads that hit no mark. It runs in the current frame.
    pub fn charge(&mut self, cost: u64) {
        let Some(mut p) = self.profiler.take() else {
            self.push_pending();
            self.acc = self.acc.wrapping_add(cost);
            return;
        };
        self.push_held(&mut p);
        self.acc = self.acc.wrapping_add(cost);
        self.profiler = Some(p);
    }

    /// Measures of everything seen so far, as if every open frame ended now. Does not change the
    /// engine: more events may follow.
    pub fn snapshot(&self) -> Report {
        self.clone().finish()
    }

    /// Ends every open frame and region (implicit syncs) and returns the measures.
    pub fn finish(mut self) -> Report {
        let mut profiler = self.profiler.take();
        match &mut profiler {
            Some(p) => self.push_held(p),
            None => self.push_pending(),
        }
        while self.stack.len() > 1 {
            match &mut profiler {
                None => self.pop_implicit(&mut ()),
                Some(p) => self.pop_implicit(&mut **p),
            }
        }
        let mut root = self.stack.pop().expect("root frame");
        if root.sync(self.acc, &mut self.ends) {
            self.syncs += 1;
        }
        self.end_regions(&mut root);
        let total = root.paths.cur(self.acc);
        let profile = profiler.map(|p| p.finish(total.work, total.span, self.acc));
        Report {
            total: Measures {
                work: total.work,
                span: total.span,
                burdened_span: total.bspan,
                spawns: self.spawns,
                syncs: self.syncs,
            },
            events: self.events,
            regions: self.regions,
            anomalies: self.anomalies,
            profile,
        }
    }

    /// The pending iteration (see `pending`) ends at the next event, whose strand of `cost` is
    /// all it held, the running total being `start` before it; returns the running total after.
    #[inline(always)]
    fn leaf_iteration_ended(&mut self, start: u64, cost: u64) -> u64 {
        let acc = start.wrapping_add(cost);
        // A leaf iteration: this strand, ended in the loop (the top frame), whose own strands
        // were settled up to `start` at the iteration's begin.
        let burden = self.config.burden;
        let top = self.stack.last_mut().expect("root frame is never popped");
        let in_loop = |x: &mut Box<FrameExtra>| x.lp.end_leaf_iteration(burden, acc);
        if !top.extra.as_mut().is_some_and(in_loop) {
            top_not_loop_iteration_ended(top, cost, burden, acc);
        }
        acc
    }

    /// [`Engine::leaf_iteration_ended`] for a profiling engine, the running total being `acc`
    /// after its strand of `cost`: whether the iteration closed its loop's chunk.
    #[inline(always)]
    fn leaf_iteration_closing(&mut self, acc: u64, cost: u64) -> bool {
        let burden = self.config.burden;
        let top = self.stack.last_mut().expect("root frame is never popped");
        let in_loop = top
            .extra
            .as_mut()
            .and_then(|x| x.lp.end_leaf_iteration_closing(burden, acc));
        in_loop.unwrap_or_else(|| {
            top_not_loop_iteration_ended(top, cost, burden, acc);
            false
        })
    }

    /// The frame begun and not pushed yet (see `pending`), if any, pushed now.
    #[inline(always)]
    fn push_pending(&mut self) {
        let pending = std::mem::replace(&mut self.pending, Pending::None);
        if pending != Pending::None {
            self.push_at(pending.kind(), self.acc);
        }
    }

    /// The anomaly counters, to count one more.
    fn anomaly(&mut self) -> &mut Anomalies {
        self.anomaly_count += 1;
        &mut self.anomalies
    }

    fn top(&mut self) -> &mut Frame {
        self.stack.last_mut().expect("root frame is never popped")
    }

    /// Syncs the top frame; returns whether it had children out.
    #[inline]
    fn sync_top<O: Observer>(&mut self, o: &mut O) -> bool {
        o.sync(self.acc);
        let top = self.stack.last_mut().expect("root frame is never popped");
        top.sync(self.acc, &mut self.ends)
    }

    /// Handles a closer for frames of `kind`: closes frames up to and including the innermost one of
    /// that kind. With none open (a stream that began inside that frame), the closer ends the part
    /// of the frame the stream saw: everything open is closed and the root syncs.
    #[inline(always)]
    fn close<O: Observer>(&mut self, o: &mut O, kind: FrameKind) {
        if self.stack.last().expect("root frame is never popped").kind != kind {
            self.close_through(o, kind);
            return;
        }
        self.pop(o);
    }

    /// [`Engine::close`] when the top frame is not of `kind`: the frames above the innermost
    /// one of that kind end implicitly. (The stack is searched: what is searched is popped,
    /// or, with none of that kind, everything is: O(1) amortized per pushed frame.)
    #[cold]
    #[inline(never)]
    fn close_through<O: Observer>(&mut self, o: &mut O, kind: FrameKind) {
        if !self.stack.iter().any(|f| f.kind == kind) {
            self.anomaly().unmatched_closers += 1;
            while self.stack.len() > 1 {
                self.pop_implicit(o);
            }
            if matches!(kind, FrameKind::Function | FrameKind::Spawn) && self.sync_top(o) {
                self.syncs += 1;
            }
            return;
        }
        while self.top().kind != kind {
            self.pop_implicit(o);
        }
        self.pop(o);
    }

    fn pop_implicit<O: Observer>(&mut self, o: &mut O) {
        self.anomaly().implicit_frame_ends += 1;
        self.pop(o);
    }

    /// Ends the top frame and folds it into its parent.
    #[inline(always)]
    fn pop<O: Observer>(&mut self, o: &mut O) {
        if !self.pop_in_place(o, self.acc) {
            self.pop_general(o);
        }
    }

    /// The common case of [`Engine::pop`], in place, the running total being `acc`: a call or
    /// spawn frame without regions or loop, whose parent has none either (what `pop_general`
    /// does, with nothing to check). Whether it was that case (if not, nothing was done).
    #[inline(always)]
    fn pop_in_place<O: Observer>(&mut self, o: &mut O, acc: u64) -> bool {
        let [.., parent, frame] = &mut self.stack[..] else {
            return false;
        };
        // One test of both (`|`: no jump between them).
        if frame.extra.is_some() | parent.extra.is_some() {
            return false;
        }
        let kind = frame.kind;
        // Its children out, if any (rarely: a frame syncs before it ends), joined first.
        if self.ends.len() > frame.base {
            self.syncs += 1;
            self.ends.truncate(frame.base);
            frame.paths.sync(acc);
        }
        // Its paths are in its parent's coordinate: where they end is where the parent's go on
        // from (a call: the parent takes the frame's positions as they are, `continue_from` of
        // `at` folding away), or the child's end (a spawn), as they are.
        let end = frame.paths.at(acc);
        let measured = frame.paths.cost_to(end, acc, &parent.paths);
        o.pop(kind, measured.work, measured.span, acc);
        let spawned = kind == FrameKind::Spawn;
        if spawned {
            let work = acc.wrapping_sub(frame.paths.start);
            parent.paths.child_ended(end, work, self.config.burden);
        } else {
            parent.paths.continue_from(acc, end);
        }
        // Its extra is none: nothing to drop (a plain `pop` would test it again). Popped before
        // `ends` grows, while the stack's length is known.
        std::mem::forget(self.stack.pop());
        if spawned {
            self.ends.push(end);
        }
        true
    }

    #[cold]
    fn pop_general<O: Observer>(&mut self, o: &mut O) {
        let mut frame = self.stack.pop().expect("never pops the root");
        if frame.kind == FrameKind::Loop {
            self.loops_open -= 1;
        }
        self.fold_into_parent(o, &mut frame);
        if let Some(x) = frame.extra.take() {
            self.spares.keep_extra(x);
        }
    }

    /// A loop of state `lp`, its frame just popped, ends: its tree and the control code after its
    /// last chunk run in series in its parent (the top frame now), the running total being the
    /// engine's.
    #[inline(always)]
    fn fold_loop(&mut self, lp: &mut LoopState) {
        let (tree, chunks, tail) = lp.finish(self.config.burden, self.acc);
        let internal = chunks.saturating_sub(1);
        self.spawns += internal;
        self.syncs += internal;
        let parent = self.top();
        parent.serial(tree);
        parent.serial(tail);
    }

    /// Ends `frame`, just popped, and folds it into its parent (the top frame now).
    fn fold_into_parent<O: Observer>(&mut self, o: &mut O, frame: &mut Frame) {
        let (burden, acc, start) = (self.config.burden, self.acc, frame.paths.start);
        // A loop: its tree, then its control code after the last chunk.
        // (Its state stays in its extra, which `pop_general` keeps for a later loop.)
        if let Some(lp) = frame.extra.as_mut().and_then(|x| x.lp.as_loop()) {
            if lp.chunk_open() {
                o.chunk_closed(acc);
            }
            o.pop(frame.kind, 0, 0, acc);
            self.fold_loop(lp);
            return;
        }
        if frame.sync(acc, &mut self.ends) {
            self.syncs += 1;
        }
        if !frame.regions().is_empty() {
            self.end_regions(frame);
        }
        let parent = self.stack.last_mut().expect("root frame is never popped");
        let measured = frame.paths.cost_to(frame.paths.at(acc), acc, &parent.paths);
        o.pop(frame.kind, measured.work, measured.span, acc);
        match frame.kind {
            FrameKind::Spawn => parent.child_returned(measured, start, burden, &mut self.ends),
            FrameKind::Iteration => {
                parent.iteration_ended(measured, burden, acc);
                if O::FRAMES && parent.loop_between_chunks() {
                    o.chunk_closed(acc);
                }
            }
            FrameKind::Function | FrameKind::Root | FrameKind::Loop => parent.serial(measured),
        }
    }
}

/// [`Engine::leaf_iteration_ended`] when the top frame is no loop (not met: an iteration begins
/// only in a loop), out of line.
#[cold]
#[inline(never)]
fn top_not_loop_iteration_ended(top: &mut Frame, cost: u64, burden: u64, acc: u64) {
    top.iteration_ended(Cost::strand(cost), burden, acc);
}
