//! The program's trap flag (`TF`, bit 8 of `eflags`), given back after single-steps.
//!
//! For a `PTRACE_SINGLESTEP` the x86 kernel sets `TF` and notes that the tracer set it, so that
//! the next `PTRACE_CONT` or `PTRACE_DETACH` clears it again — unless the stepped instruction
//! writes the flags (`popf`, `iret`): then the kernel takes `TF` as the program's own (a `pushf`
//! under single-stepping saved it set, the `popf` restores it), and the thread, resumed or
//! detached, traps after every instruction: each trap a SIGTRAP for the program, which kills it
//! once it is no longer traced. So whoever steps a thread and then lets it run gives it back the
//! flag the program had: [`put_back`].

use nix::libc;

use super::{regs_unless_gone, unless_gone};
use crate::sys::{self, Tid};
use crate::TraceError;

/// The trap flag (`TF`) in `eflags`.
pub(crate) const TRAP_FLAG: u64 = 1 << 8;

/// The trap flag in `regs` (`TRAP_FLAG` or 0), as the tracer sees it (the kernel hides the one
/// it set for a step itself).
pub(crate) fn of(regs: &libc::user_regs_struct) -> u64 {
    regs.eflags & TRAP_FLAG
}

/// Stopped thread `tid` (its registers now `regs`) should run on with trap flag `tf`: set it if
/// steps changed it. Returns false if the thread is gone.
pub(crate) fn put_back_in(
    tid: Tid,
    mut regs: libc::user_regs_struct,
    tf: u64,
) -> Result<bool, TraceError> {
    if of(&regs) == tf {
        return Ok(true);
    }
    regs.eflags = (regs.eflags & !TRAP_FLAG) | tf;
    Ok(unless_gone("SETREGS", tid, sys::setregs(tid, regs))?.is_some())
}

/// [`put_back_in`] with the thread's current registers. Returns false if the thread is gone.
pub(crate) fn put_back(tid: Tid, tf: u64) -> Result<bool, TraceError> {
    match regs_unless_gone(tid)? {
        Some(regs) => put_back_in(tid, regs, tf),
        None => Ok(false),
    }
}
