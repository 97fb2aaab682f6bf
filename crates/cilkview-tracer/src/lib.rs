//! The tracer of cilkview-rs: launches a program under ptrace, arms probes at
//! given offsets of each executable image and of every file mapped executable
//! in it (shared libraries, at start-up or by `dlopen`), and reports every probe hit with
//! the number of user-space instructions the hitting thread executed since
//! its previous event.
//!
//! It knows nothing of mark kinds. All ptrace / perf_event / unsafe code of
//! the project lives here, behind [`run`] and [`self_test`]. See
//! `docs/tracer.md` for how counting works.
//!
//! Invariant: the costs of all events of one run ([`TraceEvent::Exec`],
//! [`TraceEvent::Hit`], [`TraceEvent::ThreadExit`]) add up to
//! [`Outcome::total_instructions`], the user-space instructions the program
//! would retire natively, without the tool (x86-64 Linux only).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod attach;
mod counter;
mod elf;
mod emulate;
mod procfs;
mod sys;
mod tracer;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

#[doc(hidden)]
pub use attach::attach_breakpoints_only;
pub use attach::{
    attach, ignore_terminal_interrupts, AttachOptions, AttachOutcome, Ending, SignalGuard,
    StopFlag, TerminalInterruptGuard, STOP_SIGNALS,
};
pub use emulate::{
    emulator_available, run_emulated, run_emulated_with_notes, EmulationNotes, CPU_MODEL,
};

/// How instructions are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CounterMode {
    /// Hardware counter if it opens and passes the self-test, else single-step.
    #[default]
    Auto,
    /// Hardware counter (perf_event `instructions`, user only); error if unavailable.
    Hardware,
    /// Single-step every instruction (exact, ~7 µs per instruction).
    Step,
}

/// The counter actually used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterKind {
    Hardware,
    SingleStep,
}

/// Which counter is used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterInfo {
    pub kind: CounterKind,
    /// Human-readable reason, e.g. "hardware counter unavailable: perf_event_open: ...".
    pub reason: String,
    /// Hardware only: instructions the counter sees per probe stop beyond the
    /// native program (learned by the self-test, subtracted from each hit). 0 in step mode.
    pub bias: u64,
}

/// A probe: a 5-byte NOP `0f 1f 44 00 00` in an executable image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Offset from the start of the image's lowest mapping (for an ELF file:
    /// virtual address minus the page-aligned virtual address of its first
    /// `PT_LOAD` segment; for a non-PIE x86-64 executable usually `vaddr - 0x400000`).
    pub offset: u64,
    /// DWARF x86-64 register number whose value to report at each hit
    /// (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8–15 r8–r15).
    pub operand: Option<u16>,
}

/// What to run and how to count.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// Program to execute (searched in `PATH` if it has no slash).
    pub program: PathBuf,
    /// Arguments, without argv\[0\] (argv\[0\] is `program`).
    pub args: Vec<OsString>,
    pub counter: CounterMode,
    /// Single-step mode only: bind the program (all its threads) and the tracer to the CPU the
    /// tracer runs on. They then take turns on one CPU instead of waking each other across CPUs
    /// at every step: ~3x faster on our KVM guests. The program sees a one-CPU affinity mask
    /// (as under `taskset` or rr), which changes what thread pools sized from it do.
    pub bind_cpu: bool,
}

