//! The session's hot path with call-site profiles: a run of hits of a thread whose engine
//! profiles (and no region's profiler) handed to the engine in batches
//! ([`Engine::process_batch_until_anomaly`]: the profiler taken out of the engine once a batch,
//! not once a hit), each hit of a kind that is nothing but an engine event (a call, a spawn, a
//! sync, a loop's iterations: [`HotKind`]) put in the batch with its site; any other hit (a
//! lock mark, a region's begin or end, a dependence edge, a probe not ours) after the batch so
//! far, by the general path.

use cilkview_engine::{CallSite, Event, EventKind};
use cilkview_events::PackedHit;

use super::{HitPath, HotKind, Thread};

/// The most events a batch holds.
const BATCH: usize = 1024;

/// A thread's events not handed to its engine yet, and each one's probe (whose mark a new
/// anomaly is reported at). Empty between runs: kept only for its room.
#[derive(Default)]
pub(crate) struct ProfiledBatch {
    events: Vec<Event>,
    probes: Vec<usize>,
}

impl HotKind {
    /// The engine event a hit of this kind is (`None`: the general path).
    #[inline(always)]
    fn event_kind(self) -> Option<EventKind> {
        Some(match self {
            HotKind::FunctionEnter => EventKind::FunctionEnter,
            HotKind::FunctionExit => EventKind::FunctionExit,
            HotKind::Spawn => EventKind::Spawn,
            HotKind::SpawnReturn => EventKind::SpawnReturn,
            HotKind::Sync => EventKind::Sync,
            HotKind::LoopBegin => EventKind::LoopBegin { grain: 1 },
            HotKind::IterationBegin => EventKind::IterationBegin,
            HotKind::IterationEnd => EventKind::IterationEnd,
            HotKind::LoopEnd => EventKind::LoopEnd,
            HotKind::General | HotKind::NotSmall => return None,
        })
    }
}

impl HitPath<'_> {
    /// A run of packed hits (any of [`PackedHit`]'s forms) of `thread`, whose engine profiles
    /// call sites and which has no region's profiler: the same as [`HitPath::hit`] on each.
    pub(crate) fn run_profiled(&mut self, thread: &mut Thread, words: &[u64]) {
        let mut batch = std::mem::take(&mut thread.batch);
        PackedHit::for_each_hit_in(words, |probe, cost| {
            let Some(kind) = self.probes.kind_of(probe).event_kind() else {
                self.hand_over(thread, &mut batch);
                self.hit::<true>(thread, probe, cost, None);
                return;
            };
            let site = match kind {
                EventKind::FunctionEnter | EventKind::Spawn => {
                    self.site_of(probe, &mut thread.spawn_caller)
                }
                _ => None,
            };
            batch.events.push(Event::at(cost, kind, site));
            batch.probes.push(probe);
            if batch.events.len() == BATCH {
                self.hand_over(thread, &mut batch);
            }
        });
        self.hand_over(thread, &mut batch);
        thread.batch = batch;
    }

    /// The site of a hit (without operand) of `probe`, an entry or a spawn of ours.
    #[inline(always)]
    fn site_of(&mut self, probe: usize, spawn_caller: &mut Option<u64>) -> Option<CallSite> {
        let site = self.probes.entries[probe].site;
        self.sites.as_mut()?.site(site, None, spawn_caller)
    }

    /// The batch handed to the thread's engine, each new anomaly recorded at the mark of the
    /// event that raised it; the batch left empty.
    fn hand_over(&mut self, thread: &mut Thread, batch: &mut ProfiledBatch) {
        let mut from = 0;
        while from < batch.events.len() {
            from += thread
                .engine
                .process_batch_until_anomaly(&batch.events[from..]);
            if thread.engine.anomaly_count() != thread.seen_count {
                let place = self.probes.entries[batch.probes[from - 1]].place;
                self.record_anomalies(thread, place);
            }
        }
        batch.events.clear();
        batch.probes.clear();
    }
}
