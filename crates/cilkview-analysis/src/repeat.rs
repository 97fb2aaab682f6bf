//! `run --repeat N` (the native counter): each strand's time is **the median of its N runs**,
//! more exactly the mean of its runs near the median (within 1/64 of it, at least 40 ns: a
//! clock that moves in ~10-ns steps reads a strand of a few steps as one step or the next, and
//! the median alone is a step) (of two runs, their mean where they agree within 1/64 of the
//! shorter, at least 40 ns, else the shorter). A time-based strand is its instructions' time plus whatever interrupted it (a
//! timer tick, the hypervisor: 15–40 µs each on a VM, hundreds a second; under load, stretches
//! where the virtual CPU runs up to 2x slower), and the span, a longest path, collects those
//! interruptions; the same strand of another run is rarely interrupted again, so the median
//! leaves them out where fewer than half its runs were interrupted. It keeps the strand's own
//! spread (caches, the stub's cost varying by a few ns), which the program's own CPU time has
//! too: the shortest run of each strand summed to 0.61–0.75 of the untraced CPU time on
//! cilkbench's kernels, its luckiest run every time (docs/tracer.md, "How exact"). The minima are
//! the low end of the span's noise bound ([`RecordedRun::replay`], [`Estimate`]). With three
//! runs or more, the typical times are then scaled, all by one factor, to sum to the median
//! run's work ([`RecordedRun::costs`]): what lengthens a strand in one run only is in every
//! run's work but in no strand's typical run.
//!
//! The first run is recorded ([`Recorder`]): the backend's calls and events in order, and for
//! each thread the sequence of what ended its strands (a probe, an exec, the thread's exit) with
//! their costs. Each further run is folded into it ([`Folder`]): its threads (matched by order of
//! appearance) must end their strands the same way in the same order, each cost is kept beside
//! the others' (the first [`SAMPLED_RUNS`] runs'; the shortest and the sum of all); where a
//! thread's sequence departs from the first run's ([`Divergence`]), the rest of that thread's
//! run is not used. The result is replayed into the analysis
//! ([`RecordedRun::replay`]) as if one run had measured it. Memory: 12 bytes per hit and 4 per
//! strand and run.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use cilkview_events::{EventSink, HitsTotal, PackedHit, Probe, ProbesError, TraceEvent};

/// What ended a strand, besides a probe's number.
const EXEC: u32 = u32::MAX;
const THREAD_EXIT: u32 = u32::MAX - 1;

/// One step of the recorded run, in the backend's order.
enum Item {
    /// `probes_for` of this image (the analysis numbers its probes again at the replay).
    Probes(PathBuf),
    ImageBase(u64),
    /// An event as it came (its cost, if it carries one, is the thread's next strand's).
    Event {
        thread: u32,
        event: TraceEvent,
    },
    /// The thread's next `count` strands, ended by hits without operands.
    Hits {
        thread: u32,
        count: usize,
    },
}

/// One thread's strands: what ended each (a probe's number, [`EXEC`] or [`THREAD_EXIT`]), its
/// shortest cost and the sum of its costs over the runs folded in, and each of the first
/// [`SAMPLED_RUNS`] runs' costs (a run that departed has fewer: its strands up to there).
struct Strands {
    tid: i32,
    ends: Vec<u32>,
    least: Vec<u64>,
    sums: Vec<u64>,
    runs: Vec<u16>,
    /// `samples[r][i]`: run `r`'s cost of strand `i`, as `f32` (exact to 2^24 ns, ~17 ms;
    /// within 6·10^-8 beyond: 4 bytes per run and strand).
    samples: Vec<Vec<f32>>,
}

/// The runs whose costs are kept for each strand's median (`--repeat auto` may run up to 100:
/// the shortest and the mean cover them all, the median the first 15).
pub(crate) const SAMPLED_RUNS: usize = 15;

impl Strands {
    fn new(tid: i32) -> Strands {
        Strands {
            tid,
            ends: Vec::new(),
            least: Vec::new(),
            sums: Vec::new(),
            runs: Vec::new(),
            samples: vec![Vec::new()],
        }
    }

    /// The first run's strand.
    fn push(&mut self, end: u32, cost: u64) {
        self.ends.push(end);
        self.least.push(cost);
        self.sums.push(cost);
        self.runs.push(1);
        self.samples[0].push(cost as f32);
    }

