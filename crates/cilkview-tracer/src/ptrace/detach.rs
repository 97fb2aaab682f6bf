//! Leaving the attached process: its probes restored, every thread's tail reported, each
//! thread detached with the signal it held, as if never traced.

use std::collections::{HashMap, HashSet};

use super::counting::Counting;
use super::stop_all::{AllStopped, Held};
use super::{ptrace_err, restart, trap_flag, Tracer};
use crate::kill_point::{self, Phase};
use crate::procfs::{self, Mem};
use crate::sys::{self, Restart, Tid};
use crate::TraceError;

impl<C: Counting> Tracer<'_, C> {
    /// All threads are stopped: restore the probes, move threads stopped
    /// just past an `int3` back onto the (restored) mark, report each
    /// thread's tail and detach everything, delivering recorded signals.
    pub(super) fn detach_all(&mut self, stopped: &HashMap<Tid, Held>) -> Result<(), TraceError> {
        let mut first_err = None;
        let patches: Vec<_> = self.core.armed.patched.drain(..).collect();
        let patched: HashSet<u64> = patches.iter().map(|p| p.addr).collect();
        if !patched.is_empty() {
            let pid = self.core.pid;
            match Mem::open(pid) {
                Ok(mem) => {
                    for p in &patches {
                        if let Err(source) = mem.write(p.addr, &p.orig[..p.len]) {
                            first_err.get_or_insert(TraceError::Proc { pid, source });
                        }
                        kill_point::reached(Phase::Restoring);
                    }
                }
                Err(source) => {
                    first_err.get_or_insert(TraceError::Proc { pid, source });
                }
            }
        }
        let mut tids: Vec<Tid> = stopped.keys().copied().collect();
        tids.sort_unstable();
        for &tid in &tids {
            if patched.is_empty() {
                break;
            }
            if let Ok(mut regs) = sys::getregs(tid) {
                if patched.contains(&regs.rip.wrapping_sub(1)) {
                    // After an int3, rip is inside the restored 5-byte NOP (or
                    // the loader hook's first instruction): rerun it whole.
                    regs.rip -= 1;
                    if let Err(e) = sys::setregs(tid, regs) {
                        first_err.get_or_insert(ptrace_err("SETREGS", tid)(e));
                    }
                }
            }
        }
        self.core.armed = Default::default();
        // Tails: every live thread's work since its last event.
        let mut live: Vec<Tid> = self
            .core
            .threads
            .iter()
            .filter(|(_, th)| !th.exit_reported)
            .map(|(&t, _)| t)
            .collect();
        live.sort_unstable();
        for tid in live {
            self.report_exit(tid);
            self.counting.remove_thread(tid);
        }
        kill_point::reached(Phase::Detaching);
        for &tid in &tids {
            // Single-steps may have left the trap flag set: the program's own back.
            let tf = self.core.threads.get(&tid).map_or(0, |th| th.trap_flag);
            if let Err(e) = trap_flag::put_back(tid, tf) {
                first_err.get_or_insert(e);
            }
            if let Err(e) = restart(tid, Restart::Detach(stopped[&tid].detach_signal())) {
                first_err.get_or_insert(e);
            }
        }
        self.core.threads.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// Detach every thread stopped by `stop_all` before anything was changed in the process,
    /// each with the signal it stopped with (a group-stopped one stays stopped).
    pub(super) fn release(&mut self, stopped: &HashMap<Tid, Held>) {
        for (&tid, &held) in stopped {
            let _ = sys::restart(tid, Restart::Detach(held.detach_signal()));
        }
        self.core.threads.clear();
    }

    /// After an error while attached: stop, restore, detach (best effort);
    /// the process is left running.
    pub(super) fn abandon(&mut self) {
        if self.core.threads.is_empty() {
            return;
        }
        // A thread the error left in a stop (`t` in /proc) would never report to an interrupt.
        let held: Vec<Tid> = (self.core.threads.keys().copied())
            .filter(|&t| procfs::in_trace_stop(t))
            .collect();
        if let Ok(AllStopped::Held(stopped)) = self.stop_all(&held) {
            let _ = self.detach_all(&stopped);
        }
    }
}
