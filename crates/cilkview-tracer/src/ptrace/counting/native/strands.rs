//! A measured thread's clock: where its current strand started, what the tracer and the kernel
//! took off it, and what was reported.

use std::collections::VecDeque;

use super::clock::Clock;
use super::stub::Reading;
use crate::sys::native::rdtsc;
use crate::sys::switches::SwitchLog;
use std::fs::File;

/// Something that happened to a thread, in order, not yet reported.
pub(super) enum Item {
    /// A record's words as its stub wrote them (`region::Record::read`).
    Hit([u64; 3]),
    /// Stopped by the tracer from `from` to `to` (ticks): charged to nobody.
    Pause { from: u64, to: u64 },
}

/// A measured thread's clock.
pub(super) struct Strands {
    pub(super) slot: Option<usize>,
    /// Number of the next record of its slot to read.
    pub(super) next: u64,
    /// What each record reads and writes.
    pub(super) state: StrandState,
    pub(super) pending: Vec<Item>,
    /// When the tracer saw it stop.
    pub(super) stopped_at: Option<u64>,
    /// The kernel's record of its context switches, and the intervals it was off its CPU
    /// (ticks; `u64::MAX`: not back yet) not yet taken off a strand.
    pub(super) switches: Option<SwitchLog>,
    pub(super) off: VecDeque<(u64, u64)>,
    /// The tool's copy of its instructions counter ([`Reading::Rdpmc`]).
    pub(super) counter: Option<File>,
}

/// The part of a thread's clock that each of its records reads and writes: a few words, `Copy`,
/// so that the drain holds it in registers while a ring drains (read and written through the
/// thread's map entry, each record loaded and stored every field: ~100 instructions a record
/// by the loop's disassembly, ~60 in registers; callgrind, fib under `--counter native`).
#[derive(Clone, Copy, Debug)]
pub(super) struct StrandState {
    /// Where the current strand last (re)started, in ticks.
    pub(super) last: u64,
    /// Ticks of the current strand before `last`.
    pub(super) strand: u64,
    /// Ticks charged so far, and the nanoseconds reported for them.
    charged: u64,
    /// What the next strand gives before it is charged, in 1/256 ticks: the ticks the last
    /// strands were too short to give (see [`StrandState::end`]; at most [`OWED_AT_MOST`]),
    /// and, below them, the fraction of the hit costs not yet taken off (one word: the drain's
    /// short path takes both off a strand with one subtract, [`StrandState::end_simple`]).
    owed_q8: u64,
    reported: u64,
    /// A record at or before this clock ends a strand that was never off its CPU and has no
    /// ticks before `last` (`strand` 0): the drain's short path ([`StrandState::end_simple`]).
    /// The start of `off`'s first interval ([`Strands::off`]), `u64::MAX` if none, or 0 while
    /// `strand` is not (one compare per hit, not the deque's front nor `strand`).
    simple_until: u64,
    /// The probe of its last hit ([`NO_PROBE`] before the first).
    prev: u32,
    /// What its hits cost where the program ran nothing between two (see
    /// [`StrandState::hit_skip`]).
    empty: EmptyStrands,
    /// The hit costs so far (1/256 ticks): their whole ticks are those taken off the strands
    /// ([`StrandState::hit_ticks`]; the fraction is carried in `owed_q8`).
    hit_q8: u64,
}

/// A strand ended by [`StrandState::end_simple`], and its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    /// On the short arithmetic, nothing charged (cost 0: a fine-grained program's common
    /// strand, whose steps then need no test of its cost).
    Nothing,
    /// On the short arithmetic, this cost.
    Short(u64),
    /// Longer than the short arithmetic's bound (or a clock gone back): on the general steps,
    /// this cost.
    Long(u64),
}

impl Ended {
    /// Its cost.
    #[inline(always)]
    pub(super) fn cost(self) -> u64 {
        match self {
            Ended::Nothing => 0,
            Ended::Short(cost) | Ended::Long(cost) => cost,
        }
    }
}

