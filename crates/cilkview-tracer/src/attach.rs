//! Public API of `attach`: options, outcome, the stop flag, and the signal
//! helpers for the `run` and `attach` commands. The ptrace work is in
//! `ptrace/attach.rs`.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::backend::FnSink;
use crate::{
    sys, Backend, BreakpointsOnly, CounterInfo, CounterMode, Ending, Probe, TraceError, TraceEvent,
};

/// The signals that should end an attach session cleanly (restore the probes and detach)
/// instead of killing the tool: every signal whose default action ends a process and that can
/// be caught, but those that report the tool's own faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
/// SIGSYS, SIGTRAP, SIGABRT) and SIGPIPE (ignored: a closed output is an error to report).
pub const STOP_SIGNALS: [i32; 11] = [
    nix::libc::SIGINT,
    nix::libc::SIGTERM,
    nix::libc::SIGHUP,
    nix::libc::SIGQUIT,
    nix::libc::SIGUSR1,
    nix::libc::SIGUSR2,
    nix::libc::SIGALRM,
    nix::libc::SIGVTALRM,
    nix::libc::SIGPROF,
    nix::libc::SIGXCPU,
    nix::libc::SIGXFSZ,
];

/// Makes an attach session survive the death of this process, even by SIGKILL or the OOM
/// killer: call it first thing, while the process is single-threaded. The process forks; the
/// fork returns from this call and does the work (attach, measure, report); this process — the
/// one the user sees and may kill — only forwards [`STOP_SIGNALS`] to it, waits and exits with
/// its status. When this process dies anyhow, the fork receives SIGTERM, which a
/// [`StopFlag::on_signals`] registration turns into a clean detach. (A single-stepped thread
/// left by a tracer that vanishes keeps its trap flag and dies of SIGTRAP at its next
/// instruction; so only a SIGKILL of the fork itself, whose pid nobody is shown, can still harm
/// the process.)
pub fn survive_tool_death() -> std::io::Result<()> {
    sys::split_off_worker(&STOP_SIGNALS, nix::libc::SIGTERM)
}

/// A stop request shared between the caller and [`attach`]. Cloning shares
/// the same flag. Once requested it stays requested (one flag per session).
///
/// [`StopFlag::request`] may be called from any thread; a signal handler is
/// installed with [`StopFlag::on_signals`] (never set the flag from your own
/// handler: `attach` would only notice it at the next tracee event).
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<StopInner>);

#[derive(Debug, Default)]
struct StopInner {
    flag: Arc<AtomicBool>,
    /// Self-pipe (read, write), created on first use: a byte in it wakes the
    /// tracer's wait (see `sys::spawn_alarm`).
    pipe: OnceLock<(OwnedFd, OwnedFd)>,
}

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Ask the attach session to stop: it restores the probes, detaches
    /// every thread and returns [`Ending::Stopped`]. Cheap, thread-safe,
    /// idempotent.
    pub fn request(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        if let Some((_, w)) = self.0.pipe.get() {
            sys::poke(w);
        }
    }

    pub fn is_requested(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    pub(crate) fn wake_fd(&self) -> std::io::Result<&OwnedFd> {
        if self.0.pipe.get().is_none() {
            let p = sys::wake_pipe()?;
            let _ = self.0.pipe.set(p);
        }
        Ok(&self.0.pipe.get().expect("just set").0)
    }

    /// Turn `signals` (normally [`STOP_SIGNALS`]) into stop requests until the
    /// returned guard is dropped (the previous behaviour is then restored).
    /// Uses `signal-hook` (async-signal-safe: an atomic store and a pipe write).
    /// While registered, these signals no longer terminate the process.
    pub fn on_signals(&self, signals: &[i32]) -> std::io::Result<SignalGuard> {
        self.wake_fd()?;
        let w = &self.0.pipe.get().expect("created").1;
        let mut guard = SignalGuard {
            ids: Vec::new(),
            _keep: self.clone(),
        };
        for &sig in signals {
            guard
                .ids
                .push(signal_hook::flag::register(sig, Arc::clone(&self.0.flag))?);
            // signal-hook owns (and closes on unregister) the fd it is given: a dup.
            guard
                .ids
                .push(signal_hook::low_level::pipe::register(sig, w.try_clone()?)?);
        }
        Ok(guard)
    }
}

