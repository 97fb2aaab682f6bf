//! Counting by single-stepping: every instruction is one `PTRACE_SINGLESTEP`, exact on any
//! machine; marks are found when a thread is about to execute one.

use std::collections::HashMap;

use nix::libc;

use super::sigtrap_guard::Guard;
use super::Counting;
use crate::ptrace::{regs_unless_gone, restart, trap_flag, unless_gone, Core};
use crate::sys::{self, Restart, Tid};
use crate::{TraceError, TraceEvent};

#[derive(Default)]
struct Thread {
    /// Instructions since the last event.
    pending: u64,
    /// A PTRACE_SINGLESTEP was issued and has not completed yet.
    in_flight: bool,
    /// rip the in-flight step started from.
    step_from: u64,
    /// rsp the in-flight step started from.
    rsp_from: u64,
    /// A hit reported at this rip, whose NOP has not executed yet.
    reported_at: Option<u64>,
    /// Just exec'd: the exec syscall's completion report is not an instruction.
    after_exec: bool,
    /// Keeps the program's SIGTRAP handler and mask as they are (see `sigtrap_guard`).
    guard: Guard,
}

pub(crate) struct Stepping {
    threads: HashMap<Tid, Thread>,
    /// Bind the program and the tracer to one CPU (see `TraceOptions::bind_cpu`).
    bind_cpu: bool,
    /// The tracer's own binding, undone when the session ends.
    pinned: Option<sys::PinnedThread>,
}

impl Stepping {
    pub(crate) fn new(bind_cpu: bool) -> Stepping {
        Stepping {
            threads: HashMap::new(),
            bind_cpu,
            pinned: None,
        }
    }

    fn thread(&mut self, tid: Tid) -> &mut Thread {
        self.threads.entry(tid).or_default()
    }

    /// The thread is about to execute the instruction at `regs.rip`.
    fn boundary(&mut self, core: &mut Core<'_>, tid: Tid, regs: &libc::user_regs_struct) {
        let rip = regs.rip;
        let hit = core.probe_at(rip);
        let th = self.thread(tid);
        th.step_from = rip;
        th.rsp_from = regs.rsp;
        th.guard.at_boundary(tid, regs);
        if let Some(at) = hit {
            if th.reported_at != Some(rip) {
                th.reported_at = Some(rip);
                let cost = std::mem::take(&mut th.pending);
                let operand = at.operand(tid, regs);
                core.emit(TraceEvent::Hit {
                    probe: at.index,
                    tid,
                    cost,
                    operand,
                });
            }
        }
    }
}

/// Did this completed syscall (seen at its exit) possibly map or unmap executable code?
/// `mmap`/`mprotect` with `PROT_EXEC`, `munmap`, `mremap`, successful.
fn maps_syscall(r: &libc::user_regs_struct) -> bool {
    let failed = (r.rax as i64) < 0 && (r.rax as i64) >= -4095;
    !failed
        && match r.orig_rax {
            9 | 10 => r.rdx & libc::PROT_EXEC as u64 != 0, // mmap, mprotect
            11 | 25 => true,                               // munmap, mremap
            _ => false,
        }
}

/// Is the instruction at `addr` a REP/REPNE-prefixed string instruction?
fn is_rep_string(tid: Tid, addr: u64) -> bool {
    let (Ok(a), Ok(b)) = (sys::peek(tid, addr), sys::peek(tid, addr + 8)) else {
        return false;
    };
    let bytes = [a.to_le_bytes(), b.to_le_bytes()].concat();
    let mut rep = false;
    for &x in &bytes {
        match x {
            0xf2 | 0xf3 => rep = true,
            0xf0 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x66 | 0x67 | 0x40..=0x4f => {}
            0x6c..=0x6f | 0xa4..=0xa7 | 0xaa..=0xaf => return rep,
            _ => return false,
        }
    }
    false
}

impl Counting for Stepping {
    fn launched(&mut self, pid: Tid) -> Option<String> {
        if !self.bind_cpu {
            return None;
        }
        // Before the program starts: it and every thread it creates stay on the tracer's CPU.
        let (pinned, cpu) = sys::bind_with_child(pid)?;
        self.pinned = Some(pinned);
        Some(format!(
            "program bound to CPU {cpu} with the tracer for speed"
        ))
    }

    fn add_thread(&mut self, tid: Tid, _at_exec: bool) -> Result<(), TraceError> {
        self.threads.insert(tid, Thread::default());
        Ok(())
    }

