//! The pipeline of one measurement: the probes of each image (from its cilkview marks), then
//! the backend's events translated into fork-join events for one engine per thread, then the
//! report model.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cilkview_engine::{Anomalies, Config, Engine, EventKind, RegionId, Report};
use cilkview_events::{Ending, EventSink, ExitStatus, HitsTotal, Probe, ProbesError, TraceEvent};
use cilkview_marks::{has_marks_section, read_marks, MarkKind, MarkedImage};
use cilkview_report::{RunInfo, RunReport};

use crate::hit_path::{HitPath, ProbeEntry, ProbeTable, Thread};
use crate::locks::{HeldLocks, LockMark, Locks};
use crate::nesting::{Cut, MarkPlace, Nesting};
use crate::region_profile::RegionProfiler;
use crate::sites::{ProbeSite, Sites};
use crate::{Progress, HITS_STEP};

/// Label strings ↔ region ids.
#[derive(Default)]
struct Labels {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Labels {
    fn id(&mut self, label: &str) -> RegionId {
        if let Some(&id) = self.ids.get(label) {
            return RegionId(id);
        }
        let id = self.names.len() as u32;
        self.names.push(label.to_string());
        self.ids.insert(label.to_string(), id);
        RegionId(id)
    }
}

/// How a session reads the marks of an image (the `.cilkview_marks` section by default).
pub type MarksReader<'a> = Box<dyn FnMut(&Path) -> Result<MarkedImage, ProbesError> + Send + 'a>;

/// One measurement in progress: an [`EventSink`] a backend feeds (the probes of each image, then
/// every event), then [`Session::finish`] for the report.
pub struct Session<'a> {
    burden: u64,
    /// One engine per thread, in the order threads appeared: each thread has its own fork-join
    /// stack. Their measures combine at the end as computations running in parallel
    /// (`Report::beside`).
    engines: Vec<Thread>,
    /// Thread id → index in `engines`.
    engine_of: HashMap<i32, usize>,
    /// The index of the last engine used (events come in runs of one thread).
    last_engine: usize,
    /// Marks hit, over all threads.
    hits: u64,
    /// The cost of every event, over all threads (saturating): with the burden, it bounds the
    /// measures (`Engine::sums_fit`).
    cost_total: u64,
    /// What each probe of the current program image means, indexed like the backend's probe
    /// numbers: the executable's marks, then those of each library, in the order the backend
    /// asked for them.
    probes: ProbeTable,
    labels: Labels,
    /// Every image (executable or library) whose marks were read, with its number of marks.
    images: Vec<(PathBuf, usize)>,
    /// Marks that did not nest, for the warning.
    nesting: Nesting,
    read: MarksReader<'a>,
    progress: &'a mut dyn Progress,
    /// Call-site profiling (`with_profile`): the sites of entries and spawns.
    sites: Option<Sites>,
    /// The region profiled instead of the whole run (`with_profile_region`).
    profile_region: Option<(String, RegionId)>,
    /// The work held under each lock (`run --locks`).
    locks: Locks,
}

impl<'a> Session<'a> {
    /// A session charging `burden` instructions per continuation, reading marks from the ELF
    /// files the backend names.
    pub fn new(burden: u64, progress: &'a mut dyn Progress) -> Session<'a> {
        Session {
            burden,
            engines: Vec::new(),
            engine_of: HashMap::new(),
            last_engine: 0,
            hits: 0,
            cost_total: 0,
            probes: ProbeTable::default(),
            labels: Labels::default(),
            images: Vec::new(),
            nesting: Nesting::default(),
            read: Box::new(|image| Ok(read_marks(image)?)),
            progress,
            sites: None,
            profile_region: None,
            locks: Locks::default(),
        }
    }

    /// The same session, also profiling call sites (Cilkprof; docs/engine.md): the report gets
    /// `call_sites` and `call_contexts`, named from the images' symbols.
    pub fn with_profile(mut self) -> Session<'a> {
        self.sites = Some(Sites::default());
        self
    }

