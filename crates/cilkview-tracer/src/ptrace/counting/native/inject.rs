//! System calls run inside a stopped tracee thread (its registers saved, set to the call on a
//! kill-safe gadget, run to the call's syscall-exit stop, restored), and the memory the native
//! backend maps with them: the shared record region and the stub pages near each marked file.

use nix::libc;

use super::call_gadget::{self, Gadget};
use crate::kill_point::{self, Phase};
use crate::procfs::{self, Mem};
use crate::ptrace::{ptrace_err, regs_unless_gone};
use crate::sys::{self, Restart, Stop, Tid, Wait};
use crate::TraceError;

/// An error of the native backend's set-up in the tracee.
pub(super) fn setup_err(pid: Tid, what: String) -> TraceError {
    TraceError::Proc {
        pid,
        source: std::io::Error::other(format!("native: {what}")),
    }
}

/// The signal mask while the tracer single-steps a thread (an injected call, out of a stub):
/// all but SIGTRAP and the two that cannot be blocked. Signals arriving meanwhile stay pending
/// for the program. SIGTRAP must not be blocked: the step's trap is a forced SIGTRAP, and a
/// forced signal found blocked resets the program's handler to the default for the whole
/// process (a new thread starts with every signal blocked by glibc's `pthread_create`: a call
/// injected there made the program's next SIGTRAP kill it).
pub(super) const STEPPING_MASK: u64 =
    !((1 << (libc::SIGTRAP - 1)) | (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1)));

/// Whether the signal-delivery stop of `tid` with `sig`, met while single-stepping it, is a
/// signal for the program: any but SIGTRAP, and a SIGTRAP sent by a process (`kill`, `tgkill`,
/// `sigqueue`: a code ≤ 0), not the trap of the step.
pub(super) fn sent(tid: Tid, sig: i32) -> bool {
    sig != libc::SIGTRAP || matches!(sys::siginfo_code(tid), Ok(code) if code <= 0)
}

/// Run system call `nr` with `args` in stopped thread `tid`, on the call gadget at `gadget`
/// (`call_gadget.rs`: in spare bytes of the program's code for the first call, in the region's
/// page after). Returns the call's result (a negative errno on failure).
///
/// The thread runs to the call's syscall-exit stop (`PTRACE_SYSCALL`: no single-step, no trap),
/// its registers are put back there, and it stays there: resumed with a signal from that stop,
/// the kernel sends it the signal, as a signal-delivery stop would deliver it. A system call
/// that the stop interrupted is restarted explicitly ([`restarted`]). Signals for the program
/// that stop it meanwhile are returned in `deferred` (to deliver at its next resume).
///
/// Kill-safe: whenever the tool dies (ptrace lets the thread go as it is), the thread finishes
/// the call (its effect stays: a mapping, at worst a descriptor) and returns, through the
/// gadget's data, to where it was with its own registers. Nothing is ever written over the
/// program's code, and its signal mask is never changed.
pub(super) fn syscall(
    tid: Tid,
    gadget: Gadget,
    nr: i64,
    args: [u64; 6],
    deferred: &mut Vec<i32>,
) -> Result<i64, TraceError> {
    if in_system_call(tid) {
        finish_system_call(tid, deferred)?;
    }
    let back = restarted(sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?);
    let mem = Mem::open(tid).map_err(|source| TraceError::Proc { pid: tid, source })?;
    mem.write(gadget.data, &call_gadget::data(&back))
        .map_err(|source| TraceError::Proc { pid: tid, source })?;
    let mut regs = back;
    regs.rip = gadget.code;
    regs.r11 = nr as u64;
    [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9] = args;
    sys::setregs(tid, regs).map_err(ptrace_err("SETREGS", tid))?;
    kill_point::reached(Phase::Injecting);
    let result = run_call(tid, gadget, deferred);
    if result.is_ok() || regs_unless_gone(tid)?.is_some() {
        sys::setregs(tid, back).map_err(ptrace_err("SETREGS", tid))?;
    }
    result
}

/// Thread `tid`'s registers `regs` at a stop, an interrupted system call's restart made
/// explicit as the kernel makes it on a resume that runs no handler (`-ERESTARTSYS`,
/// `-ERESTARTNOINTR`, `-ERESTARTNOHAND`: the call again; `-ERESTART_RESTARTBLOCK`:
/// `restart_syscall`), and `orig_rax` -1 (no restart on the way out of the stop). The kernel
/// would look at these only on the way out of a signal-delivery stop or one like it; the thread
/// leaves the injection from a syscall-exit stop, where it does not. A signal delivered at that
/// resume then finds the call restarted (as with `SA_RESTART`) where it could have returned
/// `EINTR`.
fn restarted(mut regs: libc::user_regs_struct) -> libc::user_regs_struct {
    if (regs.orig_rax as i64) >= 0 {
        match -(regs.rax as i64) {
            512..=514 => (regs.rax, regs.rip) = (regs.orig_rax, regs.rip - 2),
            516 => (regs.rax, regs.rip) = (libc::SYS_restart_syscall as u64, regs.rip - 2),
            _ => {}
        }
    }
    regs.orig_rax = u64::MAX;
    regs
}

