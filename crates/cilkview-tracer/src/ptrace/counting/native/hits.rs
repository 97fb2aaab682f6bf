//! A thread's records as the drain reports them: each ends a strand; what a probe's stub
//! gives the analysis.

use std::collections::VecDeque;

use cilkview_events::{HitsTotal, PackedHit};

use super::region::{ring_index, Record, Ring};
use super::strands::{Ended, HitCost, StrandState, TickScale, FOLLOWS_NONE};
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

/// What the drain needs of a probe: what one hit adds to the strand it ends, (time only) the
/// probe whose mark lies just before its own (a strand from that one's hit to this one's is
/// empty), how its hits are packed, and its operand. The fields the drain's short path reads
/// come first.
#[derive(Clone, Copy)]
pub(super) struct ProbeStub {
    pub(super) hit_cost: HitCost,
    /// [`PackedHit::probe_bits`] of its number (0 where none fits).
    pub(super) packed_bits: u64,
    /// A strand shorter than this (ticks) that its hit ends takes the short path's arithmetic
    /// ([`StrandState::end_simple`]): the clock's [`super::strands::short_cut`] + 1, or 0 for a
    /// probe whose hits never pack (an operand, or a number no packed hit holds): the short
    /// path's one compare of a strand's length also keeps such a hit off its cost-0 steps.
    pub(super) short_below: u64,
    pub(super) follows: u32,
    pub(super) operand: Operand,
}

impl ProbeStub {
    /// Probe number `probe`'s, without an operand, each hit adding `hit_cost`, strands of at
    /// most `short_cut` ticks on the short path's arithmetic.
    pub(super) fn plain(probe: usize, hit_cost: HitCost, short_cut: u64) -> ProbeStub {
        let bits = PackedHit::probe_bits(probe);
        ProbeStub {
            hit_cost,
            packed_bits: bits.unwrap_or(0),
            short_below: if bits.is_some() { short_cut + 1 } else { 0 },
            follows: FOLLOWS_NONE,
            operand: Operand::None,
        }
    }

    /// Whether its hit of `cost` goes packed.
    #[inline(always)]
    pub(super) fn packs(&self, cost: u64) -> bool {
        self.short_below != 0 && cost <= PackedHit::MAX_COST
    }

    /// Its hit of `cost` as a packed word (where [`ProbeStub::packs`]).
    #[inline(always)]
    pub(super) fn packed_hit(&self, cost: u64) -> u64 {
        self.packed_bits | (cost << PackedHit::COST_SHIFT)
    }

    /// Its hits never packed (an operand's, or an unknown probe's).
    pub(super) fn unpacked(self) -> ProbeStub {
        ProbeStub {
            short_below: 0,
            ..self
        }
    }
}

/// What reporting a thread's records reads only: the probes' stubs and the clock's settings.
pub(super) struct Setting<'a> {
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
}

/// One thread's records being reported: each ends a strand; hits without an operand go to the
/// sink packed, a run at a time. The per-record path is inlined into the drain's loop (as a
/// closure it was a call per hit, ~16 instructions of it; callgrind) and takes one short path
/// for the common record (a probe with a stub, no wait, nothing off the CPU or paused, a cost
/// that packs); what is out of line (the general path, the sink, a hit with an operand) is given
/// values, never the `Hits` or the thread's [`StrandState`]: neither escapes, so the compiler
/// keeps their fields in registers.
pub(super) struct Hits<'a> {
    pub(super) set: &'a Setting<'a>,
    /// Packed hits not yet handed to the sink: the first `len` (a fixed array and a count, not
    /// a `Vec`: no capacity check, length or pointer reloaded per hit).
    pub(super) packed: &'a mut [u64; PACKED_RUN],
    pub(super) len: usize,
    /// The thread's nanoseconds reported ([`StrandState::reported`]) before the first of them:
    /// their costs sum to what was reported since (no pass over the words to sum them).
    pub(super) run_from: u64,
    pub(super) waits: &'a mut u64,
    pub(super) waited: &'a mut u64,
    /// Records reported (counted by the caller, not per record).
    pub(super) n: u64,
}

