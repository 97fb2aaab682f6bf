//! Counting at native speed: every mark's NOP becomes a `jmp rel32` to a stub (`stub.rs`) in a
//! page mapped near the marked file; the stub appends (probe, `rdtsc`, operand) to its thread's
//! slot of a region shared with the tool (`region.rs`), which the event loop drains while the
//! program runs (it polls instead of blocking in `waitpid`). Everything is put in place through
//! ptrace by injected system calls (`inject.rs`): at each exec, at attach, and at each library
//! load (the loader hook). Costs are nanoseconds (`clock.rs`), or instructions where the stubs
//! can read each thread's own instructions counter with `rdpmc` (`instructions.rs`). A thread
//! inside a stub when a signal is to be delivered is stepped out of it first (`step_out.rs`).
//!
//! Time the program spends stopped by the tracer (set-up, library loads, signals) and time a
//! stub waited for room is charged to no strand; the measured cost of one hit is taken off each
//! strand that ends at a hit (measured at start-up, then by each thread in the program where two
//! marks lie back to back: `strands.rs`).

mod call_gadget;
mod clock;
mod cpu_time;
mod hits;
mod inject;
mod instructions;
mod polling;
mod refusals;
mod region;
mod slots;
mod spare_code;
mod step_out;
mod strands;
pub(crate) mod stub;
pub(crate) mod unwind;

pub(crate) use clock::calibrated;
#[cfg(feature = "testing")]
pub(crate) use clock::use_software_stand_in;
pub use clock::ClockUnavailable;

use std::collections::HashMap;
use std::time::Duration;

use nix::libc;

use self::clock::Clock;
use self::cpu_time::ProgramCpu;
use self::hits::{Hits, Operand, ProbeStub, Setting, PACKED_RUN};
use self::inject::setup_err;
use self::polling::{next_sleep, IDLE_MIN};
use self::region::Region;
use self::step_out::step_out_of;
use self::strands::{HitCost, Item, Strands, TickScale, FOLLOWS_NONE};
use self::stub::{Reading, StubOperand, FIRST_STUB, STUB_BYTES};
use super::Counting;
use crate::kill_point::{self, Phase};
use crate::procfs::{self, Mem};
use crate::ptrace::loader_hook::{self, LoaderHook};
use crate::ptrace::probes::Patch;
use crate::ptrace::{regs_unless_gone, restart, unless_gone, Core};
use crate::sys::native::{rdtsc, ChildEvents};
use crate::sys::switches::SwitchLog;
use crate::sys::wait_any_nohang;
use crate::sys::{self, Restart, Tid, Wait};
use crate::TraceError;
use cilkview_marks::MARK_NOP;

pub(crate) struct Native {
    clock: Clock,
    /// Ticks to the report's unit, from the clock (a multiply per strand).
    scale: TickScale,
    tool_pid: u64,
    region: Option<Region>,
    threads: HashMap<Tid, Strands>,
    hook: Option<LoaderHook>,
    /// Signals that arrived during an injected call, per thread: delivered at its next resume.
    deferred: HashMap<Tid, Vec<i32>>,
    /// By probe number.
    stubs: Vec<ProbeStub>,
    /// The thread of the last stop (injected calls run on it).
    current: Option<Tid>,
    /// The event loop's sleep when nothing happened.
    idle: Duration,
    /// Hits being packed for the sink.
    packed: Box<[u64; PACKED_RUN]>,
    /// Hits whose stub waited for room, and the ticks they waited.
    waits: u64,
    waited: u64,
    /// The empty strands' gaps of threads gone (`Strands::empty_gaps`): sum, number.
    empty_gaps: (u64, u64),
    /// The ticks of the hits' cost taken off the strands by the threads gone
    /// (`StrandState::hit_ticks()`).
    hit_ticks_gone: u64,
    /// The program's CPU time, for the note that sets the work against it.
    cpu: ProgramCpu,
}

/// Room for a thread's pending items kept from one report to the next (32 bytes each).
const PENDING_KEPT: usize = 1024;

impl Native {
    pub(crate) fn new(clock: Clock) -> Native {
        Native {
            scale: TickScale::new(clock.ns_per_tick()),
            clock,
            tool_pid: sys::getpid() as u64,
            region: None,
            threads: HashMap::new(),
            hook: None,
            deferred: HashMap::new(),
            stubs: Vec::new(),
            current: None,
            idle: IDLE_MIN,
            packed: Box::new([0; PACKED_RUN]),
            waits: 0,
            waited: 0,
            empty_gaps: (0, 0),
            hit_ticks_gone: 0,
            cpu: ProgramCpu::default(),
        }
    }

