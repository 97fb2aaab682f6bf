//! `--profile-region LABEL`: the call-site profile of one region instead of the whole run. A
//! second, profiling engine per thread sees only what ran inside the region: the events from
//! each `RegionBegin(LABEL)` to its end, the strands of the other events in it as plain costs,
//! and nothing of the rest of the run. Its instances follow one another in that engine, as a
//! region's measures add up over its instances, so the profile's root has the region's work and
//! span, and its rows add up to them (docs/engine.md, "Call-site profiles").

use cilkview_engine::{Config, Engine, Event, EventKind, Profile, RegionId};

/// The region profiler of one thread.
#[derive(Clone, Debug)]
pub(crate) struct RegionProfiler {
    id: RegionId,
    engine: Engine,
    /// Instances of the label open (0: outside the region; a nested one counts, only the
    /// outermost is profiled).
    open: u32,
    /// The children the region's frame had out when the region began (since its last sync):
    /// `SpawnAfter` numbers siblings from the first of them, the region's engine from its own.
    before: u64,
}

impl RegionProfiler {
    pub fn new(id: RegionId, burden: u64) -> Self {
        RegionProfiler {
            id,
            engine: Engine::with_profile(Config { burden }),
            open: 0,
            before: 0,
        }
    }

    /// `event` was consumed by the thread's engine `main`.
    #[inline]
    pub fn event(&mut self, main: &Engine, event: Event) {
        if self.open == 0 {
            if event.kind == EventKind::RegionBegin(self.id) {
                self.open = 1;
                self.before = main.children_out();
            }
            return;
        }
        // The frame the region began in is the region engine's root.
        let in_its_frame = self.engine.depth() == 0;
        match event.kind {
            EventKind::RegionBegin(id) if id == self.id => {
                self.open += 1;
                self.engine.charge(event.cost);
            }
            EventKind::RegionEnd(id) if id == self.id => {
                self.engine.charge(event.cost);
                self.open -= 1;
                if self.open == 0 {
                    self.end_instance();
                }
            }
            EventKind::RegionBegin(_) | EventKind::RegionEnd(_) => self.engine.charge(event.cost),
            // The region's frame ends (a return, a spawned child's end, its iteration's end):
            // so does the region, with this strand (as the engine ends regions left open).
            EventKind::FunctionExit
            | EventKind::SpawnReturn
            | EventKind::IterationEnd
            | EventKind::IterationBegin
            | EventKind::LoopEnd
                if in_its_frame =>
            {
                self.engine.charge(event.cost);
                self.open = 0;
                self.end_instance();
            }
            EventKind::SpawnAfter { sibling } if in_its_frame => {
                let sibling = sibling.checked_sub(self.before).unwrap_or(u64::MAX);
                self.engine
                    .process(Event::new(event.cost, EventKind::SpawnAfter { sibling }));
            }
            EventKind::Sync if in_its_frame => {
                self.before = 0;
                self.engine.process(event);
            }
            _ => self.engine.process(event),
        }
    }

    /// A strand no event ended (a foreign probe, a thread's end) ran in the thread.
    pub fn charge(&mut self, cost: u64) {
        if self.open > 0 {
            self.engine.charge(cost);
        }
    }

    /// An instance ends: its children still out join it (the region's measures see an implicit
    /// sync), so the next instance follows it.
    fn end_instance(&mut self) {
        self.engine.process(Event::new(0, EventKind::Sync));
    }

    /// The profile of every instance, one after the other (an instance still open at the end of
    /// the stream ends there).
    pub fn finish(self) -> Profile {
        self.engine.finish().profile.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilkview_engine::CallSite;
    use EventKind::*;

    const R: RegionId = RegionId(0);

    /// Runs `events` through an engine and a region profiler of R: the region's measures (work,
    /// span) and the region profile's root (on work).
    fn both(events: &[Event]) -> ((u64, u64), (u64, u64), Profile) {
        let mut main = Engine::new(Config { burden: 100 });
        let mut region = RegionProfiler::new(R, 100);
        for &e in events {
            main.process(e);
            region.event(&main, e);
        }
        let report = main.finish();
        let m = report.regions.iter().find(|r| r.id == R).unwrap().measures;
        let p = region.finish();
        let root = p.root().on_work;
        ((m.work, m.span), (root.work, root.span), p)
    }

    fn e(cost: u64, kind: EventKind) -> Event {
        Event::new(cost, kind)
    }

    #[test]
    fn the_region_profile_is_the_regions_measures() {
        let site = CallSite::new(7);
        let (measures, profile, p) = both(&[
            e(1000, FunctionEnter), // start-up, outside
            e(5, RegionBegin(R)),
            Event::at(1, Spawn, site),
            e(10, SpawnReturn),
            e(3, RegionBegin(RegionId(1))), // another label: a plain strand here
            e(20, RegionEnd(RegionId(1))),
            e(2, Sync),
            e(4, RegionEnd(R)),
            e(500, Spawn), // outside again
            e(7, SpawnReturn),
            e(0, FunctionExit),
        ]);
        // In the region: 1, the child 10 ‖ 3 + 20, then 2 + 4: work 40, span 30.
        assert_eq!(measures, (40, 30));
        assert_eq!(profile, measures);
        let child = p.sites.iter().find(|s| Some(s.site) == site).unwrap();
        assert_eq!(
            (child.invocations, child.on_work.work, child.on_span.span),
            (1, 10, 0)
        );
        assert_eq!(p.root().local_on_span.span, 30);
    }

    #[test]
    fn a_region_ends_with_its_frame_and_its_instances_follow_one_another() {
        let (measures, profile, _) = both(&[
            e(1, FunctionEnter),
            e(2, RegionBegin(R)), // never ended: it ends when its function returns
            e(3, Spawn),
            e(10, SpawnReturn),
            e(4, FunctionExit),
            e(1, FunctionEnter),
            e(2, RegionBegin(R)),
            e(6, RegionBegin(R)), // nested: counted in the outer instance
            e(8, RegionEnd(R)),
            e(5, RegionEnd(R)),
            e(0, FunctionExit),
        ]);
        // First: 3 + (10 ‖ 4) = work 17, span 13 (the child is synced by the return). Second:
        // 6 + 8 + 5 = 19 — and the engine measures the nested instance (8) once more.
        assert_eq!(measures, (17 + 19 + 8, 13 + 19 + 8));
        assert_eq!(profile, (17 + 19, 13 + 19));
    }
}
