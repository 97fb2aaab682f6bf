//! What `run` and `attach` share: translating tracer events (probe hits) into engine events, and
//! turning the engine's measures into a report.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cilkview_engine::{Config, Engine, Event, EventKind, RegionId, Report};
use cilkview_marks::{read_marks, MarkKind};
use cilkview_report::{CounterReport, Ending, RunInfo, RunReport};
use cilkview_tracer::{CounterInfo, CounterMode, Probe, TraceEvent};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{CounterArg, ModelOptions};

pub fn counter_mode(arg: CounterArg) -> CounterMode {
    match arg {
        CounterArg::Auto => CounterMode::Auto,
        CounterArg::Hw => CounterMode::Hardware,
        CounterArg::Step => CounterMode::Step,
    }
}

pub fn counter_report(info: &CounterInfo) -> CounterReport {
    CounterReport {
        mode: match info.kind {
            CounterMode::Hardware => "hardware",
            CounterMode::Step => "single-step",
            CounterMode::Emulate => "emulate",
            CounterMode::Auto => "auto",
        }
        .to_string(),
        reason: info.reason.clone(),
    }
}

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

/// The state the tracer's two callbacks share.
pub struct Session {
    burden: u64,
    /// One engine per thread: each thread has its own fork-join stack. Their measures combine at
    /// the end as computations running in parallel (`Report::beside`).
    engines: HashMap<i32, Engine>,
    /// Marks hit, over all threads.
    hits: u64,
    /// What each probe of the current program image means, indexed like the tracer's probe
    /// numbers: the executable's marks, then those of each library, in the order the tracer asked
    /// for them. Region labels are already interned.
    marks: Vec<(MarkKind, Option<RegionId>)>,
    labels: Labels,
    /// Every image (executable or library) whose marks were read, with its number of marks.
    images: Vec<(PathBuf, usize)>,
    progress: ProgressBar,
    last_progress: Instant,
}

impl Session {
    /// A session whose progress line (on a terminal only) reads `{spinner} cilkview-rs: {what}, …`.
    pub fn new(model: &ModelOptions, what: &str) -> RefCell<Session> {
        let progress = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        progress.set_style(
            ProgressStyle::with_template(&format!(
                "{{spinner}} cilkview-rs: {what}, {{msg}} ({{elapsed}})"
            ))
            .expect("a valid template"),
        );
        progress.enable_steady_tick(Duration::from_millis(250));
        progress.set_message("no mark hit yet");
        RefCell::new(Session {
            burden: model.burden,
            engines: HashMap::new(),
            hits: 0,
            marks: Vec::new(),
            labels: Labels::default(),
            images: Vec::new(),
            progress,
            last_progress: Instant::now(),
        })
    }

    /// The tracer's `probes_for` callback: the probes of one image.
    pub fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, String> {
        let marked = match read_marks(image) {
            Ok(m) => m,
            // The first image is the program, checked before it started; a later one we cannot
            // read (an interpreter, a library we do not understand) runs as unmarked code.
            Err(e) if self.images.is_empty() => return Err(e.to_string()),
            Err(_) => Default::default(),
        };
        self.images.push((image.to_path_buf(), marked.marks.len()));
        for m in &marked.marks {
            let label = m.label.as_deref().map(|l| self.labels.id(l));
            self.marks.push((m.kind, label));
        }
        Ok(marked
            .marks
            .iter()
            .map(|m| Probe {
                offset: m.offset(&marked),
                operand: m.operand,
            })
            .collect())
    }

    /// The engine of thread `tid`.
    fn engine(&mut self, tid: i32) -> &mut Engine {
        let burden = self.burden;
        self.engines
            .entry(tid)
            .or_insert_with(|| Engine::new(Config { burden }))
    }

    /// The tracer's `on_event` callback.
    pub fn on_event(&mut self, event: TraceEvent) {
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
                    self.marks.drain(..self.marks.len().saturating_sub(probes));
                    // A wrapper (shell script, env, launcher) that ran no marks is not part of
                    // the analyzed program.
                    if self.hits == 0 {
                        self.engines.clear();
                        return;
                    }
                }
                self.engine(tid).charge(cost);
            }
            TraceEvent::ThreadStart { .. } => {}
            TraceEvent::ThreadExit { tid, cost } => self.engine(tid).charge(cost),
            TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand,
            } => {
                let Some(&(kind, label)) = self.marks.get(probe) else {
                    self.engine(tid).charge(cost);
                    return;
                };
                let region = || label.unwrap_or(RegionId(u32::MAX));
                let kind = match kind {
                    MarkKind::FunctionEnter => EventKind::FunctionEnter,
                    MarkKind::FunctionExit => EventKind::FunctionExit,
                    MarkKind::Spawn => EventKind::Spawn,
                    MarkKind::SpawnReturn => EventKind::SpawnReturn,
                    MarkKind::Sync => EventKind::Sync,
                    MarkKind::LoopBegin => EventKind::LoopBegin {
                        grain: operand.unwrap_or(1),
                    },
                    MarkKind::IterationBegin => EventKind::IterationBegin,
                    MarkKind::IterationEnd => EventKind::IterationEnd,
                    MarkKind::LoopEnd => EventKind::LoopEnd,
                    MarkKind::RegionBegin => EventKind::RegionBegin(region()),
                    MarkKind::RegionEnd => EventKind::RegionEnd(region()),
                };
                self.engine(tid).process(Event::new(cost, kind));
                self.hits += 1;
                if self.last_progress.elapsed() > Duration::from_millis(200) {
                    self.last_progress = Instant::now();
                    self.progress
                        .set_message(format!("{} marks hit", self.hits));
                }
            }
        }
    }

    /// Ends the session: the report of everything measured, with the warnings a user needs.
    /// `partial`: the stream began in the middle of the run (attach), so closers without openers
    /// are expected.
    pub fn finish(self, info: RunInfo, subject: &str, partial: bool) -> (RunReport, Report) {
        self.progress.finish_and_clear();
        let measured = self
            .engines
            .into_values()
            .map(Engine::finish)
            .reduce(Report::beside)
            .unwrap_or_default();
        let names = &self.labels.names;
        let mut report = RunReport::new(info, &measured, |id| {
            names.get(id as usize).cloned().unwrap_or_default()
        });
        if self.images.iter().all(|(_, marks)| *marks == 0) {
            report.warnings.push(format!(
                "{subject} has no cilkview marks: measured as serial code (parallelism 1.00). \
                 Mark its parallel structure with cilkview.h (`cilkview-rs header > cilkview.h`)."
            ));
        }
        let mut anomalies = measured.anomalies;
        if partial {
            anomalies.unmatched_closers = 0;
            anomalies.implicit_frame_ends = 0;
        }
        if !anomalies.is_clean() {
            report.warnings.push(format!(
                "the marks did not nest as fork-join control should ({anomalies:?}); measures \
                 may be off"
            ));
        }
        (report, measured)
    }
}

/// `Ending` of the report from the tracer's exit status.
pub fn ending(status: cilkview_tracer::ExitStatus) -> Ending {
    match status {
        cilkview_tracer::ExitStatus::Exited(code) => Ending::Exited(code),
        cilkview_tracer::ExitStatus::Signaled(sig) => Ending::Signaled(sig),
    }
}