    /// Move the records written in `tid`'s slot to its pending items.
    fn collect(&mut self, tid: Tid) {
        let (Some(region), Some(th)) = (self.region.as_ref(), self.threads.get_mut(&tid)) else {
            return;
        };
        if let Some(slot) = th.slot {
            let pending = &mut th.pending;
            let head = region.head(slot);
            // Room for all at once (a stopped thread's slot is often a full ring): no doubling.
            pending.reserve(head.saturating_sub(th.next) as usize);
            th.next = region.drain(slot, th.next, head, |r| pending.push(Item::Hit(*r)));
        }
    }

    /// Report `tid`'s pending items and the records in its slot. Returns how many hits.
    fn report(&mut self, core: &mut Core<'_>, tid: Tid) -> u64 {
        let Some(th) = self.threads.get_mut(&tid) else {
            return 0;
        };
        // The records written so far, counted before the switch records are read: a strand
        // they end was off its CPU only in intervals the kernel has already logged (a record
        // written after the read could end a strand cut by a switch not yet read, charged whole).
        let head = match (self.region.as_ref(), th.slot) {
            (Some(region), Some(slot)) => Some((slot, region.head(slot))),
            _ => None,
        };
        if th.switches.is_some() {
            self.clock.anchor();
            th.read_switches(&self.clock);
        }
        // Nothing new (most polls of most threads): nothing to set up.
        if th.pending.is_empty() && head.is_none_or(|(_, head)| head <= th.next) {
            return 0;
        }
        let set = Setting {
            tid,
            stubs: &self.stubs,
            unpatched: ProbeStub::plain(0, self.clock.per_hit, 0).unpacked(),
            interruption: self.clock.interruption,
            scale: self.scale,
            wait_shift: self.clock.reading.wait_shift(),
        };
        let mut hits = Hits {
            set: &set,
            packed: &mut self.packed,
            len: 0,
            run_from: th.state.reported(),
            waits: &mut self.waits,
            waited: &mut self.waited,
            n: 0,
        };
        // The thread's clock as a local while its records are reported, so its fields can stay
        // in registers (through `th`, a map's entry, each record loaded and stored them).
        let mut st = th.state;
        let off = &mut th.off;
        // Its room kept for the records of the next stops (up to a bound: `collect` grew it one
        // record at a time, a realloc per doubling, at each stop).
        let mut pending = std::mem::take(&mut th.pending);
        for item in pending.drain(..) {
            match item {
                Item::Hit(r) => {
                    hits.n += 1;
                    hits.record(core, &mut st, off, &r);
                }
                Item::Pause { from, to } => st.pause(off, from, to),
            }
        }
        pending.shrink_to(PENDING_KEPT);
        th.pending = pending;
        if let (Some(region), Some((slot, head))) = (self.region.as_ref(), head) {
            hits.n += head.saturating_sub(th.next);
            hits.ring(core, &mut st, off, (region.ring(slot), th.next, head));
            th.next = region.drained(slot, th.next, head);
        }
        th.state = st;
        hits.flush(core, st.reported());
        hits.n
    }

