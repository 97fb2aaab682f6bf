//! A thread's records as the drain reports them: each ends a strand; what a probe's stub
//! gives the analysis.

use std::collections::VecDeque;

use cilkview_events::{HitsTotal, PackedHit};

use super::region::Record;
use super::strands::{HitCost, StrandState, TickScale, FOLLOWS_NONE};
use crate::ptrace::Core;
use crate::sys::Tid;
use crate::TraceEvent;
/// What the analysis gets as a hit's operand.
#[derive(Clone, Copy)]
pub(super) enum Operand {
    None,
    Value,
    /// The return address, made relative to this load address.
    ReturnAddress(u64),
}

/// What the drain needs of a probe: its operand, what one hit adds to the strand it ends,
/// (time only) the probe whose mark lies just before its own (a strand from that one's hit to
/// this one's is empty), and where its hits are packed, their probe's bits.
#[derive(Clone, Copy)]
pub(super) struct ProbeStub {
    pub(super) operand: Operand,
    pub(super) hit_cost: HitCost,
    pub(super) follows: u32,
    /// [`PackedHit::probe_bits`] where its hits go packed: without an operand, its number
    /// within a packed hit's.
    pub(super) packed: Option<u64>,
}

impl ProbeStub {
    /// Probe number `probe`'s, without an operand, each hit adding `hit_cost`.
    pub(super) fn plain(probe: usize, hit_cost: HitCost) -> ProbeStub {
        ProbeStub {
            operand: Operand::None,
            hit_cost,
            follows: FOLLOWS_NONE,
            packed: PackedHit::probe_bits(probe),
        }
    }
}

/// One thread's records being reported: each ends a strand; hits without an operand go to the
/// sink packed, a run at a time. The per-record path is inlined into the drain's loop (as a
/// closure it was a call per hit, ~16 instructions of it; callgrind), and what is out of line
/// (the sink, a hit with an operand, a wait) is given values, never the `Hits` or the thread's
/// [`StrandState`]: neither escapes, so the compiler keeps their fields in registers.
pub(super) struct Hits<'a> {
    pub(super) tid: Tid,
    pub(super) stubs: &'a [ProbeStub],
    /// What a probe without a stub is taken as (its hit cost: what a hit adds to its strand; its
    /// hits not packed, as their number is not its own).
    pub(super) unpatched: ProbeStub,
    /// Ticks: a longer gap between back-to-back marks was an interruption.
    pub(super) interruption: u64,
    pub(super) scale: TickScale,
    /// [`Record::wait`] to ticks (or instructions): shifted left by this.
    pub(super) wait_shift: u32,
    /// Packed hits not yet handed to the sink: the first `len` (a fixed array and a count, not
    /// a `Vec`: no capacity check, length or pointer reloaded per hit).
    pub(super) packed: &'a mut [u64; PACKED_RUN],
    pub(super) len: usize,
    pub(super) waits: &'a mut u64,
    pub(super) waited: &'a mut u64,
    /// Records reported (counted by the caller, not per record).
    pub(super) n: u64,
}

impl Hits<'_> {
    /// The record `r` of a thread whose clock is `st` (its off-CPU intervals `off`).
    #[inline(always)]
    pub(super) fn record(
        &mut self,
        core: &mut Core<'_>,
        st: &mut StrandState,
        off: &mut VecDeque<(u64, u64)>,
        r: Record,
    ) {
        let probe = r.probe as usize;
        // By reference: copying the 32-byte `ProbeStub` out was ~8 instructions per hit.
        let stub = match self.stubs.get(probe) {
            Some(stub) => stub,
            None => &self.unpatched,
        };
        let off_cpu = st.off_between(off, st.last, r.tsc);
        let at = (r.tsc, off_cpu, self.interruption);
        let skip = st.hit_skip(r.probe, stub.follows, stub.hit_cost, at);
        let cost = st.end(r.tsc, skip + off_cpu, self.scale);
        st.last = r.tsc;
        if r.wait != 0 {
            // Counted on its CPU: the wait spins, yielding every 1024 rounds, and where other
            // work takes the CPU then, the thread is off it (the kernel's count of its CPU time
            // does not hold that).
            let ticks = waited(self.waits, r.wait, self.wait_shift);
            let off_wait = st.off_between(off, r.tsc, r.tsc + ticks).min(ticks);
            *self.waited += ticks - off_wait;
            st.last += ticks;
        }
        if let Some(bits) = stub.packed {
            if let Some(w) = PackedHit::with_probe_bits(bits, cost) {
                // Room made before the word is written: `len` is then below the array's length.
                if self.len >= PACKED_RUN {
                    hand_over(core, self.tid, &self.packed[..]);
                    self.len = 0;
                }
                self.packed[self.len] = w.0;
                self.len += 1;
                return;
            }
        }
        let packed = &self.packed[..self.len];
        unpacked(
            core,
            self.tid,
            packed,
            (probe, cost),
            stub.operand,
            r.operand,
        );
        self.len = 0;
    }

    /// Hand the packed hits to the sink.
    #[inline(always)]
    pub(super) fn flush(&mut self, core: &mut Core<'_>) {
        if self.len != 0 {
            hand_over(core, self.tid, &self.packed[..self.len]);
            self.len = 0;
        }
    }
}

/// A hit that is not packed (its operand, or a cost too large for a packed word), after the
/// packed hits before it (`packed`).
#[cold]
#[inline(never)]
fn unpacked(
    core: &mut Core<'_>,
    tid: Tid,
    packed: &[u64],
    (probe, cost): (usize, u64),
    kind: Operand,
    value: u64,
) {
    let operand = match kind {
        Operand::None => None,
        Operand::Value => Some(value),
        Operand::ReturnAddress(load) => Some(value.wrapping_sub(load)),
    };
    hand_over(core, tid, packed);
    core.emit(TraceEvent::Hit {
        probe,
        tid,
        cost,
        operand,
    });
}

/// A hit whose stub waited `wait` (as the stub wrote it, see [`Record::wait`]) for room:
/// counted; the ticks it waited.
#[cold]
#[inline(never)]
fn waited(waits: &mut u64, wait: u32, shift: u32) -> u64 {
    *waits += 1;
    u64::from(wait) << shift
}

/// Hand the packed hits `packed` to the sink.
#[inline(never)]
fn hand_over(core: &mut Core<'_>, tid: Tid, packed: &[u64]) {
    if !packed.is_empty() {
        // One hit per word (`PackedHit::with_probe_bits`'s).
        let t = HitsTotal {
            hits: packed.len() as u64,
            cost: PackedHit::cost_of_ones(packed),
        };
        core.sink.hits_counted(tid, packed, t);
        core.hits += t.hits;
        core.total += t.cost;
    }
}

/// Hits handed to the sink at once, at most.
pub(super) const PACKED_RUN: usize = 4096;
