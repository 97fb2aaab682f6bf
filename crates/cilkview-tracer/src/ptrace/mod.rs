//! The ptrace backend: a program (or a running process) under `ptrace`, its threads followed,
//! its marks' probes watched, each hit reported with its cost. How costs are measured and how a
//! stopped thread resumes is the [`counting::Counting`] seam; everything else is here:
//!
//! - `mod.rs`: the shared state ([`Core`]), the tracer ([`Tracer`]) and its stop dispatch;
//! - `launch.rs`: starting a program and running it to its end;
//! - `threads.rs`: new threads, forked children, execs;
//! - `probes.rs`: the mapped files and their probes, patched bytes;
//! - `loader_hook.rs`: the dynamic loader's hook (breakpoints mode);
//! - `window.rs`: attaching to a running process and measuring a window of it;
//! - `stop_all.rs`: stopping every thread of it, each held with how it goes on;
//! - `detach.rs`: detaching from it, its probes restored;
//! - `trap_flag.rs`: the program's trap flag, given back after single-steps.

pub(crate) mod counting;
mod detach;
mod launch;
mod loader_hook;
mod probes;
mod stop_all;
mod threads;
mod trap_flag;
mod window;

pub(crate) use launch::run;
pub(crate) use window::attach;

use std::collections::{HashMap, HashSet};

use nix::errno::Errno;
use nix::libc;

use self::counting::Counting;
use self::probes::Armed;
use crate::sys::{self, Restart, Stop, Tid, Wait};
use crate::{EventSink, ExitStatus, TraceError, TraceEvent};

/// What the event loop keeps of each thread (counting keeps its own state).
#[derive(Default)]
struct Thread {
    /// Its `ThreadExit` was reported (it is exiting, or no longer measured).
    exit_reported: bool,
    /// The trap flag as the program has it (`trap_flag::TRAP_FLAG` or 0: as the tool first
    /// stopped the thread at attach, as its creator had it, clear after an exec), given back
    /// when it is detached.
    trap_flag: u64,
}

/// The state of a session that does not depend on how instructions are counted.
pub(crate) struct Core<'s> {
    pid: Tid,
    threads: HashMap<Tid, Thread>,
    armed: Armed,
    images: u32,
    /// Measuring has begun (the launched program exec'd, or the process was attached).
    execed: bool,
    sink: &'s mut dyn EventSink,
    hits: u64,
    tail: u64,
    total: u64,
    nthreads: u32,
    /// New tasks announced by a CLONE/FORK/VFORK event whose first stop has not been seen.
    expected: HashSet<Tid>,
    /// New tasks seen (first stop or death) before their parent's event.
    seen_new: HashSet<Tid>,
    /// The program's trap flag of the creators of expected tasks that have it set (see
    /// `Thread::trap_flag`).
    inherited_trap_flag: HashMap<Tid, u64>,
}

impl<'s> Core<'s> {
    fn new(pid: Tid, sink: &'s mut dyn EventSink) -> Self {
        Core {
            pid,
            threads: HashMap::new(),
            armed: Armed::default(),
            images: 0,
            execed: false,
            sink,
            hits: 0,
            tail: 0,
            total: 0,
            nthreads: 0,
            expected: HashSet::new(),
            seen_new: HashSet::new(),
            inherited_trap_flag: HashMap::new(),
        }
    }

    pub(crate) fn pid(&self) -> Tid {
        self.pid
    }

    pub(crate) fn emit(&mut self, ev: TraceEvent) {
        self.total += ev.cost();
        match ev {
            TraceEvent::Hit { .. } => self.hits += 1,
            TraceEvent::ThreadExit { cost, .. } => self.tail += cost,
            _ => {}
        }
        self.sink.event(ev);
    }
}

/// A ptrace session counting with `C`.
pub(crate) struct Tracer<'s, C> {
    core: Core<'s>,
    counting: C,
}

/// The one constructor of [`TraceError::Ptrace`]: request `op` on thread `tid` failed.
pub(crate) fn ptrace_err(op: &'static str, tid: Tid) -> impl FnOnce(Errno) -> TraceError {
    move |source| TraceError::Ptrace { op, tid, source }
}

/// The result `r` of request `op` about stopped thread `tid`; `None` if the thread is gone
/// (ESRCH: a SIGKILL from outside can come between two requests about one stop; its exit will be
/// reported). The one place ESRCH is read as "gone" (pete's `died_if_esrch`).
pub(crate) fn unless_gone<T>(
    op: &'static str,
    tid: Tid,
    r: nix::Result<T>,
) -> Result<Option<T>, TraceError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Errno::ESRCH) => Ok(None),
        Err(e) => Err(ptrace_err(op, tid)(e)),
    }
}

