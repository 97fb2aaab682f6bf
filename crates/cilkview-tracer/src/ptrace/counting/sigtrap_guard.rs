//! Single-stepping without touching the program's SIGTRAP state.
//!
//! A step trap is a *forced* SIGTRAP: when the thread has SIGTRAP blocked at that moment (in its
//! own SIGTRAP handler, in glibc's `pthread_create` or `raise`, anywhere it blocks every signal),
//! the kernel resets the program's SIGTRAP handler to SIG_DFL and unblocks the signal. So, per
//! thread:
//!
//! 1. before a step with SIGTRAP blocked, the guard unblocks it (`PTRACE_SETSIGMASK`) and puts
//!    the program's mask back at the next stop — adjusted when the stepped instruction was a
//!    mask-changing syscall (`rt_sigprocmask`, whose `oldset` then also gets the program's real
//!    old mask; `rt_sigreturn`, whose mask comes from the signal frame);
//! 2. a step onto an `rt_sigprocmask` that will block SIGTRAP reports its completion after the
//!    syscall, with SIGTRAP already blocked: the guard passes the kernel a copy of the set
//!    without SIGTRAP (below the stack's red zone) and sets the intended mask at the next stop;
//! 3. a SIGTRAP of the program's own (`raise`, `kill`) that was pending while blocked, and that
//!    unblocking let through, is kept and delivered (with its siginfo) when the program
//!    unblocks SIGTRAP, as it would have been natively.
//!
//! Left: a program with SIGTRAP *ignored* (SIG_IGN) gets SIG_DFL at its first step (the kernel
//! resets ignored forced signals too); `rt_sigsuspend`/`ppoll`-style temporary masks that block
//! SIGTRAP are not rewritten (their completion trap comes after the temporary mask is undone).

use nix::libc;

use crate::sys::{self, Tid};

/// SIGTRAP's bit in a signal mask.
const TRAP_BIT: u64 = 1 << (libc::SIGTRAP - 1);
/// SIGKILL's and SIGSTOP's bits: never blocked.
const UNBLOCKABLE: u64 = (1 << (libc::SIGKILL - 1)) | (1 << (libc::SIGSTOP - 1));
const RT_SIGPROCMASK: u64 = 14;
const RT_SIGRETURN: u64 = 15;
/// `syscall`.
const SYSCALL_INSN: u64 = 0x050f;

/// A rewritten `rt_sigprocmask` in flight.
#[derive(Clone, Copy, Debug)]
struct Rewrite {
    /// The mask the program asked for.
    intended: u64,
    /// The program's mask before the call (for its `oldset`).
    old: u64,
    /// The program's `set` pointer, restored after the step.
    set_ptr: u64,
    /// Where the copy of the set was written, and what was there.
    scratch: u64,
    scratch_was: u64,
}

/// The SIGTRAP guard of one thread.
#[derive(Default)]
pub(crate) struct Guard {
    /// The program's mask, while SIGTRAP is unblocked for one step.
    saved: Option<u64>,
    rewrite: Option<Rewrite>,
    /// The last stop came while SIGTRAP was unblocked by the guard.
    unmasked: bool,
    /// The next instruction is a `syscall` with rax = rt_sigprocmask or rt_sigreturn (seen at
    /// the boundary): its number.
    syscall_next: Option<u64>,
    /// The syscall the current step runs, if it is one of those.
    syscall_now: Option<u64>,
    owed: Option<libc::siginfo_t>,
}

impl Guard {
    /// The thread is about to execute the instruction at `regs.rip`.
    pub(crate) fn at_boundary(&mut self, tid: Tid, regs: &libc::user_regs_struct) {
        self.syscall_next = (matches!(regs.rax, RT_SIGPROCMASK | RT_SIGRETURN)
            && sys::peek(tid, regs.rip).is_ok_and(|w| w & 0xffff == SYSCALL_INSN))
        .then_some(regs.rax);
    }

    /// Before a step of thread `tid` delivering `sig`: returns the signal to deliver (an owed
    /// SIGTRAP, once the program unblocked it).
    pub(crate) fn before_step(&mut self, tid: Tid, sig: i32) -> i32 {
        self.syscall_now = None;
        if sig != 0 {
            // A signal is delivered: its handler frame must save the program's own mask.
            self.syscall_next = None;
            return sig;
        }
        let Ok(mask) = sys::getsigmask(tid) else {
            return sig;
        };
        self.syscall_now = self.syscall_next.take();
        if self.syscall_now == Some(RT_SIGPROCMASK) {
            self.rewrite = rewrite_sigprocmask(tid, mask);
        }
        if mask & TRAP_BIT != 0 {
            if sys::setsigmask(tid, mask & !TRAP_BIT).is_ok() {
                self.saved = Some(mask);
            }
        } else if let Some(info) = self.owed.take() {
            // The program unblocked SIGTRAP: its pending one arrives now.
            if sys::setsiginfo(tid, &info).is_ok() {
                return libc::SIGTRAP;
            }
        }
        sig
    }

