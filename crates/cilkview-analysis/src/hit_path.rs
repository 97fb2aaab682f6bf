//! The session's hot path: a thread's mark hits applied to its engine.
//!
//! Each probe of the current program image has an entry ([`ProbeEntry`]: what its hits mean,
//! where its mark is) and a byte ([`HotKind`]): a run of packed hits without profiling looks up
//! the byte only (for a small hit, the plugin's form, by the low 16 bits of its half word, in a
//! table of its own: no shift, mask or bounds check), and for a kind that needs nothing but the
//! engine (a call, a spawn, a sync, a
//! loop's iterations: nearly every hit), hands the engine its event with the kind written in the
//! loop's code, so that the engine's own dispatch on the kind folds away in each of the loop's
//! arms. Everything else (lock marks, probes not ours, regions, dependence edges; a region's
//! profile) takes the general path, [`HitPath::hit`], out of line; call-site profiles, batches
//! for the profiling engine (`hit_path/profiled.rs`).

use cilkview_engine::{Anomalies, Engine, Event, EventKind, Steps};
use cilkview_events::PackedHit;

use crate::locks::{HeldLocks, Locks};
use crate::nesting::{MarkPlace, Nesting};
use crate::region_profile::RegionProfiler;
use crate::sites::Sites;

mod probes;
mod profiled;
use probes::HotKind;
pub(crate) use probes::{ProbeEntry, ProbeTable};
pub(crate) use profiled::ProfiledBatch;

/// The analysis of one thread: its engine, its anomalies as last seen and their count (a change
/// after an event names that event's mark in the nesting warning), and with `--profile-region`
/// the region's profiler.
pub(crate) struct Thread {
    pub(crate) tid: i32,
    pub(crate) engine: Engine,
    pub(crate) seen: Anomalies,
    pub(crate) seen_count: u64,
    pub(crate) region: Option<Box<RegionProfiler>>,
    /// The return address a runtime wrapper's spawn hit reported, for the entry hit that follows
    /// it (`Sites::site`).
    pub(crate) spawn_caller: Option<u64>,
    /// The locks it holds (`run --locks`).
    pub(crate) held: HeldLocks,
    /// With call-site profiles, its events on their way to the engine (`profiled.rs`).
    pub(crate) batch: ProfiledBatch,
}

/// The value of `match $pair { .. }` with an arm `{ $arm!(A, B); $next }` for each pair of kinds
/// `A` of a call, a spawn or a sync and `B` of one too or `NotSmall`, `$other` for any other
/// pair: one jump a word. (Pairs with a loop's kinds dispatched at once too made the
/// loop's code spill its registers: more instructions a hit, not fewer.)
macro_rules! dispatch_pairs {
    ($pair:ident, $arm:ident, $next:expr, $other:expr) => {
        dispatch_pairs!(@rows $pair, $arm, $next, $other,
            [FunctionEnter FunctionExit Spawn SpawnReturn Sync NotSmall], [],
            FunctionEnter FunctionExit Spawn SpawnReturn Sync)
    };
    (@rows $pair:ident, $arm:ident, $next:expr, $other:expr, [$($b:ident)*], [$($arms:tt)*],
     $a:ident $($rest:ident)*) => {
        dispatch_pairs!(@rows $pair, $arm, $next, $other, [$($b)*],
            [$($arms)* $(($a $b))*], $($rest)*)
    };
    (@rows $pair:ident, $arm:ident, $next:expr, $other:expr, $bs:tt,
     [$(($a:ident $b:ident))*], ) => {
        match $pair {
            $(p if p == const { HotKind::pair(HotKind::$a, HotKind::$b) } => {
                $arm!($a, $b);
                $next
            })*
            _ => $other,
        }
    };
}

/// The probe of the small hit in the low half of `half`, read only off the hot path (a
/// closure: nothing computed before the jump on the hit's kind).
#[inline(always)]
fn small_probe(half: u64) -> impl FnOnce() -> usize {
    move || PackedHit::small_hit(half).0
}

/// The cost of the small hit in the low half of `half`.
#[inline(always)]
fn small_cost(half: u64) -> u64 {
    PackedHit::small_hit(half).1
}

