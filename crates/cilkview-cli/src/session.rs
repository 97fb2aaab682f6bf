//! `cilkview-rs run`: trace the program, translate probe hits into engine events, report.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cilkview_engine::{Config, Engine, Event, EventKind, RegionId};
use cilkview_marks::{read_marks, Mark, MarkKind};
use cilkview_report::{CounterReport, Ending, RunInfo, RunReport};
use cilkview_tracer::{CounterKind, CounterMode, ExitStatus, Probe, TraceEvent, TraceOptions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{CounterArg, RunArgs};
use crate::outputs;

/// Finds the program as the shell would and checks it can be analyzed, before anything runs.
fn resolve_program(program: &OsString) -> Result<PathBuf> {
    let path = PathBuf::from(program);
    let path = if path.components().count() == 1 && !path.exists() {
        which::which(&path).with_context(|| {
            format!(
                "program `{}` not found in PATH (give a path such as ./{0})",
                path.display()
            )
        })?
    } else {
        path
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{}: no such file (check the path)", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {}", path.display())),
    };
    if meta.is_dir() {
        bail!("{} is a directory, not a program", path.display());
    }
    if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 == 0 {
        bail!(
            "{} is not executable (chmod +x it, or build it with cc)",
            path.display()
        );
    }
    Ok(path)
}

/// Whether the file starts with `#!` (a script that will exec an interpreter: its marks are read
/// at that exec).
fn is_script(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"#!"
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

/// The state shared by the tracer's two callbacks.
struct Session {
    burden: u64,
    engine: Engine,
    /// Marks of the current image, indexed like its probes; region labels already interned.
    marks: Vec<(MarkKind, Option<RegionId>)>,
    labels: Labels,
    /// Every image exec'd, and how many marks it had.
    images: Vec<(PathBuf, usize)>,
    progress: ProgressBar,
    last_progress: Instant,
}

impl Session {
    fn probes_for(&mut self, image: &Path) -> std::result::Result<Vec<Probe>, String> {
        let marked = match read_marks(image) {
            Ok(m) => m,
            // An image we cannot read marks from (e.g. an interpreter we do not understand) is
            // run as unmarked code.
            Err(e) if self.images.is_empty() => return Err(e.to_string()),
            Err(_) => Default::default(),
        };
        self.images.push((image.to_path_buf(), marked.marks.len()));
        let probes = marked
            .marks
            .iter()
            .map(|m: &Mark| Probe {
                offset: m.offset(&marked),
                operand: m.operand,
            })
            .collect();
        self.marks = marked
            .marks
            .iter()
            .map(|m| (m.kind, m.label.as_deref().map(|l| self.labels.id(l))))
            .collect();
        Ok(probes)
    }

    fn on_event(&mut self, event: TraceEvent) {
        match event {
            TraceEvent::Exec { image, cost, .. } => {
                // A new program image: a wrapper (shell script, env, launcher) that ran no marks
                // is not part of the analyzed program.
                if image > 0 && self.engine.events() == 0 {
                    self.engine = Engine::new(Config {
                        burden: self.burden,
                    });
                } else {
                    self.engine.charge(cost);
                }
            }
            TraceEvent::ThreadStart { .. } => {}
            TraceEvent::ThreadExit { cost, .. } => self.engine.charge(cost),
            TraceEvent::Hit {
                probe,
                cost,
                operand,
                ..
            } => {
                let Some(&(kind, label)) = self.marks.get(probe) else {
                    self.engine.charge(cost);
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
                self.engine.process(Event::new(cost, kind));
                if self.last_progress.elapsed() > Duration::from_millis(200) {
                    self.last_progress = Instant::now();
                    self.progress
                        .set_message(format!("{} marks hit", self.engine.events()));
                }
            }
        }
    }
}

fn counter_mode(arg: CounterArg) -> CounterMode {
    match arg {
        CounterArg::Auto => CounterMode::Auto,
        CounterArg::Hw => CounterMode::Hardware,
        CounterArg::Step => CounterMode::Step,
    }
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let program = resolve_program(&args.program)?;
    if !is_script(&program) {
        // Not ELF, wrong architecture, truncated, corrupt marks: say so before running anything.
        read_marks(&program).with_context(|| format!("cannot analyze {}", program.display()))?;
    }
    outputs::check_writable(&outputs::exporters(&args.output))?;

    let progress = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    progress.set_style(
        ProgressStyle::with_template("{spinner} cilkview-rs: tracing, {msg} ({elapsed})").unwrap(),
    );
    progress.enable_steady_tick(Duration::from_millis(250));
    progress.set_message("starting");
    let session = RefCell::new(Session {
        burden: args.model.burden,
        engine: Engine::new(Config {
            burden: args.model.burden,
        }),
        marks: Vec::new(),
        labels: Labels::default(),
        images: Vec::new(),
        progress: progress.clone(),
        last_progress: Instant::now(),
    });
    let options = TraceOptions {
        program: program.clone(),
        args: args.args.clone(),
        counter: counter_mode(args.counter),
    };
    let outcome = cilkview_tracer::run(
        &options,
        |image| session.borrow_mut().probes_for(image),
        |event| session.borrow_mut().on_event(event),
    );
    progress.finish_and_clear();
    let outcome = outcome.with_context(|| format!("cannot analyze {}", program.display()))?;
    let session = session.into_inner();

    let ending = match outcome.status {
        ExitStatus::Exited(code) => Ending::Exited(code),
        ExitStatus::Signaled(sig) => Ending::Signaled(sig),
    };
    let counter = CounterReport {
        mode: match outcome.counter.kind {
            CounterKind::Hardware => "hardware",
            CounterKind::SingleStep => "single-step",
        }
        .to_string(),
        reason: outcome.counter.reason.clone(),
    };
    let measured = session.engine.finish();
    let names = &session.labels.names;
    let mut report = RunReport::new(
        RunInfo {
            program: args.program.to_string_lossy().into_owned(),
            args: args
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            ending,
            counter,
            burden: args.model.burden,
            span_coefficient: args.model.span_coefficient,
            max_cores: args.model.max_cores,
        },
        &measured,
        |id| names.get(id as usize).cloned().unwrap_or_default(),
    );
    if session.images.iter().all(|(_, marks)| *marks == 0) {
        report.warnings.push(format!(
            "{} has no cilkview marks: measured as serial code (parallelism 1.00). Mark its \
             parallel structure with cilkview.h (`cilkview-rs header > cilkview.h`).",
            program.display()
        ));
    }
    if !measured.anomalies.is_clean() {
        report.warnings.push(format!(
            "the marks did not nest as fork-join control should ({:?}); measures may be off",
            measured.anomalies
        ));
    }
    let gates_passed = outputs::emit(&report, &args.output)?;
    let status = outcome.status.code();
    Ok(if status != 0 {
        ExitCode::from(status.clamp(0, 255) as u8)
    } else if !gates_passed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
