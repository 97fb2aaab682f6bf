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
    /// Ticks to take off that the last strands were too short to give (see [`StrandState::end`]).
    owed: u64,
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
    /// The hit costs so far (1/256 ticks): whole ticks of it taken off the strands
    /// ([`StrandState::hit_ticks`]), the fraction carried to the next hit (one word, not two:
    /// a register fewer in the drain's loop).
    hit_q8: u64,
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
    sum: u64,
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
    /// `adjust` brought up to date, if trusted, for probes whose start-up cost is `startup`.
    #[cold]
    fn update(&mut self, startup: HitCost) {
        if self.trusted() {
            self.adjust = ((self.sum << 8) / self.n).wrapping_sub(startup.0);
        }
    }

    /// Whether their mean is trusted.
    #[inline(always)]
    fn trusted(&self) -> bool {
        self.n >= EMPTY_STRANDS_TRUSTED
    }
}

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

impl StrandState {
    fn new(now: u64) -> StrandState {
        StrandState {
            last: now,
            strand: 0,
            charged: 0,
            owed: 0,
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
            let e = &mut self.empty;
            e.sum += gap;
            e.n += 1;
            // Tested apart: one test per empty strand, not two.
            if e.n % 256 == 0 {
                e.update(startup);
            }
        }
        self.prev = probe;
        let cost = startup.0.wrapping_add(self.empty.adjust);
        let before = self.hit_q8 >> 8;
        self.hit_q8 += cost;
        (self.hit_q8 >> 8) - before
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
            (e.sum, e.n)
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

    /// A hit of `probe` at `tsc` ends the strand, where [`StrandState::is_simple`]: what
    /// [`StrandState::hit_skip`] then [`StrandState::end`] give with nothing off the CPU and
    /// no ticks before `last` (the drain's short path: neither `strand` nor the off-CPU
    /// intervals read), `last` set to `tsc`. Its cost.
    #[inline(always)]
    pub(super) fn end_simple(
        &mut self,
        (probe, follows, startup): (u32, u32, HitCost),
        (tsc, cut): (u64, u64),
        scale: TickScale,
    ) -> u64 {
        debug_assert!(self.strand == 0 && self.is_simple(tsc));
        let raw = tsc.saturating_sub(self.last);
        let skip = self.skip_after(probe, follows, startup, (raw, cut));
        self.last = tsc;
        self.end_raw(raw, skip, scale)
    }

    /// [`StrandState::end`] of a strand of `raw` ticks (`strand` included and cleared).
    #[inline(always)]
    fn end_raw(&mut self, raw: u64, skip: u64, scale: TickScale) -> u64 {
        let off = skip + self.owed;
        let ticks = raw.saturating_sub(off);
        // `off - raw` where it is more, else 0 (without a branch on which).
        self.owed = (off + ticks - raw).min(OWED_AT_MOST);
        self.charged += ticks;
        // `charged` only grows and the scale is monotonic: `ns` is never below `reported`.
        let ns = scale.of(self.charged);
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
    fn off_moved(&mut self) {
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
mod tests {
    use super::*;

    /// Strands ending at `ends` (ticks from 0), each with `skip` taken off: their costs.
    fn costs(ends: &[u64], skip: u64) -> Vec<u64> {
        let mut th = StrandState::new(0);
        ends.iter()
            .map(|&tsc| {
                let cost = th.end(tsc, skip, TickScale::new(1.0));
                th.last = tsc;
                cost
            })
            .collect()
    }

    #[test]
    fn a_strand_shorter_than_the_hit_cost_owes_the_rest_to_the_next() {
        // Strands of 5, 5, 30 and 40 ticks, 10 taken off each: 0, 0, 30 - 10 - 10, 40 - 10.
        assert_eq!(costs(&[5, 10, 40, 80], 10), [0, 0, 10, 30]);
        // The thread's work is its ticks less what was taken off, not more.
        assert_eq!(costs(&[5, 10, 40, 80], 10).iter().sum::<u64>(), 80 - 4 * 10);
        // Strands long enough lose exactly the skip.
        assert_eq!(costs(&[100, 250], 10), [90, 140]);
    }

    #[test]
    fn ticks_scale_exactly_at_one_per_tick_and_within_a_ns_otherwise() {
        assert_eq!(TickScale::new(1.0).of(u64::MAX / 2), u64::MAX / 2);
        // A 2.445 GHz TSC: 10^12 ticks (409 s) as the f64 product, within 3·10^-10 of it.
        let k = 1.0 / 2.445;
        let by_f64 = (1e12 * k) as u64;
        let diff = TickScale::new(k).of(1_000_000_000_000).abs_diff(by_f64);
        assert!(
            diff as f64 <= 3e-10 * by_f64 as f64,
            "{diff} ns off {by_f64}"
        );
        assert_eq!(TickScale::new(k).of(0), 0);
    }

    #[test]
    fn off_cpu_intervals_are_taken_off_the_strands_they_cut() {
        let mut th = Strands::new(0);
        th.off.extend([(10, 20), (30, u64::MAX)]);
        th.off_moved();
        // Before any interval: nothing, nothing forgotten.
        assert_eq!(th.state.off_between(&mut th.off, 0, 5), 0);
        assert_eq!(th.off.len(), 2);
        // The first whole and the open one's start up to 40.
        assert_eq!(th.state.off_between(&mut th.off, 5, 40), 10 + 10);
        assert_eq!(
            th.off.len(),
            1,
            "the ended interval is forgotten, the open one kept"
        );
    }

    #[test]
    fn a_hit_costs_the_mean_of_the_clock_steps_with_its_fraction() {
        // A hit of ~12 ticks on a clock moving in steps of 10: gaps of 10 and 20; the gap of
        // an interruption (5000) is left out.
        let cost = HitCost::mean_below(&[10, 10, 10, 20, 10, 5000], 1000);
        assert_eq!(cost, HitCost(12 << 8));
        assert_eq!(HitCost::mean_below(&[], 1000), HitCost(0));
        // 10.5 ticks off each of 4 strands: 10, 11, 10, 11 — 42 in all, not 40 or 44.
        let mut th = StrandState::new(0);
        let half = HitCost((10 << 8) + 128);
        let skips: Vec<u64> = (0..4)
            .map(|i| th.hit_skip(i, FOLLOWS_NONE, half, (100, 0, 1000)))
            .collect();
        assert_eq!(skips, [10, 11, 10, 11]);
    }

    #[test]
    fn empty_strands_measure_the_hit_cost_in_the_program() {
        // Probe 1's mark follows probe 0's. Hits alternate 0, 1, 2: the gap from a hit of 0 to
        // one of 1 is 13 ticks, every third gap 26 (13.0 + 13 / 3 on average), strands to 2 of
        // 100 ticks; the start-up cost is 10.
        let startup = HitCost::whole(10);
        let mut th = StrandState::new(0);
        let mut tsc = 0;
        let mut skips = Vec::new();
        for i in 0..3 * EMPTY_STRANDS_TRUSTED as u32 + 3 {
            let (probe, follows, gap) = match i % 3 {
                0 => (0, FOLLOWS_NONE, 100),
                1 => (1, 0, if i % 9 == 1 { 26 } else { 13 }),
                _ => (2, FOLLOWS_NONE, 100),
            };
            tsc += gap;
            let skip = th.hit_skip(probe, follows, startup, (tsc, 0, 1000));
            th.end(tsc, skip, TickScale::new(1.0));
            th.last = tsc;
            skips.push(skip);
        }
        // The start-up cost until 1024 empty strands were measured, then their mean.
        assert!(skips[..3 * 1000].iter().all(|&s| s == 10));
        let (sum, n) = th.empty_gaps();
        assert_eq!(n, EMPTY_STRANDS_TRUSTED + 1);
        let last: u64 = skips[skips.len() - 3..].iter().sum();
        assert!(
            (last as f64 - 3.0 * sum as f64 / n as f64).abs() <= 1.0,
            "{skips:?}"
        );
        // An interruption in an empty strand is not the hit's cost; a gap from another probe
        // (not the one before the mark) is a strand, not measured.
        let mut th = StrandState::new(0);
        th.hit_skip(0, FOLLOWS_NONE, startup, (10, 0, 1000));
        th.last = 10;
        th.hit_skip(1, 0, startup, (5000, 0, 1000));
        th.last = 5000;
        th.hit_skip(1, 0, startup, (5013, 0, 1000));
        assert_eq!(th.empty.n, 0);
    }

    #[test]
    fn the_short_path_gives_what_the_general_one_does() {
        // Hits of probes 0-2 (1 follows 0) at gaps from 0 to 4999 ticks (some interruptions,
        // some strands shorter than the hit's cost): each cost, the hit ticks taken off and the
        // empty strands measured are the same by `end_simple` as by `hit_skip` then `end`.
        let (startup, scale) = (HitCost((12 << 8) + 77), TickScale::new(0.4));
        let (mut general, mut short) = (StrandState::new(0), StrandState::new(0));
        let mut tsc = 0;
        for i in 0..20_000u64 {
            let probe = (i * 7 % 3) as u32;
            let follows = if probe == 1 { 0 } else { FOLLOWS_NONE };
            tsc += i * i % 41 + if i % 997 == 0 { 4000 } else { 0 };
            let skip = general.hit_skip(probe, follows, startup, (tsc, 0, 1000));
            let cost = general.end(tsc, skip, scale);
            general.last = tsc;
            assert!(short.is_simple(tsc));
            let by_short = short.end_simple((probe, follows, startup), (tsc, 1000), scale);
            assert_eq!(by_short, cost, "hit {i}");
        }
        assert_eq!(short.hit_ticks(), general.hit_ticks());
        assert_eq!(short.empty_gaps(), general.empty_gaps());
        assert!(short.empty_gaps().1 > EMPTY_STRANDS_TRUSTED);
    }

    #[test]
    fn a_paused_strand_takes_the_general_path_once() {
        // A pause leaves ticks before `last`: the next hit is not simple; once it is reported
        // (its strand ended), the ones after it are.
        let mut th = Strands::new(0);
        th.state.pause(&mut th.off, 100, 200);
        assert!(!th.state.is_simple(250));
        // The general path's steps (`hits::general`): 100 ticks before the pause, 50 after.
        let off_cpu = th.state.off_between(&mut th.off, 200, 250);
        assert_eq!(th.state.end(250, off_cpu, TickScale::new(1.0)), 150);
        th.state.last = 250;
        assert!(th.state.is_simple(300));
    }

    #[test]
    fn what_strands_owe_is_bounded() {
        // 10,000 empty strands owe at most OWED_AT_MOST to the long one after them.
        let mut ends: Vec<u64> = vec![0; 10_000];
        ends.push(1_000_000);
        let costs = costs(&ends, 10);
        assert_eq!(costs[10_000], 1_000_000 - 10 - OWED_AT_MOST);
    }
}
