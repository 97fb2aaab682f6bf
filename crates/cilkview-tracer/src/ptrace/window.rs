//! Attaching to a running process, measuring a window, and detaching so that it runs on as if
//! never traced.

use std::collections::HashMap;
use std::time::Instant;

use nix::errno::Errno;
use nix::libc;

use super::counting::Counting;
use super::stop_all::{AllStopped, Held};
use super::{ptrace_err, regs_unless_gone, restart, trap_flag, Thread, Tracer};
use crate::kill_point::{self, Phase};
use crate::procfs::{self};
use crate::sys::{self, Restart, Tid};
use crate::{AttachOptions, AttachOutcome, CounterInfo, Ending, EventSink, TraceError, TraceEvent};

/// Options of a seized thread: as `run`, minus `EXITKILL` (the process must
/// survive the tool).
const ATTACH_OPTIONS: libc::c_int = libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT;

/// See `crate::attach`.
pub(crate) fn attach<C: Counting>(
    opts: &AttachOptions,
    info: CounterInfo,
    counting: C,
    sink: &mut dyn EventSink,
) -> Result<AttachOutcome, TraceError> {
    let pid = opts.pid;
    if pid <= 0 || !procfs::exists(pid) {
        return Err(TraceError::NoSuchProcess { pid });
    }
    let me = sys::getpid();
    match procfs::tgid(pid) {
        Err(_) => return Err(TraceError::NoSuchProcess { pid }),
        // Ourselves, or the process the user sees of this tool (`sh -c 'exec cilkview-rs attach
        // $$'`: the worker would trace the process that waits for it).
        Ok(t) if t == me || Some(t) == sys::front_process() => {
            return Err(TraceError::AttachSelf { pid })
        }
        Ok(t) if t != pid => return Err(TraceError::NotAProcess { tid: pid, pid: t }),
        Ok(_) => {}
    }
    let wake = opts
        .stop
        .wake_fd()
        .map_err(|source| TraceError::Proc { pid: me, source })?;
    let mut t = Tracer::new(pid, counting, sink);
    let mut alarm = Alarm { pid: None };
    let result = t.attach_session(opts, wake, &mut alarm);
    alarm.cancel();
    let mut info = info;
    info.notes.extend(t.counting.summary(t.core.hits));
    match result {
        Ok((ending, elapsed)) => Ok(AttachOutcome {
            ending,
            counter: info,
            hits: t.core.hits,
            tail_cost: t.core.tail,
            total_cost: t.core.total,
            threads: t.core.nthreads,
            elapsed,
        }),
        Err(e) => {
            t.abandon();
            Err(e)
        }
    }
}

/// The alarm child of the tracer thread (see `sys::spawn_alarm`).
struct Alarm {
    pid: Option<Tid>,
}

impl Alarm {
    fn cancel(&mut self) {
        if let Some(a) = self.pid.take() {
            sys::kill(a, libc::SIGKILL);
            let _ = sys::wait_for(a);
        }
    }
}

