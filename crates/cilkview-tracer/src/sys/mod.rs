//! Thin wrappers around the raw system calls the tracer needs.
//!
//! Every `unsafe` block of the tracer lives in this module (and in the
//! calibration child of `counter.rs`); a function whose soundness depends on its caller is an
//! `unsafe fn` with its contract under `# Safety`. The wrappers take and return plain
//! integers for signals so that real-time signals (which `nix::sys::signal::Signal`
//! cannot represent) are re-injected unchanged.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::libc::{self, c_int, c_long, c_void};

pub mod cpuid;
pub mod native;
pub mod rdpmc;
mod shared_map;
mod spawn;
mod stop;
pub mod switches;
#[cfg(test)]
mod unwind_tests;
pub use shared_map::SharedMap;
pub use spawn::{exec_in_order, high_fds, prepare_child, spawn_blocked, spawn_fn, Child};
pub use stop::{restart, wait_any, wait_any_nohang, wait_for, Restart, Stop, Wait};

pub type Tid = i32;

/// Opens a perf event counting thread `tid` (0: the calling thread) on any CPU, close-on-exec,
/// user space only: `attr` with its size filled in and the kernel and hypervisor excluded.
pub fn open_user_perf_event(
    attr: perf_event_open_sys::bindings::perf_event_attr,
    tid: Tid,
) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let attr = user_only(attr);
    // SAFETY: the syscall reads `attr`, which lives across the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const perf_event_open_sys::bindings::perf_event_attr,
            tid,
            -1,
            -1,
            perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `attr` with its size filled in and the kernel and hypervisor excluded (user space only).
pub fn user_only(
    mut attr: perf_event_open_sys::bindings::perf_event_attr,
) -> perf_event_open_sys::bindings::perf_event_attr {
    attr.size = std::mem::size_of_val(&attr) as u32;
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// `si_code` values of SIGTRAP (x86-64).
pub const TRAP_BRKPT: i32 = 1;
pub const TRAP_TRACE: i32 = 2;
pub const SI_KERNEL: i32 = 0x80;

/// The shell's `SIGINT`/`SIGQUIT` dispositions while a
/// [`crate::TerminalInterruptGuard`] is alive: bit 0 (SIGINT) / bit 1 (SIGQUIT)
/// set = reset that signal to `SIG_DFL` in launched children (it was not
/// ignored before the guard).
pub static RESET_IN_CHILD: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Set `sig` to `SIG_IGN`; returns the previous action.
pub fn ignore_signal(sig: i32) -> io::Result<libc::sigaction> {
    // SAFETY: sigaction with valid pointers to locals.
    unsafe {
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &new, &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(old)
    }
}

/// Put back an action returned by [`ignore_signal`].
pub fn restore_signal(sig: i32, old: &libc::sigaction) {
    // SAFETY: `old` is a complete action previously returned by the kernel.
    unsafe {
        libc::sigaction(sig, old, std::ptr::null_mut());
    }
}

/// Is the action `SIG_IGN`?
pub fn is_ignore(act: &libc::sigaction) -> bool {
    act.sa_sigaction == libc::SIG_IGN
}

/// A close-on-exec, non-blocking pipe (read end, write end).
pub fn wake_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(
        nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK,
    )?)
}

/// Write one byte to a non-blocking pipe (a full pipe already wakes readers).
pub fn wake(fd: &OwnedFd) {
    let _ = nix::unistd::write(fd, &[1u8]);
}

/// Fork an "alarm" child of the calling thread that exits as soon as `wake`
/// is readable or `timeout_ms` (-1 = never) elapses. Its exit wakes the
/// calling thread's blocking `waitpid(-1, __WALL | __WNOTHREAD)`: this is how
/// a stop request or a deadline interrupts the tracer's wait without polling.
/// The child keeps no other descriptor and dies with its parent thread.
pub fn spawn_alarm(wake: &OwnedFd, timeout_ms: i32) -> io::Result<Tid> {
    let fd = wake.as_raw_fd();
    // SAFETY: the child only makes raw syscalls (prctl, close_range, poll, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: raw, async-signal-safe syscalls on integers and a local.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if fd > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, (fd - 1) as u32, 0u32);
            }
            libc::syscall(libc::SYS_close_range, (fd + 1) as u32, u32::MAX, 0u32);
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&mut p, 1, timeout_ms);
            libc::_exit(0);
        }
    }
    Ok(pid)
}

/// The worker of [`split_off_worker`], for the waiter's signal handler.
static WORKER: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn forward_to_worker(sig: c_int) {
    let pid = WORKER.load(std::sync::atomic::Ordering::Relaxed);
    if pid > 0 {
        kill(pid, sig); // kill(2) is async-signal-safe
    }
}

