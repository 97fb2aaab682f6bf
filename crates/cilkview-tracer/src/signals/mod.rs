//! The tool's signals: the stop request of an attach session ([`StopFlag`]), the guards of the
//! `run` and `attach` commands (ignoring the terminal's interrupts, surviving the tool's death)
//! and the forwarding of signals meant for the program ([`forward`]).

pub(crate) mod forward;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::sys;

pub use forward::{forward_signals, ForwardGuard, FORWARDED_SIGNALS};

/// The signals that should end an attach session cleanly (restore the probes and detach)
/// instead of killing the tool: every signal whose default action ends a process and that can
/// be caught, but those that report the tool's own faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
/// SIGSYS, SIGTRAP, SIGABRT) and SIGPIPE (ignored: a closed output is an error to report).
pub const ATTACH_STOP_SIGNALS: [i32; 11] = [
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
/// one the user sees and may kill — only forwards [`ATTACH_STOP_SIGNALS`] to it, waits and exits with
/// its status. When this process dies anyhow, the fork receives SIGTERM, which a
/// [`StopFlag::on_signals`] registration turns into a clean detach. (A single-stepped thread
/// left by a tracer that vanishes keeps its trap flag and dies of SIGTRAP at its next
/// instruction; so only a SIGKILL of the fork itself, whose pid nobody is shown, can still harm
/// the process.)
/// An error, before any fork, if the process already has other threads.
pub fn survive_tool_death() -> std::io::Result<()> {
    sys::split_off_worker_single_threaded(&ATTACH_STOP_SIGNALS, nix::libc::SIGTERM)
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
            sys::wake(w);
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

    /// Turn `signals` (normally [`ATTACH_STOP_SIGNALS`]) into stop requests until the
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