/// [`StrandState::prev`] before a thread's first hit.
const NO_PROBE: u32 = u32::MAX;
/// A probe's `follows` where no probe's mark ends where its own begins (never a probe, nor
/// [`NO_PROBE`]).
pub(super) const FOLLOWS_NONE: u32 = u32::MAX - 1;

/// A cost per mark hit in 1/256 ticks (or instructions): a mean of the clock's readings, whose
/// fraction matters where the clock moves in steps (~10 ns on an AMD guest's TSC: a hit of ~13
/// ns reads as one step or two; taking 13 ns off each strand and not 10 or 20 needs the mean).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HitCost(u64);

impl HitCost {
    /// A whole number of ticks (instructions).
    pub(super) fn whole(ticks: u64) -> HitCost {
        HitCost(ticks << 8)
    }

    /// The mean of the `gaps` (ticks) at or below `cut`; 0 if none.
    pub(super) fn mean_below(gaps: &[u64], cut: u64) -> HitCost {
        let kept = gaps.iter().filter(|&&g| g <= cut);
        let (sum, n) = kept.fold((0u64, 0u64), |(s, n), &g| (s + g, n + 1));
        HitCost((sum << 8).checked_div(n).unwrap_or(0))
    }

    /// In ticks.
    pub(super) fn ticks(self) -> f64 {
        self.0 as f64 / 256.0
    }
}

/// The gaps between a thread's hits of two marks that lie back to back in the code (the first
/// one's stub returns onto the second: no instruction of the program between them), which are
/// what a hit costs in this program (its caches, its branch history, the analysis draining the
/// records on the other core) rather than in the start-up measurement.
#[derive(Clone, Copy, Debug, Default)]
struct EmptyStrands {
    /// The last of them, fewer than 256, not yet in `sum` and `n`: their count in the top byte
    /// ([`RECENT_ONE`] each), their gaps' sum below it (one add per empty strand, whose carry
    /// out of the word is the 256th).
    recent: u64,
    sum: u64,
    /// A multiple of 256.
    n: u64,
    /// Their mean (1/256 ticks) less the start-up cost (wrapping), added to the start-up cost
    /// of each hit: 0 until `n` reaches [`EMPTY_STRANDS_TRUSTED`], then brought up to date each
    /// time `n` is a multiple of 256 (no division per hit; no flag, countdown or test of `n` per
    /// hit: fewer of the drain's values to hold in registers). Every probe's start-up cost is
    /// the clock's where strands are measured empty (the time counter; under the instructions
    /// counter no probe `follows` another).
    adjust: u64,
}

impl EmptyStrands {
    /// One more, of `gap` ticks, below [`GAP_IN_RECENT`] (probes' start-up cost `startup`).
    #[inline(always)]
    fn add(&mut self, gap: u64, startup: HitCost) {
        debug_assert!(gap < GAP_IN_RECENT);
        let carry;
        (self.recent, carry) = self.recent.overflowing_add(gap | RECENT_ONE);
        if carry {
            self.update(startup);
        }
    }

    /// One more, of `gap` ticks, whatever it is.
    #[inline(always)]
    fn add_any(&mut self, gap: u64, startup: HitCost) {
        if gap < GAP_IN_RECENT {
            self.add(gap, startup);
        } else {
            self.sum += gap;
            self.add(0, startup);
        }
    }

    /// The 256 `recent` ones added to `sum` and `n`, and `adjust` brought up to date, if
    /// trusted, for probes whose start-up cost is `startup`.
    #[cold]
    fn update(&mut self, startup: HitCost) {
        // Their count carried out of the word: what is left is their gaps' sum (256 of them,
        // each below 2^48, sum below 2^56).
        self.sum += self.recent;
        self.n += 256;
        self.recent = 0;
        if self.trusted() {
            self.adjust = ((self.sum << 8) / self.n).wrapping_sub(startup.0);
        }
    }

    /// Whether their mean is trusted (`n`, a multiple of 256, is as far as the whole count
    /// from [`EMPTY_STRANDS_TRUSTED`]).
    #[inline(always)]
    fn trusted(&self) -> bool {
        self.n >= EMPTY_STRANDS_TRUSTED
    }

