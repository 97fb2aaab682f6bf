//! A thread's records as the drain reports them: each ends a strand; what a probe's stub
//! gives the analysis.

use cilkview_events::{HitsTotal, PackedHit};

use super::region::Record;
use super::strands::{HitCost, Strands, TickScale};
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

/// What the drain needs of a probe: its operand, what one hit adds to the strand it ends, and
/// (time only) the probe whose mark lies just before its own (a strand from that one's hit to
/// this one's is empty).
#[derive(Clone, Copy)]
pub(super) struct ProbeStub {
    pub(super) operand: Operand,
    pub(super) hit_cost: HitCost,
    pub(super) follows: u32,
}

/// One thread's records being reported: each ends a strand; hits without an operand go to the
/// sink packed, a run at a time. The per-record path is inlined into the drain's loop (as a
/// closure it was a call per hit, ~16 instructions of it; callgrind).
pub(super) struct Hits<'a> {
    pub(super) tid: Tid,
    pub(super) stubs: &'a [ProbeStub],
    /// What a probe without a stub is taken as (its hit cost: what a hit adds to its strand).
    pub(super) unpatched: ProbeStub,
    /// Ticks: a longer gap between back-to-back marks was an interruption.
    pub(super) interruption: u64,
    pub(super) scale: TickScale,
    pub(super) packed: &'a mut Vec<u64>,
    /// The sum of the costs in `packed`.
    pub(super) packed_cost: u64,
    pub(super) waits: &'a mut u64,
    pub(super) waited: &'a mut u64,
    /// Records reported (counted by the caller, not per record).
    pub(super) n: u64,
}

impl Hits<'_> {
    #[inline(always)]
    pub(super) fn record(&mut self, core: &mut Core<'_>, th: &mut Strands, r: Record) {
        let probe = r.probe as usize;
        // By reference: copying the 32-byte `ProbeStub` out was ~8 instructions per hit.
        let stub = self.stubs.get(probe).unwrap_or(&self.unpatched);
        let off = th.off_between(th.last, r.tsc);
        let at = (r.tsc, off, self.interruption);
        let skip = th.hit_skip(r.probe, stub.follows, stub.hit_cost, at);
        let cost = th.end(r.tsc, skip + off, self.scale);
        if r.waited != 0 {
            waited_on_cpu(self.waits, self.waited, th, (r.tsc, r.waited));
        }
        th.last = r.tsc + r.waited;
        if let Operand::None = stub.operand {
            if let Some(w) = PackedHit::new(probe, cost) {
                self.packed.push(w.0);
                self.packed_cost += cost;
                if self.packed.len() >= PACKED_RUN {
                    self.flush(core);
                }
                return;
            }
        }
        self.unpacked(core, probe, cost, stub.operand, r.operand);
    }

    /// A hit that is not packed: its operand, or a cost too large for a packed word.
    #[cold]
    #[inline(never)]
    fn unpacked(
        &mut self,
        core: &mut Core<'_>,
        probe: usize,
        cost: u64,
        kind: Operand,
        value: u64,
    ) {
        let operand = match kind {
            Operand::None => None,
            Operand::Value => Some(value),
            Operand::ReturnAddress(load) => Some(value.wrapping_sub(load)),
        };
        self.flush(core);
        core.emit(TraceEvent::Hit {
            probe,
            tid: self.tid,
            cost,
            operand,
        });
    }

    /// Hand the packed hits to the sink.
    pub(super) fn flush(&mut self, core: &mut Core<'_>) {
        if !self.packed.is_empty() {
            // One hit per word (`PackedHit::new`), their costs summed as they were packed.
            let t = HitsTotal {
                hits: self.packed.len() as u64,
                cost: self.packed_cost,
            };
            core.sink.hits_counted(self.tid, self.packed, t);
            core.hits += t.hits;
            core.total += t.cost;
            self.packed.clear();
            self.packed_cost = 0;
        }
    }
}

/// A stub waited `waited` ticks for room from `tsc`: one more wait in `waits`, and its time on
/// its CPU added to `on_cpu` (the wait spins, yielding every 1024 rounds: where other work takes
/// the CPU then, the thread is off it, and the kernel's count of its CPU time does not hold
/// that).
#[cold]
#[inline(never)]
fn waited_on_cpu(waits: &mut u64, on_cpu: &mut u64, th: &mut Strands, (tsc, waited): (u64, u64)) {
    *waits += 1;
    *on_cpu += waited - th.off_between(tsc, tsc + waited).min(waited);
}

/// Hits handed to the sink at once, at most.
pub(super) const PACKED_RUN: usize = 4096;