impl<C: Counting> Tracer<'_, C> {
    fn attach_session(
        &mut self,
        opts: &AttachOptions,
        wake: &std::os::fd::OwnedFd,
        alarm: &mut Alarm,
    ) -> Result<(Ending, std::time::Duration), TraceError> {
        let pid = self.core.pid;
        let resume = self.seize_and_stop_all()?;
        if !self.core.threads.contains_key(&pid) {
            return Err(TraceError::ExitedDuringAttach { pid });
        }
        kill_point::reached(Phase::Stopped);
        let group_stopped = resume.values().any(|&h| h == Held::GroupStopped);
        if let Some(reason) = self.counting.refuses(pid, group_stopped) {
            // Nothing is changed yet: each thread goes back to what it was doing (a stopped
            // one stays stopped).
            self.release(&resume);
            return Err(TraceError::NativeRefused { pid, reason });
        }
        // Everything is stopped: set up and start measuring; on an error, restore and detach
        // right here (every thread is still in the stop `stop_all` saw: none would report again).
        match self.start_measuring(&resume) {
            Ok(started) => self.measure(opts, wake, alarm, started),
            Err(e) => {
                let _ = self.detach_all(&resume);
                Err(e)
            }
        }
    }

    /// Seizes the leader, then every thread until /proc/PID/task shows no new one (threads may
    /// be created meanwhile), and stops them all: how each stopped thread goes on.
    fn seize_and_stop_all(&mut self) -> Result<HashMap<Tid, Held>, TraceError> {
        let pid = self.core.pid;
        sys::seize(pid, ATTACH_OPTIONS).map_err(|e| match e {
            Errno::ESRCH => TraceError::NoSuchProcess { pid },
            Errno::EPERM => TraceError::AttachDenied {
                pid,
                reason: procfs::attach_denied_reason(pid),
            },
            e => ptrace_err("SEIZE", pid)(e),
        })?;
        self.core.threads.insert(pid, Thread::default());
        kill_point::reached(Phase::Seized);
        loop {
            while self.seize_new_threads()? {}
            let AllStopped::Held(resume) = self.stop_all(&[])? else {
                return Err(TraceError::ExitedDuringAttach { pid });
            };
            let tasks = procfs::tasks(pid).map_err(|_| TraceError::ExitedDuringAttach { pid })?;
            if tasks.iter().all(|t| self.core.threads.contains_key(t)) {
                return Ok(resume);
            }
            // A thread appeared that no event announced: seize it too.
            // The stopped ones stay stopped (a second interrupt is harmless).
        }
    }

    /// Seizes each thread of /proc/PID/task not seized yet. Returns whether it seized any.
    fn seize_new_threads(&mut self) -> Result<bool, TraceError> {
        let pid = self.core.pid;
        let me = sys::gettid();
        let tasks = procfs::tasks(pid).map_err(|_| TraceError::ExitedDuringAttach { pid })?;
        let mut new = false;
        for tid in tasks {
            if self.core.threads.contains_key(&tid) {
                continue;
            }
            match sys::seize(tid, ATTACH_OPTIONS) {
                Ok(()) => {}
                Err(Errno::ESRCH) => continue, // exited meanwhile
                // Exiting meanwhile (a thread that has begun to exit cannot be seized).
                Err(Errno::EPERM) if procfs::thread_exiting(pid, tid) => continue,
                // Created by a seized thread: already ours (TRACECLONE).
                Err(Errno::EPERM)
                    if procfs::status_field(
                        &format!("/proc/{pid}/task/{tid}/status"),
                        "TracerPid",
                    )
                    .as_deref()
                        == Some(&me.to_string()) => {}
                Err(e) => return Err(ptrace_err("SEIZE", tid)(e)),
            }
            self.core.expected.remove(&tid);
            self.core.threads.insert(tid, Thread::default());
            new = true;
        }
        Ok(new)
    }

    /// Every thread stopped by `stop_all` (`resume`: its signal): note each thread's trap flag as
    /// the program has it (given back at detach: see `trap_flag`), arm, open counters, report the
    /// start, resume. Returns when measuring started.
    fn start_measuring(&mut self, resume: &HashMap<Tid, Held>) -> Result<Instant, TraceError> {
        let pid = self.core.pid;
        let mut tids: Vec<Tid> = self.core.threads.keys().copied().collect();
        tids.sort_unstable();
        for &tid in &tids {
            if let (Some(regs), Some(th)) =
                (regs_unless_gone(tid)?, self.core.threads.get_mut(&tid))
            {
                th.trap_flag = trap_flag::of(&regs);
            }
            self.counting.add_thread(tid, false)?;
        }
        self.arm(pid)?;
        self.core.execed = true;
        self.core.images = 1;
        self.core.nthreads = tids.len() as u32;
        let started = Instant::now();
        let probes = self.core.armed.next;
        self.core.emit(TraceEvent::Exec {
            image: 0,
            tid: pid,
            cost: 0,
            probes,
        });
        for &tid in tids.iter().filter(|&&t| t != pid) {
            self.core.emit(TraceEvent::ThreadStart { tid });
        }
        for &tid in &tids {
            self.counting.at_boundary(&mut self.core, tid)?;
        }
        for (&tid, &held) in resume {
            self.resume_from_stop(tid, held)?;
        }
        kill_point::reached(Phase::Measuring);
        Ok(started)
    }

    /// Measure until a stop request, the deadline or the process's end; then stop every thread
    /// and detach.
    fn measure(
        &mut self,
        opts: &AttachOptions,
        wake: &std::os::fd::OwnedFd,
        alarm: &mut Alarm,
        started: Instant,
    ) -> Result<(Ending, std::time::Duration), TraceError> {
        let pid = self.core.pid;
        let deadline = opts.duration.map(|d| started + d);
        let ending = loop {
            if opts.stop.is_requested() {
                break Ending::Stopped;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break Ending::TimeUp;
            }
            if alarm.pid.is_none() {
                let ms = deadline.map_or(-1, |d| {
                    alarm_ms(d.saturating_duration_since(Instant::now()))
                });
                alarm.pid =
                    Some(
                        sys::spawn_alarm(wake, ms).map_err(|source| TraceError::Proc {
                            pid: sys::getpid(),
                            source,
                        })?,
                    );
            }
            let Some((tid, status)) = self.next_exit(Some(&mut alarm.pid))? else {
                continue;
            };
            if tid == pid {
                return Ok((Ending::Exited(status), started.elapsed()));
            }
        };
        alarm.cancel();
        match self.stop_all(&[])? {
            AllStopped::ProcessEnded(status) => Ok((Ending::Exited(status), started.elapsed())),
            AllStopped::Held(stopped) => {
                let elapsed = started.elapsed();
                self.detach_all(&stopped)?;
                Ok((ending, elapsed))
            }
        }
    }

    /// Resume a thread held by `stop_all` as it recorded.
    fn resume_from_stop(&mut self, tid: Tid, held: Held) -> Result<(), TraceError> {
        match held {
            Held::GroupStopped => restart(tid, Restart::Listen),
            Held::Signal(sig) => self.counting.resume(tid, sig),
        }
    }
}

/// The alarm's timeout for `left` until the deadline, in poll(2)'s milliseconds: rounded up, and
/// at most `i32::MAX` (about 24.8 days; a longer wait takes several alarms, the deadline being
/// checked after each).
fn alarm_ms(left: std::time::Duration) -> i32 {
    i32::try_from(left.as_millis().saturating_add(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::alarm_ms;

    #[test]
    fn alarm_timeouts_never_wrap() {
        assert_eq!(alarm_ms(Duration::ZERO), 1);
        assert_eq!(alarm_ms(Duration::from_millis(1500)), 1501);
        // 2^31 ms and more (--duration 2147483.648 and beyond) used to wrap to a negative
        // ("never") or a tiny timeout (4294967.5 s became 204 ms).
        assert_eq!(alarm_ms(Duration::from_millis(1 << 31)), i32::MAX);
        assert_eq!(alarm_ms(Duration::from_secs_f64(4294967.5)), i32::MAX);
        assert_eq!(alarm_ms(Duration::from_secs(30 * 86400)), i32::MAX);
        assert_eq!(alarm_ms(Duration::MAX), i32::MAX);
    }
}