    /// Their gaps' sum (ticks) and number.
    fn totals(&self) -> (u64, u64) {
        let gaps = self.recent & (RECENT_ONE - 1);
        (self.sum + gaps, self.n + (self.recent / RECENT_ONE))
    }
}

/// An empty strand's gap (ticks) below this is summed in [`EmptyStrands::recent`]: 256 of them
/// fit below its count's byte.
const GAP_IN_RECENT: u64 = 1 << 48;
/// One empty strand in [`EmptyStrands::recent`]'s count (its top byte).
const RECENT_ONE: u64 = 1 << 56;

/// Empty strands measured before their mean replaces the start-up value (the mean of 1024 gaps
/// of one or two ~10-ns steps is within ~0.4 ticks of the cost).
const EMPTY_STRANDS_TRUSTED: u64 = 1024;
const _: () = assert!(EMPTY_STRANDS_TRUSTED % 256 == 0);

/// Ticks to the report's unit (nanoseconds, or instructions at 1 per tick) as a 32.32 fixed-point
/// factor: a multiply and a shift per strand, where the `f64` round trip (`u64` ↔ `f64` has no
/// one instruction on x86-64 without AVX-512) took 21 instructions per mark hit (callgrind, fib
/// under `--counter native`). Exact at 1 per tick; otherwise within 2^-33 of the factor, 3·10^-10
/// relative at 2.4 GHz, far below what the TSC's calibration is known to (~10^-6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TickScale {
    per_tick_q32: u64,
}

impl TickScale {
    pub(super) fn new(per_tick: f64) -> TickScale {
        TickScale {
            per_tick_q32: (per_tick * (1u64 << 32) as f64).round() as u64,
        }
    }

    /// `ticks` in the report's unit, rounded down.
    #[inline(always)]
    pub(super) fn of(self, ticks: u64) -> u64 {
        ((u128::from(ticks) * u128::from(self.per_tick_q32)) >> 32) as u64
    }

    /// [`TickScale::of`], out of line.
    #[inline(never)]
    fn of_apart(self, ticks: u64) -> u64 {
        self.of(ticks)
    }
}

/// Ticks of `from..to` in the intervals `off`, those ending before `to` forgotten; and the start
/// of the first left (`u64::MAX`: none). Out of line and given only the deque, so the drain's
/// copy of a thread's [`Strands`] can live in registers (nothing else of it escapes).
#[cold]
#[inline(never)]
fn off_logged(off: &mut VecDeque<(u64, u64)>, from: u64, to: u64) -> (u64, u64) {
    let mut ticks = 0;
    while let Some(&(a, b)) = off.front() {
        ticks += b.min(to).saturating_sub(a.max(from));
        if b <= to {
            off.pop_front();
        } else {
            break;
        }
    }
    (ticks, off.front().map_or(u64::MAX, |&(a, _)| a))
}

/// The most ticks a thread's strands owe at once (~1 µs): a long run of strands shorter than the
/// hit's measured cost (a program marked every few instructions) gives back no more than this.
const OWED_AT_MOST: u64 = 2_500;
/// The fraction's bits of a count in 1/256 ticks.
const FRACTION: u64 = 255;

/// The longest strand that [`StrandState::end_simple`] ends with its short arithmetic, where
/// `cut` ticks is an interruption: `cut`, or less where its 1/256 ticks would not fit a word
/// (a longer strand takes the general steps, which give the same), nor its gap as an empty
/// strand's in [`EmptyStrands::recent`].
pub(super) fn short_cut(cut: u64) -> u64 {
    cut.min(GAP_IN_RECENT - 1)
}

impl StrandState {
    fn new(now: u64) -> StrandState {
        StrandState {
            last: now,
            strand: 0,
            charged: 0,
            owed_q8: 0,
            reported: 0,
            simple_until: u64::MAX,
            prev: NO_PROBE,
            empty: EmptyStrands::default(),
            hit_q8: 0,
        }
    }

