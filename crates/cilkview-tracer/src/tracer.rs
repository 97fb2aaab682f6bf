//! The event loop: launch, exec handling, probe arming, hits, threads, forks.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::libc;
use perf_event::Counter;

use crate::counter;
use crate::procfs::{self, Mem};
use crate::sys::{self, Tid, Wait};
use crate::{
    CounterInfo, CounterKind, ExitStatus, Outcome, Probe, TraceError, TraceEvent, TraceOptions,
};

/// The bytes of a cilkview mark: `nopl 0x0(%rax,%rax,1)`.
pub const MARK_NOP: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];
/// The armed mark: `int3` then the 4-byte `nopl 0x0(%rax)`; after the trap the
/// thread resumes at addr+1 on a valid instruction.
pub const ARMED: [u8; 5] = [0xcc, 0x0f, 0x1f, 0x40, 0x00];

#[derive(Default)]
struct Thread {
    /// Hardware mode: this thread's counter and its value at the last event.
    counter: Option<Counter>,
    base: u64,
    /// Step mode: instructions since the last event.
    pending: u64,
    /// Step mode: a PTRACE_SINGLESTEP was issued and has not completed yet.
    in_flight: bool,
    /// Step mode: rip the in-flight step started from.
    step_from: u64,
    /// Step mode: a hit reported at this rip, whose NOP has not executed yet.
    reported_at: Option<u64>,
    /// Step mode: just exec'd; the exec syscall's completion report is not an instruction.
    after_exec: bool,
    exit_reported: bool,
}

#[derive(Default)]
struct Armed {
    /// address -> (probe index, operand register)
    addrs: HashMap<u64, (usize, Option<u16>)>,
    /// Hardware mode: addresses patched with `ARMED`.
    patched: Vec<u64>,
}

struct Tracer<P, F> {
    /// Probes are int3-patched (hardware mode, or breakpoints-only testing mode).
    hw: bool,
    /// Open hardware counters (false only in the breakpoints-only testing mode).
    count: bool,
    bias: u64,
    pid: Tid,
    threads: HashMap<Tid, Thread>,
    armed: Armed,
    images: u32,
    execed: bool,
    probes_for: P,
    on_event: F,
    hits: u64,
    tail: u64,
    total: u64,
    nthreads: u32,
}

fn ptrace_err(op: &'static str, tid: Tid) -> impl FnOnce(Errno) -> TraceError {
    move |source| TraceError::Ptrace { op, tid, source }
}

fn reg(regs: &libc::user_regs_struct, dwarf: u16) -> u64 {
    match dwarf {
        0 => regs.rax,
        1 => regs.rdx,
        2 => regs.rcx,
        3 => regs.rbx,
        4 => regs.rsi,
        5 => regs.rdi,
        6 => regs.rbp,
        7 => regs.rsp,
        8 => regs.r8,
        9 => regs.r9,
        10 => regs.r10,
        11 => regs.r11,
        12 => regs.r12,
        13 => regs.r13,
        14 => regs.r14,
        _ => regs.r15,
    }
}

/// Is the instruction at `addr` a REP/REPNE-prefixed string instruction?
fn is_rep_string(tid: Tid, addr: u64) -> bool {
    let (Ok(a), Ok(b)) = (sys::peek(tid, addr), sys::peek(tid, addr + 8)) else {
        return false;
    };
    let bytes = [a.to_le_bytes(), b.to_le_bytes()].concat();
    let mut rep = false;
    for &x in &bytes {
        match x {
            0xf2 | 0xf3 => rep = true,
            0xf0 | 0x2e | 0x36 | 0x3e | 0x26 | 0x64 | 0x65 | 0x66 | 0x67 | 0x40..=0x4f => {}
            0x6c..=0x6f | 0xa4..=0xa7 | 0xaa..=0xaf => return rep,
            _ => return false,
        }
    }
    false
}

/// `breakpoints_only`: patch probes like hardware mode but open no counter
/// (all costs 0) — lets tests exercise the int3 path on machines without a PMU.
pub fn run<P, F>(
    opts: &TraceOptions,
    info: CounterInfo,
    breakpoints_only: bool,
    probes_for: P,
    on_event: F,
) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
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
    let mut child = sys::spawn_blocked(&program, &argv).map_err(spawn_err)?;
    let mut t = Tracer {
        hw: info.kind == CounterKind::Hardware || breakpoints_only,
        count: !breakpoints_only,
        bias: info.bias,
        pid: child.pid,
        threads: HashMap::new(),
        armed: Armed::default(),
        images: 0,
        execed: false,
        probes_for,
        on_event,
        hits: 0,
        tail: 0,
        total: 0,
        nthreads: 1,
    };
    let result = t
        .start(&mut child)
        .and_then(|()| t.event_loop(&child, opts));
    match result {
        Ok(status) => Ok(Outcome {
            status,
            counter: info,
            hits: t.hits,
            tail_cost: t.tail,
            total_instructions: t.total,
            threads: t.nthreads,
        }),
        Err(e) => {
            t.kill_all();
            Err(e)
        }
    }
}

