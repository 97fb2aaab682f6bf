//! The backend seam: a backend turns "run this program" (and, for ptrace, "attach to this
//! process") into the ordered [`TraceEvent`] stream fed to an [`EventSink`]. `auto` asks each
//! backend in turn whether it can run here and keeps the reasons (shown in the report).
//!
//! Backends: [`Hardware`] (ptrace, breakpoints on the marks + the hardware counter), [`Emulate`]
//! (the program under `qemu-x86_64` with the cilkview plugin: exact, `EMULATION_SLOWDOWN`, any machine;
//! `src/emulate/`, docs/emulation.md), [`Step`] (ptrace single-stepping: exact, slow) and
//! [`Native`] (patched jumps to stubs reading the time-stamp counter). [`CANDIDATES`] is their
//! order, the one table `auto`, `choose_for_attach` and [`use_instead`] read. With the
//! `testing` feature, `BreakpointsOnly` (src/testing.rs) patches like `Hardware` but counts
//! nothing.

use std::path::{Path, PathBuf};

use crate::counter::SelfTestError;
use crate::emulate::{EmulatorError, Refusal};
use crate::ptrace::counting::ClockUnavailable;
use crate::ptrace::counting::{native_clock, Breakpoints, Native as NativeCounting, Stepping};
use crate::{
    counter, ptrace, AttachOptions, AttachOutcome, CostUnit, CounterInfo, CounterMode, EventSink,
    Outcome, Probe, ProbesError, TraceError, TraceEvent, TraceOptions,
};
use cilkview_events::Note;

/// Why a backend cannot count here ([`Backend::check`]) or cannot run a program
/// ([`Backend::supports`]): under `auto`, the reason it was passed over.
#[derive(Clone, Debug, thiserror::Error)]
pub enum Unavailable {
    /// The hardware counter cannot be opened or failed its self-test.
    #[error("{0}")]
    HardwareCounter(&'static SelfTestError),
    /// No plugin-capable `qemu-x86_64`.
    #[error("{0}")]
    Emulator(EmulatorError),
    /// The native counter's clock cannot be calibrated here.
    #[error("{0}")]
    NativeClock(ClockUnavailable),
    /// The emulator cannot run this program (a 32-bit program, a script whose interpreter is
    /// not an x86-64 ELF program, ...).
    #[error("{}", .refusal.passed_over(.program))]
    NotEmulable { program: PathBuf, refusal: Refusal },
    /// A set-user-ID or set-group-ID program (`what`) would run with the caller's ids under
    /// the emulator.
    #[error(
        "emulation: {what}, and under emulation it would run with your ids, not the ones its \
         mode bits give it"
    )]
    SetId { what: String },
    /// The program's code has instructions the emulated CPU lacks (AVX-512): it would die of
    /// SIGILL under the emulator.
    #[error("emulation: the emulated CPU lacks instructions the program has ({what}): it would die of SIGILL")]
    LacksInstructions { what: String },
}

/// What a backend is, whatever the machine: what `auto` ([`CANDIDATES`]), [`use_instead`] and
/// the command line's option checks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Description {
    /// Tried by `auto` for a run (and offered by [`use_instead`]).
    pub in_auto: bool,
    /// Can attach to a running process (and is tried by `auto` for an attach).
    pub attaches: bool,
    /// Binds the program to one CPU unless [`TraceOptions::bind_cpu`] is off
    /// (`--no-cpu-binding`).
    pub binds_cpu: bool,
    /// The advice of an error that points to it, e.g. "use --counter emulate (exact, at about
    /// QEMU's speed)".
    pub advice: &'static str,
}

/// One way of running a program and counting its instructions.
pub trait Backend {
    /// The counter it provides (never [`CounterMode::Auto`]).
    fn mode(&self) -> CounterMode;
    /// What it is (see [`Description`]).
    fn describe(&self) -> Description;
    /// What its costs count on this machine (the [`CounterInfo::unit`] its [`Backend::check`]
    /// gives when it passes), or `None` where that is not known because it cannot count here.
    fn unit(&self) -> Option<CostUnit>;
    /// Whether `--repeat` (each strand's time estimated over runs) means something for it here: its
    /// costs are times, which vary from run to run; instructions do not.
    fn repeats(&self) -> bool {
        self.unit() == Some(CostUnit::Nanoseconds)
    }
    /// Whether it can count here: the counter it would use (with the reason it is chosen), or
    /// why not, with what to do about it.
    fn check(&self) -> Result<CounterInfo, Unavailable>;
    /// Whether it can run this program (under `auto`, a backend that cannot is passed over for
    /// the next one): `Err(why not)`.
    fn supports(&self, _opts: &TraceOptions) -> Result<(), Unavailable> {
        Ok(())
    }
    /// Run `opts.program` to its end, feeding `sink`. `info` is what [`Backend::check`] gave.
    /// If this returns an error, the program has been killed.
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError>;
    /// Measure the running process `opts.pid` for a while, then leave it running as before.
    fn attach(
        &self,
        _opts: &AttachOptions,
        _info: CounterInfo,
        _sink: &mut dyn EventSink,
    ) -> Result<AttachOutcome, TraceError> {
        Err(TraceError::AttachUnsupported { mode: self.mode() })
    }
}

