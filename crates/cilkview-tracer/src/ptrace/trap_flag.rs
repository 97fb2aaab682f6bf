//! The program's trap flag (`TF`, bit 8 of `eflags`), given back after single-steps.
//!
//! For a `PTRACE_SINGLESTEP` the x86 kernel sets `TF` and notes that the tracer set it, so that
//! the next `PTRACE_CONT` or `PTRACE_DETACH` clears it again — unless the stepped instruction
//! writes the flags (`popf`, `iret`): then the kernel takes `TF` as the program's own (a `pushf`
//! under single-stepping saved it set, the `popf` restores it), and the thread, resumed or
//! detached, traps after every instruction: each trap a SIGTRAP for the program, which kills it
//! once it is no longer traced. So whoever steps a thread and then lets it run gives it back the
//! flag the program had: [`put_back`].
//!
//! A stepped `pushf` saves `TF` set in the program's memory, where no register put back reaches
//! it: detached between that `pushf` and its `popf`, the program's own `popf` set `TF` and the
//! next instruction's trap killed it (fixtures/popf_rounds.c under `attach --counter step`, in
//! about one try of eight). So whoever steps every instruction clears it there as the `pushf`
//! completes: [`clear_pushed`].

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

/// Thread `tid` just completed one single-step from `from` with `%rsp` at `rsp_from`, its
/// registers now `regs`: if that instruction was a `pushf` (`9c`, `48 9c`, or `66 9c` for the
/// 16-bit flags), clear the step's `TF` in the flags it saved, as a `pushf` run without the tool
/// saves them (for a program whose own trap flag is clear). Anything else is left alone; a
/// thread gone meanwhile is no error.
pub(crate) fn clear_pushed(
    tid: Tid,
    from: u64,
    rsp_from: u64,
    regs: &libc::user_regs_struct,
) -> Result<(), TraceError> {
    let (len, pushed) = (regs.rip.wrapping_sub(from), rsp_from.wrapping_sub(regs.rsp));
    if !matches!((len, pushed), (1, 8) | (2, 8) | (2, 2)) {
        return Ok(()); // not the length and stack move of a pushf: no memory read
    }
    let Some(code) = unless_gone("PEEKDATA", tid, sys::peek(tid, from))? else {
        return Ok(());
    };
    let [b0, b1, ..] = code.to_le_bytes();
    let pushf = match (len, pushed) {
        (1, 8) => b0 == 0x9c,
        (2, 8) => (0x40..=0x4f).contains(&b0) && b1 == 0x9c,
        _ => b0 == 0x66 && b1 == 0x9c,
    };
    if !pushf {
        return Ok(());
    }
    let Some(saved) = unless_gone("PEEKDATA", tid, sys::peek(tid, regs.rsp))? else {
        return Ok(());
    };
    if saved & TRAP_FLAG == 0 {
        return Ok(());
    }
    unless_gone(
        "POKEDATA",
        tid,
        sys::poke_data(tid, regs.rsp, saved & !TRAP_FLAG),
    )
    .map(drop)
}