/// Words that [`HitPath::words`] hands [`HitPath::words_by_halves`] at once from one it does not
/// dispatch at once: a loop's words take one call for this many.
const HALVES_AT_A_TIME: usize = 512;

/// What the loops over a run of plain hits hold in locals (registers) rather than behind the
/// thread: the anomaly count last seen (the general path and a new anomaly update the
/// thread's, and this from it), and the engine's running total and pending frame
/// ([`Steps`]: given back to the engine before the general path and after the run).
#[derive(Clone, Copy)]
struct RunLocals {
    seen: u64,
    steps: Steps,
}

/// The session's parts a hit touches besides its thread's (see `Session::hit_path`).
pub(crate) struct HitPath<'s> {
    pub(crate) probes: &'s ProbeTable,
    pub(crate) sites: &'s mut Option<Sites>,
    pub(crate) nesting: &'s mut Nesting,
    pub(crate) locks: &'s mut Locks,
    /// Hits that are no engine event: probes not ours (rare), lock marks (counted apart).
    pub(crate) foreign: u64,
}

impl HitPath<'_> {
    /// A run of packed hits of `thread`: `words` in any of [`PackedHit`]'s forms, or (`ones`)
    /// words of one hit each, [`PackedHit::new`]'s.
    pub(crate) fn run(&mut self, thread: &mut Thread, words: &[u64], ones: bool) {
        // Whether the engine (or the region's) profiles, checked once for the run.
        if thread.engine.profiling() || thread.region.is_some() {
            if thread.region.is_none() {
                self.run_profiled(thread, words);
                return;
            }
            PackedHit::for_each_hit_in(words, |probe, cost| {
                self.hit::<true>(thread, probe, cost, None)
            });
            return;
        }
        let mut at = RunLocals {
            seen: thread.seen_count,
            steps: thread.engine.steps(),
        };
        if ones {
            self.ones(thread, words, &mut at);
        } else {
            self.words(thread, words, &mut at);
        }
        thread.engine.settle(at.steps);
    }

    /// Words of one hit each ([`PackedHit::new`]'s form), no call sites profiled. (Out of line:
    /// its code and registers apart from [`HitPath::words`]'s.)
    #[inline(never)]
    fn ones(&mut self, thread: &mut Thread, words: &[u64], at_out: &mut RunLocals) {
        // The loop's state in a local no call out of line sees (registers).
        let mut local = *at_out;
        let probes = self.probes;
        let ones = &*probes.ones;
        for &x in words {
            // A small probe's kind by the word's low 16 bits ([`ProbeTable::ones`]).
            let kind = match PackedHit::one_hit_key(x) {
                Some(key) => ones[key],
                None => probes.kind_of_large(x),
            };
            let (probe, cost) = (|| PackedHit::one_hit(x).0, PackedHit::one_hit(x).1);
            self.plain(kind, thread, probe, cost, &mut local);
        }
        *at_out = local;
    }

    /// Words of packed hits in any form, no call sites profiled: each word of two small hits of
    /// a call, a spawn or a sync (or one, the second half zero), nearly every word the plugin
    /// writes, dispatched once on its pair of kinds, each half's kind read in
    /// [`ProbeTable::small`] with its low 16 bits the key ([`HitPath::pairs`]); any other word
    /// (a second half not zero that is no small hit among them), and the [`HALVES_AT_A_TIME`] − 1
    /// after it, by [`HitPath::words_by_halves`] out of line.
    #[inline(always)]
    fn words(&mut self, thread: &mut Thread, words: &[u64], at: &mut RunLocals) {
        let mut from = 0;
        while from < words.len() {
            from += self.pairs(thread, &words[from..], at);
            if from < words.len() {
                // A loop's words come in long runs: a few at a time one half at a time.
                let some = (words.len() - from).min(HALVES_AT_A_TIME);
                self.words_by_halves(thread, &words[from..from + some], at);
                from += some;
            }
        }
    }

    /// The words of `words` that [`HitPath::words`] dispatches at once, up to the first it does
    /// not: how many. (The loop's state in a local whose address no call takes: registers. The
    /// words it does not dispatch are taken after it returns, not by a call from its loop.)
    #[inline(always)]
    fn pairs(&mut self, thread: &mut Thread, words: &[u64], at_out: &mut RunLocals) -> usize {
        let mut local = *at_out;
        let at = &mut local;
        let small = &*self.probes.small;
        // The words by an iterator (a pointer and its end: one compare a word).
        let mut rest = words.iter();
        let taken = loop {
            let Some(&x) = rest.next() else {
                break words.len();
            };
            let second = x >> 32;
            let pair = HotKind::pair(small[x as u16 as usize], small[second as u16 as usize]);
            // Both hits' engine steps, each inlined for its kind.
            macro_rules! both {
                ($a:ident, NotSmall) => {{
                    if second != 0 {
                        break words.len() - rest.len() - 1;
                    }
                    self.plain(HotKind::$a, thread, small_probe(x), small_cost(x), at);
                }};
                ($a:ident, $b:ident) => {{
                    self.plain(HotKind::$a, thread, small_probe(x), small_cost(x), at);
                    self.plain(
                        HotKind::$b,
                        thread,
                        small_probe(second),
                        small_cost(second),
                        at,
                    );
                }};
            }
            dispatch_pairs!(pair, both, (), {
                break words.len() - rest.len() - 1;
            });
        };
        *at_out = local;
        taken
    }

    /// Words of packed hits one half at a time.
    #[inline(never)]
    fn words_by_halves(&mut self, thread: &mut Thread, words: &[u64], at_out: &mut RunLocals) {
        // The loops' state in registers through the loop, as in `run`.
        let mut local = *at_out;
        let at = &mut local;
        let small = &*self.probes.small;
        for &x in words {
            let kind = small[x as u16 as usize];
            if !self.plain(kind, thread, small_probe(x), small_cost(x), at) {
                self.one_hit_word(thread, x, at);
                continue;
            }
            let second = x >> 32;
            let kind = small[second as u16 as usize];
            if !self.plain(kind, thread, small_probe(second), small_cost(second), at) && second != 0
            {
                // Not written by the plugin; read as a small hit all the same (as
                // `PackedHit::for_each_hit_in` reads it).
                self.odd_second(thread, second, at);
            }
        }
        *at_out = local;
    }

    /// A word of one hit among words of small hits (a cost of 2^16 or more): out of line.
    #[cold]
    #[inline(never)]
    fn one_hit_word(&mut self, thread: &mut Thread, word: u64, at: &mut RunLocals) {
        PackedHit(word).for_each(|probe, cost| {
            self.plain(self.probes.kind_of(probe), thread, || probe, cost, at);
        });
    }

    /// A word's second half that is not zero and has not a small hit's bits 0–1.
    #[cold]
    #[inline(never)]
    fn odd_second(&mut self, thread: &mut Thread, half: u64, at: &mut RunLocals) {
        let (probe, cost) = PackedHit::small_hit(half);
        self.plain(self.probes.kind_of(probe), thread, || probe, cost, at);
    }

    /// A hit of `probe`, whose kind is `kind`, without an operand, no call sites profiled: the
    /// hot path, tens of millions of times a second. False, and nothing done, for
    /// [`HotKind::NotSmall`].
    #[inline(always)]
    fn plain(
        &mut self,
        kind: HotKind,
        thread: &mut Thread,
        probe: impl FnOnce() -> usize,
        cost: u64,
        at: &mut RunLocals,
    ) -> bool {
        let engine = &mut thread.engine;
        // One arm per kind, each with the engine's step inlined for its kind alone: whether it
        // took the engine's general step (the only one that counts anomalies).
        macro_rules! apply {
            ($kind:expr) => {
                engine.step_in(&mut at.steps, Event::new(cost, $kind))
            };
        }
        let general = match kind {
            // Kinds that never raise an anomaly (an opener, a sync: see the test
            // `openers_and_syncs_raise_no_anomaly`): no check after them.
            HotKind::FunctionEnter => {
                apply!(EventKind::FunctionEnter);
                return true;
            }
            HotKind::Spawn => {
                apply!(EventKind::Spawn);
                return true;
            }
            HotKind::Sync => {
                apply!(EventKind::Sync);
                return true;
            }
            HotKind::LoopBegin => {
                apply!(EventKind::LoopBegin { grain: 1 });
                return true;
            }
            // A closer: a new anomaly only by the engine's general step (`Engine::step_in`).
            HotKind::FunctionExit => apply!(EventKind::FunctionExit),
            HotKind::SpawnReturn => apply!(EventKind::SpawnReturn),
            HotKind::IterationBegin => apply!(EventKind::IterationBegin),
            HotKind::IterationEnd => apply!(EventKind::IterationEnd),
            HotKind::LoopEnd => apply!(EventKind::LoopEnd),
            HotKind::General => {
                thread.engine.settle(at.steps);
                at.seen = self.general(thread, probe(), cost);
                at.steps = thread.engine.steps();
                return true;
            }
            HotKind::NotSmall => return false,
        };
        if general && engine.anomaly_count() != at.seen {
            at.seen = self.anomaly_at(thread, probe());
        }
        true
    }

    /// [`HitPath::hit`] out of line, for the hot loop: the anomaly count it leaves.
    #[cold]
    #[inline(never)]
    fn general(&mut self, thread: &mut Thread, probe: usize, cost: u64) -> u64 {
        self.hit::<false>(thread, probe, cost, None);
        thread.seen_count
    }

    /// The thread's engine counted a new anomaly at a hit of `probe` (one of ours): recorded
    /// with its mark's place; the anomaly count now.
    #[cold]
    #[inline(never)]
    fn anomaly_at(&mut self, thread: &mut Thread, probe: usize) -> u64 {
        let place = self.probes.entries[probe].place;
        self.record_anomalies(thread, place)
    }

    /// The anomalies the engine counted since last seen, recorded at `place`: the count now.
    fn record_anomalies(&mut self, thread: &mut Thread, place: MarkPlace) -> u64 {
        let Thread {
            engine,
            seen,
            seen_count,
            ..
        } = thread;
        let after = engine.anomalies();
        self.nesting.record(Some(place), seen, &after);
        (*seen, *seen_count) = (after, engine.anomaly_count());
        *seen_count
    }

    /// A hit of `probe`, with its operand if it has one: the general path (profiling call sites
    /// when `MAYBE_PROFILED`: only then does the session have them).
    #[inline(always)]
    pub(crate) fn hit<const MAYBE_PROFILED: bool>(
        &mut self,
        thread: &mut Thread,
        probe: usize,
        cost: u64,
        operand: Option<u64>,
    ) {
        let Thread {
            engine,
            seen_count,
            region,
            spawn_caller,
            held,
            ..
        } = &mut *thread;
        let entry = self.probes.entries.get(probe);
        if entry.is_none_or(|e| e.lock.is_some()) {
            // Not a probe we gave, or a lock mark: its cost is still work of the thread.
            engine.charge(cost);
            if let Some(region) = region {
                region.charge(cost);
            }
            self.foreign += 1;
            if let Some(mark) = entry.and_then(|e| e.lock) {
                held.hit(mark, operand, engine.cost_so_far(), self.locks);
            }
            return;
        }
        let entry = entry.expect("checked");
        // The table's loop beginnings have grain 1, what a hit without an operand gives; its
        // spawn-afters and wait-fors name no sibling.
        let kind = match (entry.kind, operand) {
            (kind, None) => kind,
            (EventKind::LoopBegin { .. }, Some(grain)) => EventKind::LoopBegin { grain },
            (EventKind::SpawnAfter { .. }, Some(sibling)) => EventKind::SpawnAfter { sibling },
            (EventKind::WaitFor { .. }, Some(sibling)) => EventKind::WaitFor { sibling },
            (kind, Some(_)) => kind,
        };
        if MAYBE_PROFILED {
            let site = match (kind, &mut *self.sites) {
                (EventKind::FunctionEnter | EventKind::Spawn, Some(sites)) => {
                    sites.site(entry.site, operand, spawn_caller)
                }
                _ => None,
            };
            let event = Event::at(cost, kind, site);
            engine.process(event);
            if let Some(region) = region {
                region.event(engine, event);
            }
        } else {
            // No call sites: a session has them only with a profiling engine or region (`run`
            // then takes the profiled loop).
            engine.process_unprofiled(Event::new(cost, kind));
        }
        if engine.anomaly_count() != *seen_count {
            self.record_anomalies(thread, entry.place);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::LockMark;
    use crate::sites::ProbeSite;
    use cilkview_engine::RegionId;
    use cilkview_marks::MarkKind;

    fn entry(kind: EventKind, lock: Option<LockMark>) -> ProbeEntry {
        ProbeEntry {
            kind,
            place: MarkPlace {
                image: 0,
                address: 0x1000,
                kind: MarkKind::Sync,
            },
            site: ProbeSite::None,
            lock,
        }
    }

    #[test]
    fn the_hot_loops_take_only_what_is_an_engine_event_and_nothing_else() {
        let hot = |kind, lock| HotKind::of(&entry(kind, lock));
        assert_eq!(hot(EventKind::Spawn, None), HotKind::Spawn);
        assert_eq!(
            hot(EventKind::LoopBegin { grain: 1 }, None),
            HotKind::LoopBegin
        );
        // A lock mark is no engine event, whatever its kind.
        assert_eq!(
            hot(EventKind::Sync, Some(LockMark::Acquire)),
            HotKind::General
        );
        for general in [
            EventKind::LoopBegin { grain: 4 },
            EventKind::RegionBegin(RegionId(0)),
            EventKind::RegionEnd(RegionId(0)),
            EventKind::SpawnAfter { sibling: u64::MAX },
            EventKind::WaitFor { sibling: u64::MAX },
        ] {
            assert_eq!(hot(general, None), HotKind::General, "{general:?}");
        }
        // The table keeps a byte per entry, the first dropped alike.
        let mut table = ProbeTable::default();
        table.push(entry(EventKind::Spawn, None));
        table.push(entry(EventKind::Sync, Some(LockMark::Release)));
        table.push(entry(EventKind::FunctionExit, None));
        table.drop_first(1);
        assert_eq!(table.len(), 2);
        assert_eq!(table.hot, [HotKind::General, HotKind::FunctionExit]);
        assert_eq!(table.entries[1].kind, EventKind::FunctionExit);
        // The small hits' table: by a half word's low 16 bits, either form bit 0.
        let key = |probe| PackedHit::small(probe, 0).unwrap().0 as usize;
        assert_eq!(table.small[key(1)], HotKind::FunctionExit);
        assert_eq!(table.small[key(1) | 1], HotKind::FunctionExit);
        assert_eq!(table.small[key(0)], HotKind::General);
        assert_eq!(table.small[key(2)], HotKind::General, "not ours");
        assert_eq!(
            table.small[PackedHit::new(1, 0).unwrap().0 as usize],
            HotKind::NotSmall
        );
        assert_eq!(table.small[0], HotKind::NotSmall);
        // The one-hit words' table: by such a word's low 16 bits, whatever its cost.
        let one = |probe| PackedHit::one_hit_key(PackedHit::new(probe, 1 << 30).unwrap().0);
        assert_eq!(table.ones[one(1).unwrap()], HotKind::FunctionExit);
        assert_eq!(table.ones[one(0).unwrap()], HotKind::General);
        assert_eq!(table.ones[one(2).unwrap()], HotKind::General, "not ours");
        assert_eq!(one(PackedHit::MAX_SMALL_PROBE + 1), None, "in no table");
        table.push(entry(EventKind::Sync, None));
        assert_eq!(table.small[key(2)], HotKind::Sync);
        assert_eq!(table.ones[one(2).unwrap()], HotKind::Sync);
    }

    proptest::proptest! {
        /// The hot loop checks for a new anomaly only after the kinds that can raise one: an
        /// opener (function, spawn, loop) or a sync never does, whatever came before.
        #[test]
        fn openers_and_syncs_raise_no_anomaly(kinds in proptest::collection::vec(0..9usize, 0..300)) {
            let mut engine = Engine::new(cilkview_engine::Config { burden: 7 });
            for (i, k) in kinds.into_iter().enumerate() {
                let kind = [
                    EventKind::FunctionEnter,
                    EventKind::Spawn,
                    EventKind::Sync,
                    EventKind::LoopBegin { grain: 1 },
                    EventKind::FunctionExit,
                    EventKind::SpawnReturn,
                    EventKind::IterationBegin,
                    EventKind::IterationEnd,
                    EventKind::LoopEnd,
                ][k];
                let before = engine.anomaly_count();
                engine.process_unprofiled(Event::new(i as u64 % 5, kind));
                if k < 4 {
                    proptest::prop_assert_eq!(engine.anomaly_count(), before, "{:?}", kind);
                }
            }
        }
    }
}