impl<P, F> Tracer<P, F>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    fn start(&mut self, child: &mut sys::Child) -> Result<(), TraceError> {
        let options = libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACEEXIT
            | libc::PTRACE_O_EXITKILL;
        sys::seize(self.pid, options).map_err(|e| match e {
            Errno::EPERM => TraceError::PtraceDenied,
            e => TraceError::Ptrace {
                op: "SEIZE",
                tid: self.pid,
                source: e,
            },
        })?;
        let mut th = Thread::default();
        if self.count && self.hw {
            // Disabled until the exec: the launcher's own instructions are not counted.
            th.counter =
                Some(
                    counter::open(self.pid, true).map_err(|source| TraceError::Counter {
                        tid: self.pid,
                        source,
                    })?,
                );
        }
        self.threads.insert(self.pid, th);
        child.release().map_err(|source| TraceError::Spawn {
            program: "(launcher)".into(),
            source,
        })
    }

    fn emit(&mut self, ev: TraceEvent) {
        self.total += ev.cost();
        match ev {
            TraceEvent::Hit { .. } => self.hits += 1,
            TraceEvent::ThreadExit { cost, .. } => self.tail += cost,
            _ => {}
        }
        (self.on_event)(ev);
    }

    fn event_loop(
        &mut self,
        child: &sys::Child,
        opts: &TraceOptions,
    ) -> Result<ExitStatus, TraceError> {
        loop {
            let (tid, status) = match sys::wait_any().map_err(TraceError::Wait)? {
                Wait::Exited(tid, code) => (tid, ExitStatus::Exited(code)),
                Wait::Signaled(tid, sig) => (tid, ExitStatus::Signaled(sig)),
                Wait::Stopped { tid, sig, event } => {
                    self.on_stop(tid, sig, event)?;
                    continue;
                }
            };
            self.reap(tid);
            if tid == self.pid {
                if !self.execed {
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

    /// A task is gone: report its tail if its exit stop was missed.
    fn reap(&mut self, tid: Tid) {
        if let Some(mut th) = self.threads.remove(&tid) {
            if !th.exit_reported && self.execed {
                let cost = self.exit_cost(&mut th);
                self.emit(TraceEvent::ThreadExit { tid, cost });
            }
        }
    }

    fn exit_cost(&mut self, th: &mut Thread) -> u64 {
        if self.hw {
            th.counter
                .as_mut()
                .and_then(|c| c.read().ok())
                .map_or(0, |v| v.saturating_sub(th.base))
        } else {
            // An in-flight step when the thread exits is the exit syscall (or the
            // instruction a sibling's exit_group interrupted): it retired.
            let c = th.pending + th.in_flight as u64;
            th.pending = 0;
            th.in_flight = false;
            c
        }
    }

    /// Hardware mode: instructions since the last event, minus `bias`.
    fn hw_cost(&mut self, tid: Tid, bias: u64) -> Result<u64, TraceError> {
        let th = self.threads.get_mut(&tid).expect("known thread");
        let Some(ctr) = th.counter.as_mut() else {
            return Ok(0); // breakpoints-only mode
        };
        let v = ctr
            .read()
            .map_err(|source| TraceError::Counter { tid, source })?;
        let d = v.saturating_sub(th.base);
        th.base = v;
        Ok(d.saturating_sub(bias))
    }

    /// Resume a stopped thread, delivering `sig` (0 = none).
    fn resume(&mut self, tid: Tid, sig: i32) -> Result<(), TraceError> {
        let r = if self.hw {
            sys::cont(tid, sig)
        } else {
            if let Some(th) = self.threads.get_mut(&tid) {
                th.in_flight = true;
            }
            sys::step(tid, sig)
        };
        match r {
            Ok(()) | Err(Errno::ESRCH) => Ok(()), // ESRCH: killed meanwhile; its exit will be reported
            Err(e) => Err(TraceError::Ptrace {
                op: if self.hw { "CONT" } else { "SINGLESTEP" },
                tid,
                source: e,
            }),
        }
    }

    fn on_stop(&mut self, tid: Tid, sig: i32, event: i32) -> Result<(), TraceError> {
        if !self.threads.contains_key(&tid) {
            return self.new_task(tid, sig, event);
        }
        match event {
            0 if sig == libc::SIGTRAP => self.on_sigtrap(tid),
            0 => self.resume(tid, sig), // signal-delivery-stop: re-inject unchanged
            sys::PTRACE_EVENT_EXEC => self.on_exec(tid),
            sys::PTRACE_EVENT_EXIT => {
                let mut th = self.threads.remove(&tid).expect("known thread");
                let cost = self.exit_cost(&mut th);
                th.exit_reported = true;
                self.threads.insert(tid, th);
                if self.execed {
                    self.emit(TraceEvent::ThreadExit { tid, cost });
                }
                match sys::cont(tid, 0) {
                    Ok(()) | Err(Errno::ESRCH) => Ok(()),
                    Err(e) => Err(TraceError::Ptrace {
                        op: "CONT",
                        tid,
                        source: e,
                    }),
                }
            }
            sys::PTRACE_EVENT_STOP
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) =>
            {
                // Group-stop: stay stopped (as without the tool) until SIGCONT.
                match sys::listen(tid) {
                    Ok(()) | Err(Errno::ESRCH) => Ok(()),
                    Err(e) => Err(TraceError::Ptrace {
                        op: "LISTEN",
                        tid,
                        source: e,
                    }),
                }
            }
            // FORK/VFORK/CLONE (the new task is handled at its own first stop),
            // PTRACE_EVENT_STOP after LISTEN, anything else: just go on.
            _ => self.resume(tid, 0),
        }
    }

    /// First stop of a task we do not know: a new thread of the program, or a
    /// forked process to hand back untraced.
    fn new_task(&mut self, tid: Tid, sig: i32, event: i32) -> Result<(), TraceError> {
        let tgid = match procfs::tgid(tid) {
            Ok(t) => t,
            Err(_) => return Ok(()), // already gone
        };
        if tgid != self.pid {
            // A forked child. Unless it shares our memory (vfork / CLONE_VM, where
            // the parent's patches must stay), restore the original NOPs in its
            // copy of the text, then detach: it runs as without the tool.
            if self.hw && !self.armed.patched.is_empty() && !sys::same_vm(tid, self.pid) {
                let mem = Mem::open(tid).map_err(|source| TraceError::Proc { pid: tid, source })?;
                for &addr in &self.armed.patched {
                    mem.write(addr, &MARK_NOP)
                        .map_err(|source| TraceError::Proc { pid: tid, source })?;
                }
            }
            return match sys::detach(tid) {
                Ok(()) | Err(Errno::ESRCH) => Ok(()),
                Err(e) => Err(TraceError::Ptrace {
                    op: "DETACH",
                    tid,
                    source: e,
                }),
            };
        }
        let mut th = Thread::default();
        if self.count && self.hw {
            th.counter = Some(
                counter::open(tid, false).map_err(|source| TraceError::Counter { tid, source })?,
            );
        }
        self.threads.insert(tid, th);
        self.nthreads += 1;
        self.emit(TraceEvent::ThreadStart { tid });
        if !self.hw {
            let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
            self.step_boundary(tid, &regs);
        }
        let inject = if event == 0 && sig != libc::SIGTRAP && sig != libc::SIGSTOP {
            sig
        } else {
            0
        };
        self.resume(tid, inject)
    }

    fn on_exec(&mut self, tid: Tid) -> Result<(), TraceError> {
        let former = sys::geteventmsg(tid).map(|m| m as Tid).unwrap_or(tid);
        let mut th = self.threads.remove(&former).unwrap_or_default();
        if former != tid {
            // A non-leader thread exec'd and took over the leader's tid.
            if let Some(mut old) = self.threads.remove(&tid) {
                if !old.exit_reported && self.execed {
                    let cost = self.exit_cost(&mut old);
                    self.emit(TraceEvent::ThreadExit { tid, cost });
                }
            }
        }
        let cost = if self.hw {
            0 // read below, once the state is in the map
        } else {
            let c = th.pending + th.in_flight as u64; // the execve syscall itself retired
                                                      // We stop inside execve; stepping on from here reports the syscall's
                                                      // exit (TRAP_BRKPT) before the first instruction of the new image.
            th.after_exec = true;
            th.pending = 0;
            th.in_flight = false;
            th.reported_at = None;
            c
        };
        self.threads.insert(tid, th);
        let cost = if self.hw { self.hw_cost(tid, 0)? } else { cost };
        self.execed = true;
        self.arm(tid)?;
        let image = self.images;
        self.images += 1;
        self.emit(TraceEvent::Exec { image, tid, cost });
        if !self.hw {
            let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
            self.step_boundary(tid, &regs);
        }
        self.resume(tid, 0)
    }

    /// Ask for the probes of the freshly exec'd image and arm them.
    fn arm(&mut self, pid: Tid) -> Result<(), TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        let exe = procfs::exe(pid).map_err(proc_err)?;
        let probes = (self.probes_for)(&exe).map_err(|message| TraceError::Probes {
            image: exe.clone(),
            message,
        })?;
        self.armed = Armed::default();
        if probes.is_empty() {
            return Ok(());
        }
        let base = procfs::load_address(pid, &exe)
            .map_err(proc_err)?
            .ok_or_else(|| TraceError::ImageNotMapped {
                image: exe.clone(),
                pid,
            })?;
        let mem = Mem::open(pid).map_err(proc_err)?;
        for (i, p) in probes.iter().enumerate() {
            let addr = base.wrapping_add(p.offset);
            let mut found = [0u8; 5];
            if mem.read(addr, &mut found).is_err() || found != MARK_NOP {
                return Err(TraceError::BadProbe {
                    image: exe,
                    offset: p.offset,
                    found,
                });
            }
            let operand = match p.operand {
                Some(r) if r > 15 => {
                    return Err(TraceError::Probes {
                        image: exe,
                        message: format!("probe {i}: operand register {r} is not a DWARF x86-64 general register (0-15)"),
                    })
                }
                o => o,
            };
            if self.armed.addrs.insert(addr, (i, operand)).is_some() {
                return Err(TraceError::DuplicateProbe {
                    image: exe,
                    offset: p.offset,
                });
            }
        }
        if self.hw {
            for &addr in self.armed.addrs.keys() {
                mem.write(addr, &ARMED).map_err(proc_err)?;
                self.armed.patched.push(addr);
            }
        }
        Ok(())
    }

    fn on_sigtrap(&mut self, tid: Tid) -> Result<(), TraceError> {
        let code = match sys::siginfo_code(tid) {
            Ok(c) => c,
            Err(Errno::ESRCH) => return Ok(()),
            Err(e) => {
                return Err(TraceError::Ptrace {
                    op: "GETSIGINFO",
                    tid,
                    source: e,
                })
            }
        };
        if self.hw {
            if code == sys::SI_KERNEL {
                let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
                if let Some(&(probe, op)) = self.armed.addrs.get(&regs.rip.wrapping_sub(1)) {
                    let cost = self.hw_cost(tid, self.bias)?;
                    let operand = op.map(|r| reg(&regs, r));
                    self.emit(TraceEvent::Hit {
                        probe,
                        tid,
                        cost,
                        operand,
                    });
                    return self.resume(tid, 0);
                }
            }
            return self.resume(tid, libc::SIGTRAP); // the program's own SIGTRAP
        }
        // Step mode: did the in-flight step execute an instruction?
        let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
        let th = self.threads.get_mut(&tid).expect("known thread");
        let mut inject = 0;
        let executed = match code {
            // A REP string instruction traps after each iteration with rip unchanged;
            // it retires (and counts) once, when rip moves on.
            sys::TRAP_TRACE if regs.rip == th.step_from && is_rep_string(tid, regs.rip) => 0,
            sys::TRAP_TRACE => 1, // ordinary single-step trap
            sys::TRAP_BRKPT => u64::from(!th.after_exec), // step over a syscall, reported at its exit
            sys::SI_KERNEL => {
                inject = libc::SIGTRAP; // the program's own int3: it executed; deliver its SIGTRAP
                1
            }
            libc::SIGTRAP => 0, // ptrace_notify: stepped into a signal handler, nothing executed
            _ => return self.resume(tid, libc::SIGTRAP), // a SIGTRAP sent by kill(): deliver it
        };
        th.after_exec = false;
        th.in_flight = false;
        th.pending += executed;
        if executed == 1 && th.reported_at == Some(th.step_from) {
            th.reported_at = None;
        }
        self.step_boundary(tid, &regs);
        self.resume(tid, inject)
    }

    /// Step mode: the thread is about to execute the instruction at `regs.rip`.
    fn step_boundary(&mut self, tid: Tid, regs: &libc::user_regs_struct) {
        let rip = regs.rip;
        let hit = self.armed.addrs.get(&rip).copied();
        let th = self.threads.get_mut(&tid).expect("known thread");
        th.step_from = rip;
        if let Some((probe, op)) = hit {
            if th.reported_at != Some(rip) {
                th.reported_at = Some(rip);
                let cost = std::mem::take(&mut th.pending);
                let operand = op.map(|r| reg(regs, r));
                self.emit(TraceEvent::Hit {
                    probe,
                    tid,
                    cost,
                    operand,
                });
            }
        }
    }

    /// After an error: kill the program and reap it.
    fn kill_all(&mut self) {
        sys::kill(self.pid, libc::SIGKILL);
        loop {
            match sys::wait_any() {
                Ok(Wait::Exited(tid, _) | Wait::Signaled(tid, _)) if tid == self.pid => break,
                Ok(Wait::Stopped { tid, .. }) => {
                    let _ = sys::cont(tid, 0);
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    }
}