/// One event of a run, delivered in order. Costs are user-space instructions
/// of the thread `tid` since its previous event (or since it started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// The program exec'd an image and its probes are armed. `image` counts
    /// execs from 0. It follows the `probes_for` calls made at the exec (the
    /// executable first, then the files already mapped executable, e.g. the
    /// dynamic loader); see [`TraceEvent::Hit`] for the numbering. `cost`:
    /// instructions run in the previous image since the thread's last event
    /// (0 for image 0). `probes`: how many probes those calls returned in all
    /// (so a caller that keeps one table of every call's probes knows that
    /// the last `probes` entries are the new image's).
    Exec {
        image: u32,
        tid: i32,
        cost: u64,
        probes: usize,
    },
    /// A new thread of the program (not the initial one) started.
    ThreadStart { tid: i32 },
    /// Thread `tid` reached probe number `probe` of the current image.
    /// The probe's NOP itself is counted in the *following* strand.
    ///
    /// Numbering: `probe` indexes the concatenation, in call order, of all
    /// the vectors `probes_for` returned since (and including) the call for
    /// the current executable image: that call comes first (indices
    /// `0..n`), then one call per file mapped executable later (the dynamic
    /// loader, the `DT_NEEDED` libraries, each `dlopen`), each vector taking
    /// the next indices. At each exec the numbering restarts at 0. A library
    /// unmapped by `dlclose` keeps its indices (they are never reused, its
    /// probes simply stop being hit); if the same file is mapped again it
    /// gets a new call and new indices.
    Hit {
        probe: usize,
        tid: i32,
        cost: u64,
        operand: Option<u64>,
    },
    /// Thread `tid` ended; `cost` is its tail since its last event.
    ThreadExit { tid: i32, cost: u64 },
}

impl TraceEvent {
    /// The cost carried by this event (0 for `ThreadStart`).
    pub fn cost(&self) -> u64 {
        match *self {
            TraceEvent::Exec { cost, .. }
            | TraceEvent::Hit { cost, .. }
            | TraceEvent::ThreadExit { cost, .. } => cost,
            TraceEvent::ThreadStart { .. } => 0,
        }
    }
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled(i32),
}

impl ExitStatus {
    /// The shell convention: the exit code, or 128 + signal number.
    pub fn code(&self) -> i32 {
        match *self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled(s) => 128 + s,
        }
    }
}

/// Summary of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: ExitStatus,
    pub counter: CounterInfo,
    /// Number of `Hit` events.
    pub hits: u64,
    /// Sum of the `ThreadExit` costs (work after each thread's last hit).
    pub tail_cost: u64,
    /// Sum of all event costs: the program's user-space instructions.
    pub total_instructions: u64,
    /// Threads seen, including the initial one.
    pub threads: u32,
}

/// Errors of the tracer; messages say what was wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot execute `{}`: {source}{}", program.display(), exec_hint(source))]
    Exec {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start `{}`: {source}", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "ptrace denied: another tracer is attached or ptrace is restricted \
             (kernel.yama.ptrace_scope / CAP_SYS_PTRACE)"
    )]
    PtraceDenied,
    #[error("ptrace({op}) on thread {tid} failed: {source}")]
    Ptrace {
        op: &'static str,
        tid: i32,
        source: nix::errno::Errno,
    },
    #[error("hardware instruction counter requested but unavailable: {reason}; use the step counter (slow but exact)")]
    CounterUnavailable { reason: String },
    #[error("hardware instruction counter on thread {tid}: {source}")]
    Counter { tid: i32, source: std::io::Error },
    #[error("cannot get the probes of `{}`: {message}", image.display())]
    Probes { image: PathBuf, message: String },
    #[error("probe at offset {offset:#x} of `{}` does not point at a cilkview mark \
             (expected bytes 0f 1f 44 00 00, found {found:02x?}); is the marks table from another build?", image.display())]
    BadProbe {
        image: PathBuf,
        offset: u64,
        found: [u8; 5],
    },
    #[error("two probes at offset {offset:#x} of `{}`", image.display())]
    DuplicateProbe { image: PathBuf, offset: u64 },
    #[error("`{}` is not mapped in process {pid}; cannot place probes", image.display())]
    ImageNotMapped { image: PathBuf, pid: i32 },
    #[error("reading /proc for process {pid}: {source}")]
    Proc { pid: i32, source: std::io::Error },
    #[error("waitpid: {0}")]
    Wait(std::io::Error),
    #[error("no process with pid {pid}; check the pid (the process may have exited)")]
    NoSuchProcess { pid: i32 },
    #[error("pid {pid} is cilkview-rs itself; give the pid of another process")]
    AttachSelf { pid: i32 },
    #[error("{tid} is a thread of process {pid}; attach to the process: {pid}")]
    NotAProcess { tid: i32, pid: i32 },
    #[error("cannot attach to process {pid}: {reason}")]
    AttachDenied { pid: i32, reason: String },
    #[error("process {pid} exited while the tracer was attaching; nothing was measured")]
    ExitedDuringAttach { pid: i32 },
    #[error("the emulator is unavailable: {reason}")]
    EmulatorUnavailable { reason: String },
    #[error("{message}")]
    Emulator { message: String },
}

