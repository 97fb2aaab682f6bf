//! Regions: a labeled region's sub-dag measured from its begin to its end in the frame it began
//! in (docs/engine.md, "Regions").

use super::Engine;
use crate::event::RegionId;
use crate::frame::{Frame, FrameKind, OpenRegion};
use crate::measures::{Measures, RegionMeasures};
use crate::paths::{End, Paths};

impl Engine {
    /// A region begins in the current frame.
    #[inline(always)]
    pub(super) fn begin_region(&mut self, id: RegionId) {
        let (spawns_at_begin, syncs_at_begin, acc) = (self.spawns, self.syncs, self.acc);
        let events_at_begin = self.events;
        let out = self.ends.len();
        let top = self.stack.last_mut().expect("root frame is never popped");
        let first = out - top.base;
        if top.kind == FrameKind::Loop {
            self.anomaly().unmatched_regions += 1;
            return;
        }
        let extra = top.extra.get_or_insert_with(|| self.spares.extra());
        extra.regions.push(OpenRegion {
            id,
            paths: Paths::new(acc),
            spawns_at_begin,
            syncs_at_begin,
            events_at_begin,
            first,
            ends: Vec::new(),
            after: End::default(),
        });
    }

    /// The innermost region `id` open in the current frame ends.
    #[inline(always)]
    pub(super) fn end_region(&mut self, id: RegionId) {
        let top = self.stack.last_mut().expect("root frame is never popped");
        let Some(i) = top.regions().iter().rposition(|r| r.id == id) else {
            self.anomaly().unmatched_regions += 1;
            return;
        };
        let regions = &mut top.extra.as_mut().expect("a region").regions;
        // The innermost, as a rule: popped (`remove` moves it out by a call).
        let r = if i + 1 == regions.len() {
            regions.pop().expect("a region")
        } else {
            regions.remove(i)
        };
        top.release_idle_extra(&mut self.spares);
        self.record_region(&r);
    }

    pub(super) fn end_regions(&mut self, frame: &mut Frame) {
        while let Some(r) = frame.extra.as_mut().and_then(|x| x.regions.pop()) {
            self.anomaly().implicit_region_ends += 1;
            self.record_region(&r);
        }
    }

    /// A region ends: its measures are those of the sub-dag of strands that ran inside it. Children
    /// it spawned and did not sync are included (the region's own measures see an implicit sync;
    /// the enclosing computation does not).
    pub(super) fn record_region(&mut self, r: &OpenRegion) {
        let c = r.paths.synced(self.acc);
        let m = Measures {
            work: c.work,
            span: c.span,
            burdened_span: c.bspan,
            spawns: self.spawns - r.spawns_at_begin,
            syncs: self.syncs - r.syncs_at_begin,
        };
        self.record_region_measures(r.id, &m, self.events - r.events_at_begin);
    }

    /// A region `id` that held one strand of `cost` ended (no spawn or sync in it).
    #[inline(always)]
    pub(super) fn record_strand_region(&mut self, id: RegionId, cost: u64) {
        let strand = Measures {
            work: cost,
            span: cost,
            burdened_span: cost,
            spawns: 0,
            syncs: 0,
        };
        self.record_region_measures(id, &strand, 1);
    }

    /// A region `id` of measures `m` and `events` ended: its entry in the regions' measures
    /// counts it.
    fn record_region_measures(&mut self, id: RegionId, m: &Measures, events: u64) {
        let entry = self.region_entry(id);
        entry.measures = entry.measures.then(m);
        entry.events += events;
    }

    /// The entry of the regions' measures for region `id`, one more counted in it (made if
    /// none: a new id is inserted in place).
    #[inline(always)]
    fn region_entry(&mut self, id: RegionId) -> &mut RegionMeasures {
        let i = match self.regions.binary_search_by_key(&id, |m| m.id) {
            Ok(i) => i,
            Err(i) => {
                let new = RegionMeasures {
                    id,
                    count: 0,
                    events: 0,
                    measures: Measures::default(),
                };
                self.regions.insert(i, new);
                i
            }
        };
        let entry = &mut self.regions[i];
        entry.count += 1;
        entry
    }
}
