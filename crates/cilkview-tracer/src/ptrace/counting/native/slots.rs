//! A thread's record slot: given at its first stop (or at the set-up of a new image), its
//! `gs_base` pointed at it, its pages mapped, and, for stubs reading instructions, its own
//! counter opened (`instructions.rs`).

use nix::libc;

use super::inject::{self, setup_err};
use super::stub::{Reading, SLOT_BYTES};
use super::{instructions, region, Native};
use crate::ptrace::{regs_unless_gone, unless_gone};
use crate::sys::{self, Tid};
use crate::TraceError;

impl Native {
    /// Give thread `tid` (stopped) a slot and point its `gs_base` at it.
    pub(super) fn give_slot(&mut self, tid: Tid, fresh: bool) -> Result<(), TraceError> {
        let Some(region) = self.region.as_mut() else {
            return Ok(());
        };
        let Some(th) = self.threads.get_mut(&tid) else {
            return Ok(());
        };
        let Some(mut regs) = regs_unless_gone(tid)? else {
            return Ok(());
        };
        if fresh && regs.gs_base != 0 {
            return Err(setup_err(
                tid,
                "the program uses %gs (its thread has a gs base): the native counter cannot run"
                    .into(),
            ));
        }
        let (slot, at) = region.assign(self.tool_pid).ok_or_else(|| {
            setup_err(tid, format!("more than {} threads at once", region::SLOTS))
        })?;
        th.slot = Some(slot);
        th.next = 0;
        regs.gs_base = at;
        if unless_gone("SETREGS", tid, sys::setregs(tid, regs))?.is_none() {
            return Ok(());
        }
        // The slot's pages mapped in the program now: each first write to a page of it would
        // otherwise fault (~3 µs in a virtual machine, every 170 records: measured as a strand
        // outlier every ~20 µs of a fine-grained loop). An older kernel without
        // MADV_POPULATE_WRITE (5.14) refuses it: the faults then stay.
        let mut deferred = Vec::new();
        let populate = [at, SLOT_BYTES, libc::MADV_POPULATE_WRITE as u64, 0, 0, 0];
        if let Err(e) = inject::syscall(
            tid,
            region.injector,
            libc::SYS_madvise,
            populate,
            &mut deferred,
        ) {
            // Killed meanwhile (another thread's exit_group): its exit is reported as usual.
            if regs_unless_gone(tid)?.is_some() {
                return Err(e);
            }
        }
        if region.reading == Reading::Rdpmc {
            match instructions::open(tid, region, slot, &mut deferred) {
                Ok(counter) => (th.counter, th.state.last, th.state.strand) = (Some(counter), 0, 0),
                Err(_) if regs_unless_gone(tid)?.is_none() => {}
                Err(e) => return Err(e),
            }
        }
        if !deferred.is_empty() {
            self.deferred.entry(tid).or_default().extend(deferred);
        }
        Ok(())
    }
}