/// Breakpoints on the marks, the hardware counter between them.
pub struct Hardware;

/// Single-stepping every instruction under ptrace.
pub struct Step;

/// The program under `qemu-x86_64` with the cilkview TCG plugin.
pub struct Emulate;

/// The program at native speed, each mark patched into a jump to a stub recording the
/// time-stamp counter in memory the tool drains (costs in nanoseconds; docs/tracer.md).
pub struct Native;

impl Backend for Hardware {
    fn mode(&self) -> CounterMode {
        CounterMode::Hardware
    }
    fn describe(&self) -> Description {
        Description {
            in_auto: true,
            attaches: true,
            binds_cpu: false,
            advice: "use --counter hw (native speed between marks)",
        }
    }
    fn unit(&self) -> Option<CostUnit> {
        Some(CostUnit::Instructions)
    }
    fn check(&self) -> Result<CounterInfo, Unavailable> {
        let bias = *counter::self_test_cached()
            .as_ref()
            .map_err(Unavailable::HardwareCounter)?;
        Ok(CounterInfo {
            kind: CounterMode::Hardware,
            reason: "hardware counter requested".into(),
            notes: vec![Note::new(
                "counter",
                format!("hardware counter passed the self-test (per-hit bias {bias})"),
            )],
            bias,
            unit: cilkview_events::CostUnit::Instructions,
        })
    }
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError> {
        let counting = Breakpoints::<perf_event::Counter>::new(info.bias);
        ptrace::run(opts, info, counting, sink)
    }
    fn attach(
        &self,
        opts: &AttachOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<AttachOutcome, TraceError> {
        let counting = Breakpoints::<perf_event::Counter>::new(info.bias);
        ptrace::attach(opts, info, counting, sink)
    }
}

impl Backend for Step {
    fn mode(&self) -> CounterMode {
        CounterMode::Step
    }
    fn describe(&self) -> Description {
        Description {
            in_auto: true,
            attaches: true,
            binds_cpu: true,
            advice: "use --counter step (exact, but ~20 µs per instruction)",
        }
    }
    fn unit(&self) -> Option<CostUnit> {
        Some(CostUnit::Instructions)
    }
    fn check(&self) -> Result<CounterInfo, Unavailable> {
        Ok(CounterInfo {
            kind: CounterMode::Step,
            reason: "single-step requested".into(),
            notes: Vec::new(),
            bias: 0,
            unit: cilkview_events::CostUnit::Instructions,
        })
    }
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError> {
        ptrace::run(opts, info, Stepping::new(opts.bind_cpu), sink)
    }
    fn attach(
        &self,
        opts: &AttachOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<AttachOutcome, TraceError> {
        // A running process keeps its own CPU affinity.
        ptrace::attach(opts, info, Stepping::new(false), sink)
    }
}

impl Backend for Emulate {
    fn mode(&self) -> CounterMode {
        CounterMode::Emulate
    }
    fn describe(&self) -> Description {
        Description {
            in_auto: true,
            attaches: false,
            binds_cpu: false,
            advice: "use --counter emulate (exact, at about QEMU's speed)",
        }
    }
    fn unit(&self) -> Option<CostUnit> {
        Some(CostUnit::Instructions)
    }
    fn check(&self) -> Result<CounterInfo, Unavailable> {
        crate::emulator_available().map_err(Unavailable::Emulator)?;
        Ok(CounterInfo {
            kind: CounterMode::Emulate,
            reason: "emulation requested".into(),
            notes: Vec::new(),
            bias: 0,
            unit: cilkview_events::CostUnit::Instructions,
        })
    }
    fn supports(&self, opts: &TraceOptions) -> Result<(), Unavailable> {
        match crate::emulate::inspect_program(opts) {
            // A 32-bit program, a script whose interpreter is one or is a script itself.
            Ok((program, Err(refusal))) => Err(Unavailable::NotEmulable { program, refusal }),
            // QEMU would run it with the caller's ids: the next counter in `auto`'s order runs
            // it with its own.
            Ok((path, Ok(_))) => match crate::emulate::set_id(&path) {
                Some(what) => Err(Unavailable::SetId { what }),
                None => match crate::emulate::isa::lacking_instruction(&path) {
                    Some(what) => Err(Unavailable::LacksInstructions { what }),
                    None => Ok(()),
                },
            },
            Err(_) => Ok(()), // an error every backend will report
        }
    }
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError> {
        let (mut outcome, _) = crate::run_emulated(opts, sink)?;
        // Why this backend (from `check`), then what the emulator ran: its version and CPU model.
        let ran = std::mem::take(&mut outcome.counter.notes);
        outcome.counter.reason = info.reason;
        outcome.counter.notes = info.notes;
        outcome.counter.notes.extend(ran);
        Ok(outcome)
    }
}

/// The native counter's note: what it reads, in one line; the rest (off-CPU time, why not
/// `rdpmc`) its long form.
fn native_note(described: &str) -> Note {
    match described.split_once("; ") {
        Some((first, rest)) => Note::new("counter", format!("native: {first}")).with_detail(rest),
        None => Note::new("counter", format!("native: {described}")),
    }
}

/// The native counter with its calibrated clock, or the error a run or attach reports without one.
fn native_counting() -> Result<NativeCounting, TraceError> {
    let clock = native_clock().map_err(|reason| TraceError::CounterUnavailable {
        mode: CounterMode::Native,
        reason: reason.to_string(),
    })?;
    Ok(NativeCounting::new(clock))
}

/// What the native counter's costs would count here (instructions where its stubs
/// read them with `rdpmc`, else nanoseconds), or `None` if it cannot run.
pub fn native_unit() -> Option<CostUnit> {
    Native.unit()
}

impl Backend for Native {
    fn mode(&self) -> CounterMode {
        CounterMode::Native
    }
    fn describe(&self) -> Description {
        Description {
            in_auto: false,
            attaches: true,
            binds_cpu: false,
            advice: "use --counter native (native speed; time where rdpmc is not readable)",
        }
    }
    /// Instructions where its stubs read them with `rdpmc`, else nanoseconds.
    fn unit(&self) -> Option<CostUnit> {
        native_clock().ok().map(|clock| clock.unit())
    }
    fn check(&self) -> Result<CounterInfo, Unavailable> {
        let clock = native_clock().map_err(Unavailable::NativeClock)?;
        Ok(CounterInfo {
            kind: CounterMode::Native,
            reason: "native counter requested".into(),
            notes: vec![native_note(&clock.describe())],
            bias: 0,
            unit: clock.unit(),
        })
    }
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError> {
        ptrace::run(opts, info, native_counting()?, sink)
    }
    fn attach(
        &self,
        opts: &AttachOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<AttachOutcome, TraceError> {
        ptrace::attach(opts, info, native_counting()?, sink)
    }
}

/// Every backend, fastest first: the order in which `auto` tries those it may (for a run, those
/// [`Description::in_auto`]: hardware counter, emulation, single-stepping; for an attach, those
/// that [`Description::attaches`]: hardware counter, native, single-stepping).
const CANDIDATES: [CounterMode; 4] = [
    CounterMode::Hardware,
    CounterMode::Native,
    CounterMode::Emulate,
    CounterMode::Step,
];

/// The backend of `mode` (`None` for `Auto`, which is a choice among them).
pub fn backend(mode: CounterMode) -> Option<Box<dyn Backend>> {
    Some(match mode {
        CounterMode::Auto => return None,
        CounterMode::Hardware => Box::new(Hardware),
        CounterMode::Emulate => Box::new(Emulate),
        CounterMode::Step => Box::new(Step),
        CounterMode::Native => Box::new(Native),
    })
}

/// Every backend, in `auto`'s order, among those `wanted`.
pub fn backends(wanted: impl Fn(&dyn Backend) -> bool) -> Vec<Box<dyn Backend>> {
    CANDIDATES
        .iter()
        .filter_map(|&mode| backend(mode))
        .filter(|b| wanted(b.as_ref()))
        .collect()
}

/// `mode`'s backend alone, or under `Auto` the candidates `auto_wants`, in order.
fn candidates(
    mode: CounterMode,
    auto_wants: impl Fn(&dyn Backend) -> bool,
) -> Vec<Box<dyn Backend>> {
    match backend(mode) {
        Some(b) => vec![b],
        None => backends(auto_wants),
    }
}

/// The backend `mode` resolves to on this machine, with the counter it will use and why.
/// `Auto` takes the first backend of [`Hardware`], [`Emulate`], [`Step`] whose check passes; the
/// reason then says why the ones before it were not used.
pub fn choose(mode: CounterMode) -> Result<(Box<dyn Backend>, CounterInfo), TraceError> {
    first_available(mode, candidates(mode, |b| b.describe().in_auto), |_| Ok(()))
}

/// The advice of an error that asks for another counter than `failed`: the fastest one that
/// works here — the hardware counter if it passes its self-test, else emulation if a
/// plugin-capable QEMU is installed, else single-stepping.
pub fn use_instead(failed: CounterMode) -> String {
    backends(|b| b.describe().in_auto && b.mode() != failed)
        .into_iter()
        .find(|b| b.check().is_ok())
        .map_or(Step.describe().advice, |b| b.describe().advice)
        .into()
}

/// [`use_instead`] for `attach`: the fastest counter that attaches and works here (the
/// hardware counter, else the native counter, else single-stepping).
pub fn use_instead_attaching(failed: CounterMode) -> String {
    backends(|b| b.describe().attaches && b.mode() != failed)
        .into_iter()
        .find(|b| b.check().is_ok())
        .map_or(Step.describe().advice, |b| b.describe().advice)
        .into()
}

/// [`choose`] for running `opts.program`: under `Auto`, a backend that cannot run this program
/// (e.g. emulation for a `#!` script) is passed over too.
pub fn choose_for_run(opts: &TraceOptions) -> Result<(Box<dyn Backend>, CounterInfo), TraceError> {
    if opts.counter != CounterMode::Auto {
        return choose(opts.counter);
    }
    let candidates = backends(|b| b.describe().in_auto);
    first_available(CounterMode::Auto, candidates, |b| b.supports(opts))
}

/// [`choose`] for attaching to a running process: only the ptrace backends can (`Auto`:
/// [`Hardware`], then [`Native`], then [`Step`]; `Emulate` is an error).
pub fn choose_for_attach(mode: CounterMode) -> Result<(Box<dyn Backend>, CounterInfo), TraceError> {
    if backend(mode).is_some_and(|b| !b.describe().attaches) {
        return Err(TraceError::AttachUnsupported { mode });
    }
    first_available(
        mode,
        candidates(mode, |b| b.describe().attaches),
        |_| Ok(()),
    )
    .map_err(|e| match e {
        TraceError::CounterUnavailable { mode, reason } => {
            TraceError::AttachCounterUnavailable { mode, reason }
        }
        e => e,
    })
}

/// The first of `candidates` that can count here and `accepts`; its reason says why the ones
/// before it were passed over.
fn first_available(
    mode: CounterMode,
    candidates: Vec<Box<dyn Backend>>,
    accepts: impl Fn(&dyn Backend) -> Result<(), Unavailable>,
) -> Result<(Box<dyn Backend>, CounterInfo), TraceError> {
    let mut refused: Vec<(CounterMode, String)> = Vec::new();
    for backend in candidates {
        match backend
            .check()
            .and_then(|info| accepts(backend.as_ref()).map(|()| info))
        {
            Ok(mut info) => {
                if !refused.is_empty() {
                    let names: Vec<&str> = refused.iter().map(|(m, _)| m.name()).collect();
                    info.reason = format!("chosen by auto ({} unavailable here)", names.join(", "));
                    let passed_over = refused
                        .into_iter()
                        .map(|(m, why)| Note::new("passed-over", format!("{m}: {why}")));
                    info.notes.splice(0..0, passed_over);
                }
                return Ok((backend, info));
            }
            Err(why) => refused.push((backend.mode(), why.to_string())),
        }
    }
    let why: Vec<String> = refused.into_iter().map(|(_, why)| why).collect();
    Err(TraceError::CounterUnavailable {
        mode,
        reason: why.join("; "),
    })
}

/// The closure pair of the free functions ([`crate::run`], [`crate::attach`]) as an [`EventSink`].
pub(crate) struct FnSink<P, F> {
    pub(crate) probes_for: P,
    pub(crate) on_event: F,
}

impl<P, F> EventSink for FnSink<P, F>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        (self.probes_for)(image)
    }
    fn event(&mut self, event: TraceEvent) {
        (self.on_event)(event)
    }
}