    /// The thread stopped: give it back the mask the program has.
    pub(crate) fn stopped(&mut self, tid: Tid) {
        self.unmasked = self.saved.is_some();
        let saved = self.saved.take();
        if let Some(rw) = self.rewrite.take() {
            finish_rewrite(tid, rw);
            return;
        }
        let Some(saved) = saved else {
            return;
        };
        if let Ok(now) = sys::getsigmask(tid) {
            let mask = mask_after_step(tid, saved, now, self.syscall_now.take());
            let _ = sys::setsigmask(tid, mask);
        }
    }

    /// A SIGTRAP that is not a step's, at a stop: `true` if it was pending while the program
    /// blocked it (kept for later: do not deliver it now).
    pub(crate) fn keep_blocked_sigtrap(&mut self, tid: Tid) -> bool {
        if !self.unmasked {
            return false;
        }
        if let Ok(info) = sys::getsiginfo(tid) {
            self.owed = Some(info);
        }
        true
    }
}

/// The thread is on `syscall` with rax = rt_sigprocmask and the program's mask `mask`: if the
/// call will block SIGTRAP, give the kernel a set without it.
fn rewrite_sigprocmask(tid: Tid, mask: u64) -> Option<Rewrite> {
    let mut regs = sys::getregs(tid).ok()?;
    if regs.rax != RT_SIGPROCMASK || regs.rsi == 0 {
        return None;
    }
    let set = sys::peek(tid, regs.rsi).ok()?;
    let intended = match regs.rdi as i32 {
        libc::SIG_BLOCK => mask | set,
        libc::SIG_UNBLOCK => mask & !set,
        libc::SIG_SETMASK => set,
        _ => return None,
    };
    let intended = intended & !UNBLOCKABLE;
    if intended & TRAP_BIT == 0 {
        return None;
    }
    // Below the 128-byte red zone: nothing of the program's lives there while it is stopped.
    let scratch = (regs.rsp - 512) & !15;
    let scratch_was = sys::peek(tid, scratch).ok()?;
    sys::poke_data(tid, scratch, set & !TRAP_BIT).ok()?;
    let rw = Rewrite {
        intended,
        old: mask,
        set_ptr: regs.rsi,
        scratch,
        scratch_was,
    };
    regs.rsi = scratch;
    if sys::setregs(tid, regs).is_err() {
        let _ = sys::poke_data(tid, scratch, scratch_was);
        return None;
    }
    Some(rw)
}

/// After the rewritten call: the program's pointer and stack bytes back, its intended mask set,
/// its `oldset` holding its real old mask.
fn finish_rewrite(tid: Tid, rw: Rewrite) {
    let Ok(mut regs) = sys::getregs(tid) else {
        return;
    };
    let _ = sys::poke_data(tid, rw.scratch, rw.scratch_was);
    let done = regs.orig_rax == RT_SIGPROCMASK && regs.rax == 0;
    regs.rsi = rw.set_ptr;
    let _ = sys::setregs(tid, regs);
    if done {
        let _ = sys::setsigmask(tid, rw.intended);
        if regs.rdx != 0 {
            let _ = sys::poke_data(tid, regs.rdx, rw.old);
        }
    } else {
        let _ = sys::setsigmask(tid, rw.old);
    }
}

/// The mask the program would have now: the step ran with SIGTRAP unblocked (`saved` was the
/// program's mask), it was `syscall` (one of those the guard watches) or not, and the mask is
/// now `now`.
fn mask_after_step(tid: Tid, saved: u64, now: u64, syscall: Option<u64>) -> u64 {
    let keep = now | (saved & TRAP_BIT);
    match syscall {
        // The mask comes from the signal frame: the program's own.
        Some(RT_SIGRETURN) => return now,
        Some(RT_SIGPROCMASK) => {}
        _ => return keep,
    }
    let Ok(r) = sys::getregs(tid) else {
        return keep;
    };
    match r.orig_rax {
        // Redo rt_sigprocmask(how, set, oldset) on the program's mask.
        RT_SIGPROCMASK if r.rax == 0 => {
            if r.rdx != 0 {
                let _ = sys::poke_data(tid, r.rdx, saved);
            }
            let Some(set) = (r.rsi != 0).then(|| sys::peek(tid, r.rsi).ok()).flatten() else {
                return saved;
            };
            let mask = match r.rdi as i32 {
                libc::SIG_BLOCK => saved | set,
                libc::SIG_UNBLOCK => saved & !set,
                _ => set,
            };
            mask & !UNBLOCKABLE
        }
        // Anything else keeps SIGTRAP as the program had it.
        _ => keep,
    }
}