impl Hits<'_> {
    /// The record `r` of a thread whose clock is `st` (its off-CPU intervals `off`), whatever
    /// it is: the short path's steps if it can ([`simple_run`]'s, one record at a time, for the
    /// records read at a stop), else the general path.
    #[inline(always)]
    pub(super) fn record(
        &mut self,
        core: &mut Core<'_>,
        st: &mut StrandState,
        off: &mut VecDeque<(u64, u64)>,
        r: &[u64; 3],
    ) {
        let (tsc, word) = (r[0], r[2]);
        let stub = match self.set.stubs.get(word as usize) {
            Some(stub) if st.is_simple(tsc) => stub,
            _ => {
                let room = (
                    (&mut *self.packed, self.len, &mut self.run_from),
                    &mut *self.waits,
                    &mut *self.waited,
                );
                (*st, self.len) = general(self.set, core, *st, off, room, Record::read(r));
                return;
            }
        };
        let hit = (word as u32, stub.follows, stub.hit_cost);
        let at = (tsc, self.set.interruption, stub.short_below);
        let cost = st.end_simple(hit, at, self.set.scale).cost();
        self.ended(core, stub, (word as usize, cost, st.reported()), r[1]);
    }

    /// The hit of probe `stub`'s (`hit`: its number, its strand's cost, the thread's
    /// nanoseconds reported after it; its record's operand `value`), its strand ended: packed
    /// where it packs, else handed over unpacked.
    #[inline(always)]
    fn ended(&mut self, core: &mut Core<'_>, stub: &ProbeStub, hit: (usize, u64, u64), value: u64) {
        let (_, cost, reported) = hit;
        if stub.packs(cost) {
            self.pack(core, stub.packed_hit(cost), reported - cost);
        } else {
            self.unpacked(core, hit, stub.operand, value);
        }
    }

    /// A hit that is not packed (its cost, the thread's nanoseconds reported after it), after
    /// the packed ones (handed over with it).
    #[inline(always)]
    fn unpacked(&mut self, core: &mut Core<'_>, hit: (usize, u64, u64), kind: Operand, value: u64) {
        let run = (&self.packed[..self.len], &mut self.run_from);
        unpacked(core, self.set.tid, run, hit, kind, value);
        self.len = 0;
    }

    /// Add the packed hit `w` (the thread's nanoseconds reported before it `before`), handing
    /// the run over first if it is full.
    #[inline(always)]
    fn pack(&mut self, core: &mut Core<'_>, w: u64, before: u64) {
        // Room made before the word is written: `len` is then below the array's length.
        let run = (&*self.packed, self.len, &mut self.run_from);
        self.len = make_room(core, self.set.tid, run, before);
        self.packed[self.len] = w;
        self.len += 1;
    }

    /// The records `from..head` of `ring`, of a thread whose clock is `st` (its off-CPU
    /// intervals `off`): runs of common records on the short path ([`simple_run`]), each bounded
    /// by the room left for packed hits; a record it stops at on the general path or unpacked.
    #[inline(always)]
    pub(super) fn ring(
        &mut self,
        core: &mut Core<'_>,
        st: &mut StrandState,
        off: &mut VecDeque<(u64, u64)>,
        (ring, from, head): (&Ring, u64, u64),
    ) {
        let mut n = from;
        while n < head {
            let run = (&*self.packed, self.len, &mut self.run_from);
            self.len = make_room(core, self.set.tid, run, st.reported());
            // Bounded by the ring's end too: a run's records lie one after another.
            let to_end = ring.len() - ring_index(n);
            let count = (head - n).min((PACKED_RUN - self.len) as u64) as usize;
            let count = count.min(to_end);
            let out = &mut self.packed[self.len..self.len + count];
            // No off-CPU interval ahead (the common case): no compare of each record's clock.
            let (done, unpacked_cost) = if st.off_ahead() {
                simple_run::<true>(self.set, st, (ring, n), out)
            } else {
                simple_run::<false>(self.set, st, (ring, n), out)
            };
            self.len += done;
            n += done as u64;
            if done == count {
                continue;
            }
            let r = &ring[ring_index(n)];
            match unpacked_cost {
                None => self.record(core, st, off, r),
                Some(cost) => {
                    let probe = r[2] as usize;
                    let stub = &self.set.stubs[probe];
                    self.ended(core, stub, (probe, cost, st.reported()), r[1]);
                }
            }
            n += 1;
        }
    }

    /// Hand the packed hits to the sink, the thread's nanoseconds reported now `reported`.
    #[inline(always)]
    pub(super) fn flush(&mut self, core: &mut Core<'_>, reported: u64) {
        if self.len != 0 {
            let cost = reported - self.run_from;
            hand_over(core, self.set.tid, &self.packed[..self.len], cost);
            self.len = 0;
            self.run_from = reported;
        }
    }
}