    /// The ticks to take off the strand that a hit of `probe` at `tsc` ends (`off` of it off
    /// the CPU) for the hit's own cost: `startup`, or, once the thread has hit
    /// [`EMPTY_STRANDS_TRUSTED`] empty strands, their mean; the fraction carried to the next.
    /// The strand is empty when `probe`'s mark follows the last hit's directly (`follows`: the
    /// probe whose mark ends where `probe`'s begins, else [`FOLLOWS_NONE`]); its gap, unless
    /// longer than `cut` ticks (an interruption), is then measured.
    #[inline(always)]
    pub(super) fn hit_skip(
        &mut self,
        probe: u32,
        follows: u32,
        startup: HitCost,
        (tsc, off, cut): (u64, u64, u64),
    ) -> u64 {
        let gap = (self.strand + tsc.saturating_sub(self.last)).saturating_sub(off);
        self.skip_after(probe, follows, startup, (gap, cut))
    }

    /// [`StrandState::hit_skip`] of a strand of `gap` ticks on its CPU.
    #[inline(always)]
    fn skip_after(
        &mut self,
        probe: u32,
        follows: u32,
        startup: HitCost,
        (gap, cut): (u64, u64),
    ) -> u64 {
        if follows == self.prev && gap <= cut {
            self.empty.add_any(gap, startup);
        }
        self.prev = probe;
        let q = (self.owed_q8 & FRACTION) + self.hit_cost_q8(startup);
        self.owed_q8 = (self.owed_q8 & !FRACTION) | (q & FRACTION);
        q >> 8
    }

    /// A hit's cost (1/256 ticks) for probes whose start-up cost is `startup`, added to the
    /// hit costs so far.
    #[inline(always)]
    fn hit_cost_q8(&mut self, startup: HitCost) -> u64 {
        let cost = startup.0.wrapping_add(self.empty.adjust);
        self.hit_q8 += cost;
        cost
    }

    /// The ticks of hit costs taken off so far (the whole ticks [`StrandState::hit_skip`] gave).
    pub(super) fn hit_ticks(&self) -> u64 {
        self.hit_q8 >> 8
    }

    /// The nanoseconds reported for its strands so far (its work by time).
    pub(super) fn reported(&self) -> u64 {
        self.reported
    }

    /// The gaps of its empty strands that replaced the start-up cost: their sum (ticks) and
    /// number, (0, 0) if too few.
    pub(super) fn empty_gaps(&self) -> (u64, u64) {
        let e = &self.empty;
        if e.trusted() {
            e.totals()
        } else {
            (0, 0)
        }
    }

    /// Ticks of `from..to` the thread was off its CPU (the intervals `off`, the thread's
    /// [`Strands::off`]); forgets what ends before `to`.
    #[inline(always)]
    pub(super) fn off_between(
        &mut self,
        off: &mut VecDeque<(u64, u64)>,
        from: u64,
        to: u64,
    ) -> u64 {
        // Nothing logged, or only after `to` (an interval not yet ended starts after it): the
        // common case, once per mark hit.
        if self.simple_until < to {
            let ticks;
            (ticks, self.simple_until) = off_logged(off, from, to);
            ticks
        } else {
            0
        }
    }

    /// The strand ends at `tsc` (not counted: `skip` ticks of it): its nanoseconds. Rounding
    /// is carried over, so a thread's costs add up to its charged ticks. A strand shorter than
    /// what is taken off it (the hit's cost varies by a few ns around the one measured) owes the
    /// rest to the thread's next strands: cutting it at 0 instead would add the shortfall of
    /// every such strand to the work (measured: fine-grained programs' work by time read up to
    /// 1.3 times their CPU time).
    #[inline(always)]
    pub(super) fn end(&mut self, tsc: u64, skip: u64, scale: TickScale) -> u64 {
        let raw = self.strand + tsc.saturating_sub(self.last);
        self.strand = 0;
        self.end_raw(raw, skip, scale)
    }

    /// Whether a record at `tsc` takes the drain's short path ([`StrandState::end_simple`]).
    #[inline(always)]
    pub(super) fn is_simple(&self, tsc: u64) -> bool {
        tsc <= self.simple_until
    }