    /// The same session, profiling call sites in region `label` only (every instance of it,
    /// one after the other): the report's profile is the region's, its root the region's work
    /// and span.
    pub fn with_profile_region(mut self, label: &str) -> Session<'a> {
        let id = self.labels.id(label);
        self.profile_region = Some((label.to_string(), id));
        self.with_profile()
    }

    /// The same session, profiling as a request asks: not at all, the whole program
    /// ([`Session::with_profile`]) or region `region` only ([`Session::with_profile_region`]).
    pub fn with_profiling(self, profile: bool, region: Option<&str>) -> Session<'a> {
        match (profile, region) {
            (true, Some(label)) => self.with_profile_region(label),
            (true, None) => self.with_profile(),
            (false, _) => self,
        }
    }

    /// The same session, reading marks with `read` instead of from the files (tests, or marks
    /// that come from elsewhere).
    pub fn with_marks_reader(
        mut self,
        read: impl FnMut(&Path) -> Result<MarkedImage, ProbesError> + Send + 'a,
    ) -> Session<'a> {
        self.read = Box::new(read);
        self
    }

    /// The index in `engines` of thread `tid`'s engine.
    #[inline]
    fn engine_index(&mut self, tid: i32) -> usize {
        match self.engines.get(self.last_engine) {
            Some(t) if t.tid == tid => self.last_engine,
            _ => self.switch_engine(tid),
        }
    }

    /// Another thread's events (or a new thread's): its engine becomes the last used.
    #[cold]
    fn switch_engine(&mut self, tid: i32) -> usize {
        let (burden, profile) = (self.burden, self.sites.is_some());
        let region = self.profile_region.as_ref().map(|(_, id)| *id);
        let engines = &mut self.engines;
        self.last_engine = *self.engine_of.entry(tid).or_insert_with(|| {
            let config = Config { burden };
            // With a profiled region, the region's profiler profiles; the thread's engine
            // measures only.
            let engine = if profile && region.is_none() {
                Engine::with_profile(config)
            } else {
                Engine::new(config)
            };
            engines.push(Thread {
                tid,
                engine,
                seen: Anomalies::default(),
                seen_count: 0,
                region: region.map(|id| Box::new(RegionProfiler::new(id, burden))),
                spawn_caller: None,
                held: HeldLocks::default(),
                batch: Default::default(),
            });
            engines.len() - 1
        });
        self.last_engine
    }

    /// A hit of thread `tid`.
    fn on_hit(&mut self, probe: usize, tid: i32, cost: u64, operand: Option<u64>) {
        self.cost_total = self.cost_total.saturating_add(cost);
        let i = self.engine_index(tid);
        let (mut path, thread) = self.hit_path(i);
        path.hit::<true>(thread, probe, cost, operand);
        let ours = 1 - path.foreign;
        self.count_hits(ours);
    }

    /// A strand of thread `tid` that no mark ended.
    fn charge(&mut self, tid: i32, cost: u64) {
        self.cost_total = self.cost_total.saturating_add(cost);
        let i = self.engine_index(tid);
        let thread = &mut self.engines[i];
        thread.engine.charge(cost);
        if let Some(region) = &mut thread.region {
            region.charge(cost);
        }
    }

    /// A run of packed hits of thread `tid` (`ones`: words of one hit each): how many hits and
    /// their cost.
    fn run_of_hits(&mut self, tid: i32, words: &[u64], ones: bool) -> HitsTotal {
        let i = self.engine_index(tid);
        let (mut path, thread) = self.hit_path(i);
        // The run's totals from the engine's before and after (every hit is an event of the
        // engine or, for a foreign probe, a charge to it): nothing counted per hit.
        let (events, cost) = (thread.engine.events(), thread.engine.cost_so_far());
        path.run(thread, words, ones);
        let ours = thread.engine.events() - events;
        let total = HitsTotal {
            hits: ours + path.foreign,
            cost: thread.engine.cost_so_far().wrapping_sub(cost),
        };
        self.count_hits(ours);
        self.cost_total = self.cost_total.saturating_add(total.cost);
        total
    }

    /// What a hit of the thread of `engines[i]` reads and writes, borrowed once for a run of
    /// hits: the session's parts, and the thread's.
    fn hit_path(&mut self, i: usize) -> (HitPath<'_>, &mut Thread) {
        let path = HitPath {
            probes: &self.probes,
            sites: &mut self.sites,
            nesting: &mut self.nesting,
            locks: &mut self.locks,
            foreign: 0,
        };
        (path, &mut self.engines[i])
    }

    /// `n` more marks hit: progress each time the count passes a multiple of [`HITS_STEP`].
    #[inline]
    fn count_hits(&mut self, n: u64) {
        let before = self.hits;
        self.hits += n;
        if before / HITS_STEP != self.hits / HITS_STEP {
            self.progress.hits(self.hits);
        }
    }

    /// Ends the session: the report of everything measured, with the warnings a user needs.
    /// `subject` names the program in those warnings. `partial`: the stream began in the middle
    /// of the run (attach), so closers without openers are expected.
    pub fn finish(self, info: RunInfo, subject: &str, partial: bool) -> RunReport {
        self.progress.hits(self.hits);
        self.progress.finished();
        let mut nesting = self.nesting;
        let mut region_profile: Option<cilkview_engine::Profile> = None;
        let mut locks = self.locks;
        let measured = self
            .engines
            .into_iter()
            .map(|mut t| {
                t.held.end(t.engine.cost_so_far(), &mut locks);
                let before = t.engine.anomalies();
                let report = t.engine.finish();
                nesting.record(None, &before, &report.anomalies);
                if let Some(region) = t.region {
                    let p = region.finish();
                    // Region instances add up over threads, as the region's measures do.
                    region_profile = Some(match region_profile.take() {
                        Some(q) => q.then(p),
                        None => p,
                    });
                }
                report
            })
            .reduce(Report::beside)
            .unwrap_or_default();
        let names = &self.labels.names;
        let ending = info.ending;
        let mut report = RunReport::new(info, &measured, |id| {
            names.get(id as usize).cloned().unwrap_or_default()
        });
        if let Some(sites) = &self.sites {
            let profile = region_profile
                .or_else(|| measured.profile.clone())
                .unwrap_or_default();
            report = report.with_profile(&profile, |s| sites.name(s.site));
            report.profile_region = self.profile_region.map(|(label, _)| label);
        }
        if self.images.iter().all(|(_, marks)| *marks == 0) {
            report.warnings.push(format!(
                "{subject} has no cilkview marks: measured as serial code (parallelism 1.00). \
                 Mark its parallel structure with cilkview.h (`cilkview-rs header > cilkview.h`)."
            ));
        }
        let cut = Cut {
            start: partial,
            end: match ending {
                Ending::Exited(ExitStatus::Signaled(_)) => Some(report.ending()),
                Ending::Exited(_) => None,
                Ending::Stopped | Ending::TimeUp => Some("detached".to_string()),
            },
        };
        report.warnings.extend(nesting.warnings(&self.images, &cut));
        if let Some(block) = locks.report(report.measures.work) {
            report.set_locks(block);
        }
        if !Engine::sums_fit(self.cost_total, measured.total.spawns, self.burden) {
            report.warnings.push(format!(
                "the measures are not exact: {} instructions plus a burden of {} per spawn \
                 ({} spawns) reach 2^64, so the burdened spans are shown as 2^64 - 1 (and the \
                 burdened parallelism as 0: a gate on it fails); use a smaller --burden",
                self.cost_total, self.burden, measured.total.spawns
            ));
            // The sums wrapped: never a burdened measure (or a passing gate) made of them.
            report.measures.burdened_span = u64::MAX;
            report.measures.burdened_parallelism = 0.0;
            for r in &mut report.regions {
                r.measures.burdened_span = u64::MAX;
                r.measures.burdened_parallelism = 0.0;
            }
        }
        report
    }
}

