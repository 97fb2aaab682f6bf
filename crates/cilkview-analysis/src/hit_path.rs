//! The session's hot path: a thread's mark hits applied to its engine.
//!
//! Each probe of the current program image has an entry ([`ProbeEntry`]: what its hits mean,
//! where its mark is) and a byte ([`HotKind`]): a run of packed hits without profiling looks up
//! the byte only, and for a kind that needs nothing but the engine (a call, a spawn, a sync, a
//! loop's iterations: nearly every hit), hands the engine its event with the kind written in the
//! loop's code, so that the engine's own dispatch on the kind folds away in each of the loop's
//! arms. Everything else (lock marks, probes not ours, regions, dependence edges; profiling)
//! takes the general path, [`HitPath::hit`], out of line.

use cilkview_engine::{Anomalies, Engine, Event, EventKind};
use cilkview_events::PackedHit;

use crate::locks::{HeldLocks, LockMark, Locks};
use crate::nesting::{MarkPlace, Nesting};
use crate::region_profile::RegionProfiler;
use crate::sites::{ProbeSite, Sites};

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
}

/// What one probe of the current program image means: one entry of the session's probe table.
#[derive(Clone, Copy)]
pub(crate) struct ProbeEntry {
    /// The engine's event (region labels interned; a loop's grain comes with each hit).
    pub(crate) kind: EventKind,
    /// Where the mark is (read only for warnings).
    pub(crate) place: MarkPlace,
    /// The call site its hits belong to (`ProbeSite::None` unless profiling call sites).
    pub(crate) site: ProbeSite,
    /// A lock mark of the `--locks` library: not an engine event (`locks.rs`).
    pub(crate) lock: Option<LockMark>,
}

/// What a hit of a probe without an operand is to the hot loops: its engine event, when that is
/// all the hit is (a kind with no data, or a loop's beginning of grain 1), or `General`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum HotKind {
    FunctionEnter,
    FunctionExit,
    Spawn,
    SpawnReturn,
    Sync,
    LoopBegin,
    IterationBegin,
    IterationEnd,
    LoopEnd,
    /// The general path: a lock mark, a region's begin or end, a spawn-after or wait-for.
    General,
}

impl HotKind {
    fn of(entry: &ProbeEntry) -> HotKind {
        if entry.lock.is_some() {
            return HotKind::General;
        }
        match entry.kind {
            EventKind::FunctionEnter => HotKind::FunctionEnter,
            EventKind::FunctionExit => HotKind::FunctionExit,
            EventKind::Spawn => HotKind::Spawn,
            EventKind::SpawnReturn => HotKind::SpawnReturn,
            EventKind::Sync => HotKind::Sync,
            EventKind::LoopBegin { grain: 1 } => HotKind::LoopBegin,
            EventKind::IterationBegin => HotKind::IterationBegin,
            EventKind::IterationEnd => HotKind::IterationEnd,
            EventKind::LoopEnd => HotKind::LoopEnd,
            _ => HotKind::General,
        }
    }
}

/// The probes of the current program image, indexed like the backend's probe numbers: each
/// one's entry, and its [`HotKind`] in a table of its own (a byte a probe: what the hot loops
/// read).
#[derive(Default)]
pub(crate) struct ProbeTable {
    entries: Vec<ProbeEntry>,
    hot: Vec<HotKind>,
}

impl ProbeTable {
    pub(crate) fn push(&mut self, entry: ProbeEntry) {
        self.hot.push(HotKind::of(&entry));
        self.entries.push(entry);
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops the first `n` probes: the others are numbered from 0.
    pub(crate) fn drop_first(&mut self, n: usize) {
        self.entries.drain(..n);
        self.hot.drain(..n);
    }
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
            PackedHit::for_each_hit_in(words, |probe, cost| {
                self.hit::<true>(thread, probe, cost, None)
            });
            return;
        }
        // What each hit reads, in locals (registers) through the loop rather than behind
        // `self`: the kinds, and the anomaly count last seen (the general path and a new
        // anomaly update the thread's, and this from it).
        let hot = self.probes.hot.as_slice();
        let mut seen = thread.seen_count;
        if ones {
            PackedHit::for_each_one_in(words, |probe, cost| {
                self.plain(hot, thread, probe, cost, &mut seen)
            });
        } else {
            PackedHit::for_each_hit_in(words, |probe, cost| {
                self.plain(hot, thread, probe, cost, &mut seen)
            });
        }
    }

    /// A hit without an operand, no call sites profiled: the hot path, tens of millions of times
    /// a second.
    #[inline(always)]
    fn plain(
        &mut self,
        hot: &[HotKind],
        thread: &mut Thread,
        probe: usize,
        cost: u64,
        seen: &mut u64,
    ) {
        let engine = &mut thread.engine;
        // One arm per kind, each with the engine's step inlined for its kind alone.
        macro_rules! apply {
            ($kind:expr) => {
                engine.process_unprofiled(Event::new(cost, $kind))
            };
        }
        match hot.get(probe) {
            Some(HotKind::FunctionEnter) => apply!(EventKind::FunctionEnter),
            Some(HotKind::FunctionExit) => apply!(EventKind::FunctionExit),
            Some(HotKind::Spawn) => apply!(EventKind::Spawn),
            Some(HotKind::SpawnReturn) => apply!(EventKind::SpawnReturn),
            Some(HotKind::Sync) => apply!(EventKind::Sync),
            Some(HotKind::LoopBegin) => apply!(EventKind::LoopBegin { grain: 1 }),
            Some(HotKind::IterationBegin) => apply!(EventKind::IterationBegin),
            Some(HotKind::IterationEnd) => apply!(EventKind::IterationEnd),
            Some(HotKind::LoopEnd) => apply!(EventKind::LoopEnd),
            Some(HotKind::General) | None => {
                *seen = self.general(thread, probe, cost);
                return;
            }
        }
        if engine.anomaly_count() != *seen {
            *seen = self.anomaly_at(thread, probe);
        }
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
    }
}