/// Thread `tid`, its registers set to a call on `gadget`: run it to the call's syscall-exit
/// stop; the call's result.
fn run_call(tid: Tid, gadget: Gadget, deferred: &mut Vec<i32>) -> Result<i64, TraceError> {
    let at_gadget = || {
        let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
        if regs.rip != gadget.code + call_gadget::AFTER_SYSCALL {
            return Err(setup_err(tid, format!("syscall stop at {:#x}", regs.rip)));
        }
        Ok(regs)
    };
    to_syscall_stop(tid, deferred)?;
    at_gadget()?;
    kill_point::reached(Phase::InCall);
    to_syscall_stop(tid, deferred)?;
    let regs = at_gadget()?;
    kill_point::reached(Phase::CallDone);
    Ok(regs.rax as i64)
}

/// Resume thread `tid` (`PTRACE_SYSCALL`) to its next syscall stop: signals for the program met
/// meanwhile go to `deferred`, event stops (an interrupt, the end of a vfork) are resumed again.
fn to_syscall_stop(tid: Tid, deferred: &mut Vec<i32>) -> Result<(), TraceError> {
    loop {
        let how = Restart::Syscall(0);
        sys::restart(tid, how).map_err(ptrace_err(how.request(), tid))?;
        match sys::wait_for(tid).map_err(TraceError::Wait)? {
            Wait::Stopped {
                stop: Stop::Syscall,
                ..
            } => return Ok(()),
            Wait::Stopped {
                stop: Stop::Signal(sig),
                ..
            } => deferred.push(sig),
            Wait::Stopped { .. } => {}
            Wait::Exited(..) | Wait::Signaled(..) => {
                return Err(setup_err(tid, "the thread ended during set-up".into()))
            }
        }
    }
}

/// Whether stopped thread `tid` is at an event stop inside a system call (the parent's stop at a
/// `clone`, `fork` or `vfork`, at the end of a `vfork`, at an `exec`: the call's exit would
/// otherwise be the first syscall stop of an injected call): the call's result is written into
/// `%rax` only when the thread goes on, into whatever registers it has then. A call injected
/// there got the result in its own registers, and the restored `%rax` said `-ENOSYS`: a thread
/// seized in `clone3` by `attach`, given its slot there, saw `clone3` fail, and glibc's
/// fallback to `clone` started a second thread on the stack the first was already using (it
/// died at address 0: `attach --counter native` to a program starting threads all the time,
/// about 1 attach in 12).
fn in_system_call(tid: Tid) -> bool {
    const EVENTS: [i32; 5] = [
        libc::PTRACE_EVENT_EXEC,
        libc::PTRACE_EVENT_CLONE,
        libc::PTRACE_EVENT_FORK,
        libc::PTRACE_EVENT_VFORK,
        libc::PTRACE_EVENT_VFORK_DONE,
    ];
    let Ok(code) = sys::siginfo_code(tid) else {
        return false;
    };
    code & 0xff == libc::SIGTRAP && EVENTS.contains(&(code >> 8))
}

/// Thread `tid`, at an event stop inside a system call ([`in_system_call`]): let it finish the
/// call, to its syscall-exit stop (its result in `%rax`; a stop the tool may die in).
fn finish_system_call(tid: Tid, deferred: &mut Vec<i32>) -> Result<(), TraceError> {
    to_syscall_stop(tid, deferred)
}

/// Thread `tid`, stopped after single-steps, its `%rip` at an `int3`: run it over the `int3`
/// with `PTRACE_CONT` (the caller puts its registers back after). A single-step leaves the thread
/// marked for stepping (`TIF_SINGLESTEP`, a trap at its next system call's exit, and the trap
/// flag) until the tracer resumes it without one; a tracer killed before that (SIGKILL, between
/// an injected call and the end of the set-up) let the thread trap at its next system call, the
/// SIGTRAP killing the program it no longer traced. A `PTRACE_CONT` clears the mark.
pub(super) fn run_over_int3(tid: Tid, deferred: &mut Vec<i32>) -> Result<(), TraceError> {
    resume_until_its_trap(tid, Restart::Continue(0), deferred)
}