    /// A later run's cost of strand `i`, the run's `run`-th (from 0: the first run's).
    fn fold(&mut self, run: usize, i: usize, cost: u64) {
        self.least[i] = self.least[i].min(cost);
        self.sums[i] += cost;
        self.runs[i] = self.runs[i].saturating_add(1);
        if run < SAMPLED_RUNS {
            if self.samples.len() <= run {
                self.samples.resize_with(run + 1, Vec::new);
            }
            // A run folds its strands in order: its column reaches `i` unless it departed.
            if self.samples[run].len() == i {
                self.samples[run].push(cost as f32);
            }
        }
    }

    /// Strand `i`'s cost by `estimate`.
    fn cost(&self, i: usize, estimate: Estimate) -> u64 {
        let n = u64::from(self.runs[i]);
        match estimate {
            Estimate::Minimum => self.least[i],
            Estimate::Typical if n < 2 => self.sums[i],
            Estimate::Typical if n == 2 => {
                let least = self.least[i];
                if self.sums[i] - 2 * least <= agreement(least) {
                    self.sums[i] / 2
                } else {
                    least
                }
            }
            Estimate::Typical => self.median(i),
        }
    }

    /// The mean of strand `i`'s sampled runs that agree with their median ([`agreement`]): the
    /// median leaves out the runs that an interruption lengthened, the mean of the others keeps
    /// what a clock moving in steps (~10 ns on an AMD guest's TSC) spreads over one step or the
    /// next: a strand of ~25 ns less the hit's cost reads 16 ns in most runs and 26 in the
    /// others, and their median, 16, is one step, not the strand (cilkbench's cholesky, strands
    /// of ~20 ns: work by the median 0.5-0.85 of its CPU time untraced).
    fn median(&self, i: usize) -> u64 {
        let mut buffer = [0f32; SAMPLED_RUNS];
        let mut n = 0;
        for cost in self.samples.iter().filter_map(|run| run.get(i)) {
            buffer[n] = *cost;
            n += 1;
        }
        let costs = &mut buffer[..n];
        costs.sort_unstable_by(f32::total_cmp);
        let mid = costs.len() / 2;
        let median = if costs.len() % 2 == 1 {
            f64::from(costs[mid])
        } else {
            (f64::from(costs[mid - 1]) + f64::from(costs[mid])) / 2.0
        };
        let near = agreement(median as u64) as f64;
        let (sum, kept) = costs
            .iter()
            .map(|&c| f64::from(c))
            .filter(|c| (c - median).abs() <= near)
            .fold((0.0, 0u32), |(s, k), c| (s + c, k + 1));
        (sum / f64::from(kept)).round() as u64
    }
}

/// How much longer than its shorter run (`least`) the other of two runs may be and still agree
/// with it: 1/[`AGREEMENT_FRACTION`] of it, at least [`AGREEMENT_FLOOR_NS`]. Within it, the
/// difference is the strand's own (its caches, the stub's cost varying by a few ns) and the two
/// are averaged; beyond it, the machine took time from the longer run (a timer tick of 15–40 µs,
/// a preemption's edges, a stretch where a busy sibling vCPU slowed it) and the shorter is
/// kept. Three runs or more give the median, which needs no threshold.
pub(crate) fn agreement(least: u64) -> u64 {
    (least / AGREEMENT_FRACTION).max(AGREEMENT_FLOOR_NS)
}

/// Two runs of a strand agree within 1/64 of the shorter...
pub(crate) const AGREEMENT_FRACTION: u64 = 64;
/// ... or 40 ns, a few times the stub's own spread.
pub(crate) const AGREEMENT_FLOOR_NS: u64 = 40;

/// Which cost of each strand a replay gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Estimate {
    /// The median of its runs (of two, their mean where they agree ([`agreement`]), else the
    /// shorter): the report's.
    Typical,
    /// Its shortest run: the low end of the noise bound.
    Minimum,
}

/// The first run's stream, with each strand's cost the minimum over the runs folded into it.
pub struct RecordedRun {
    items: Vec<Item>,
    threads: Vec<Strands>,
    /// The answers of the first run's `probes_for` calls, given again to the later runs.
    answers: Vec<(PathBuf, Vec<Probe>)>,
    /// Each run's work (the sum of its strands' costs), for the runs that matched the first
    /// one's strands all through.
    run_work: Vec<u64>,
    /// The runs recorded or folded in so far, departed ones too.
    runs: usize,
}

/// Where a later run departed from the first: its strands from there on were not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The thread, numbered from 1 in order of appearance.
    pub thread: usize,
    /// How many of the thread's strands matched before it departed.
    pub strand: usize,
    pub what: String,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "thread {} after {} strands: {}",
            self.thread, self.strand, self.what
        )
    }
}

