//! The entry points: measure a program from start to end ([`run`]) or a running process for a
//! while ([`attach`]), through the backend the counter mode resolves to, into the report model.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cilkview_engine::{DEFAULT_BURDEN, DEFAULT_BURDEN_NS, DEFAULT_SPAN_COEFFICIENT};
use cilkview_events::{Cost, CostDefault, CostUnit, CounterInfo, CounterMode, Ending, EventSink};
use cilkview_marks::{read_marks, MarksError};
use cilkview_report::{AttachReport, RunInfo, RunReport};
use cilkview_tracer::{AttachOptions, Backend, StopFlag, TraceError, TraceOptions};

use crate::noise::NoiseLine;
use crate::pipeline::pipelined;
use crate::repeat::Estimate;
use crate::repeat_runs::{replayed_span, run_repeatedly, Repeat, Repeated};
use crate::time_warnings::time_warnings;
use crate::{Progress, Session};

/// The burden of a steal when none is given: 15,000 instructions (Cilkview's), or 5 µs for a
/// counter of time.
pub const BURDEN_DEFAULT: CostDefault = CostDefault {
    instructions: DEFAULT_BURDEN,
    nanoseconds: DEFAULT_BURDEN_NS,
};

/// The parameters of the performance model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// Burden of a steal put on every continuation edge, in the unit of the counter that runs
    /// (`None`: [`BURDEN_DEFAULT`] in that unit).
    pub burden: Option<Cost>,
    /// Span coefficient δ of the speedup lower bound.
    pub span_coefficient: f64,
    /// Largest core count of the speedup table.
    pub max_cores: u32,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            burden: None,
            span_coefficient: DEFAULT_SPAN_COEFFICIENT,
            max_cores: 32,
        }
    }
}

/// An emulated run under `auto` longer than this says that `--counter native` is much faster.
const LONG_EMULATED_RUN: Duration = Duration::from_secs(10);

impl Model {
    /// The burden in the unit of `counter` (a counter that will run): the one given, else the
    /// default; an error if the one given is in another unit.
    pub fn burden_for(&self, counter: &CounterInfo) -> Result<u64, TraceError> {
        BURDEN_DEFAULT
            .or_given(self.burden, counter.unit)
            .map_err(|cost| TraceError::CostInOtherUnit {
                option: "--burden",
                cost,
                counter: counter.kind,
                unit: counter.unit,
            })
    }
}

/// The counter a request resolves to on this machine (`auto` resolved), chosen before anything
/// runs so that the options can be checked against it: its backend and what it counts.
pub struct Chosen {
    backend: Box<dyn Backend>,
    info: CounterInfo,
}

impl Chosen {
    /// A backend that is not one of the tracer's (a test's counter: docs/architecture.md,
    /// "Where a change goes"), checked here as [`choose_for_run`] checks the tracer's.
    pub fn of(backend: Box<dyn Backend>) -> Result<Chosen, TraceError> {
        let info = backend
            .check()
            .map_err(|why| TraceError::CounterUnavailable {
                mode: backend.mode(),
                reason: why.to_string(),
            })?;
        Ok(Chosen { backend, info })
    }

    /// The counter that will run, why, and in which unit.
    pub fn info(&self) -> &CounterInfo {
        &self.info
    }

    /// Its backend, which describes itself ([`Backend::describe`]).
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }
}

/// The counter [`run`] would use for `request` (see [`cilkview_tracer::choose_for_run`]).
pub fn choose_for_run(request: &RunRequest) -> Result<Chosen, TraceError> {
    let (backend, info) = cilkview_tracer::choose_for_run(&trace_options(request))?;
    Ok(Chosen { backend, info })
}

/// The counter [`attach`] would use for `counter` (see
/// [`cilkview_tracer::choose_for_attach`]).
pub fn choose_for_attach(counter: CounterMode) -> Result<Chosen, TraceError> {
    let (backend, info) = cilkview_tracer::choose_for_attach(counter)?;
    Ok(Chosen { backend, info })
}

/// What the tracer runs for `request`.
fn trace_options(request: &RunRequest) -> TraceOptions {
    TraceOptions {
        program: request.program.clone(),
        args: request.args.clone(),
        counter: request.counter,
        bind_cpu: request.bind_cpu,
        host_dispatch: request.host_dispatch,
        env: request.env.clone(),
    }
}

/// What one measurement found.
#[derive(Clone, Debug)]
pub struct Analysis {
    /// The report model: measures, counter, warnings (and the window, for an attach).
    pub report: RunReport,
    /// How the run (or the measuring window) ended.
    pub ending: Ending,
}

