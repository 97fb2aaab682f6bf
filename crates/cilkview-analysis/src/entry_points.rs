//! The entry points: measure a program from start to end ([`run`]) or a running process for a
//! while ([`attach`]), through the backend the counter mode resolves to, into the report model.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use cilkview_engine::{DEFAULT_BURDEN, DEFAULT_BURDEN_NS, DEFAULT_SPAN_COEFFICIENT};
use cilkview_events::{CounterMode, Ending};
use cilkview_marks::{read_marks, MarksError};
use cilkview_report::{AttachReport, RunInfo, RunReport};
use cilkview_tracer::{AttachOptions, StopFlag, TraceError, TraceOptions};

use crate::repeat::{Folder, Recorder};
use crate::{Progress, Session};

/// The parameters of the performance model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// Burden of a steal, in instructions, put on every continuation edge.
    pub burden: u64,
    /// The same in nanoseconds, for a counter whose costs are times (`native`).
    pub burden_ns: u64,
    /// Span coefficient δ of the speedup lower bound.
    pub span_coefficient: f64,
    /// Largest core count of the speedup table.
    pub max_cores: u32,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            burden: DEFAULT_BURDEN,
            burden_ns: DEFAULT_BURDEN_NS,
            span_coefficient: DEFAULT_SPAN_COEFFICIENT,
            max_cores: 32,
        }
    }
}

/// An emulated run under `auto` longer than this says that `--counter native` is much faster.
const LONG_EMULATED_RUN: Duration = Duration::from_secs(10);

