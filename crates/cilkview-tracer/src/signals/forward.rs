//! Signals sent to the tool by `kill PID` (SIGTERM, SIGHUP, …) are meant for the measured program:
//! [`forward_signals`] passes them on to the program the tracer launched, so that it ends as it
//! would have without the tool and the tool lives on to write the report of what was measured.

use std::sync::atomic::{AtomicI32, Ordering};
use std::thread::JoinHandle;

use signal_hook::iterator::{Handle, Signals};

use crate::sys;

/// The signals `run` forwards to the program: what `kill` sends (SIGTERM), a closed terminal or
/// ssh session (SIGHUP), and the other catchable signals whose default action ends a process and
/// that someone else sends. Not forwarded: SIGINT and SIGQUIT (the terminal sends them to the
/// whole process group, the program included; the tool ignores them), the tool's own faults
/// (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGTRAP, SIGABRT), SIGPIPE, and SIGXCPU / SIGXFSZ
/// (the tool's own resource limits).
pub const FORWARDED_SIGNALS: [i32; 7] = [
    nix::libc::SIGTERM,
    nix::libc::SIGHUP,
    nix::libc::SIGUSR1,
    nix::libc::SIGUSR2,
    nix::libc::SIGALRM,
    nix::libc::SIGVTALRM,
    nix::libc::SIGPROF,
];

/// The program launched by [`crate::run`], while it runs (0 otherwise).
static PROGRAM: AtomicI32 = AtomicI32::new(0);
/// A signal to forward that arrived before the program was launched.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// The launcher forked `pid`: forward to it from now on (and what arrived before).
pub(crate) fn launched(pid: i32) {
    PROGRAM.store(pid, Ordering::SeqCst);
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        sys::kill(pid, pending);
    }
}

/// The program was reaped: its pid may be reused, forward no more.
pub(crate) fn ended() {
    PROGRAM.store(0, Ordering::SeqCst);
}

/// Forwards `signals` (normally [`FORWARDED_SIGNALS`]) to the program launched by [`crate::run`]
/// until the guard is dropped; meanwhile they no longer end the tool. (Terminal interrupts need
/// no forwarding: they reach the whole foreground process group, see
/// [`crate::ignore_terminal_interrupts`].)
pub fn forward_signals(signals: &[i32]) -> std::io::Result<ForwardGuard> {
    let mut incoming = Signals::new(signals)?;
    let handle = incoming.handle();
    let thread = std::thread::Builder::new()
        .name("cilkview-forward".into())
        .spawn(move || {
            for sig in incoming.forever() {
                match PROGRAM.load(Ordering::SeqCst) {
                    0 => PENDING.store(sig, Ordering::SeqCst),
                    pid => sys::kill(pid, sig),
                }
            }
        })?;
    Ok(ForwardGuard {
        handle,
        thread: Some(thread),
    })
}

/// Keeps the forwarding of [`forward_signals`]; stops it on drop (the signals are then caught
/// and dropped, as signal-hook does not restore the default action).
#[must_use = "forwarding stops when the guard is dropped"]
pub struct ForwardGuard {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ForwardGuard {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