/// A program to run from start to end.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// The file to execute (already resolved, see [`check_program`]).
    pub program: PathBuf,
    /// The program as the user named it, for the report.
    pub name: String,
    /// Its arguments, without argv\[0\].
    pub args: Vec<OsString>,
    pub counter: CounterMode,
    /// Single-step only: bind the program and the tracer to one CPU (faster stepping; the
    /// program sees a one-CPU affinity mask).
    pub bind_cpu: bool,
    /// Keep glibc's dispatch as this CPU makes it (`TraceOptions::host_dispatch`).
    pub host_dispatch: bool,
    pub model: Model,
    /// Profile call sites (Cilkprof): the report gets `call_sites` and `call_contexts`.
    pub profile: bool,
    /// With `profile`: profile this region (its label) instead of the whole run.
    pub profile_region: Option<String>,
    /// Variables set for the program only (not for the tool, nor for the emulator's own
    /// process): `TraceOptions::env`.
    pub env: Vec<(OsString, OsString)>,
    /// Run the program this many times, each strand its typical time over the runs (a counter
    /// of time: `native`; once otherwise). See `repeat.rs`, `repeat_runs.rs`.
    pub repeat: Repeat,
}

/// A running process to measure until `stop`, `duration` or its exit.
#[derive(Clone, Debug)]
pub struct AttachRequest {
    pub pid: i32,
    pub counter: CounterMode,
    pub duration: Option<Duration>,
    pub stop: StopFlag,
    pub model: Model,
    /// Profile call sites, as [`RunRequest::profile`].
    pub profile: bool,
    /// As [`RunRequest::profile_region`].
    pub profile_region: Option<String>,
}

/// Whether the file starts with `#!` (a script that will exec an interpreter: the marks are those
/// of the images exec'd after it).
fn is_script(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"#!"
}

/// Checks, before anything runs, that `program` can be analyzed: a script (`#!`), or an ELF file
/// for this machine whose marks, if any, are well-formed.
pub fn check_program(program: &Path) -> Result<(), MarksError> {
    if !is_script(program) {
        read_marks(program)?;
    }
    Ok(())
}

/// Runs `request.program` to completion under the tracer and analyzes it. The program's
/// stdin, stdout, stderr and exit status are its own.
pub fn run(request: &RunRequest, progress: &mut dyn Progress) -> Result<Analysis, TraceError> {
    run_chosen(request, choose_for_run(request)?, progress)
}

/// [`run`] with the counter [`choose_for_run`] chose for `request`.
pub fn run_chosen(
    request: &RunRequest,
    chosen: Chosen,
    progress: &mut dyn Progress,
) -> Result<Analysis, TraceError> {
    let options = trace_options(request);
    let Chosen {
        backend,
        info: counter,
    } = chosen;
    let burden = request.model.burden_for(&counter)?;
    let mut session = Session::new(burden, progress)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let began = std::time::Instant::now();
    let repeats = backend.repeats() && request.repeat.repeats();
    let info = |counter: &cilkview_events::CounterInfo, ending| RunInfo {
        program: request.name.clone(),
        args: request
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        ending,
        counter: counter.into(),
        unit: counter.unit,
        burden,
        span_coefficient: request.model.span_coefficient,
        max_cores: request.model.max_cores,
    };
    let (outcome, repeated) = if repeats {
        let scratch = info(
            &counter,
            Ending::Exited(cilkview_events::ExitStatus::Exited(0)),
        );
        let backend = &*backend;
        let repeated = run_repeatedly(request, &options, backend, counter, &scratch, &mut session)?;
        (repeated.0, Some(repeated.1))
    } else {
        let kind = counter.kind;
        let run = |sink: &mut dyn EventSink| backend.run(&options, counter, sink);
        let outcome = if crate::pipeline::wanted(kind) {
            pipelined(&mut session, run)
        } else {
            run(&mut session)
        };
        (outcome?, None)
    };
    let emulated_long = request.counter == CounterMode::Auto
        && outcome.counter.kind == CounterMode::Emulate
        && began.elapsed() > LONG_EMULATED_RUN;
    let ending = Ending::Exited(outcome.status);
    let info = info(&outcome.counter, ending);
    let subject = request.program.display().to_string();
    let mut report = session.finish(info.clone(), &subject, false);
    let mut can_repeat = true;
    if let Some(repeated) = repeated {
        let time = outcome.counter.unit == cilkview_tracer::CostUnit::Nanoseconds;
        add_repeated(&mut report, repeated, time, info);
        can_repeat = false;
    }
    let emulated_for = emulated_long.then(|| began.elapsed());
    measuring_warnings(
        &mut report,
        request,
        &options,
        &outcome,
        can_repeat,
        emulated_for,
    );
    Ok(Analysis { report, ending })
}