impl Model {
    /// The burden in `unit` (a [`crate::CounterInfo::unit`]): [`Model::burden_ns`] for a time.
    pub fn burden_in(&self, unit: cilkview_tracer::CostUnit) -> u64 {
        match unit {
            cilkview_tracer::CostUnit::Nanoseconds => self.burden_ns,
            _ => self.burden,
        }
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
    /// Run the program this many times and take each strand's minimum (a counter of time:
    /// `native`; 1 otherwise). See `repeat.rs`.
    pub runs: u32,
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
    let options = TraceOptions {
        program: request.program.clone(),
        args: request.args.clone(),
        counter: request.counter,
        bind_cpu: request.bind_cpu,
        host_dispatch: request.host_dispatch,
        env: request.env.clone(),
    };
    let (backend, counter) = cilkview_tracer::choose_for_run(&options)?;
    let burden = request.model.burden_in(counter.unit);
    let mut session = Session::new(burden, progress)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let began = std::time::Instant::now();
    let runs = if counter.kind == CounterMode::Native {
        request.runs.max(1)
    } else {
        1
    };
    let (outcome, repeated) = if runs == 1 {
        (backend.run(&options, counter, &mut session)?, None)
    } else {
        let repeated = run_repeatedly(request, &options, &*backend, counter, runs, &mut session)?;
        (repeated.0, Some(repeated.1))
    };
    let emulated_long = request.counter == CounterMode::Auto
        && outcome.counter.kind == CounterMode::Emulate
        && began.elapsed() > LONG_EMULATED_RUN;
    let ending = Ending::Exited(outcome.status);
    let info = RunInfo {
        program: request.name.clone(),
        args: request
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        ending,
        counter: (&outcome.counter).into(),
        unit: outcome.counter.unit,
        burden,
        span_coefficient: request.model.span_coefficient,
        max_cores: request.model.max_cores,
    };
    let subject = request.program.display().to_string();
    let mut report = session.finish(info, &subject, false);
    let mut can_repeat = true;
    if let Some(Repeated { runs, warnings }) = repeated {
        report.counter.runs = runs;
        report.warnings.extend(warnings);
        can_repeat = false;
    }
    if outcome.counter.unit == cilkview_tracer::CostUnit::Nanoseconds {
        let work = report.measures.work;
        report
            .warnings
            .extend(strand_time_warning(outcome.hits, work, can_repeat));
    }
    if emulated_long {
        report.warnings.push(format!(
            "this run was emulated for {:.0} s (exact instruction counts, 2-170x slower than \
             native, most on floating point); --counter native measures time at native speed",
            began.elapsed().as_secs_f64()
        ));
    }
    Ok(Analysis { report, ending })
}

/// What repeated runs add to the report: how many were folded in, and what departed.
struct Repeated {
    runs: u32,
    warnings: Vec<String>,
}

/// `--repeat`: runs the program `runs` times, each strand's cost the minimum over the runs,
/// replayed into `session`. A run is used up to where its marks depart from the first's (if
/// they do); one that ends otherwise than the first (a signal, another exit status) is the last.
fn run_repeatedly(
    request: &RunRequest,
    options: &TraceOptions,
    backend: &dyn cilkview_tracer::Backend,
    counter: cilkview_events::CounterInfo,
    runs: u32,
    session: &mut Session,
) -> Result<(cilkview_events::Outcome, Repeated), TraceError> {
    // The probes of each image are asked of a session of the same settings, so that `session`
    // numbers them at the replay, in the stream's order.
    let mut unused = ();
    let mut answerer = Session::new(0, &mut unused)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let mut recorder = Recorder::new(&mut answerer);
    let mut outcome = backend.run(options, counter.clone(), &mut recorder)?;
    let mut recorded = recorder.finish();
    let mut done = 1;
    let mut warnings = Vec::new();
    for run in 2..=runs {
        let mut folder = Folder::new(&mut recorded);
        let later = backend.run(options, counter.clone(), &mut folder)?;
        let divergence = folder.finish();
        done = run;
        if later.status != outcome.status {
            let rest = match runs - run {
                0 => String::new(),
                1 => format!("; run {runs} was not made"),
                _ => format!("; runs {} to {runs} were not made", run + 1),
            };
            warnings.push(format!(
                "--repeat: run {run} ended with {} where run 1 ended with {}: its strands were used \
                 where its marks matched run 1's{rest}",
                status_words(later.status),
                status_words(outcome.status)
            ));
            break;
        }
        if let Some(divergence) = divergence {
            warnings.push(format!(
                "--repeat: run {run} did not hit the marks of run 1 in the same order ({divergence}): \
                 its strands from there on were not used; a program whose marks vary between runs \
                 is measured by one run"
            ));
        }
    }
    recorded
        .replay(session)
        .map_err(|(image, message)| TraceError::Probes { image, message })?;
    outcome.total_instructions = recorded.total();
    if done > 1 {
        outcome.counter.reason = format!(
            "{}; each strand the minimum of its {done} runs (--repeat)",
            outcome.counter.reason
        );
    }
    Ok((
        outcome,
        Repeated {
            runs: done,
            warnings,
        },
    ))
}

fn status_words(status: cilkview_events::ExitStatus) -> String {
    match status {
        cilkview_events::ExitStatus::Exited(code) => format!("status {code}"),
        cilkview_events::ExitStatus::Signaled(signal) => format!("signal {signal}"),
    }
}

/// Strands shorter on average than this (ns) say that `--repeat` would help.
const SHORT_STRANDS_NS: u64 = 500_000;
/// Strands shorter on average than this (ns) are of the order of the stub's own cost taken off
/// each (~10 ns, its spread a few ns): time cannot resolve them.
const TOO_FINE_NS: u64 = 25;

/// What a time-based measure of `hits` strands of `work_ns` in all cannot see: strands too fine
/// for time at all, or (when `--repeat` could help) short ones, which the machine's
/// interruptions lengthen — and the span, a longest path, collects them.
fn strand_time_warning(hits: u64, work_ns: u64, can_repeat: bool) -> Option<String> {
    if hits == 0 {
        return None;
    }
    let mean = work_ns / hits;
    let shown = if mean < 1000 {
        format!("{mean} ns")
    } else {
        format!("{:.1} µs", mean as f64 / 1000.0)
    };
    if mean < TOO_FINE_NS {
        return Some(format!(
            "strands are too fine for time (mean {shown} between marks, the order of the mark's \
             own cost taken off each: the counter's reason says it): work and span by time say \
             little here; count instructions (--counter emulate) or mark coarser strands"
        ));
    }
    (can_repeat && mean < SHORT_STRANDS_NS).then(|| {
        format!(
            "strands are short (mean {shown} between marks): each interruption of the machine (a \
             timer tick, the hypervisor; 15–40 µs on a VM) lengthens the strand it lands in and \
             the span collects them, so the parallelism by time reads low; --repeat 5 takes each \
             strand's minimum over 5 runs"
        )
    })
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
    let (program, args) = command_line(request.pid);
    let (backend, counter) = cilkview_tracer::choose_for_attach(request.counter)?;
    let burden = request.model.burden_in(counter.unit);
    let mut session = Session::new(burden, progress)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let options = AttachOptions {
        pid: request.pid,
        counter: request.counter,
        duration: request.duration,
        stop: request.stop.clone(),
    };
    let started = SystemTime::now();
    let outcome = backend.attach(&options, counter, &mut session)?;
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
    if outcome.counter.unit == cilkview_tracer::CostUnit::Nanoseconds {
        let work = report.measures.work;
        report
            .warnings
            .extend(strand_time_warning(outcome.hits, work, false));
    }
    report.attach = Some(AttachReport::new(
        request.pid,
        humantime::format_rfc3339_seconds(started).to_string(),
        outcome.elapsed.as_secs_f64(),
        ending,
    ));
    Ok(Analysis { report, ending })
}