impl EventSink for Session<'_> {
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        let marked = match (self.read)(image) {
            Ok(m) => m,
            // The first image is the program, checked before it started; a later one we cannot
            // read (an interpreter, a library we do not understand) runs as unmarked code,
            // unless it has a marks section: corrupt marks are an error wherever they are.
            Err(e) if self.images.is_empty() || has_marks_section(image) => return Err(e),
            Err(_) => MarkedImage::default(),
        };
        let index = self.images.len();
        self.images.push((image.to_path_buf(), marked.marks.len()));
        self.locks.image(image);
        let lock_marks = LockMark::of_image(image, &marked);
        self.locks.seen |= lock_marks.iter().any(Option::is_some);
        let mut probes: Vec<Probe> = marked
            .marks
            .iter()
            .map(|m| Probe::new(m.offset(&marked), m.operand))
            .collect();
        let sites = match &mut self.sites {
            Some(sites) => sites.image(image, &marked, &mut probes),
            None => Vec::new(),
        };
        for (i, m) in marked.marks.iter().enumerate() {
            let mut region =
                || RegionId(m.label.as_deref().map_or(u32::MAX, |l| self.labels.id(l).0));
            let kind = match m.kind {
                MarkKind::FunctionEnter => EventKind::FunctionEnter,
                MarkKind::FunctionExit => EventKind::FunctionExit,
                MarkKind::Spawn => EventKind::Spawn,
                MarkKind::SpawnReturn => EventKind::SpawnReturn,
                MarkKind::Sync => EventKind::Sync,
                MarkKind::LoopBegin => EventKind::LoopBegin { grain: 1 },
                MarkKind::IterationBegin => EventKind::IterationBegin,
                MarkKind::IterationEnd => EventKind::IterationEnd,
                MarkKind::LoopEnd => EventKind::LoopEnd,
                MarkKind::RegionBegin => EventKind::RegionBegin(region()),
                MarkKind::RegionEnd => EventKind::RegionEnd(region()),
                // The sibling is the hit's operand; none names no sibling (no constraint).
                MarkKind::SpawnAfter => EventKind::SpawnAfter { sibling: u64::MAX },
                MarkKind::WaitFor => EventKind::WaitFor { sibling: u64::MAX },
            };
            self.probes.push(ProbeEntry {
                kind,
                place: MarkPlace {
                    image: index,
                    address: m.address,
                    kind: m.kind,
                },
                site: sites.get(i).copied().unwrap_or(ProbeSite::None),
                lock: lock_marks[i],
            });
        }
        Ok(probes)
    }

    fn image_base(&mut self, base: u64) {
        self.locks.base(base);
        if let Some(sites) = &mut self.sites {
            sites.base(base);
        }
    }

    fn event(&mut self, event: TraceEvent) {
        match event {
            TraceEvent::Exec {
                image,
                tid,
                cost,
                probes,
            } => {
                if image > 0 {
                    // A new program image: the numbering restarts with the probes of the calls
                    // made at its exec, the last `probes` entries.
                    let gone = self.probes.len().saturating_sub(probes);
                    self.probes.drop_first(gone);
                    // A wrapper (shell script, env, launcher) that ran no marks is not part of
                    // the analyzed program.
                    if self.hits == 0 {
                        self.engines.clear();
                        self.engine_of.clear();
                        return;
                    }
                }
                self.charge(tid, cost);
            }
            TraceEvent::ThreadStart { .. } => {}
            TraceEvent::ThreadExit { tid, cost } => self.charge(tid, cost),
            TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand,
            } => self.on_hit(probe, tid, cost, operand),
        }
    }

    fn hit(&mut self, probe: usize, tid: i32, cost: u64) {
        self.on_hit(probe, tid, cost, None);
    }

    fn hits(&mut self, tid: i32, hits: &[u64]) -> HitsTotal {
        self.run_of_hits(tid, hits, false)
    }

    fn hits_counted(&mut self, tid: i32, hits: &[u64], _: HitsTotal) {
        self.run_of_hits(tid, hits, true);
    }
}