/// The registers of stopped thread `tid`; `None` if it was killed meanwhile (see
/// [`unless_gone`]).
pub(crate) fn regs_unless_gone(tid: Tid) -> Result<Option<libc::user_regs_struct>, TraceError> {
    unless_gone("GETREGS", tid, sys::getregs(tid))
}

/// Restarts stopped thread `tid` as `how` says; one killed meanwhile is no error (see
/// [`unless_gone`]).
pub(crate) fn restart(tid: Tid, how: Restart) -> Result<(), TraceError> {
    unless_gone(how.request(), tid, sys::restart(tid, how)).map(drop)
}

/// The value of DWARF x86-64 register `dwarf` (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp,
/// 7 rsp, 8–15 r8–r15).
pub(crate) fn reg(regs: &libc::user_regs_struct, dwarf: u16) -> u64 {
    match dwarf {
        0 => regs.rax,
        1 => regs.rdx,
        2 => regs.rcx,
        3 => regs.rbx,
        4 => regs.rsi,
        5 => regs.rdi,
        6 => regs.rbp,
        7 => regs.rsp,
        8 => regs.r8,
        9 => regs.r9,
        10 => regs.r10,
        11 => regs.r11,
        12 => regs.r12,
        13 => regs.r13,
        14 => regs.r14,
        _ => regs.r15,
    }
}

impl<'s, C: Counting> Tracer<'s, C> {
    /// A tracer of process `pid` (not yet seized).
    fn new(pid: Tid, counting: C, sink: &'s mut dyn EventSink) -> Self {
        Tracer {
            core: Core::new(pid, sink),
            counting,
        }
    }

    /// Waits for the next event of any tracee and handles it. Returns the task that ended, if one
    /// did (its tail already reported); `None` after a stop, or when `alarm` (attach's wake-up
    /// helper child, forgotten here) ended.
    fn next_exit(
        &mut self,
        alarm: Option<&mut Option<Tid>>,
    ) -> Result<Option<(Tid, ExitStatus)>, TraceError> {
        let (tid, status) = match self.counting.wait(&mut self.core)? {
            Wait::Exited(tid, _) | Wait::Signaled(tid, _)
                if alarm.as_ref().is_some_and(|a| **a == Some(tid)) =>
            {
                if let Some(a) = alarm {
                    *a = None;
                }
                return Ok(None);
            }
            Wait::Exited(tid, code) => (tid, ExitStatus::Exited(code)),
            Wait::Signaled(tid, sig) => (tid, ExitStatus::Signaled(sig)),
            Wait::Stopped { tid, stop } => {
                self.on_stop(tid, stop)?;
                return Ok(None);
            }
        };
        if !self.core.threads.contains_key(&tid) {
            self.core.note_seen(tid);
        }
        self.reap(tid);
        Ok(Some((tid, status)))
    }

    /// A task is gone: report its tail if its exit stop was missed.
    fn reap(&mut self, tid: Tid) {
        if let Some(th) = self.core.threads.remove(&tid) {
            if !th.exit_reported && self.core.execed {
                let _ = self.counting.flush(&mut self.core, tid);
                let cost = self.counting.take_tail(tid);
                self.core.emit(TraceEvent::ThreadExit { tid, cost });
            }
        }
        self.counting.remove_thread(tid);
    }

    /// The thread is exiting (`PTRACE_EVENT_EXIT`, or no longer measured): report its tail.
    fn report_exit(&mut self, tid: Tid) {
        if self.core.execed {
            let _ = self.counting.flush(&mut self.core, tid);
        }
        let cost = self.counting.take_tail(tid);
        if let Some(th) = self.core.threads.get_mut(&tid) {
            th.exit_reported = true;
        }
        if self.core.execed {
            self.core.emit(TraceEvent::ThreadExit { tid, cost });
        }
    }

    fn on_stop(&mut self, tid: Tid, stop: Stop) -> Result<(), TraceError> {
        if !self.core.threads.contains_key(&tid) {
            return self.new_task(tid, stop);
        }
        self.counting.stopped(tid);
        match stop {
            Stop::Signal(libc::SIGTRAP) => match self.counting.sigtrap(&mut self.core, tid)? {
                Some(inject) => self.counting.resume(tid, inject),
                None => Ok(()),
            },
            Stop::Signal(sig) => self.counting.resume(tid, sig), // re-injected unchanged
            Stop::Exec => self.on_exec(tid),
            Stop::Exit => {
                self.report_exit(tid);
                restart(tid, Restart::Continue(0))
            }
            // Stay stopped (as without the tool) until SIGCONT.
            Stop::Group(_) => restart(tid, Restart::Listen),
            Stop::Created => {
                // The new task is handled at its own first stop.
                self.core.note_new(tid);
                self.counting.resume(tid, 0)
            }
            // After LISTEN or an interrupt, anything else: just go on.
            Stop::Interrupt | Stop::Syscall | Stop::Other { .. } => self.counting.resume(tid, 0),
        }
    }
}
