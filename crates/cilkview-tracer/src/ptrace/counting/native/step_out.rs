//! Taking a thread out of the way: out of the stub pages before a signal is delivered to it
//! (its registers set, or, waiting for room, single-stepped), or past a mark's NOP about to be
//! replaced (single-stepped); leaving the program's signals and flags as they were.

use super::inject::{end_stepping, sent, STEPPING_MASK};
use super::strands::Item;
use super::stub::Reading;
use super::unwind::{self, Out};
use super::Native;
use crate::procfs::Mem;
use crate::ptrace::{ptrace_err, regs_unless_gone, trap_flag, unless_gone};
use crate::sys::native::rdtsc;
use crate::sys::{self, Restart, Stop, Tid, Wait};
use crate::TraceError;
use nix::libc;

impl Native {
    /// Signal `sig` is about to be delivered to `tid`: if the thread is inside a stub, take it
    /// out first (a handler hitting a mark would share the stub's record). Its registers are
    /// put where they would be had the stub not begun or had it ended ([`unwind`]): nothing
    /// runs, so the signal, its siginfo and the program's mask stay as they are. A thread
    /// waiting for room in the slow path of a [`Reading::Tsc`] stub goes back to the mark, its
    /// wait charged to no strand ([`Native::back_to_the_mark`]); in that of a
    /// [`Reading::Rdpmc`] stub (its wait is instructions, not a pause of the clock) it runs on,
    /// single-stepped ([`Native::run_out_of_stubs`]).
    pub(super) fn leave_stubs(&mut self, tid: Tid) -> Result<(), TraceError> {
        let Some(region) = self.region.as_ref() else {
            return Ok(());
        };
        let Some(regs) = regs_unless_gone(tid)? else {
            return Ok(());
        };
        if !region.in_stubs(regs.rip) {
            return Ok(());
        }
        let mem = Mem::open(tid).map_err(|source| TraceError::Proc { pid: tid, source })?;
        let reading = region.reading;
        let word = |at| mem.word(at);
        match unwind::out_of_stubs(&regs, |rip| region.piece_at(rip, &mem), word) {
            Some(Out::Regs(out)) => unless_gone("SETREGS", tid, sys::setregs(tid, *out)).map(drop),
            Some(Out::Waiting {
                at_mark,
                clock: Some(at),
            }) if reading == Reading::Tsc => self.back_to_the_mark(tid, *at_mark, at),
            Some(Out::Waiting { .. }) => self.run_out_of_stubs(tid),
            None => Ok(()), // in a gadget: no record taken
        }
    }

    /// `tid`, stopped in the slow path waiting since its mark's clock read `at`, goes back to
    /// the mark (registers `at_mark`): the hit is made again after the signal. The wait, from
    /// the mark to the stop, is charged to no strand and counted as a wait for the analysis.
    fn back_to_the_mark(
        &mut self,
        tid: Tid,
        at_mark: libc::user_regs_struct,
        at: u64,
    ) -> Result<(), TraceError> {
        self.collect(tid); // the records before the wait come before the pause
        if let Some(th) = self.threads.get_mut(&tid) {
            let stopped = th.stopped_at.unwrap_or_else(rdtsc);
            th.pending.push(Item::Pause {
                from: at,
                to: stopped,
            });
            self.waits += 1;
            self.waited += stopped.saturating_sub(at);
        }
        unless_gone("SETREGS", tid, sys::setregs(tid, at_mark)).map(drop)
    }