    fn remove_thread(&mut self, tid: Tid) {
        self.threads.remove(&tid);
    }

    fn take_tail(&mut self, tid: Tid) -> u64 {
        // An in-flight step when the thread exits is the exit syscall (or the
        // instruction a sibling's exit_group interrupted): it retired.
        let th = self.thread(tid);
        let c = th.pending + th.in_flight as u64;
        th.pending = 0;
        th.in_flight = false;
        c
    }

    fn resume(&mut self, tid: Tid, sig: i32) -> Result<(), TraceError> {
        // Never a forced SIGTRAP while the program has SIGTRAP blocked (sigtrap_guard).
        let th = self.thread(tid);
        let sig = th.guard.before_step(tid, sig);
        self.thread(tid).in_flight = true;
        restart(tid, Restart::Step(sig))
    }

    fn exec(&mut self, former: Tid, tid: Tid) -> Result<u64, TraceError> {
        let mut th = self.threads.remove(&former).unwrap_or_default();
        let c = th.pending + th.in_flight as u64; // the execve syscall itself retired
                                                  // We stop inside execve; stepping on from here reports the syscall's
                                                  // exit (TRAP_BRKPT) before the first instruction of the new image.
        th.after_exec = true;
        th.pending = 0;
        th.in_flight = false;
        th.reported_at = None;
        self.threads.insert(tid, th);
        Ok(c)
    }

    fn armed(&mut self, _: &mut Core<'_>, _: Tid, _: &[u64], _: bool) -> Result<(), TraceError> {
        Ok(()) // nothing to patch: marks are found by stepping onto them
    }

    fn at_boundary(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<(), TraceError> {
        let Some(regs) = regs_unless_gone(tid)? else {
            return Ok(());
        };
        self.boundary(core, tid, &regs);
        Ok(())
    }

    fn sigtrap(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<Option<i32>, TraceError> {
        let Some(code) = unless_gone("GETSIGINFO", tid, sys::siginfo_code(tid))? else {
            return Ok(None);
        };
        // Did the in-flight step execute an instruction?
        let Some(regs) = regs_unless_gone(tid)? else {
            return Ok(None);
        };
        let th = self.thread(tid);
        let mut inject = 0;
        let executed = match code {
            // A REP string instruction traps after each iteration with rip unchanged;
            // it retires (and counts) once, when rip moves on.
            sys::TRAP_TRACE if regs.rip == th.step_from && is_rep_string(tid, regs.rip) => 0,
            sys::TRAP_TRACE => 1, // ordinary single-step trap
            sys::TRAP_BRKPT => u64::from(!th.after_exec), // step over a syscall, reported at its exit
            sys::SI_KERNEL => {
                inject = libc::SIGTRAP; // the program's own int3: it executed; deliver its SIGTRAP
                1
            }
            libc::SIGTRAP => 0, // ptrace_notify: stepped into a signal handler, nothing executed
            // A SIGTRAP sent by kill()/raise() while the program blocked it: kept for when
            // the program unblocks SIGTRAP.
            _ if th.guard.keep_blocked_sigtrap(tid) => {
                th.in_flight = false;
                return Ok(Some(0));
            }
            _ => return Ok(Some(libc::SIGTRAP)), // a SIGTRAP sent by kill(): deliver it
        };
        th.after_exec = false;
        th.in_flight = false;
        th.pending += executed;
        let own_trap_flag = core.threads.get(&tid).map_or(0, |t| t.trap_flag);
        if code == sys::TRAP_TRACE && executed == 1 && own_trap_flag == 0 {
            trap_flag::clear_pushed(tid, th.step_from, th.rsp_from, &regs)?;
        }
        if executed == 1 && th.reported_at == Some(th.step_from) {
            th.reported_at = None;
        }
        if code == sys::TRAP_BRKPT && executed == 1 && maps_syscall(&regs) {
            // A library may have been mapped (dlopen, start-up) or unmapped. Its marks are
            // found by stepping onto them: nothing to patch.
            core.rescan()?;
        }
        self.boundary(core, tid, &regs);
        Ok(Some(inject))
    }

    fn stopped(&mut self, tid: Tid) {
        if let Some(th) = self.threads.get_mut(&tid) {
            th.guard.stopped(tid);
        }
    }

    fn interrupted(&mut self, tid: Tid) {
        if let Some(th) = self.threads.get_mut(&tid) {
            th.in_flight = false;
        }
    }
}
