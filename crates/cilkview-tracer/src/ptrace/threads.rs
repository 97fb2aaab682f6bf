//! Tasks coming and going: new threads of the program, forked children (handed back untraced),
//! and execs (a new image: its probes are armed anew).

use nix::libc;

use super::counting::Counting;
use super::{restart, trap_flag, Core, Thread, Tracer};
use crate::procfs::{self, Mem};
use crate::sys::{self, Restart, Stop, Tid};
use crate::{TraceError, TraceEvent};

impl Core<'_> {
    /// A CLONE/FORK/VFORK event of `parent`: remember the new task until its first stop.
    pub(crate) fn note_new(&mut self, parent: Tid) {
        if let Ok(new) = sys::geteventmsg(parent) {
            let new = new as Tid;
            if !self.threads.contains_key(&new) && !self.seen_new.remove(&new) {
                self.expected.insert(new);
                let tf = self.threads.get(&parent).map_or(0, |th| th.trap_flag);
                if tf != 0 {
                    self.inherited_trap_flag.insert(new, tf);
                }
            }
        }
    }

    /// A task not in `threads` stopped for the first time or died.
    pub(crate) fn note_seen(&mut self, tid: Tid) {
        self.inherited_trap_flag.remove(&tid);
        if !self.expected.remove(&tid) {
            self.seen_new.insert(tid);
        }
    }
}

impl<C: Counting> Tracer<'_, C> {
    /// First stop of a task we do not know: a new thread of the program, or a
    /// forked process to hand back untraced.
    pub(super) fn new_task(&mut self, tid: Tid, stop: Stop) -> Result<(), TraceError> {
        match self.new_task_stopped(tid, stop)? {
            Some(inject) => self.counting.resume(tid, inject),
            None => Ok(()),
        }
    }

    /// `new_task` without resuming: `Some(signal to resume with)` if it is a
    /// new thread of the program (now in `threads`), `None` if it was a
    /// forked child (detached) or is gone.
    pub(super) fn new_task_stopped(
        &mut self,
        tid: Tid,
        stop: Stop,
    ) -> Result<Option<i32>, TraceError> {
        let core = &mut self.core;
        // The program's trap flag is its creator's (a task seen before its creator's event: clear).
        let tf = core.inherited_trap_flag.get(&tid).copied().unwrap_or(0);
        core.note_seen(tid);
        let tgid = match procfs::tgid(tid) {
            Ok(t) => t,
            Err(_) => return Ok(None), // already gone
        };
        if tgid != core.pid {
            // A forked child. Unless it shares our memory (vfork / CLONE_VM, where
            // the parent's patches must stay), restore the original bytes in its
            // copy of the text, then detach: it runs as without the tool.
            // (Probes of the executable and of libraries, and the loader hook.)
            if sys::same_vm(tid, core.pid) {
                self.counting.unmeasured_sharer(tid)?;
            } else if !core.armed.patched.is_empty() {
                let mem = Mem::open(tid).map_err(|source| TraceError::Proc { pid: tid, source })?;
                for p in &core.armed.patched {
                    mem.write(p.addr, &p.orig[..p.len])
                        .map_err(|source| TraceError::Proc { pid: tid, source })?;
                }
            }
            // Created by a single-stepped thread, it may carry the trap flag a stepped `popf`
            // left set (see `trap_flag`).
            if !trap_flag::put_back(tid, tf)? {
                return Ok(None); // gone
            }
            restart(tid, Restart::Detach(0))?;
            return Ok(None);
        }
        core.threads.insert(
            tid,
            Thread {
                trap_flag: tf,
                ..Thread::default()
            },
        );
        if !core.execed {
            // Attaching, not measuring yet: counting starts and starts are
            // reported for all threads at once when measuring begins.
            return Ok(Some(stop.signal().unwrap_or(0)));
        }
        self.counting.add_thread(tid, false)?;
        self.core.nthreads += 1;
        self.core.emit(TraceEvent::ThreadStart { tid });
        self.counting.at_boundary(&mut self.core, tid)?;
        let inject = match stop {
            Stop::Signal(sig) if sig != libc::SIGTRAP && sig != libc::SIGSTOP => sig,
            _ => 0,
        };
        Ok(Some(inject))
    }

    pub(super) fn on_exec(&mut self, tid: Tid) -> Result<(), TraceError> {
        let former = sys::geteventmsg(tid).map(|m| m as Tid).unwrap_or(tid);
        if former != tid {
            // A non-leader thread exec'd and took over the leader's tid.
            self.reap(tid);
        }
        let mut th = self.core.threads.remove(&former).unwrap_or_default();
        th.trap_flag = 0; // an exec starts the new image with it clear
        self.core.threads.insert(tid, th);
        if self.core.execed {
            self.counting.flush(&mut self.core, former)?;
        }
        let cost = self.counting.exec(former, tid)?;
        self.core.execed = true;
        self.arm(tid)?;
        let image = self.core.images;
        self.core.images += 1;
        let probes = self.core.armed.next;
        self.core.emit(TraceEvent::Exec {
            image,
            tid,
            cost,
            probes,
        });
        self.counting.at_boundary(&mut self.core, tid)?;
        self.counting.resume(tid, 0)
    }

    /// A new executable image (exec, or attach): place the probes of every file mapped
    /// executable and let counting arm them.
    pub(super) fn arm(&mut self, pid: Tid) -> Result<(), TraceError> {
        let addrs = self.core.arm(pid)?;
        self.counting.armed(&mut self.core, pid, &addrs, true)
    }
}