    /// Place stubs for the probes at `addrs` (just placed by `core`) and patch their marks.
    fn patch(
        &mut self,
        core: &mut Core<'_>,
        pid: Tid,
        addrs: &[u64],
        all_stopped: bool,
    ) -> Result<(), TraceError> {
        let Some(region) = self.region.as_mut() else {
            return Ok(());
        };
        let tid = self.current.unwrap_or(pid);
        let proc_err = |source| TraceError::Proc { pid, source };
        let mem = Mem::open(pid).map_err(proc_err)?;
        // Threads stopped inside a mark's NOP (not at its start) must not see it change.
        let mut rips = Vec::new();
        if all_stopped {
            for &t in self.threads.keys() {
                if let Some(regs) = regs_unless_gone(t)? {
                    rips.push((t, regs.rip));
                }
            }
        }
        let mut deferred = Vec::new();
        for group in stub_page_groups(addrs) {
            let len = (FIRST_STUB + group.len() as u64 * STUB_BYTES).next_multiple_of(4096);
            let (lo, hi) = (group[0], *group.last().unwrap());
            let page = inject::place_near(pid, lo, hi, len)?;
            inject::map_code(tid, region.injector, page, len, &mut deferred)?;
            region.pages.push((page, page + len));
            let reading = self.clock.reading;
            let mut code = stub::page_head(reading);
            for (i, &addr) in group.iter().enumerate() {
                let (index, operand) =
                    describe_stub(&mut self.stubs, &self.clock, reading, core, addr);
                let at = page + FIRST_STUB + i as u64 * STUB_BYTES;
                let s = stub::stub(reading, at, addr, page, index, operand)
                    .ok_or_else(|| setup_err(pid, format!("stub for {addr:#x} out of reach")))?;
                code.resize((at - page) as usize, 0xcc);
                code.extend_from_slice(&s);
            }
            mem.write(page, &code).map_err(proc_err)?;
            for &addr in &group {
                let at = page + FIRST_STUB + (code_index(&group, addr)) as u64 * STUB_BYTES;
                for &(t, rip) in &rips {
                    if rip > addr && rip < addr + 5 {
                        step_out_of(t, addr, region.int3, &mut deferred)?;
                    }
                }
                let jump = stub::jump(addr, at).expect("placed in reach");
                mem.write(addr, &jump).map_err(proc_err)?;
                kill_point::reached(Phase::Patching);
                core.add_patch(Patch {
                    addr,
                    orig: MARK_NOP,
                    len: 5,
                });
            }
        }
        if !deferred.is_empty() {
            self.deferred.entry(tid).or_default().extend(deferred);
        }
        Ok(())
    }
}

/// What the drain needs of the probe at `addr` (just placed by `core`), kept in `stubs` by probe
/// number; its number and what its stub loads as the operand.
fn describe_stub(
    stubs: &mut Vec<ProbeStub>,
    clock: &Clock,
    reading: Reading,
    core: &Core<'_>,
    addr: u64,
) -> (u32, StubOperand) {
    let probe = core.probe_at(addr).expect("placed by core");
    let (operand, kind) = match (probe.return_address, probe.operand) {
        (Some((ra, load)), _) => (
            StubOperand::Memory(ra.cfa_register, (ra.cfa_offset - 8) as i32),
            Operand::ReturnAddress(load),
        ),
        (None, Some(r)) => (StubOperand::Register(r), Operand::Value),
        (None, None) => (StubOperand::None, Operand::None),
    };
    if stubs.len() <= probe.index {
        let unpatched = stubs.len()..=probe.index;
        let short_cut = strands::short_cut(clock.interruption);
        stubs.extend(unpatched.map(|i| ProbeStub::plain(i, clock.per_hit, short_cut)));
    }
    let stub = &mut stubs[probe.index];
    stub.operand = kind;
    if !matches!(kind, Operand::None) {
        *stub = stub.unpacked();
    }
    match reading {
        Reading::Rdpmc => stub.hit_cost = HitCost::whole(stub::rdpmc_hit_instructions(operand)),
        Reading::Tsc => {
            stub.follows = core
                .probe_at(addr - 5)
                .map_or(FOLLOWS_NONE, |p| p.index as u32)
        }
    }
    (probe.index as u32, operand)
}

/// The marks at `addrs` in groups that share a stub page: within 1 GiB of each other, in order.
fn stub_page_groups(addrs: &[u64]) -> Vec<Vec<u64>> {
    let mut sorted = addrs.to_vec();
    sorted.sort_unstable();
    let mut groups: Vec<Vec<u64>> = Vec::new();
    for a in sorted {
        match groups.last_mut() {
            Some(g) if a - g[0] < (1 << 30) => g.push(a),
            _ => groups.push(vec![a]),
        }
    }
    groups
}

/// The index of `addr` in its group.
fn code_index(group: &[u64], addr: u64) -> usize {
    group.binary_search(&addr).expect("in the group")
}

impl Counting for Native {
    fn add_thread(&mut self, tid: Tid, at_exec: bool) -> Result<(), TraceError> {
        let mut th = Strands::starting(self.clock.reading);
        if self.clock.reading == Reading::Tsc && self.clock.switches.is_ok() {
            th.switches = SwitchLog::open(tid).ok();
        }
        self.threads.insert(tid, th);
        if !at_exec {
            // (The launched program's CPU time is measured from its exec: `exec`.)
            self.cpu.start(tid);
            self.give_slot(tid, false)?;
        }
        Ok(())
    }

    fn unmeasured_sharer(&mut self, tid: Tid) -> Result<(), TraceError> {
        // It inherited its parent's gs base, the parent's slot: its hits would be the
        // parent's. They go to the discard slot instead.
        let Some(region) = self.region.as_ref() else {
            return Ok(());
        };
        let Some(mut regs) = regs_unless_gone(tid)? else {
            return Ok(());
        };
        regs.gs_base = region.discard();
        unless_gone("SETREGS", tid, sys::setregs(tid, regs)).map(drop)
    }