/// The report's warnings on how the run was measured: strands too short for a clock, `auto`
/// single-stepping a program QEMU cannot run, an emulated run that took `emulated_for`.
fn measuring_warnings(
    report: &mut RunReport,
    request: &RunRequest,
    options: &TraceOptions,
    outcome: &cilkview_events::Outcome,
    can_repeat: bool,
    emulated_for: Option<Duration>,
) {
    if outcome.counter.unit == CostUnit::Nanoseconds {
        let warnings = time_warnings(report, outcome.hits, can_repeat);
        report.warnings.extend(warnings);
    }
    if request.counter == CounterMode::Auto && outcome.counter.kind == CounterMode::Step {
        if let Some(what) = cilkview_tracer::emulated_cpu_lacks(options) {
            report.warnings.push(format!(
                "not emulated: the program has instructions QEMU's CPU model lacks ({what}) and \
                 would die of SIGILL; single-stepped instead (exact, ~20 µs per instruction)"
            ));
        }
    }
    if let Some(took) = emulated_for {
        report.warnings.push(format!(
            "this run was emulated for {:.0} s (exact instruction counts, {}); --counter \
             native measures time at native speed",
            took.as_secs_f64(),
            cilkview_events::EMULATION_SLOWDOWN
        ));
    }
}

/// What repeated runs add to `report`: how many, their warnings and, measuring time, the noise
/// bound (the span by each strand's minimum: a second replay, with 3 runs or more).
fn add_repeated(report: &mut RunReport, repeated: Repeated, time: bool, info: RunInfo) {
    let Repeated {
        runs,
        warnings,
        recorded,
        median_run,
    } = repeated;
    report.counter.runs = runs;
    report.warnings.extend(warnings);
    if runs >= 2 && time {
        let burden = info.burden;
        let span_low = (runs >= 3)
            .then(|| replayed_span(&recorded, Estimate::Minimum, burden, info))
            .flatten();
        let noise = NoiseLine {
            runs,
            run_work: recorded.run_work(),
            work: report.measures.work,
            span: report.measures.span,
            span_low,
            median_run,
        };
        report.warnings.push(noise.line());
        report.counter.noise = Some(noise.summary());
    }
}

/// The command line of process `pid` from /proc (argv\[0\] and the rest), or `process PID`.
pub fn command_line(pid: i32) -> (String, Vec<String>) {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut words = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned());
    let program = words.next().unwrap_or_else(|| format!("process {pid}"));
    (program, words.collect())
}

/// Attaches to the running process `request.pid`, measures until a stop request, the duration
/// or its exit, detaches (it runs on unharmed) and analyzes the window.
pub fn attach(
    request: &AttachRequest,
    progress: &mut dyn Progress,
) -> Result<Analysis, TraceError> {
    attach_chosen(request, choose_for_attach(request.counter)?, progress)
}

/// [`attach`] with the counter [`choose_for_attach`] chose for `request`. Under `auto`, a
/// process the native counter refuses (stopped, under a seccomp filter of its own: it would not
/// set itself up there) is single-stepped instead, which runs no code in it.
pub fn attach_chosen(
    request: &AttachRequest,
    chosen: Chosen,
    progress: &mut dyn Progress,
) -> Result<Analysis, TraceError> {
    match attach_with(request, chosen, progress) {
        Err(TraceError::NativeRefused { reason, .. }) if request.counter == CounterMode::Auto => {
            let mut step = choose_for_attach(CounterMode::Step)?;
            step.info.notes.push(cilkview_events::Note::new(
                "native-refused",
                format!("native refused: {reason}"),
            ));
            let mut analysis = attach_with(request, step, progress)?;
            analysis.report.warnings.push(format!(
                "single-stepped instead of the native counter (exact, but ~20 µs per \
                 instruction): {reason}"
            ));
            Ok(analysis)
        }
        other => other,
    }
}

/// [`attach_chosen`] without the fallback.
fn attach_with(
    request: &AttachRequest,
    chosen: Chosen,
    progress: &mut dyn Progress,
) -> Result<Analysis, TraceError> {
    let (program, args) = command_line(request.pid);
    let Chosen {
        backend,
        info: counter,
    } = chosen;
    let burden = request.model.burden_for(&counter)?;
    let mut session = Session::new(burden, progress)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let options = AttachOptions {
        pid: request.pid,
        counter: request.counter,
        duration: request.duration,
        stop: request.stop.clone(),
    };
    let started = SystemTime::now();
    let kind = counter.kind;
    let attach = |sink: &mut dyn EventSink| backend.attach(&options, counter, sink);
    let outcome = if crate::pipeline::wanted(kind) {
        pipelined(&mut session, attach)?
    } else {
        attach(&mut session)?
    };
    let ending = outcome.ending;
    let info = RunInfo {
        program: program.clone(),
        args,
        ending,
        counter: (&outcome.counter).into(),
        unit: outcome.counter.unit,
        burden,
        span_coefficient: request.model.span_coefficient,
        max_cores: request.model.max_cores,
    };
    let subject = format!("process {} ({program})", request.pid);
    let mut report = session.finish(info, &subject, true);
    if outcome.counter.unit == CostUnit::Nanoseconds {
        let warnings = time_warnings(&report, outcome.hits, false);
        report.warnings.extend(warnings);
    }
    report.attach = Some(AttachReport::new(
        request.pid,
        humantime::format_rfc3339_seconds(started).to_string(),
        outcome.elapsed.as_secs_f64(),
        ending,
    ));
    Ok(Analysis { report, ending })
}