fn exec_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(nix::libc::ENOENT) => " (no such file: check the path or PATH)",
        Some(nix::libc::EACCES) => " (permission denied: is it executable?)",
        Some(nix::libc::ENOEXEC) => " (not an executable format; scripts need a #! line)",
        _ => "",
    }
}

/// What [`CounterMode::Auto`] would pick on this machine, and why.
/// Runs (once per process) the hardware counter self-test.
pub fn self_test() -> Result<CounterInfo, TraceError> {
    Ok(match counter::self_test_cached() {
        Ok(bias) => CounterInfo {
            kind: CounterKind::Hardware,
            reason: format!("hardware counter passed the self-test (per-hit bias {bias})"),
            bias: *bias,
        },
        Err(reason) => CounterInfo {
            kind: CounterKind::SingleStep,
            reason: reason.clone(),
            bias: 0,
        },
    })
}

/// Run `opts.program` to completion under the tracer.
///
/// At each exec (the first one and any later one, e.g. a wrapper script
/// exec'ing the real program) `probes_for` is called with the new image's path
/// (from `/proc/PID/exe`) and returns the probes to arm in it; then it is
/// called once for each other regular file mapped executable into the
/// process, when it is mapped: the dynamic loader (no marks: return an empty
/// vector), the `DT_NEEDED` libraries, libraries opened by `dlopen` — never
/// for the vdso or anonymous memory, never twice for one mapping. It must
/// return `Ok(vec![])` for files without marks (system libraries). Probe
/// offsets are relative to the lowest mapping of that file. See
/// [`TraceEvent::Hit`] for how probes are numbered. Events are
/// passed to `on_event` one at a time, in order. The program's stdin, stdout
/// and stderr are inherited untouched. If this returns an error, the program
/// has been killed.
pub fn run<P, F>(opts: &TraceOptions, probes_for: P, on_event: F) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    let counter = choose_counter(opts.counter)?;
    tracer::run(opts, counter, false, probes_for, on_event)
}

/// The counter `mode` resolves to on this machine.
pub(crate) fn choose_counter(mode: CounterMode) -> Result<CounterInfo, TraceError> {
    Ok(match mode {
        CounterMode::Step => CounterInfo {
            kind: CounterKind::SingleStep,
            reason: "single-step requested".into(),
            bias: 0,
        },
        CounterMode::Auto => self_test()?,
        CounterMode::Hardware => {
            let info = self_test()?;
            if info.kind != CounterKind::Hardware {
                return Err(TraceError::CounterUnavailable {
                    reason: info.reason,
                });
            }
            info
        }
    })
}

/// Testing aid, not for users: run with probes patched to `int3` exactly as in
/// hardware mode but without any counter (every cost is 0). Exercises the
/// patching, hit, operand and fork-scrubbing paths on machines without a PMU.
#[doc(hidden)]
pub fn run_breakpoints_only<P, F>(
    opts: &TraceOptions,
    probes_for: P,
    on_event: F,
) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    tracer::run(opts, breakpoints_only_info(), true, probes_for, on_event)
}

/// The counter of the breakpoints-only testing aids: hardware mode's patching, no counter.
pub(crate) fn breakpoints_only_info() -> CounterInfo {
    CounterInfo {
        kind: CounterKind::Hardware,
        reason: "breakpoints only (testing)".into(),
        bias: 0,
    }
}