/// The cost-carrying end of an event, if it has one: (what ended the strand, cost).
fn strand_end(event: &TraceEvent) -> Option<(u32, u64)> {
    match *event {
        TraceEvent::Exec { cost, .. } => Some((EXEC, cost)),
        TraceEvent::Hit { probe, cost, .. } => Some((probe_end(probe), cost)),
        TraceEvent::ThreadExit { cost, .. } => Some((THREAD_EXIT, cost)),
        TraceEvent::ThreadStart { .. } => None,
    }
}

fn probe_end(probe: usize) -> u32 {
    u32::try_from(probe)
        .unwrap_or(THREAD_EXIT - 1)
        .min(THREAD_EXIT - 1)
}

fn event_tid(event: &TraceEvent) -> i32 {
    match *event {
        TraceEvent::Exec { tid, .. }
        | TraceEvent::Hit { tid, .. }
        | TraceEvent::ThreadExit { tid, .. }
        | TraceEvent::ThreadStart { tid } => tid,
    }
}

/// Threads by order of appearance: a run's thread ids are its own.
#[derive(Default)]
struct ThreadOrder {
    ordinal: HashMap<i32, u32>,
}

impl ThreadOrder {
    /// The thread's number and whether it is new.
    fn of(&mut self, tid: i32) -> (u32, bool) {
        let next = self.ordinal.len() as u32;
        let mut new = false;
        let n = *self.ordinal.entry(tid).or_insert_with(|| {
            new = true;
            next
        });
        (n, new)
    }
}

/// The first run's sink: records everything, asks `answerer` (an analysis session of the same
/// settings) for the probes of each image.
pub struct Recorder<'a> {
    run: RecordedRun,
    answerer: &'a mut dyn EventSink,
    order: ThreadOrder,
}

impl<'a> Recorder<'a> {
    pub fn new(answerer: &'a mut dyn EventSink) -> Recorder<'a> {
        Recorder {
            run: RecordedRun {
                items: Vec::new(),
                threads: Vec::new(),
                answers: Vec::new(),
                run_work: Vec::new(),
                runs: 1,
            },
            answerer,
            order: ThreadOrder::default(),
        }
    }

    fn thread(&mut self, tid: i32) -> u32 {
        let (n, new) = self.order.of(tid);
        if new {
            self.run.threads.push(Strands::new(tid));
        }
        n
    }

    pub fn finish(mut self) -> RecordedRun {
        // The first run's work: the sum of its strands' costs.
        let work = self.run.threads.iter().flat_map(|t| &t.sums).sum();
        self.run.run_work.push(work);
        self.run
    }
}

impl EventSink for Recorder<'_> {
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        let probes = self.answerer.probes_for(image)?;
        self.run.answers.push((image.to_path_buf(), probes.clone()));
        self.run.items.push(Item::Probes(image.to_path_buf()));
        Ok(probes)
    }

    fn image_base(&mut self, base: u64) {
        self.run.items.push(Item::ImageBase(base));
    }

    fn event(&mut self, event: TraceEvent) {
        let thread = self.thread(event_tid(&event));
        if let Some((end, cost)) = strand_end(&event) {
            self.run.threads[thread as usize].push(end, cost);
        }
        self.run.items.push(Item::Event { thread, event });
    }

    fn hits(&mut self, tid: i32, hits: &[u64]) -> HitsTotal {
        let thread = self.thread(tid);
        let strands = &mut self.run.threads[thread as usize];
        let before = strands.ends.len();
        let total = PackedHit::for_each_in(hits, |probe, cost| {
            strands.push(probe_end(probe), cost);
        });
        let count = strands.ends.len() - before;
        match self.run.items.last_mut() {
            Some(Item::Hits {
                thread: t,
                count: c,
            }) if *t == thread => *c += count,
            _ => self.run.items.push(Item::Hits { thread, count }),
        }
        total
    }
}

/// Scales `costs` by one factor so that they sum to `target`, each rounded so that every prefix
/// of them (threads in order, then strands) sums to its exact scaled value rounded: no rounding
/// builds up over strands of a few ns (a factor of 1.05 would leave a 6-ns strand 6 every time).
fn scale_to(costs: &mut [Vec<u64>], target: u64) {
    let sum: u64 = costs.iter().flatten().sum();
    if sum == 0 || sum == target {
        return;
    }
    let (mut raw, mut scaled) = (0u128, 0u128);
    for cost in costs.iter_mut().flatten() {
        raw += u128::from(*cost);
        let upto = (raw * u128::from(target) + u128::from(sum) / 2) / u128::from(sum);
        *cost = (upto - scaled) as u64;
        scaled = upto;
    }
}

