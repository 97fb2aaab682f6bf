//! Launching a program under the tracer and running it to its end.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

use nix::errno::Errno;
use nix::libc;

use super::counting::Counting;
use super::{ptrace_err, Thread, Tracer};
use crate::sys::{self, Restart, Tid, Wait};
use crate::{CounterInfo, EventSink, ExitStatus, Outcome, TraceError, TraceOptions};

/// Run `opts.program` to completion under ptrace, counting with `counting`.
pub(crate) fn run<C: Counting>(
    opts: &TraceOptions,
    mut info: CounterInfo,
    counting: C,
    sink: &mut dyn EventSink,
) -> Result<Outcome, TraceError> {
    let (pinned, note) = crate::dispatch::pin(opts, info.unit);
    let opts = &pinned;
    info.notes.extend(note);
    let spawn_err = |source| TraceError::Spawn {
        program: opts.program.clone(),
        source,
    };
    let nul = || {
        spawn_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "argument contains a NUL byte",
        ))
    };
    let program = CString::new(opts.program.as_os_str().as_bytes()).map_err(|_| nul())?;
    let mut argv = vec![program.clone()];
    for a in &opts.args {
        argv.push(CString::new(a.as_bytes()).map_err(|_| nul())?);
    }
    let envp = match opts.environment() {
        Some(vars) => Some(
            vars.iter()
                .map(|v| CString::new(v.as_bytes()).map_err(|_| nul()))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    let mut child = sys::spawn_blocked(&program, &argv, envp.as_deref()).map_err(spawn_err)?;
    crate::signals::forward::launched(child.pid);
    let mut t = Tracer::new(child.pid, counting, sink);
    t.core.nthreads = 1;
    if let Some(note) = t.counting.launched(child.pid) {
        info.notes.push(cilkview_events::Note::new("counter", note));
    }
    let result = t
        .start(&mut child)
        .and_then(|()| t.event_loop(&child, opts));
    crate::signals::forward::ended();
    info.notes.extend(t.counting.summary(t.core.hits));
    match result {
        Ok(status) => Ok(Outcome {
            status,
            counter: info,
            hits: t.core.hits,
            tail_cost: t.core.tail,
            total_cost: t.core.total,
            threads: t.core.nthreads,
        }),
        Err(e) => {
            t.kill_all();
            Err(e)
        }
    }
}

impl<C: Counting> Tracer<'_, C> {
    fn start(&mut self, child: &mut sys::Child) -> Result<(), TraceError> {
        // TRACESYSGOOD: syscall stops (injected calls, `native/inject.rs`) told apart.
        let options = libc::PTRACE_O_TRACESYSGOOD
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACEEXIT
            | libc::PTRACE_O_EXITKILL;
        let pid = self.core.pid;
        sys::seize(pid, options).map_err(|e| match e {
            Errno::EPERM => TraceError::PtraceDenied,
            e => ptrace_err("SEIZE", pid)(e),
        })?;
        // Counted from the exec on: the launcher's own instructions are not the program's.
        self.counting.add_thread(pid, true)?;
        self.core.threads.insert(pid, Thread::default());
        child.release().map_err(|source| TraceError::Spawn {
            program: "(launcher)".into(),
            source,
        })
    }

    fn event_loop(
        &mut self,
        child: &sys::Child,
        opts: &TraceOptions,
    ) -> Result<ExitStatus, TraceError> {
        loop {
            let Some((tid, status)) = self.next_exit(None)? else {
                continue;
            };
            if tid == self.core.pid {
                if !self.core.execed {
                    if let Some(errno) = child.exec_errno() {
                        return Err(TraceError::Exec {
                            program: opts.program.clone(),
                            source: io::Error::from_raw_os_error(errno),
                        });
                    }
                }
                return Ok(status);
            }
        }
    }

    /// After an error: kill the program and reap it.
    fn kill_all(&mut self) {
        let pid: Tid = self.core.pid;
        sys::kill(pid, libc::SIGKILL);
        loop {
            match sys::wait_any() {
                Ok(Wait::Exited(tid, _) | Wait::Signaled(tid, _)) if tid == pid => break,
                Ok(Wait::Stopped { tid, .. }) => {
                    let _ = sys::restart(tid, Restart::Continue(0));
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}