/// The drain's short path: the records of `ring` from number `from` on, one per word of `out`
/// (its packed hit written there; no more than lie before the ring's end), while each is
/// common: a probe with a stub, no wait, nothing off the CPU or paused
/// ([`StrandState::end_simple`]), a strand on the short arithmetic, a cost that packs. How many
/// it took, and, where it stopped at a record whose strand it ended otherwise (a long strand,
/// an operand's hit, a cost too large), that hit's cost (the caller packs it or not).
/// `OFF_AHEAD`: whether to compare each record's clock with the thread's next off-CPU
/// interval ([`StrandState::off_ahead`]; without one, no record's clock fails it).
#[inline(always)]
fn simple_run<const OFF_AHEAD: bool>(
    set: &Setting<'_>,
    st: &mut StrandState,
    (ring, from): (&Ring, u64),
    out: &mut [u64],
) -> (usize, Option<u64>) {
    // In one piece of the ring (the caller's bound): one bounds check per run.
    let records = &ring[ring_index(from)..][..out.len()];
    for (k, (r, word_out)) in records.iter().zip(out.iter_mut()).enumerate() {
        let (tsc, word) = (r[0], r[2]);
        // One test for a probe with a stub and a record without a wait (`wait`, the word's
        // high half, makes it no index).
        let Some(stub) = set.stubs.get(word as usize) else {
            return (k, None);
        };
        if OFF_AHEAD && !st.is_simple(tsc) {
            return (k, None);
        }
        let hit = (word as u32, stub.follows, stub.hit_cost);
        let at = (tsc, set.interruption, stub.short_below);
        // Nothing charged (the common strand, on the short arithmetic: the probe's hits pack):
        // the word is the probe's bits.
        *word_out = match st.end_simple(hit, at, set.scale) {
            Ended::Nothing => stub.packed_bits,
            // On the short arithmetic: the probe's hits pack (`short_below` is not 0).
            Ended::Short(cost) if cost <= PackedHit::MAX_COST => stub.packed_hit(cost),
            Ended::Short(cost) | Ended::Long(cost) => return (k, Some(cost)),
        };
    }
    (out.len(), None)
}

/// Where [`general`] puts a hit: the packed hits, their number and `Hits::run_from`, the waits'
/// count and ticks.
type Room<'a> = (
    (&'a mut [u64; PACKED_RUN], usize, &'a mut u64),
    &'a mut u64,
    &'a mut u64,
);

