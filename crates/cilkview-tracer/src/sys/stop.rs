//! ptrace's stops and restarts, typed (the shape of pete's `Stop` and `Restart`): `waitpid`'s
//! status is decoded once, in [`Wait::from_status`], and a stopped thread goes on through one
//! request, [`restart`]. Signals stay plain integers (see the module's comment).

use std::io;

use nix::libc::{self, c_int};

use super::{ptrace_raw, Tid};

/// `PTRACE_EVENT_STOP` (not in libc): an interrupt, a group-stop or a new task's first stop of a
/// seized thread.
const PTRACE_EVENT_STOP: i32 = 128;

/// What `waitpid` reported about a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The task exited with this code.
    Exited(Tid, i32),
    /// The task was killed by this signal.
    Signaled(Tid, i32),
    /// The task is in a ptrace-stop.
    Stopped { tid: Tid, stop: Stop },
}

/// Why a traced thread is in a ptrace-stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Signal-delivery-stop: the signal is delivered only if the thread is restarted with it.
    /// `SIGTRAP` here is a single-step's or an `int3`'s trap, or the program's own.
    Signal(i32),
    /// Group-stop of a seized thread (`PTRACE_EVENT_STOP` with SIGSTOP, SIGTSTP, SIGTTIN or
    /// SIGTTOU): restarted with [`Restart::Listen`] it stays stopped until SIGCONT, as without
    /// the tool.
    Group(i32),
    /// Any other `PTRACE_EVENT_STOP`: after `PTRACE_INTERRUPT` or `PTRACE_LISTEN`, or a new
    /// task's first stop.
    Interrupt,
    /// Syscall-entry or syscall-exit stop (`SIGTRAP | 0x80`: `PTRACE_O_TRACESYSGOOD`), after
    /// [`Restart::Syscall`] only. A tracer that dies while a thread is in one sends it nothing
    /// (the kernel re-sends the stop's code as a signal, and `SIGTRAP | 0x80` is none).
    Syscall,
    /// `PTRACE_EVENT_EXEC`: the thread exec'd (the event message is its former id).
    Exec,
    /// `PTRACE_EVENT_EXIT`: the thread is exiting.
    Exit,
    /// `PTRACE_EVENT_CLONE`, `_FORK` or `_VFORK`: the thread created a task (the event message is
    /// its id).
    Created,
    /// Another event (`status >> 16`), with the signal reported beside it.
    Other { event: i32, sig: i32 },
}

impl Stop {
    /// The stop of `waitpid`'s stopped `status`.
    fn from_status(status: c_int) -> Stop {
        let sig = libc::WSTOPSIG(status);
        match status >> 16 {
            0 if sig == libc::SIGTRAP | 0x80 => Stop::Syscall,
            0 => Stop::Signal(sig),
            PTRACE_EVENT_STOP
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) =>
            {
                Stop::Group(sig)
            }
            PTRACE_EVENT_STOP => Stop::Interrupt,
            libc::PTRACE_EVENT_EXEC => Stop::Exec,
            libc::PTRACE_EVENT_EXIT => Stop::Exit,
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                Stop::Created
            }
            event => Stop::Other { event, sig },
        }
    }

    /// The signal of a signal-delivery-stop (`None` for any other stop).
    pub fn signal(self) -> Option<i32> {
        match self {
            Stop::Signal(sig) => Some(sig),
            _ => None,
        }
    }
}

impl Wait {
    /// What `waitpid` returning `tid` with `status` reported; `None` for what is not requested
    /// (WIFCONTINUED).
    pub(super) fn from_status(tid: Tid, status: c_int) -> Option<Wait> {
        if libc::WIFEXITED(status) {
            Some(Wait::Exited(tid, libc::WEXITSTATUS(status)))
        } else if libc::WIFSIGNALED(status) {
            Some(Wait::Signaled(tid, libc::WTERMSIG(status)))
        } else if libc::WIFSTOPPED(status) {
            Some(Wait::Stopped {
                tid,
                stop: Stop::from_status(status),
            })
        } else {
            None
        }
    }
}

/// How a thread in a ptrace-stop goes on: the ptrace request, with the signal it delivers (0:
/// none) where it takes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// `PTRACE_CONT`.
    Continue(i32),
    /// `PTRACE_SINGLESTEP`.
    Step(i32),
    /// `PTRACE_SYSCALL`: to the next syscall-entry or syscall-exit stop ([`Stop::Syscall`]).
    Syscall(i32),
    /// `PTRACE_LISTEN`: a group-stopped thread stays stopped, reporting its SIGCONT.
    Listen,
    /// `PTRACE_DETACH`: the thread runs on untraced.
    Detach(i32),
}

impl Restart {
    /// The request's name, as errors say it.
    pub fn request(self) -> &'static str {
        match self {
            Restart::Continue(_) => "CONT",
            Restart::Step(_) => "SINGLESTEP",
            Restart::Syscall(_) => "SYSCALL",
            Restart::Listen => "LISTEN",
            Restart::Detach(_) => "DETACH",
        }
    }
}

/// Restarts stopped thread `tid` as `how` says.
pub fn restart(tid: Tid, how: Restart) -> nix::Result<()> {
    let (req, sig) = match how {
        Restart::Continue(sig) => (libc::PTRACE_CONT, sig),
        Restart::Step(sig) => (libc::PTRACE_SINGLESTEP, sig),
        Restart::Syscall(sig) => (libc::PTRACE_SYSCALL, sig),
        Restart::Listen => (libc::PTRACE_LISTEN, 0),
        Restart::Detach(sig) => (libc::PTRACE_DETACH, sig),
    };
    // SAFETY: integer arguments; only the tracee is touched.
    unsafe { ptrace_raw(req as c_int, tid, 0, sig as usize).map(drop) }
}

/// Wait for any tracee of *this thread* (`__WALL | __WNOTHREAD`), so that
/// several tracers may run in different threads of one process (tests).
pub fn wait_any() -> io::Result<Wait> {
    wait_for(-1)
}

/// Wait for task `pid` (-1: any tracee of this thread), as [`wait_any`].
pub fn wait_for(pid: Tid) -> io::Result<Wait> {
    loop {
        let (tid, status) = waitpid(pid, 0)?;
        if let Some(w) = Wait::from_status(tid, status) {
            return Ok(w);
        }
    }
}

/// [`wait_any`] without blocking: `None` if no tracee of this thread has anything to report.
pub fn wait_any_nohang() -> io::Result<Option<Wait>> {
    loop {
        let (tid, status) = waitpid(-1, libc::WNOHANG)?;
        if tid == 0 {
            return Ok(None);
        }
        if let Some(w) = Wait::from_status(tid, status) {
            return Ok(Some(w));
        }
    }
}

/// `waitpid(pid, __WALL | __WNOTHREAD | flags)`, retried on EINTR: the task and its status (0
/// and 0 if `WNOHANG` found nothing to report).
fn waitpid(pid: Tid, flags: c_int) -> io::Result<(Tid, c_int)> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: plain syscall writing into a local.
        let r =
            unsafe { libc::waitpid(pid, &mut status, libc::__WALL | libc::__WNOTHREAD | flags) };
        if r >= 0 {
            return Ok((r, status));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