    /// Run `tid`, stopped in the slow path of an rdpmc stub waiting for room, out of the stub
    /// pages: single-stepped, its slot drained meanwhile. Every signal but SIGTRAP is blocked meanwhile
    /// (`PTRACE_SETSIGMASK`, the program's mask put back after): signals arriving during the
    /// steps stay pending for the program instead of stopping it before each step, which,
    /// with signals coming faster than a step's round trip (a fast timer, a loaded machine),
    /// kept the thread from ever leaving the stub. The signal's siginfo is put back after the
    /// steps (each step's trap replaced it: the handler would get the last one's). (A SIGTRAP
    /// the program sends itself at the instant a step traps is one pending SIGTRAP with the
    /// step's: lost. Only here: an rdpmc stub, the ring full as the signal comes.)
    fn run_out_of_stubs(&mut self, tid: Tid) -> Result<(), TraceError> {
        let Some(mask) = unless_gone("GETSIGMASK", tid, sys::getsigmask(tid))? else {
            return Ok(());
        };
        // None at a stop that is not a signal-delivery stop: nothing to put back.
        let info = sys::getsiginfo(tid).ok();
        if unless_gone("SETSIGMASK", tid, sys::setsigmask(tid, STEPPING_MASK))?.is_none() {
            return Ok(());
        }
        if !self.step_out_of_stubs(tid)? {
            return Ok(()); // the thread is gone
        }
        let mut met = Vec::new();
        end_stepping(tid, region_int3(self), &mut met)?;
        self.deferred.entry(tid).or_default().extend(met);
        if let Some(info) = info {
            // Best effort: if refused, the signal goes with the last stop's siginfo.
            let _ = sys::setsiginfo(tid, &info);
        }
        unless_gone("SETSIGMASK", tid, sys::setsigmask(tid, mask)).map(drop)
    }

    /// Single-step `tid` until its `%rip` is out of the stub pages (a stub and its slow path
    /// are a few hundred instructions once the slot is drained; the bound only guards against
    /// a hang), then give it back the trap flag it stopped with (see `trap_flag`). Returns false if it
    /// died.
    fn step_out_of_stubs(&mut self, tid: Tid) -> Result<bool, TraceError> {
        // The program's trap flag, as the thread stopped in the stub (which keeps the flags).
        let mut tf = None;
        for _ in 0..1_000_000 {
            let Some(region) = self.region.as_ref() else {
                return Ok(true);
            };
            let Some(regs) = regs_unless_gone(tid)? else {
                return Ok(false);
            };
            let tf = *tf.get_or_insert(trap_flag::of(&regs));
            if !region.in_stubs(regs.rip) {
                return trap_flag::put_back_in(tid, regs, tf);
            }
            self.collect(tid);
            let how = Restart::Step(0);
            if unless_gone(how.request(), tid, sys::restart(tid, how))?.is_none() {
                return Ok(false);
            }
            match sys::wait_for(tid).map_err(TraceError::Wait)? {
                // Only what cannot be blocked stops it here (SIGSTOP, a SIGTRAP that is not
                // the step's): delivered at its next resume.
                Wait::Stopped {
                    stop: Stop::Signal(sig),
                    ..
                } if sent(tid, sig) => self.deferred.entry(tid).or_default().push(sig),
                Wait::Stopped { .. } => {}
                Wait::Exited(..) | Wait::Signaled(..) => return Ok(false),
            }
        }
        match (tf, regs_unless_gone(tid)?) {
            (Some(tf), Some(regs)) => trap_flag::put_back_in(tid, regs, tf),
            (_, regs) => Ok(regs.is_some()),
        }
    }
}

/// The `int3` of the region's gadget (see [`end_stepping`]).
fn region_int3(native: &Native) -> u64 {
    native.region.as_ref().map_or(0, |r| r.int3)
}

/// Thread `tid` is stopped inside the NOP at `mark`: step it past the NOP (then over the `int3`
/// at `int3`: see [`end_stepping`]).
pub(super) fn step_out_of(
    tid: Tid,
    mark: u64,
    int3: u64,
    deferred: &mut Vec<i32>,
) -> Result<(), TraceError> {
    for _ in 0..8 {
        let Some(regs) = regs_unless_gone(tid)? else {
            return Ok(());
        };
        if regs.rip <= mark || regs.rip >= mark + 5 {
            return end_stepping(tid, int3, deferred);
        }
        sys::restart(tid, Restart::Step(0)).map_err(ptrace_err("SINGLESTEP", tid))?;
        match sys::wait_for(tid).map_err(TraceError::Wait)? {
            Wait::Stopped {
                stop: Stop::Signal(sig),
                ..
            } if sent(tid, sig) => deferred.push(sig),
            Wait::Exited(..) | Wait::Signaled(..) => return Ok(()),
            _ => {}
        }
    }
    end_stepping(tid, int3, deferred)
}
