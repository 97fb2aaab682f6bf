//! The tracer of cilkview-rs: launches a program under ptrace, arms probes at
//! given offsets of each executable image and of every file mapped executable
//! in it (shared libraries, at start-up or by `dlopen`), and reports every probe hit with
//! the number of user-space instructions the hitting thread executed since
//! its previous event.
//!
//! It knows nothing of mark kinds. All ptrace / perf_event / unsafe code of
//! the project lives here, behind the [`Backend`] seam (and the convenience functions [`run`],
//! [`attach`], [`self_test`]). See `docs/tracer.md` for how counting works.
//!
//! Layout: `backend.rs` (the seam and `auto`), `ptrace/` (the ptrace backend: launch, threads,
//! probes, loader hook, attach; `ptrace/counting/` its counting seam: stepping, breakpoints with
//! the hardware or, with the `testing` feature, a null counter: `testing.rs`), `counter.rs` (perf_event and its self-test), `procfs.rs`
//! (`/proc` readers), `sys/` (system calls and the shared record ring: the unsafe code).
//!
//! Invariant: the costs of all events of one run ([`TraceEvent::Exec`],
//! [`TraceEvent::Hit`], [`TraceEvent::ThreadExit`]) add up to
//! [`Outcome::total_cost`], the user-space instructions the program
//! would retire natively, without the tool (x86-64 Linux only).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![deny(unsafe_code)]

mod attach;
mod backend;
#[allow(unsafe_code)]
mod counter;
mod dispatch;
mod emulate;
mod kill_point;
mod probe_check;
mod procfs;
mod ptrace;
mod signals;
#[allow(unsafe_code)]
mod sys;
#[cfg(feature = "testing")]
mod testing;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use attach::{attach, AttachOptions, AttachOutcome};
pub use counter::SelfTestError;
pub use dispatch::TUNABLES;
pub use emulate::{
    emulator_available, read_shebang, run_emulated, EmulationNotes, EmulatorError, Refusal,
    CPU_MODEL,
};
#[cfg(feature = "testing")]
pub use testing::{
    attach_breakpoints_only, native_software_stand_in, run_breakpoints_only, BreakpointsOnly,
};

pub use backend::{
    backend, backends, choose, choose_for_attach, choose_for_run, native_unit, use_instead,
    Backend, Description, Emulate, Hardware, Native, Step, Unavailable,
};
pub use cilkview_events::{
    Cost, CostDefault, CostUnit, CounterInfo, CounterMode, Ending, EventSink, ExitStatus, Outcome,
    Probe, ProbesError, TraceEvent,
};
pub use ptrace::counting::ClockUnavailable;
pub use signals::{
    forward_signals, ignore_terminal_interrupts, survive_tool_death, ForwardGuard, SignalGuard,
    StopFlag, TerminalInterruptGuard, ATTACH_STOP_SIGNALS, FORWARDED_SIGNALS,
};
pub use sys::rdpmc::RdpmcUnavailable;

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
    /// Run the program with glibc's dispatch as this CPU's makes it, its environment unchanged.
    /// Otherwise the instruction counters run it with `GLIBC_TUNABLES` pinning the paths glibc
    /// picks to the emulated CPU's, so that they all count the same (src/dispatch.rs).
    pub host_dispatch: bool,
    /// Variables set (or replaced) in the program's environment only, not in the tracer's nor
    /// in the emulator's own (QEMU gets them as `-E NAME=VALUE`, for the guest).
    pub env: Vec<(OsString, OsString)>,
}