/// In the worker of [`split_off_worker`]: the process the user sees (0 elsewhere).
static FRONT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The process the user sees, if this is the worker [`split_off_worker`] forked: the tool too.
pub fn front_process() -> Option<Tid> {
    match FRONT.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        pid => Some(pid),
    }
}

/// Splits the calling (single-threaded) process in two. The fork returns `Ok(())` and does the
/// work; the calling process stays the one the user sees: it only forwards `forward` signals to
/// the worker, waits for it and exits as it did (never returns). If the waiter dies anyhow —
/// SIGKILL included — the worker receives `on_death` (`PR_SET_PDEATHSIG`).
///
/// # Safety
/// The calling process must be single-threaded: the fork returns into ordinary Rust code
/// (allocating, taking locks), which a lock held by another thread at the fork would deadlock
/// or corrupt.
pub unsafe fn split_off_worker(forward: &[i32], on_death: i32) -> io::Result<()> {
    let me = getpid();
    // SAFETY: the caller guarantees a single thread, so the child may run any code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        FRONT.store(me, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: plain syscalls.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, on_death);
            if libc::getppid() != me {
                libc::raise(on_death); // the waiter died before the prctl
            }
        }
        return Ok(());
    }
    WORKER.store(pid, std::sync::atomic::Ordering::Relaxed);
    for &sig in forward {
        // SAFETY: installs an async-signal-safe handler.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = forward_to_worker as *const () as usize;
            act.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
    let code = loop {
        let mut status: c_int = 0;
        // SAFETY: plain syscall writing into a local.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            if libc::WIFEXITED(status) {
                break libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                break 128 + libc::WTERMSIG(status);
            }
        } else if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break 2;
        }
    };
    std::process::exit(code)
}

/// [`split_off_worker`] if the calling process is single-threaded (`/proc/self/task` has one
/// entry), else an error and no fork.
pub fn split_off_worker_single_threaded(forward: &[i32], on_death: i32) -> io::Result<()> {
    let threads = std::fs::read_dir("/proc/self/task")?.count();
    if threads != 1 {
        return Err(io::Error::other(format!(
            "the process has {threads} threads; it must split off its worker before starting any"
        )));
    }
    // SAFETY: the process is single-threaded (just checked: only this thread could start one).
    unsafe { split_off_worker(forward, on_death) }
}

/// `ptrace(req, tid, addr, data)`, its result or errno (signals as plain integers: see the
/// module's comment).
///
/// # Safety
/// `addr` and `data` must be what `req` takes: where a request reads or writes the tracer's own
/// memory through them (GETEVENTMSG, GETSIGMASK, SETSIGMASK), a pointer to a live value of the
/// size it reads or writes; every other request used here (SEIZE, CONT, SINGLESTEP, LISTEN,
/// DETACH, INTERRUPT, PEEKDATA, POKEDATA) takes plain integers and touches only the tracee.
unsafe fn ptrace_raw(req: c_int, tid: Tid, addr: usize, data: usize) -> nix::Result<c_long> {
    nix::errno::Errno::clear();
    // SAFETY: `addr` and `data` are what `req` takes (the caller's contract).
    let r = unsafe { libc::ptrace(req as _, tid, addr as *mut c_void, data as *mut c_void) };
    if r == -1 {
        let e = nix::errno::Errno::last();
        if e as i32 != 0 {
            return Err(e);
        }
    }
    Ok(r)
}

pub fn seize(tid: Tid, options: c_int) -> nix::Result<()> {
    // SAFETY: integer arguments; only the tracee is touched.
    unsafe { ptrace_raw(libc::PTRACE_SEIZE as c_int, tid, 0, options as usize).map(drop) }
}

/// Stop a seized thread (it reports `PTRACE_EVENT_STOP`).
pub fn interrupt(tid: Tid) -> nix::Result<()> {
    // SAFETY: integer arguments; only the tracee is touched.
    unsafe { ptrace_raw(libc::PTRACE_INTERRUPT as c_int, tid, 0, 0).map(drop) }
}

pub fn setregs(tid: Tid, regs: libc::user_regs_struct) -> nix::Result<()> {
    nix::sys::ptrace::setregs(nix::unistd::Pid::from_raw(tid), regs)
}

/// Thread id of the calling thread.
pub fn gettid() -> Tid {
    nix::unistd::gettid().as_raw()
}

pub fn geteventmsg(tid: Tid) -> nix::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: `data` points at a live c_ulong, what GETEVENTMSG writes.
    unsafe {
        ptrace_raw(
            libc::PTRACE_GETEVENTMSG as c_int,
            tid,
            0,
            &mut msg as *mut _ as usize,
        )
    }?;
    Ok(msg as u64)
}