/// Resumes thread `tid` as `how` says until the trap that resuming gives (a step's, an `int3`'s):
/// signals for the program met meanwhile go to `deferred`, event stops (an interrupt) are
/// resumed again.
fn resume_until_its_trap(
    tid: Tid,
    how: Restart,
    deferred: &mut Vec<i32>,
) -> Result<(), TraceError> {
    loop {
        sys::restart(tid, how).map_err(ptrace_err(how.request(), tid))?;
        match sys::wait_for(tid).map_err(TraceError::Wait)? {
            Wait::Stopped {
                stop: Stop::Signal(sig),
                ..
            } if !sent(tid, sig) => return Ok(()),
            Wait::Stopped {
                stop: Stop::Signal(sig),
                ..
            } => deferred.push(sig),
            Wait::Stopped { .. } => {} // an event stop (e.g. an interrupt): resume again
            Wait::Exited(..) | Wait::Signaled(..) => {
                return Err(setup_err(tid, "the thread ended during set-up".into()))
            }
        }
    }
}

/// Stopped thread `tid` was single-stepped: clear what the steps left marked in the kernel
/// (see [`run_over_int3`]) by running it over the `int3` at `int3`, its registers unchanged.
pub(super) fn end_stepping(tid: Tid, int3: u64, deferred: &mut Vec<i32>) -> Result<(), TraceError> {
    let Some(saved) = regs_unless_gone(tid)? else {
        return Ok(());
    };
    let mut regs = saved;
    regs.rip = int3;
    sys::setregs(tid, regs).map_err(ptrace_err("SETREGS", tid))?;
    run_over_int3(tid, deferred)?;
    sys::setregs(tid, saved).map_err(ptrace_err("SETREGS", tid))
}

/// `mmap` flags and protections.
pub(super) const PROT_RX: u64 = (libc::PROT_READ | libc::PROT_EXEC) as u64;
pub(super) const PROT_RW: u64 = (libc::PROT_READ | libc::PROT_WRITE) as u64;
const MAP_FIXED_NOREPLACE: u64 = 0x100000;

/// An anonymous private mapping of `len` bytes at exactly `at` (or anywhere if `at` is 0) in
/// the process of `tid`, readable and executable (writes go through `/proc/PID/mem`).
pub(super) fn map_code(
    tid: Tid,
    gadget: Gadget,
    at: u64,
    len: u64,
    deferred: &mut Vec<i32>,
) -> Result<u64, TraceError> {
    let mut flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    if at != 0 {
        flags |= MAP_FIXED_NOREPLACE;
    }
    let r = syscall(
        tid,
        gadget,
        libc::SYS_mmap,
        [at, len, PROT_RX, flags, u64::MAX, 0],
        deferred,
    )?;
    if r < 0 {
        return Err(setup_err(
            tid,
            format!(
                "mmap of {len} bytes at {at:#x} in the program failed: {}",
                std::io::Error::from_raw_os_error(-r as i32)
            ),
        ));
    }
    if at != 0 && r as u64 != at {
        // An old kernel took the address as a hint.
        let _ = syscall(
            tid,
            gadget,
            libc::SYS_munmap,
            [r as u64, len, 0, 0, 0, 0],
            deferred,
        );
        return Err(setup_err(tid, format!("no room at {at:#x}")));
    }
    Ok(r as u64)
}

/// Where to put `len` bytes of stubs so that every address of `lo..=hi` reaches them with a
/// `rel32` jump (and they reach back): the free gap nearest below `lo`, else above `hi`. Below
/// first: above an executable is where its heap (`brk`) grows.
pub(super) fn place_near(pid: Tid, lo: u64, hi: u64, len: u64) -> Result<u64, TraceError> {
    const REACH: u64 = (1 << 31) - (1 << 20);
    const MIN_ADDR: u64 = 0x10000;
    let maps = procfs::maps(pid).map_err(|source| TraceError::Proc { pid, source })?;
    let mut used: Vec<(u64, u64)> = maps.iter().map(|m| (m.start, m.end)).collect();
    used.sort_unstable();
    // Gaps between mappings (and before the first), as (start, end).
    let mut gaps = Vec::new();
    let mut prev = MIN_ADDR;
    for &(s, e) in &used {
        if s > prev {
            gaps.push((prev, s));
        }
        prev = prev.max(e);
    }
    gaps.push((prev, 0x7fff_ffff_f000));
    // Keep one free page between our pages and anything else.
    let below = gaps
        .iter()
        .rev()
        .filter(|&&(s, e)| e <= lo && e >= 2 * 4096 + len && e - 4096 - len >= s + 4096)
        .map(|&(_, e)| e - 4096 - len)
        .find(|&p| hi - p <= REACH);
    let above = || {
        gaps.iter()
            .filter(|&&(s, e)| s >= hi && e > s + 2 * 4096 + len)
            .map(|&(s, _)| s + 4096)
            .find(|&p| p + len - lo <= REACH)
    };
    below.or_else(above).ok_or_else(|| {
        setup_err(
            pid,
            format!("no free address within 2 GiB of {lo:#x}..{hi:#x}"),
        )
    })
}