impl TraceOptions {
    /// The program's environment when [`TraceOptions::env`] sets something: the tracer's, with
    /// those variables replaced or added (`NAME=VALUE` strings). `None`: the tracer's unchanged.
    pub fn environment(&self) -> Option<Vec<OsString>> {
        if self.env.is_empty() {
            return None;
        }
        let mut out: Vec<OsString> = std::env::vars_os()
            .filter(|(k, _)| !self.env.iter().any(|(name, _)| name == k))
            .chain(self.env.iter().cloned())
            .map(|(k, v)| {
                let mut pair = k;
                pair.push("=");
                pair.push(v);
                pair
            })
            .collect();
        out.shrink_to_fit();
        Some(out)
    }
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
    #[error("{} requested but unavailable: {reason}; {}", unavailable_what(*mode), unavailable_hint(*mode))]
    CounterUnavailable { mode: CounterMode, reason: String },
    /// [`TraceError::CounterUnavailable`] for `attach`: the advice names a counter that attaches.
    #[error("{} requested but unavailable: {reason}; {}", unavailable_what(*mode), attach_hint(*mode))]
    AttachCounterUnavailable { mode: CounterMode, reason: String },
    #[error("`attach` needs a ptrace counter (--counter native, hw or step), not {mode}")]
    AttachUnsupported { mode: CounterMode },
    #[error("hardware instruction counter on thread {tid}: {source}")]
    Counter { tid: i32, source: std::io::Error },
    #[error("cannot get the probes of `{}`: {message}", image.display())]
    Probes {
        image: PathBuf,
        message: ProbesError,
    },
    #[error("cannot get the probes of `{}`: probe {probe}: {what} register {register} is not a \
             DWARF x86-64 general register (0-15)", image.display())]
    BadRegister {
        image: PathBuf,
        probe: usize,
        what: &'static str,
        register: u16,
    },
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
    #[error("{message}")]
    Emulator { message: String },
    #[error(
        "the native counter refuses: {reason}; nothing was changed in it. \
             `--counter step` measures it without running code in it"
    )]
    NativeRefused { pid: i32, reason: String },
    /// A cost option (`option`: its flag) in another unit than the counter's: the command line
    /// refuses it before the run, in its users' words.
    #[error("{option} {cost} is in {}, but --counter {counter} counts {unit}", cost.unit)]
    CostInOtherUnit {
        option: &'static str,
        cost: Cost,
        counter: CounterMode,
        unit: CostUnit,
    },
}

fn exec_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(nix::libc::ENOENT) => " (no such file: check the path or PATH)",
        Some(nix::libc::EACCES) => " (permission denied: is it executable?)",
        Some(nix::libc::ENOEXEC) => " (not an executable format; scripts need a #! line)",
        _ => "",
    }
}

fn unavailable_what(mode: CounterMode) -> &'static str {
    match mode {
        CounterMode::Hardware => "hardware instruction counter",
        CounterMode::Emulate => "counting by emulation",
        CounterMode::Native => "the native counter",
        _ => "every instruction counter",
    }
}

fn attach_hint(mode: CounterMode) -> String {
    match mode {
        CounterMode::Step | CounterMode::Auto => String::new(),
        _ => backend::use_instead_attaching(mode),
    }
}

fn unavailable_hint(mode: CounterMode) -> String {
    match mode {
        // Single-stepping is the last resort: nothing else to advise.
        CounterMode::Step | CounterMode::Auto => String::new(),
        _ => backend::use_instead(mode),
    }
}

/// The first instruction of the program `opts` runs that the emulated CPU lacks (AVX-512),
/// described as a phrase (text, address, function), or `None`: why `auto` passes over
/// emulation for it.
pub fn emulated_cpu_lacks(opts: &TraceOptions) -> Option<String> {
    let (path, runnable) = emulate::inspect_program(opts).ok()?;
    runnable.ok()?;
    emulate::isa::lacking_instruction(&path)
}

/// What [`CounterMode::Auto`] would pick on this machine, and why.
/// Runs (once per process) the hardware counter self-test.
pub fn self_test() -> Result<CounterInfo, TraceError> {
    choose(CounterMode::Auto).map(|(_, info)| info)
}

/// Run `opts.program` to completion with the backend `opts.counter` resolves to (see
/// [`choose`]).
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
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    let (backend, info) = choose(opts.counter)?;
    backend.run(
        opts,
        info,
        &mut backend::FnSink {
            probes_for,
            on_event,
        },
    )
}