    fn remove_thread(&mut self, tid: Tid) {
        if let Some(th) = self.threads.remove(&tid) {
            let (sum, n) = th.state.empty_gaps();
            self.empty_gaps = (self.empty_gaps.0 + sum, self.empty_gaps.1 + n);
            self.hit_ticks_gone += th.state.hit_ticks();
            if let (Some(region), Some(slot)) = (self.region.as_mut(), th.slot) {
                region.release(slot);
            }
        }
        self.deferred.remove(&tid);
    }

    fn take_tail(&mut self, tid: Tid) -> u64 {
        let k = self.scale;
        let Some(th) = self.threads.get_mut(&tid) else {
            return 0;
        };
        if th.switches.is_some() {
            self.clock.anchor();
            th.read_switches(&self.clock);
        }
        let now = th.now(self.clock.reading);
        let cost = th.end_at(now, k);
        self.cpu.ended(tid, th.state.reported());
        // Its slot is free from its exit stop on (no code of its own runs after it, and its
        // records were reported): a thread created after this one's exit returned to the
        // program (a join) takes it, whether or not the exit was reaped by then.
        if let (Some(region), Some(slot)) = (self.region.as_mut(), th.slot.take()) {
            region.release(slot);
        }
        cost
    }

    fn flush(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<(), TraceError> {
        self.report(core, tid);
        Ok(())
    }

    fn resume(&mut self, tid: Tid, mut sig: i32) -> Result<(), TraceError> {
        if sig != 0 {
            self.leave_stubs(tid)?;
        }
        // Signals that stopped the thread while the tracer stepped it: one goes with this
        // resume if it has none; the others are sent to the thread again (pending, each
        // delivered at a stop of its own: held until a resume without a signal, a SIGTRAP met
        // while stepping out of a stub waited for ever behind a fast timer's signals).
        if let Some(met) = self.deferred.remove(&tid) {
            let mut met = met.into_iter();
            if sig == 0 {
                sig = met.next().unwrap_or(0);
            }
            if let Ok(tgid) = procfs::tgid(tid) {
                for s in met {
                    sys::tgkill(tgid, tid, s);
                }
            }
        }
        if let Some(th) = self.threads.get_mut(&tid) {
            if let Some(from) = th.stopped_at.take() {
                th.pending.push(Item::Pause { from, to: rdtsc() });
            }
        }
        self.cpu.resumed(tid);
        restart(tid, Restart::Continue(sig))
    }

    fn exec(&mut self, former: Tid, tid: Tid) -> Result<u64, TraceError> {
        // The old image and its region are gone: what other threads left is dropped.
        let k = self.scale;
        let mut th = self
            .threads
            .remove(&former)
            .unwrap_or_else(|| Strands::starting(self.clock.reading));
        let measured = self.region.is_some();
        self.cpu.exec(former, tid, measured);
        self.region = None;
        self.hook = None;
        self.stubs.clear();
        for other in self.threads.values_mut() {
            other.slot = None;
            other.pending.clear();
        }
        th.slot = None;
        th.pending.clear();
        let now = th.now(self.clock.reading);
        th.counter = None; // the old image's: the new one opens its own
        let cost = if measured { th.state.end(now, 0, k) } else { 0 };
        th.state.last = now;
        self.threads.insert(tid, th);
        Ok(cost)
    }

    fn armed(
        &mut self,
        core: &mut Core<'_>,
        pid: Tid,
        addrs: &[u64],
        new_image: bool,
    ) -> Result<(), TraceError> {
        if new_image {
            if let Some(reason) = refusals::gs_refusal(pid) {
                return Err(TraceError::NativeRefused { pid, reason });
            }
            let tid = self
                .current
                .filter(|t| self.threads.contains_key(t))
                .unwrap_or(pid);
            let mut deferred = Vec::new();
            let reading = self.clock.reading;
            self.region = Some(Region::create(pid, tid, reading, &mut deferred)?);
            if !deferred.is_empty() {
                self.deferred.entry(tid).or_default().extend(deferred);
            }
            let mut tids: Vec<Tid> = self.threads.keys().copied().collect();
            tids.sort_unstable();
            for t in tids {
                self.give_slot(t, true)?;
            }
            self.hook = loader_hook::plant(core, pid)?;
        }
        self.patch(core, pid, addrs, new_image)
    }

    fn refuses(&self, pid: Tid, group_stopped: bool) -> Option<String> {
        refusals::refusal(pid, group_stopped).or_else(|| refusals::gs_refusal(pid))
    }

    fn delivers_while_stopping(&self) -> bool {
        true // `resume` takes the thread out of the stubs and continues it
    }

    fn at_boundary(&mut self, _: &mut Core<'_>, _: Tid) -> Result<(), TraceError> {
        Ok(()) // a mark right here is a jump: the stub records it
    }

    fn sigtrap(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<Option<i32>, TraceError> {
        use super::{patched_sigtrap, PatchedTrap};
        match patched_sigtrap(core, tid, self.hook)? {
            PatchedTrap::Gone => Ok(None),
            PatchedTrap::LoaderHook { rescanned, .. } => {
                if let Some(addrs) = rescanned {
                    let pid = core.pid();
                    self.patch(core, pid, &addrs, false)?;
                }
                Ok(Some(0))
            }
            // The marks are jumps, not int3: any other SIGTRAP is the program's own.
            PatchedTrap::Int3 { .. } | PatchedTrap::Program => Ok(Some(libc::SIGTRAP)),
        }
    }

    fn stopped(&mut self, tid: Tid) {
        self.current = Some(tid);
        self.cpu.stopped(tid);
        // Instructions do not run while stopped: no pause to take off.
        if let (Some(th), Reading::Tsc) = (self.threads.get_mut(&tid), self.clock.reading) {
            th.stopped_at = Some(rdtsc());
        }
        self.collect(tid);
    }

    fn summary(&self, hits: u64) -> Vec<cilkview_events::Note> {
        let waits = self.waits_summary();
        let (sum, n) = (self.threads.values().map(|th| th.state.empty_gaps()))
            .fold(self.empty_gaps, |a, b| (a.0 + b.0, a.1 + b.1));
        let ns = |ticks: f64| ticks * self.clock.ns_per_tick();
        let counter = if n == 0 {
            waits
        } else {
            format!(
                "{waits}; a mark hit cost {:.1} ns in the program (the mean of {n} gaps between \
                 marks back to back, taken off its strands from the 1024th on), {:.1} ns at \
                 start-up",
                ns(sum as f64 / n as f64),
                ns(self.clock.per_hit.ticks()),
            )
        };
        let mut notes = vec![cilkview_events::Note::new("counter", counter)];
        if self.clock.reading == Reading::Tsc {
            let waited = ns(self.waited as f64);
            let taken = (self.threads.values().map(|th| th.state.hit_ticks()))
                .fold(self.hit_ticks_gone, |a, b| a + b);
            if let Some(cpu) = self.cpu.note(hits, ns(taken as f64), waited) {
                notes.push(cilkview_events::Note::new("cpu-time", cpu));
            }
        }
        notes
    }

    fn wait(&mut self, core: &mut Core<'_>) -> Result<Wait, TraceError> {
        // Between looks at the slots the tool sleeps, but a tracee's stop (a signal for the
        // program, a new thread) wakes it at once (SIGCHLD): a program that stops often (a
        // signal every 100 µs, each stopping it until the tool looks) otherwise waited out the
        // sleep, up to 1 ms, at each stop — measured: 3 rounds of `adversarial storm` in 20 s
        // instead of 30 in 2 s.
        let events = ChildEvents::watch().map_err(TraceError::Wait)?;
        loop {
            if let Some(w) = wait_any_nohang().map_err(TraceError::Wait)? {
                return Ok(w);
            }
            let tids: Vec<Tid> = self.threads.keys().copied().collect();
            let mut fullest = 0;
            for tid in tids {
                fullest = fullest.max(self.report(core, tid));
            }
            self.idle = next_sleep(self.idle, fullest);
            events.sleep(self.idle);
        }
    }
}

impl Native {
    /// Whether and how long the program waited for the analysis.
    fn waits_summary(&self) -> String {
        if self.waits == 0 {
            "the program never waited for the analysis".into()
        } else {
            let waited = match self.clock.reading {
                Reading::Tsc => format!(
                    "{:.1} ms",
                    self.waited as f64 * self.clock.ns_per_tick() / 1e6
                ),
                Reading::Rdpmc => format!("{} instructions", self.waited),
            };
            format!(
                "the program waited for the analysis at {} mark hits, {waited} in all on its CPU \
                 (charged to no strand)",
                self.waits,
            )
        }
    }
}