impl RecordedRun {
    /// The sum of its strands' costs by `estimate` (as replayed: see [`RecordedRun::costs`]).
    pub fn total_by(&self, estimate: Estimate) -> u64 {
        self.costs(estimate).iter().flatten().sum()
    }

    /// The sum of its strands' costs (the report's: [`Estimate::Typical`]).
    pub fn total(&self) -> u64 {
        self.total_by(Estimate::Typical)
    }

    /// Each thread's strand costs by `estimate`, in order, as replayed: the typical costs of
    /// three runs or more scaled, all by one factor, to sum to the median work of the runs they
    /// were taken from ([`scale_to`]). What lengthens a strand in one run only (a cache miss, a
    /// short pause) is in every run's work and the CPU time, and in no strand's typical run: the
    /// typical costs give the shape, the runs' median the total (docs/tracer.md, "--repeat N").
    fn costs(&self, estimate: Estimate) -> Vec<Vec<u64>> {
        let mut costs = self.strand_costs(estimate);
        if estimate == Estimate::Typical {
            if let Some(median) = self.median_run() {
                scale_to(&mut costs, self.run_work[median]);
            }
        }
        costs
    }

    /// Where the typical costs are scaled to a run's work (3 runs or more), which run: its
    /// index in [`RecordedRun::run_work`], the median (the lower middle one) of the first
    /// [`SAMPLED_RUNS`].
    pub fn median_run(&self) -> Option<usize> {
        let sampled = &self.run_work[..self.run_work.len().min(SAMPLED_RUNS)];
        (sampled.len() >= 3)
            .then(|| crate::noise::median_index(sampled))
            .flatten()
    }

    /// Each thread's strands' own costs by `estimate`, in order (not scaled).
    fn strand_costs(&self, estimate: Estimate) -> Vec<Vec<u64>> {
        self.threads
            .iter()
            .map(|t| (0..t.ends.len()).map(|i| t.cost(i, estimate)).collect())
            .collect()
    }

    /// Each run's work, for the runs whose strands all matched the first run's.
    pub fn run_work(&self) -> &[u64] {
        &self.run_work
    }

    /// Feeds `sink` the first run's stream with each strand's cost by `estimate`. An error is
    /// the sink's, for the image named.
    pub fn replay(
        &self,
        sink: &mut dyn EventSink,
        estimate: Estimate,
    ) -> Result<(), (PathBuf, ProbesError)> {
        let costs = self.costs(estimate);
        let mut next = vec![0usize; self.threads.len()];
        let mut words = Vec::new();
        for item in &self.items {
            match item {
                Item::Probes(image) => {
                    sink.probes_for(image).map_err(|e| (image.clone(), e))?;
                }
                Item::ImageBase(base) => sink.image_base(*base),
                Item::Event { thread, event } => {
                    // The event as it came, with its strand's estimate as its cost.
                    let mut event = *event;
                    if let TraceEvent::Exec { cost, .. }
                    | TraceEvent::Hit { cost, .. }
                    | TraceEvent::ThreadExit { cost, .. } = &mut event
                    {
                        let i = &mut next[*thread as usize];
                        *cost = costs[*thread as usize][*i];
                        *i += 1;
                    }
                    sink.event(event);
                }
                Item::Hits { thread, count } => {
                    let (strands, i) =
                        (&self.threads[*thread as usize], &mut next[*thread as usize]);
                    let range = *i..*i + count;
                    let ends = strands.ends[range.clone()].iter();
                    words.clear();
                    for (&end, &cost) in ends.zip(&costs[*thread as usize][range]) {
                        let probe = end as usize;
                        match PackedHit::new(probe, cost) {
                            Some(word) => words.push(word.0),
                            None => {
                                sink.hits(strands.tid, &words);
                                words.clear();
                                sink.event(TraceEvent::Hit {
                                    probe,
                                    tid: strands.tid,
                                    cost,
                                    operand: None,
                                });
                            }
                        }
                    }
                    sink.hits(strands.tid, &words);
                    *i += count;
                }
            }
        }
        Ok(())
    }
}

mod folder;
pub use folder::Folder;

#[cfg(test)]
#[path = "repeat_tests.rs"]
mod tests;
