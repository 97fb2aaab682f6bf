//! A later run of `--repeat N` folded into the first ([`Folder`]): its threads must end their
//! strands as the first run's did, in the same order; where one departs, the rest of it is
//! not used.

use std::path::Path;

use cilkview_events::{EventSink, HitsTotal, PackedHit, Probe, ProbesError, TraceEvent};

use super::{
    event_tid, probe_end, strand_end, Divergence, RecordedRun, ThreadOrder, EXEC, THREAD_EXIT,
};

/// A later run's sink: folds its costs into the recorded run (each strand's minimum).
pub struct Folder<'r> {
    run: &'r mut RecordedRun,
    calls: usize,
    order: ThreadOrder,
    /// Per recorded thread: the next strand, or `None` once the thread departed.
    next: Vec<Option<usize>>,
    divergence: Option<Divergence>,
    /// The sum of this run's costs so far.
    work: u64,
    /// This run's number among the runs (the first run's is 0).
    index: usize,
}

impl<'r> Folder<'r> {
    pub fn new(run: &'r mut RecordedRun) -> Folder<'r> {
        let next = vec![Some(0); run.threads.len()];
        let index = run.runs;
        run.runs += 1;
        Folder {
            run,
            calls: 0,
            order: ThreadOrder::default(),
            next,
            divergence: None,
            work: 0,
            index,
        }
    }

    /// Thread `thread` departs at its strand `strand`: the rest of its run is not used.
    fn depart(&mut self, thread: usize, strand: usize, what: String) {
        if let Some(next) = self.next.get_mut(thread) {
            *next = None;
        }
        self.divergence.get_or_insert(Divergence {
            thread: thread + 1,
            strand,
            what,
        });
    }

    /// Every thread departs (the run maps other images).
    fn depart_all(&mut self, what: String) {
        for thread in 0..self.next.len() {
            let strand = self.next[thread].unwrap_or(0);
            self.depart(thread, strand, what.clone());
        }
        self.next.fill(None);
    }

    fn fold(&mut self, tid: i32, end: u32, cost: u64) {
        let (thread, _) = self.order.of(tid);
        let thread = thread as usize;
        let Some(Some(i)) = self.next.get(thread).copied() else {
            if thread >= self.run.threads.len() && self.divergence.is_none() {
                self.divergence = Some(Divergence {
                    thread: thread + 1,
                    strand: 0,
                    what: "a thread the first run did not have".into(),
                });
            }
            return;
        };
        let strands = &mut self.run.threads[thread];
        match strands.ends.get(i) {
            Some(&e) if e == end => {
                strands.fold(self.index, i, cost);
                self.work += cost;
                self.next[thread] = Some(i + 1);
            }
            recorded => {
                let what = format!(
                    "{} where the first run had {}",
                    name(end),
                    name_of(recorded)
                );
                self.depart(thread, i, what);
            }
        }
    }

    /// How the run departed from the first one, if it did (a thread that ended early too).
    pub fn finish(mut self) -> Option<Divergence> {
        for thread in 0..self.next.len() {
            if let Some(i) = self.next[thread] {
                let len = self.run.threads[thread].ends.len();
                if i < len {
                    self.depart(thread, i, format!("it ended where the first run had {len}"));
                }
            }
        }
        if self.divergence.is_none() {
            self.run.run_work.push(self.work);
        }
        self.divergence
    }
}

/// What ended a strand, for a message.
fn name(end: u32) -> String {
    match end {
        EXEC => "an exec".into(),
        THREAD_EXIT => "the thread's exit".into(),
        probe => format!("probe {probe}"),
    }
}

fn name_of(end: Option<&u32>) -> String {
    end.map_or_else(|| "no more strands".into(), |&e| name(e))
}

impl EventSink for Folder<'_> {
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        let call = self.calls;
        self.calls += 1;
        match self.run.answers.get(call) {
            Some((path, probes)) if path == image => Ok(probes.clone()),
            _ => {
                // Another image than the first run's: nothing of this run is used any more (its
                // probes are left unwatched).
                self.depart_all(format!("it mapped {} as its image {call}", image.display()));
                Ok(Vec::new())
            }
        }
    }

    fn event(&mut self, event: TraceEvent) {
        let tid = event_tid(&event);
        match strand_end(&event) {
            Some((end, cost)) => self.fold(tid, end, cost),
            None => {
                self.order.of(tid);
            }
        }
    }

    fn hits(&mut self, tid: i32, hits: &[u64]) -> HitsTotal {
        PackedHit::for_each_in(hits, |probe, cost| self.fold(tid, probe_end(probe), cost))
    }
}