/// The blocked-signal mask of a stopped thread (bit `n - 1` for signal `n`).
pub fn getsigmask(tid: Tid) -> nix::Result<u64> {
    let mut mask: u64 = 0;
    // SAFETY: `data` points at a live u64 and `addr` is its size, what GETSIGMASK writes.
    unsafe {
        ptrace_raw(
            libc::PTRACE_GETSIGMASK as c_int,
            tid,
            std::mem::size_of::<u64>(),
            &mut mask as *mut u64 as usize,
        )
    }?;
    Ok(mask)
}

/// Set the blocked-signal mask of a stopped thread.
pub fn setsigmask(tid: Tid, mask: u64) -> nix::Result<()> {
    // SAFETY: `data` points at a live u64 and `addr` is its size, what SETSIGMASK reads.
    unsafe {
        ptrace_raw(
            libc::PTRACE_SETSIGMASK as c_int,
            tid,
            std::mem::size_of::<u64>(),
            &mask as *const u64 as usize,
        )
    }
    .map(drop)
}

/// Read 8 bytes of a stopped tracee's memory.
pub fn peek(tid: Tid, addr: u64) -> nix::Result<u64> {
    // SAFETY: integer arguments; only the tracee is touched.
    unsafe { ptrace_raw(libc::PTRACE_PEEKDATA as c_int, tid, addr as usize, 0).map(|v| v as u64) }
}

/// The siginfo of a signal-delivery-stop.
pub fn getsiginfo(tid: Tid) -> nix::Result<libc::siginfo_t> {
    nix::sys::ptrace::getsiginfo(nix::unistd::Pid::from_raw(tid))
}

/// Replace the siginfo of the signal a stopped thread will be resumed with.
pub fn setsiginfo(tid: Tid, info: &libc::siginfo_t) -> nix::Result<()> {
    nix::sys::ptrace::setsiginfo(nix::unistd::Pid::from_raw(tid), info)
}

/// Write 8 bytes of a stopped tracee's memory.
pub fn poke_data(tid: Tid, addr: u64, value: u64) -> nix::Result<()> {
    // SAFETY: integer arguments; only the tracee's memory is written.
    unsafe {
        ptrace_raw(
            libc::PTRACE_POKEDATA as c_int,
            tid,
            addr as usize,
            value as usize,
        )
    }
    .map(drop)
}

/// `si_code` of the signal of a signal-delivery-stop.
pub fn siginfo_code(tid: Tid) -> nix::Result<i32> {
    nix::sys::ptrace::getsiginfo(nix::unistd::Pid::from_raw(tid)).map(|i| i.si_code)
}

pub fn getregs(tid: Tid) -> nix::Result<libc::user_regs_struct> {
    nix::sys::ptrace::getregs(nix::unistd::Pid::from_raw(tid))
}

/// Sends the standard signal `sig` to `pid` (a process group if negative); whether it arrived
/// is not asked (the target may be gone).
pub fn kill(pid: Tid, sig: i32) {
    if let Ok(sig) = nix::sys::signal::Signal::try_from(sig) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Send `sig` to thread `tid` of process `tgid` (`tgkill`); errors ignored (the thread may be
/// gone).
pub fn tgkill(tgid: Tid, tid: Tid, sig: i32) {
    // SAFETY: plain syscall with integer arguments.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            tgid as c_long,
            tid as c_long,
            sig as c_long,
        );
    }
}

/// `true` if the two tasks share one address space (`kcmp(KCMP_VM)`).
pub fn same_vm(a: Tid, b: Tid) -> bool {
    const KCMP_VM: c_long = 1;
    // SAFETY: plain syscall with integer arguments.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a as c_long,
            b as c_long,
            KCMP_VM,
            0 as c_long,
            0 as c_long,
        )
    };
    r == 0
}

pub fn geteuid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

pub fn getpid() -> Tid {
    nix::unistd::getpid().as_raw()
}

/// Binds the calling thread to one CPU; restores its previous affinity when dropped.
pub struct PinnedThread {
    previous: nix::sched::CpuSet,
}

impl Drop for PinnedThread {
    fn drop(&mut self) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.previous);
    }
}

/// Binds the calling thread and the (not yet exec'd) child `pid` to the CPU the caller runs on.
/// In single-step mode tracer and tracee then take turns on one CPU instead of waking each other
/// with an inter-processor interrupt at every step (~3x faster on our 2-CPU KVM guests,
/// docs/benchmarks.md). `None` (nothing changed) if the affinity cannot be set.
pub fn bind_with_child(pid: Tid) -> Option<(PinnedThread, usize)> {
    use nix::sched::{sched_getaffinity, sched_getcpu, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    let previous = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let cpu = sched_getcpu().ok()?;
    let mut one = CpuSet::new();
    one.set(cpu).ok()?;
    sched_setaffinity(Pid::from_raw(pid), &one).ok()?;
    if sched_setaffinity(Pid::from_raw(0), &one).is_err() {
        let _ = sched_setaffinity(Pid::from_raw(pid), &previous);
        return None;
    }
    Some((PinnedThread { previous }, cpu))
}