    /// Whether a record may not take the short path for its clock ([`StrandState::is_simple`]
    /// is not true of every clock): an off-CPU interval logged, or ticks before `last`. The
    /// short path changes neither.
    #[inline(always)]
    pub(super) fn off_ahead(&self) -> bool {
        self.simple_until != u64::MAX
    }

    /// A hit of `probe` at `tsc` ends the strand, where [`StrandState::is_simple`]: what
    /// [`StrandState::hit_skip`] then [`StrandState::end`] give with nothing off the CPU and
    /// no ticks before `last` (the drain's short path: neither `strand` nor the off-CPU
    /// intervals read), `last` set to `tsc`. Its cost, and how it was found ([`Ended`]). A
    /// strand shorter than `short_below` ticks (at most [`short_cut`] of `cut` + 1) is ended in
    /// 1/256 ticks, with one compare; a longer one on the general steps, which give the same.
    #[inline(always)]
    pub(super) fn end_simple(
        &mut self,
        (probe, follows, startup): (u32, u32, HitCost),
        (tsc, cut, short_below): (u64, u64, u64),
        scale: TickScale,
    ) -> Ended {
        debug_assert!(self.strand == 0 && self.is_simple(tsc));
        debug_assert!(short_below <= short_cut(cut) + 1);
        // A clock gone back (another CPU's) wraps to a long strand: the general steps.
        let raw = tsc.wrapping_sub(self.last);
        if raw >= short_below {
            let cost;
            (*self, cost) = self.end_long(probe, follows, startup, tsc, cut, scale);
            return Ended::Long(cost);
        }
        self.last = tsc;
        // `raw` < `short_below` ≤ 2^48: in 1/256 ticks it fits a word.
        let raw_q8 = raw << 8;
        // `raw` ≤ `cut`: an empty strand is measured if the mark follows the last hit's.
        if follows == self.prev {
            self.empty.add(raw, startup);
        }
        self.prev = probe;
        // What `end_raw` takes off, `skip` and the owed ticks, is `take`'s whole ticks; its
        // fraction is carried.
        let take = self.owed_q8 + self.hit_cost_q8(startup);
        // The strand gives nothing where it is no longer than `take`: what is left is owed (its
        // fraction the same). One compare for the common case, below the bound (a strand that
        // gives something wraps `left` past it).
        let left = take.wrapping_sub(raw_q8);
        if left < (OWED_AT_MOST + 1) << 8 {
            self.owed_q8 = left;
            return Ended::Nothing;
        }
        if raw_q8 <= take {
            self.owed_q8 = (OWED_AT_MOST << 8) | (left & FRACTION);
            return Ended::Nothing;
        }
        self.owed_q8 = take & FRACTION;
        Ended::Short(self.charge_apart(raw - (take >> 8), scale))
    }

    /// [`StrandState::end_simple`] of a strand longer than its short cut (or a clock gone
    /// back): the general steps. The clock after, and the cost (given and giving values, so
    /// that the caller's copy of the clock can live in registers).
    #[cold]
    #[inline(never)]
    fn end_long(
        mut self,
        probe: u32,
        follows: u32,
        startup: HitCost,
        tsc: u64,
        cut: u64,
        scale: TickScale,
    ) -> (StrandState, u64) {
        let raw = tsc.saturating_sub(self.last);
        self.last = tsc;
        let skip = self.skip_after(probe, follows, startup, (raw, cut));
        let cost = self.end_raw(raw, skip, scale);
        (self, cost)
    }

    /// [`StrandState::end`] of a strand of `raw` ticks (`strand` included and cleared).
    #[inline(always)]
    fn end_raw(&mut self, raw: u64, skip: u64, scale: TickScale) -> u64 {
        let off = skip + (self.owed_q8 >> 8);
        let fraction = self.owed_q8 & FRACTION;
        if raw <= off {
            // Nothing charged (a fine-grained program's common strand): `reported` is already
            // `charged`'s nanoseconds, no multiply.
            self.owed_q8 = ((off - raw).min(OWED_AT_MOST) << 8) | fraction;
            return 0;
        }
        self.owed_q8 = fraction;
        self.charge(raw - off, scale)
    }