/// The record `r` of a thread whose clock is `st` (its off-CPU intervals `off`), whatever it is
/// (a probe without a stub, a wait, a strand paused or off its CPU, a hit not packed): the
/// thread's clock after it, and the number of packed hits. Out of line, given and giving values.
#[cold]
#[inline(never)]
fn general(
    set: &Setting<'_>,
    core: &mut Core<'_>,
    mut st: StrandState,
    off: &mut VecDeque<(u64, u64)>,
    ((packed, len, run_from), waits, waited): Room<'_>,
    r: Record,
) -> (StrandState, usize) {
    let probe = r.probe as usize;
    let stub = match set.stubs.get(probe) {
        Some(stub) => stub,
        None => &set.unpatched,
    };
    let off_cpu = st.off_between(off, st.last, r.tsc);
    let at = (r.tsc, off_cpu, set.interruption);
    let skip = st.hit_skip(r.probe, stub.follows, stub.hit_cost, at);
    let cost = st.end(r.tsc, skip + off_cpu, set.scale);
    st.last = r.tsc;
    if r.wait != 0 {
        // Counted on its CPU: the wait spins, yielding every 1024 rounds, and where other
        // work takes the CPU then, the thread is off it (the kernel's count of its CPU time
        // does not hold that).
        *waits += 1;
        let ticks = u64::from(r.wait) << set.wait_shift;
        let off_wait = st.off_between(off, r.tsc, r.tsc + ticks).min(ticks);
        *waited += ticks - off_wait;
        st.last += ticks;
    }
    if stub.packs(cost) {
        let len = make_room(core, set.tid, (packed, len, run_from), st.reported() - cost);
        packed[len] = stub.packed_hit(cost);
        return (st, len + 1);
    }
    let hit = (probe, cost, st.reported());
    unpacked(
        core,
        set.tid,
        (&packed[..len], run_from),
        hit,
        stub.operand,
        r.operand,
    );
    (st, 0)
}

/// A hit that is not packed (its operand, or a cost too large for a packed word; the thread's
/// nanoseconds reported after it `after`), after the packed hits before it (`packed`, begun
/// at `run_from`).
#[cold]
#[inline(never)]
fn unpacked(
    core: &mut Core<'_>,
    tid: Tid,
    (packed, run_from): (&[u64], &mut u64),
    (probe, cost, after): (usize, u64, u64),
    kind: Operand,
    value: u64,
) {
    let operand = match kind {
        Operand::None => None,
        Operand::Value => Some(value),
        Operand::ReturnAddress(load) => Some(value.wrapping_sub(load)),
    };
    hand_over(core, tid, packed, after - cost - *run_from);
    *run_from = after;
    core.emit(TraceEvent::Hit {
        probe,
        tid,
        cost,
        operand,
    });
}

/// Room for one more packed hit after the first `len` of `packed` (begun at `run_from`), the
/// thread's nanoseconds reported `now`: the run handed over if it is full. The number of packed
/// hits then.
#[inline(always)]
fn make_room(
    core: &mut Core<'_>,
    tid: Tid,
    (packed, len, run_from): (&[u64; PACKED_RUN], usize, &mut u64),
    now: u64,
) -> usize {
    if len >= PACKED_RUN {
        hand_over(core, tid, &packed[..], now - *run_from);
        *run_from = now;
        return 0;
    }
    len
}

/// Hand the packed hits `packed`, whose costs sum to `cost`, to the sink.
#[inline(never)]
fn hand_over(core: &mut Core<'_>, tid: Tid, packed: &[u64], cost: u64) {
    debug_assert_eq!(cost, PackedHit::cost_of_ones(packed));
    if !packed.is_empty() {
        // One hit per word (`PackedHit::with_probe_bits`'s).
        let t = HitsTotal {
            hits: packed.len() as u64,
            cost,
        };
        core.sink.hits_counted(tid, packed, t);
        core.hits += t.hits;
        core.total += t.cost;
    }
}

/// Hits handed to the sink at once, at most.
pub(super) const PACKED_RUN: usize = 4096;

#[cfg(test)]
#[path = "hits_replay.rs"]
mod replay;
