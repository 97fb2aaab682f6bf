//! Stopping every thread of the attached process: each one held in a ptrace-stop, with how it
//! goes on when it is resumed or detached.

use std::collections::{HashMap, HashSet};

use nix::libc;

use super::counting::Counting;
use super::{unless_gone, Tracer};
use crate::procfs;
use crate::sys::{self, Restart, Stop, Tid, Wait};
use crate::{ExitStatus, TraceError};

/// How a thread that `stop_all` holds goes on when it is resumed or detached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    /// Delivering this signal (0: none).
    Signal(i32),
    /// In a group-stop: resumed with `PTRACE_LISTEN` it stays stopped until SIGCONT, as without
    /// the tool; detached, it stays stopped.
    GroupStopped,
}

impl Held {
    /// The signal to deliver as the thread is detached.
    pub(super) fn detach_signal(self) -> i32 {
        match self {
            Held::Signal(sig) => sig,
            Held::GroupStopped => 0,
        }
    }
}

/// What `stop_all` ended with.
pub(super) enum AllStopped {
    /// Every thread is in a ptrace-stop: how each goes on.
    Held(HashMap<Tid, Held>),
    /// The process ended meanwhile.
    ProcessEnded(ExitStatus),
}

/// The threads `stop_all` holds and those it waits for.
struct Stopping {
    stopped: HashMap<Tid, Held>,
    awaiting: HashSet<Tid>,
}