    /// `ticks` more charged: their nanoseconds (rounding carried over).
    #[inline(always)]
    fn charge(&mut self, ticks: u64, scale: TickScale) -> u64 {
        self.charge_by(ticks, |charged| scale.of(charged))
    }

    /// [`StrandState::charge`] with the multiply out of line: the short path's loop then holds
    /// none of the registers a multiply takes.
    #[inline(always)]
    fn charge_apart(&mut self, ticks: u64, scale: TickScale) -> u64 {
        self.charge_by(ticks, |charged| scale.of_apart(charged))
    }

    /// [`StrandState::charge`], the nanoseconds of all ticks charged given by `ns_of`.
    #[inline(always)]
    fn charge_by(&mut self, ticks: u64, ns_of: impl FnOnce(u64) -> u64) -> u64 {
        self.charged += ticks;
        // `charged` only grows and the scale is monotonic: `ns` is never below `reported`.
        let ns = ns_of(self.charged);
        let cost = ns - self.reported;
        self.reported = ns;
        cost
    }

    /// Stopped by the tracer from `from` to `to`: not a strand's time.
    pub(super) fn pause(&mut self, off: &mut VecDeque<(u64, u64)>, from: u64, to: u64) {
        let off_cpu = self.off_between(off, self.last, from);
        self.strand += from.saturating_sub(self.last).saturating_sub(off_cpu);
        self.off_between(off, from, to);
        self.last = self.last.max(to);
        if self.strand != 0 {
            self.simple_until = 0;
        }
    }
}

impl Strands {
    pub(super) fn new(now: u64) -> Strands {
        Strands {
            slot: None,
            next: 0,
            state: StrandState::new(now),
            pending: Vec::new(),
            stopped_at: Some(now),
            switches: None,
            off: VecDeque::new(),
            counter: None,
        }
    }

    /// Read the thread's new context-switch records into `off`.
    pub(super) fn read_switches(&mut self, clock: &Clock) {
        let Some(log) = self.switches.as_mut() else {
            return;
        };
        let off = &mut self.off;
        log.read(|out, ns| {
            let t = clock.tsc_at(ns);
            if out {
                off.push_back((t, u64::MAX));
            } else if let Some(last) = off.back_mut().filter(|l| l.1 == u64::MAX) {
                last.1 = t.max(last.0);
            }
        });
        self.off_moved();
    }

    /// Bring `simple_until` up to date with `off`.
    pub(super) fn off_moved(&mut self) {
        let st = &mut self.state;
        st.simple_until = match self.off.front() {
            _ if st.strand != 0 => 0,
            Some(&(a, _)) => a,
            None => u64::MAX,
        };
    }

    /// A new thread's, stopped by the tracer now; reading instructions, they count from its
    /// counter's opening (0, at its slot's set-up), and no pause is taken off.
    pub(super) fn starting(reading: Reading) -> Strands {
        match reading {
            Reading::Tsc => Strands::new(rdtsc()),
            Reading::Rdpmc => Strands {
                stopped_at: None,
                ..Strands::new(0)
            },
        }
    }

    /// Its clock now (stopped by the tracer): the TSC when it stopped, or its instructions so
    /// far (where the counter cannot be read: where its strand last started, adding nothing).
    pub(super) fn now(&self, reading: Reading) -> u64 {
        match reading {
            Reading::Tsc => self.stopped_at.unwrap_or_else(rdtsc),
            Reading::Rdpmc => self
                .counter
                .as_ref()
                .and_then(super::instructions::read)
                .unwrap_or(self.state.last),
        }
    }

    /// Its strand ends at `now` (no hit: what it was off its CPU only is taken off) and the
    /// next starts there: the strand's cost.
    pub(super) fn end_at(&mut self, now: u64, scale: TickScale) -> u64 {
        let st = &mut self.state;
        let off = st.off_between(&mut self.off, st.last, now);
        let cost = st.end(now, off, scale);
        st.last = now;
        cost
    }
}

#[cfg(test)]
#[path = "strands_tests.rs"]
mod tests;