/// Keeps the signal registrations of [`StopFlag::on_signals`]; unregisters on drop.
#[must_use = "the signals are unregistered when the guard is dropped"]
pub struct SignalGuard {
    ids: Vec<signal_hook::SigId>,
    _keep: StopFlag,
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// While alive, the tool ignores SIGINT and SIGQUIT, so that Ctrl-C / Ctrl-\
/// at the terminal reach the program launched by [`crate::run`] (same process
/// group) and the tool survives to write its report. Programs launched by
/// [`crate::run`] meanwhile get these signals back at their previous
/// disposition (default, unless the tool itself was started with them
/// ignored, e.g. by `nohup`). Other ways of spawning children (e.g.
/// `std::process::Command`) inherit the "ignored" disposition. Do not nest.
#[must_use = "the signals are restored when the guard is dropped"]
pub struct TerminalInterruptGuard {
    prev: Vec<(i32, nix::libc::sigaction)>,
}

/// See [`TerminalInterruptGuard`]. Failures (which `sigaction` cannot
/// really have for these signals) leave that signal unchanged.
pub fn ignore_terminal_interrupts() -> TerminalInterruptGuard {
    let mut prev = Vec::new();
    let mut reset = 0u8;
    for (bit, sig) in [(1u8, nix::libc::SIGINT), (2, nix::libc::SIGQUIT)] {
        if let Ok(old) = sys::ignore_signal(sig) {
            if !sys::is_ignore(&old) {
                reset |= bit;
            }
            prev.push((sig, old));
        }
    }
    sys::RESET_IN_CHILD.store(reset, Ordering::SeqCst);
    TerminalInterruptGuard { prev }
}

impl Drop for TerminalInterruptGuard {
    fn drop(&mut self) {
        sys::RESET_IN_CHILD.store(0, Ordering::SeqCst);
        for (sig, old) in &self.prev {
            sys::restore_signal(*sig, old);
        }
    }
}

/// What to attach to and when to stop.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// Process id (thread-group id) of a running process.
    pub pid: i32,
    pub counter: CounterMode,
    /// Stop measuring (and detach) after this long; `None`: until the stop
    /// flag is requested or the process exits.
    pub duration: Option<Duration>,
    /// Request a stop at any time (timer, signal handler, other thread).
    pub stop: StopFlag,
}

/// Summary of an attach session (same counts as [`crate::Outcome`], over
/// the attached window only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachOutcome {
    pub ending: Ending,
    pub counter: CounterInfo,
    /// Number of `Hit` events.
    pub hits: u64,
    /// Sum of the `ThreadExit` costs (thread tails, including the tails
    /// reported at detach).
    pub tail_cost: u64,
    /// Sum of all event costs: the user-space instructions of the window.
    pub total_instructions: u64,
    /// Threads seen while attached.
    pub threads: u32,
    /// Wall time from the moment the probes were armed to the end.
    pub elapsed: Duration,
}

/// Attach to the running process `opts.pid`, measure until a stop request,
/// `opts.duration` or the process's exit, then (unless it exited) restore
/// every probe and detach: the process goes on as if never traced.
///
/// Every thread is seized (`PTRACE_SEIZE` without `EXITKILL`: the process
/// survives the tool) and stopped; `probes_for` is called with the
/// executable's path, then with each other file mapped executable (every
/// library already loaded, in order of load address), and later for each
/// library mapped while attached, as in [`crate::run`] (same numbering);
/// the event stream is that of [`crate::run`]: first
/// `Exec { image: 0, tid: pid, cost: 0 }`, then `ThreadStart` for every other
/// thread present, then hits, starts and exits as they happen. At detach each
/// live thread gets a final `ThreadExit { tid, cost }` carrying its tail since
/// its last event (the thread does not end: its measurement does), so the
/// costs cover the whole window. If this returns an error after the seize,
/// the process has been detached (probes restored) and left running.
pub fn attach<P, F>(
    opts: &AttachOptions,
    probes_for: P,
    on_event: F,
) -> Result<AttachOutcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    let (backend, info) = crate::choose_for_attach(opts.counter)?;
    backend.attach(
        opts,
        info,
        &mut FnSink {
            probes_for,
            on_event,
        },
    )
}

/// Testing aid, not for users: [`attach`] with probes patched to `int3` as in
/// hardware mode but no counter (every cost 0).
#[doc(hidden)]
pub fn attach_breakpoints_only<P, F>(
    opts: &AttachOptions,
    probes_for: P,
    on_event: F,
) -> Result<AttachOutcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    let b = BreakpointsOnly;
    let info = b.check().expect("always available");
    b.attach(
        opts,
        info,
        &mut FnSink {
            probes_for,
            on_event,
        },
    )
}