impl<C: Counting> Tracer<'_, C> {
    /// Stop every thread (`PTRACE_INTERRUPT`) and wait until each one (and
    /// every task announced by a clone/fork event) is in a ptrace-stop or
    /// gone. Returns how each stopped thread goes on when it is resumed or
    /// detached, or the process's exit status if it ended meanwhile. Stops met
    /// on the way are accounted as usual (hits, steps, thread exits) once
    /// measuring has started.
    pub(super) fn stop_all(&mut self, held: &[Tid]) -> Result<AllStopped, TraceError> {
        // `held`: threads already in a ptrace-stop the tracer saw; an interrupt would not make
        // them report again.
        let mut st = Stopping {
            stopped: held.iter().map(|&t| (t, Held::Signal(0))).collect(),
            awaiting: self.core.threads.keys().copied().collect(),
        };
        st.awaiting.retain(|t| !st.stopped.contains_key(t));
        for &tid in &st.awaiting {
            unless_gone("INTERRUPT", tid, sys::interrupt(tid))?;
        }
        st.awaiting.extend(self.core.expected.iter().copied());
        loop {
            // Safety net: a task that no longer exists will never report.
            st.awaiting.retain(|&t| procfs::exists(t));
            if st.awaiting.is_empty() {
                return Ok(AllStopped::Held(st.stopped));
            }
            let (tid, stop) = match sys::wait_any().map_err(TraceError::Wait)? {
                Wait::Exited(tid, code) => {
                    self.gone(tid, &mut st);
                    if tid == self.core.pid {
                        return Ok(AllStopped::ProcessEnded(ExitStatus::Exited(code)));
                    }
                    continue;
                }
                Wait::Signaled(tid, s) => {
                    self.gone(tid, &mut st);
                    if tid == self.core.pid {
                        return Ok(AllStopped::ProcessEnded(ExitStatus::Signaled(s)));
                    }
                    continue;
                }
                Wait::Stopped { tid, stop } => (tid, stop),
            };
            self.counting.stopped(tid);
            st.awaiting.remove(&tid);
            if !self.core.threads.contains_key(&tid) {
                if let Some(inject) = self.new_task_stopped(tid, stop)? {
                    st.stopped.insert(tid, Held::Signal(inject));
                }
                continue;
            }
            self.hold(tid, stop, &mut st)?;
        }
    }

    /// A task died while stopping everything.
    fn gone(&mut self, tid: Tid, st: &mut Stopping) {
        st.awaiting.remove(&tid);
        st.stopped.remove(&tid);
        if !self.core.threads.contains_key(&tid) {
            self.core.note_seen(tid);
        }
        self.reap(tid);
    }

    /// Thread `tid`, one `stop_all` waits for, reported `stop`: hold it (with how it goes on),
    /// or let it run on until its pending trap is dequeued, or forget it (exiting).
    fn hold(&mut self, tid: Tid, stop: Stop, st: &mut Stopping) -> Result<(), TraceError> {
        match stop {
            Stop::Signal(libc::SIGTRAP) => {
                let inject = if self.core.execed {
                    self.counting.sigtrap(&mut self.core, tid)?
                } else {
                    Some(libc::SIGTRAP) // not measuring yet: the program's own
                };
                if let Some(inject) = inject {
                    self.hold_or_deliver(tid, inject, st)?;
                }
            }
            // Signal-delivery-stop. (A pending step trap would have come first.)
            Stop::Signal(sig) => self.hold_or_deliver(tid, sig, st)?,
            Stop::Group(_) | Stop::Interrupt => {
                // The interrupt (or a group-stop) is reported before pending
                // signals: a step's or a probe's SIGTRAP may still be queued.
                // Let it be dequeued (no instruction runs before that) so it
                // is accounted and never reaches the detached program.
                if procfs::thread_signal_pending(self.core.pid, tid, libc::SIGTRAP) {
                    let how = Restart::Continue(0);
                    if unless_gone(how.request(), tid, sys::restart(tid, how))?.is_some() {
                        st.awaiting.insert(tid);
                    }
                    return Ok(());
                }
                self.counting.interrupted(tid); // the step had not executed
                let held = match stop {
                    Stop::Group(_) => Held::GroupStopped,
                    _ => Held::Signal(0),
                };
                st.stopped.insert(tid, held);
            }
            Stop::Exit => {
                // Exiting: account its tail and let it go; it is not detached.
                st.stopped.remove(&tid);
                self.on_stop(tid, stop)?;
            }
            Stop::Exec => self.exec_while_stopping(tid, st)?,
            Stop::Created => {
                self.core.note_new(tid);
                if let Ok(new) = sys::geteventmsg(tid) {
                    if self.core.expected.contains(&(new as Tid)) {
                        st.awaiting.insert(new as Tid);
                    }
                }
                st.stopped.insert(tid, Held::Signal(0));
            }
            Stop::Syscall | Stop::Other { .. } => {
                st.stopped.insert(tid, Held::Signal(0));
            }
        }
        Ok(())
    }

    /// Thread `tid`, one `stop_all` waits for, is at a stop that goes on with signal `sig`. A
    /// signal for the program is delivered at once where the counter can (the thread is then
    /// held at the interrupt that follows, its handler not begun): held at its signal-delivery
    /// stop, the signal was lost if the tool died before detaching it (the kernel drops it;
    /// measured: the program's SIGTRAP lost in 2-4 of 40 attaches killed while restoring).
    fn hold_or_deliver(&mut self, tid: Tid, sig: i32, st: &mut Stopping) -> Result<(), TraceError> {
        if sig != 0 && self.counting.delivers_while_stopping() {
            self.counting.resume(tid, sig)?;
            if unless_gone("INTERRUPT", tid, sys::interrupt(tid))?.is_some() {
                st.awaiting.insert(tid);
            }
            return Ok(());
        }
        self.counting.interrupted(tid);
        st.stopped.insert(tid, Held::Signal(sig));
        Ok(())
    }

    /// Thread `tid` exec'd while every thread was being stopped: the old image and its patches
    /// are gone, the other threads too. Only the exec'ing thread remains, held.
    fn exec_while_stopping(&mut self, tid: Tid, st: &mut Stopping) -> Result<(), TraceError> {
        let former = sys::geteventmsg(tid).map(|m| m as Tid).unwrap_or(tid);
        let mut th = self.core.threads.remove(&former).unwrap_or_default();
        th.trap_flag = 0; // an exec starts the new image with it clear
        let others: Vec<Tid> = self.core.threads.keys().copied().collect();
        for o in others {
            self.reap(o);
        }
        self.core.threads.insert(tid, th);
        self.counting.flush(&mut self.core, former)?;
        self.counting.exec(former, tid)?;
        self.counting.interrupted(tid);
        self.core.armed = Default::default();
        st.awaiting.clear();
        st.stopped.clear();
        st.stopped.insert(tid, Held::Signal(0));
        Ok(())
    }
}
