//! The event loop: launch, exec handling, probe arming, hits, threads, forks.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::errno::Errno;
use nix::libc;
use perf_event::Counter;

use crate::counter;
use crate::elf;
use crate::procfs::{self, Mapping, Mem};
use crate::sys::{self, Tid, Wait};
use crate::{
    AttachOptions, AttachOutcome, CounterInfo, CounterMode, Ending, ExitStatus, Outcome, Probe,
    TraceError, TraceEvent, TraceOptions,
};

/// In the resume map of `stop_all`: the thread is in a group-stop; resume it
/// with `PTRACE_LISTEN` (it stays stopped until SIGCONT, as without the tool).
const LISTEN: i32 = -1;

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
    /// Hardware mode: instructions to add to the next event's cost (the
    /// native instructions of an emulated loader-hook function, and the
    /// counted work before that stop).
    carry: u64,
}

/// Hardware mode: bytes of the tracee's text replaced by the tracer; each
/// patch starts with an `int3` at `addr`.
#[derive(Clone, Copy, Debug)]
struct Patch {
    addr: u64,
    orig: [u8; 5],
    len: usize,
}

/// Hardware mode: the dynamic loader's debugger hook `r_brk`
/// (`_dl_debug_state`), patched with an `int3` whose stop emulates the
/// function (a bare `ret`) and rescans the mapped files.
#[derive(Clone, Copy, Debug)]
struct LoaderHook {
    addr: u64,
    /// Instructions the function executes natively (`ret`: 1, `endbr64; ret`: 2).
    native: u64,
    /// Address of `_r_debug.r_state` (rescan only when it is `RT_CONSISTENT`),
    /// if the loader exports `_r_debug`; else rescan at every call.
    r_state: Option<u64>,
}

/// A mapped file, by identity: (dev, inode, path, lowest mapping start).
type FileKey = (String, u64, String, u64);

/// The probes of the current executable image and of the files mapped in it.
/// Reset at each exec.
#[derive(Default)]
struct Armed {
    /// address -> (probe index, operand register)
    addrs: HashMap<u64, (usize, Option<u16>)>,
    /// Hardware mode: patched spots (probes with `ARMED`, the loader hook with `int3`).
    patched: Vec<Patch>,
    /// Index of the first probe of the next `probes_for` vector: indices
    /// number the concatenation of all vectors since the exec.
    next: usize,
    /// Files `probes_for` was called for, still mapped -> their probe addresses.
    files: HashMap<FileKey, Vec<u64>>,
    hook: Option<LoaderHook>,
}

/// A file with an executable mapping, as seen in `/proc/PID/maps`.
struct MappedFile {
    key: FileKey,
    /// Start of its lowest mapping (any permissions): the load address.
    base: u64,
    /// `/proc/PID/map_files/...` name of its lowest mapping (opens the
    /// mapped file even if it was deleted or replaced on disk).
    map_file: String,
}

/// The regular files (path starting with '/') having at least one
/// executable mapping, in order of load address.
fn exec_files(pid: Tid, maps: &[Mapping]) -> Vec<MappedFile> {
    let mut by_file: HashMap<(&str, u64, &str), (u64, u64, bool)> = HashMap::new();
    for m in maps.iter().filter(|m| m.path.starts_with('/')) {
        let e = by_file
            .entry((m.dev.as_str(), m.inode, m.path.as_str()))
            .or_insert((m.start, m.end, false));
        if m.start < e.0 {
            (e.0, e.1) = (m.start, m.end);
        }
        e.2 |= m.exec;
    }
    let mut v: Vec<MappedFile> = by_file
        .into_iter()
        .filter(|(_, (_, _, exec))| *exec)
        .map(|((dev, inode, path), (start, end, _))| MappedFile {
            key: (dev.to_string(), inode, path.to_string(), start),
            base: start,
            map_file: format!("/proc/{pid}/map_files/{start:x}-{end:x}"),
        })
        .collect();
    v.sort_by_key(|f| f.base);
    v
}

/// Did this completed syscall (seen at its exit in step mode) possibly map
/// or unmap executable code? `mmap`/`mprotect` with `PROT_EXEC`, `munmap`,
/// `mremap`, successful.
fn maps_syscall(r: &libc::user_regs_struct) -> bool {
    let failed = (r.rax as i64) < 0 && (r.rax as i64) >= -4095;
    !failed
        && match r.orig_rax {
            9 | 10 => r.rdx & libc::PROT_EXEC as u64 != 0, // mmap, mprotect
            11 | 25 => true,                               // munmap, mremap
            _ => false,
        }
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
    /// New tasks announced by a CLONE/FORK/VFORK event whose first stop has not been seen.
    expected: HashSet<Tid>,
    /// New tasks seen (first stop or death) before their parent's event.
    seen_new: HashSet<Tid>,
    /// Step mode with `bind_cpu`: the tracer's own binding, undone when the session ends.
    pinned: Option<sys::PinnedThread>,
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
    let mut t = Tracer::new(child.pid, &info, breakpoints_only, probes_for, on_event);
    t.nthreads = 1;
    let mut info = info;
    if !t.hw && opts.bind_cpu {
        // Before the program starts: it and every thread it creates stay on the tracer's CPU.
        if let Some((pinned, cpu)) = sys::bind_with_child(child.pid) {
            t.pinned = Some(pinned);
            info.reason.push_str(&format!(
                "; program bound to CPU {cpu} with the tracer for speed"
            ));
        }
    }
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
    /// A tracer of process `pid` (not yet seized) counting with `info`.
    fn new(
        pid: Tid,
        info: &CounterInfo,
        breakpoints_only: bool,
        probes_for: P,
        on_event: F,
    ) -> Self {
        Tracer {
            hw: info.kind == CounterMode::Hardware || breakpoints_only,
            count: !breakpoints_only,
            bias: info.bias,
            pid,
            threads: HashMap::new(),
            armed: Armed::default(),
            images: 0,
            execed: false,
            probes_for,
            on_event,
            hits: 0,
            tail: 0,
            total: 0,
            nthreads: 0,
            expected: HashSet::new(),
            seen_new: HashSet::new(),
            pinned: None,
        }
    }

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
            let Some((tid, status)) = self.next_exit(None)? else {
                continue;
            };
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

    /// Waits for the next event of any tracee and handles it. Returns the task that ended, if one
    /// did (its tail already reported); `None` after a stop, or when `alarm` (attach's wake-up
    /// helper child, forgotten here) ended.
    fn next_exit(
        &mut self,
        alarm: Option<&mut Option<Tid>>,
    ) -> Result<Option<(Tid, ExitStatus)>, TraceError> {
        let (tid, status) = match sys::wait_any().map_err(TraceError::Wait)? {
            Wait::Exited(tid, _) | Wait::Signaled(tid, _)
                if alarm.as_ref().is_some_and(|a| **a == Some(tid)) =>
            {
                if let Some(a) = alarm {
                    *a = None;
                }
                return Ok(None);
            }
            Wait::Exited(tid, code) => (tid, ExitStatus::Exited(code)),
            Wait::Signaled(tid, sig) => (tid, ExitStatus::Signaled(sig)),
            Wait::Stopped { tid, sig, event } => {
                self.on_stop(tid, sig, event)?;
                return Ok(None);
            }
        };
        if !self.threads.contains_key(&tid) {
            self.note_seen(tid);
        }
        self.reap(tid);
        Ok(Some((tid, status)))
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
                .map_or(0, |v| {
                    v.saturating_sub(th.base) + std::mem::take(&mut th.carry)
                })
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
        Ok(d.saturating_sub(bias) + std::mem::take(&mut th.carry))
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
            libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                // The new task is handled at its own first stop.
                self.note_new(tid);
                self.resume(tid, 0)
            }
            // PTRACE_EVENT_STOP after LISTEN or an interrupt, anything else: just go on.
            _ => self.resume(tid, 0),
        }
    }

    /// First stop of a task we do not know: a new thread of the program, or a
    /// forked process to hand back untraced.
    fn new_task(&mut self, tid: Tid, sig: i32, event: i32) -> Result<(), TraceError> {
        match self.new_task_stopped(tid, sig, event)? {
            Some(inject) => self.resume(tid, inject),
            None => Ok(()),
        }
    }

    /// A CLONE/FORK/VFORK event of `parent`: remember the new task until its first stop.
    fn note_new(&mut self, parent: Tid) {
        if let Ok(new) = sys::geteventmsg(parent) {
            let new = new as Tid;
            if !self.threads.contains_key(&new) && !self.seen_new.remove(&new) {
                self.expected.insert(new);
            }
        }
    }

    /// A task not in `threads` stopped for the first time or died.
    fn note_seen(&mut self, tid: Tid) {
        if !self.expected.remove(&tid) {
            self.seen_new.insert(tid);
        }
    }

    /// `new_task` without resuming: `Some(signal to resume with)` if it is a
    /// new thread of the program (now in `threads`), `None` if it was a
    /// forked child (detached) or is gone.
    fn new_task_stopped(
        &mut self,
        tid: Tid,
        sig: i32,
        event: i32,
    ) -> Result<Option<i32>, TraceError> {
        self.note_seen(tid);
        let tgid = match procfs::tgid(tid) {
            Ok(t) => t,
            Err(_) => return Ok(None), // already gone
        };
        if tgid != self.pid {
            // A forked child. Unless it shares our memory (vfork / CLONE_VM, where
            // the parent's patches must stay), restore the original NOPs in its
            // copy of the text, then detach: it runs as without the tool.
            // (Probes of the executable and of libraries, and the loader hook.)
            if self.hw && !self.armed.patched.is_empty() && !sys::same_vm(tid, self.pid) {
                let mem = Mem::open(tid).map_err(|source| TraceError::Proc { pid: tid, source })?;
                for p in &self.armed.patched {
                    mem.write(p.addr, &p.orig[..p.len])
                        .map_err(|source| TraceError::Proc { pid: tid, source })?;
                }
            }
            return match sys::detach(tid) {
                Ok(()) | Err(Errno::ESRCH) => Ok(None),
                Err(e) => Err(TraceError::Ptrace {
                    op: "DETACH",
                    tid,
                    source: e,
                }),
            };
        }
        let mut th = Thread::default();
        if !self.execed {
            // Attaching, not measuring yet: counters are opened and starts
            // reported for all threads at once when measuring begins.
            self.threads.insert(tid, th);
            return Ok(Some(if event == 0 { sig } else { 0 }));
        }
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
        Ok(Some(inject))
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
        let probes = self.armed.next;
        self.emit(TraceEvent::Exec {
            image,
            tid,
            cost,
            probes,
        });
        if !self.hw {
            let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
            self.step_boundary(tid, &regs);
        }
        self.resume(tid, 0)
    }

    /// A new executable image (exec, or attach): ask for the probes of the
    /// executable, then of every other file mapped executable (the dynamic
    /// loader at exec; all libraries at attach), arm them, and (hardware
    /// mode) plant the loader hook that announces later `dlopen`s.
    fn arm(&mut self, pid: Tid) -> Result<(), TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        self.armed = Armed::default();
        let exe = procfs::exe(pid).map_err(proc_err)?;
        // A deleted or replaced executable (e.g. rebuilt while running): read
        // the marks through /proc/PID/exe, which still is the running file.
        let probe_path = if exe.exists() {
            exe.clone()
        } else {
            PathBuf::from(format!("/proc/{pid}/exe"))
        };
        let probes = (self.probes_for)(&probe_path).map_err(|message| TraceError::Probes {
            image: exe.clone(),
            message,
        })?;
        let maps = procfs::maps(pid).map_err(proc_err)?;
        let files = exec_files(pid, &maps);
        let exe_name = exe.as_os_str().to_string_lossy();
        let exe_file = files.iter().find(|f| f.key.2 == exe_name);
        let mut addrs = Vec::new();
        if !probes.is_empty() {
            let base = exe_file
                .map(|f| f.base)
                .ok_or_else(|| TraceError::ImageNotMapped {
                    image: exe.clone(),
                    pid,
                })?;
            addrs = self.place(pid, &exe, base, &probes)?;
        }
        if let Some(f) = exe_file {
            self.armed.files.insert(f.key.clone(), addrs);
        }
        self.scan_files(pid, files)?;
        if self.hw {
            self.plant_loader_hook(pid, &maps)?;
        }
        Ok(())
    }

    /// Check and arm the probes of one file loaded at `base`; they get the
    /// next indices. Returns their addresses.
    fn place(
        &mut self,
        pid: Tid,
        image: &Path,
        base: u64,
        probes: &[Probe],
    ) -> Result<Vec<u64>, TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        let mem = Mem::open(pid).map_err(proc_err)?;
        let first = self.armed.next;
        let mut addrs = Vec::with_capacity(probes.len());
        for (i, p) in probes.iter().enumerate() {
            let addr = base.wrapping_add(p.offset);
            let mut found = [0u8; 5];
            if mem.read(addr, &mut found).is_err() || found != MARK_NOP {
                return Err(TraceError::BadProbe {
                    image: image.to_path_buf(),
                    offset: p.offset,
                    found,
                });
            }
            let operand = match p.operand {
                Some(r) if r > 15 => {
                    return Err(TraceError::Probes {
                        image: image.to_path_buf(),
                        message: format!("probe {i}: operand register {r} is not a DWARF x86-64 general register (0-15)"),
                    })
                }
                o => o,
            };
            if self
                .armed
                .addrs
                .insert(addr, (first + i, operand))
                .is_some()
            {
                return Err(TraceError::DuplicateProbe {
                    image: image.to_path_buf(),
                    offset: p.offset,
                });
            }
            addrs.push(addr);
        }
        self.armed.next += probes.len();
        if self.hw {
            for &addr in &addrs {
                mem.write(addr, &ARMED).map_err(proc_err)?;
                self.armed.patched.push(Patch {
                    addr,
                    orig: MARK_NOP,
                    len: 5,
                });
            }
        }
        Ok(addrs)
    }

    /// The mapped files may have changed (a loader notification, an
    /// `mmap`/`munmap` syscall): forget the files no longer mapped and ask
    /// for the probes of the newly mapped ones.
    fn rescan(&mut self) -> Result<(), TraceError> {
        let pid = self.pid;
        let maps = match procfs::maps(pid) {
            Ok(m) => m,
            Err(_) if !procfs::exists(pid) => return Ok(()), // dying
            Err(source) => return Err(TraceError::Proc { pid, source }),
        };
        let files = exec_files(pid, &maps);
        self.scan_files(pid, files)
    }

    fn scan_files(&mut self, pid: Tid, files: Vec<MappedFile>) -> Result<(), TraceError> {
        let current: HashSet<&FileKey> = files.iter().map(|f| &f.key).collect();
        let gone: Vec<FileKey> = self
            .armed
            .files
            .keys()
            .filter(|k| !current.contains(k))
            .cloned()
            .collect();
        for key in gone {
            let addrs = self.armed.files.remove(&key).unwrap_or_default();
            self.forget(pid, &addrs);
        }
        for f in files {
            if self.armed.files.contains_key(&f.key) {
                continue;
            }
            let path = PathBuf::from(&f.key.2);
            // A deleted or replaced file: read it through /proc/PID/map_files.
            let probe_path = if path.exists() {
                path.clone()
            } else {
                PathBuf::from(&f.map_file)
            };
            self.armed.files.insert(f.key.clone(), Vec::new());
            let probes = (self.probes_for)(&probe_path).map_err(|message| TraceError::Probes {
                image: path.clone(),
                message,
            })?;
            if !probes.is_empty() {
                let addrs = self.place(pid, &path, f.base, &probes)?;
                self.armed.files.insert(f.key, addrs);
            }
        }
        Ok(())
    }

    /// A file was unmapped: its probes stop being hit (their indices are not
    /// reused). Patched bytes still present (the mapping lost only its
    /// execute permission) are restored, best effort.
    fn forget(&mut self, pid: Tid, addrs: &[u64]) {
        if addrs.is_empty() {
            return;
        }
        let mem = Mem::open(pid).ok();
        for addr in addrs {
            self.armed.addrs.remove(addr);
            if let Some(i) = self.armed.patched.iter().position(|p| p.addr == *addr) {
                let p = self.armed.patched.swap_remove(i);
                let mut now = [0u8; 5];
                if let Some(mem) = &mem {
                    if mem.read(p.addr, &mut now).is_ok() && now == ARMED {
                        let _ = mem.write(p.addr, &p.orig[..p.len]);
                    }
                }
            }
        }
    }

    /// Hardware mode: patch an `int3` on the dynamic loader's `r_brk`
    /// (`_dl_debug_state`, found through `AT_BASE` and the loader's symbol
    /// table), so that every `dlopen`/`dlclose` (and the start-up loading of
    /// the `DT_NEEDED` libraries) stops the tracer. Silently skipped when
    /// there is no loader (static executables), its symbols cannot be read, or
    /// the function is not a plain `ret` (`[endbr64;] ret`, `rep ret`).
    fn plant_loader_hook(&mut self, pid: Tid, maps: &[Mapping]) -> Result<(), TraceError> {
        const AT_BASE: u64 = 7;
        let Some(at_base) = procfs::auxv(pid, AT_BASE)
            .ok()
            .flatten()
            .filter(|&b| b != 0)
        else {
            return Ok(());
        };
        let Some(ld) = exec_files(pid, maps)
            .into_iter()
            .find(|f| f.base == at_base)
        else {
            return Ok(());
        };
        let path = if Path::new(&ld.key.2).exists() {
            PathBuf::from(&ld.key.2)
        } else {
            PathBuf::from(&ld.map_file)
        };
        let Ok(data) = std::fs::read(&path) else {
            return Ok(());
        };
        let Some(off) = elf::symbol_offset(&data, "_dl_debug_state") else {
            return Ok(());
        };
        // struct r_debug { int r_version; struct link_map *r_map; ElfW(Addr) r_brk; enum r_state; ... }
        let r_state = elf::symbol_offset(&data, "_r_debug").map(|o| at_base + o + 24);
        let addr = at_base + off;
        let mem = Mem::open(pid).map_err(|source| TraceError::Proc { pid, source })?;
        let mut code = [0u8; 5];
        if mem.read(addr, &mut code).is_err() {
            return Ok(());
        }
        let native = match code {
            [0xc3, ..] | [0xf3, 0xc3, ..] => 1,  // ret, rep ret
            [0xf3, 0x0f, 0x1e, 0xfa, 0xc3] => 2, // endbr64; ret
            _ => return Ok(()),
        };
        mem.write(addr, &[0xcc])
            .map_err(|source| TraceError::Proc { pid, source })?;
        self.armed.patched.push(Patch {
            addr,
            orig: code,
            len: 1,
        });
        self.armed.hook = Some(LoaderHook {
            addr,
            native,
            r_state,
        });
        Ok(())
    }

    /// Hardware mode: thread `tid` hit the loader hook. Emulate the `ret`
    /// of `_dl_debug_state`, account its native instructions, and rescan
    /// the mapped files if the link map is consistent.
    fn loader_hook(
        &mut self,
        tid: Tid,
        regs: &libc::user_regs_struct,
        hook: LoaderHook,
    ) -> Result<(), TraceError> {
        let ret = sys::peek(tid, regs.rsp).map_err(ptrace_err("PEEKDATA", tid))?;
        let mut r = *regs;
        r.rip = ret;
        r.rsp = r.rsp.wrapping_add(8);
        sys::setregs(tid, r).map_err(ptrace_err("SETREGS", tid))?;
        let bias = self.bias;
        if let Some(th) = self.threads.get_mut(&tid) {
            if let Some(ctr) = th.counter.as_mut() {
                // Counted: the work since the last event, plus this stop
                // (`bias`: the int3); native: the work plus the function.
                let v = ctr
                    .read()
                    .map_err(|source| TraceError::Counter { tid, source })?;
                th.carry += v.saturating_sub(th.base).saturating_sub(bias) + hook.native;
                th.base = v;
            }
        }
        let consistent = hook
            .r_state
            .map_or(true, |a| sys::peek(tid, a).map_or(true, |v| v as u32 == 0));
        if consistent {
            self.rescan()?;
        }
        Ok(())
    }

    fn on_sigtrap(&mut self, tid: Tid) -> Result<(), TraceError> {
        match self.sigtrap(tid)? {
            Some(inject) => self.resume(tid, inject),
            None => Ok(()),
        }
    }

    /// Account a SIGTRAP signal-delivery-stop of a known thread without
    /// resuming it: `Some(signal to resume with)`, `None` if the thread is gone.
    fn sigtrap(&mut self, tid: Tid) -> Result<Option<i32>, TraceError> {
        let code = match sys::siginfo_code(tid) {
            Ok(c) => c,
            Err(Errno::ESRCH) => return Ok(None),
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
                if let Some(hook) = self
                    .armed
                    .hook
                    .filter(|h| h.addr == regs.rip.wrapping_sub(1))
                {
                    self.loader_hook(tid, &regs, hook)?;
                    return Ok(Some(0));
                }
                if let Some(&(probe, op)) = self.armed.addrs.get(&regs.rip.wrapping_sub(1)) {
                    let cost = self.hw_cost(tid, self.bias)?;
                    let operand = op.map(|r| reg(&regs, r));
                    self.emit(TraceEvent::Hit {
                        probe,
                        tid,
                        cost,
                        operand,
                    });
                    return Ok(Some(0));
                }
            }
            return Ok(Some(libc::SIGTRAP)); // the program's own SIGTRAP
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
            _ => return Ok(Some(libc::SIGTRAP)), // a SIGTRAP sent by kill(): deliver it
        };
        th.after_exec = false;
        th.in_flight = false;
        th.pending += executed;
        if executed == 1 && th.reported_at == Some(th.step_from) {
            th.reported_at = None;
        }
        if code == sys::TRAP_BRKPT && executed == 1 && maps_syscall(&regs) {
            // A library may have been mapped (dlopen, start-up) or unmapped.
            self.rescan()?;
        }
        self.step_boundary(tid, &regs);
        Ok(Some(inject))
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

/// Options of a seized thread: as `run`, minus `EXITKILL` (the process must
/// survive the tool).
const ATTACH_OPTIONS: libc::c_int = libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT;

/// See `crate::attach`. `breakpoints_only`: as in `run`.
pub fn attach<P, F>(
    opts: &AttachOptions,
    info: CounterInfo,
    breakpoints_only: bool,
    probes_for: P,
    on_event: F,
) -> Result<AttachOutcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    let pid = opts.pid;
    if pid <= 0 || !procfs::exists(pid) {
        return Err(TraceError::NoSuchProcess { pid });
    }
    let me = sys::getpid();
    match procfs::tgid(pid) {
        Err(_) => return Err(TraceError::NoSuchProcess { pid }),
        Ok(t) if t == me => return Err(TraceError::AttachSelf { pid }),
        Ok(t) if t != pid => return Err(TraceError::NotAProcess { tid: pid, pid: t }),
        Ok(_) => {}
    }
    let wake = opts
        .stop
        .wake_fd()
        .map_err(|source| TraceError::Proc { pid: me, source })?;
    let mut t = Tracer::new(pid, &info, breakpoints_only, probes_for, on_event);
    let mut alarm = Alarm { pid: None };
    let result = t.attach_session(opts, wake, &mut alarm);
    alarm.cancel();
    match result {
        Ok((ending, elapsed)) => Ok(AttachOutcome {
            ending,
            counter: info,
            hits: t.hits,
            tail_cost: t.tail,
            total_instructions: t.total,
            threads: t.nthreads,
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

impl<P, F> Tracer<P, F>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    fn attach_session(
        &mut self,
        opts: &AttachOptions,
        wake: &std::os::fd::OwnedFd,
        alarm: &mut Alarm,
    ) -> Result<(Ending, std::time::Duration), TraceError> {
        let pid = self.pid;
        // Seize the leader, then every thread until /proc/PID/task shows no
        // new one (threads may be created meanwhile); stop them all.
        sys::seize(pid, ATTACH_OPTIONS).map_err(|e| match e {
            Errno::ESRCH => TraceError::NoSuchProcess { pid },
            Errno::EPERM => TraceError::AttachDenied {
                pid,
                reason: procfs::attach_denied_reason(pid),
            },
            e => TraceError::Ptrace {
                op: "SEIZE",
                tid: pid,
                source: e,
            },
        })?;
        self.threads.insert(pid, Thread::default());
        let me = sys::gettid();
        let resume = loop {
            loop {
                let tasks =
                    procfs::tasks(pid).map_err(|_| TraceError::ExitedDuringAttach { pid })?;
                let mut new = false;
                for tid in tasks {
                    if self.threads.contains_key(&tid) {
                        continue;
                    }
                    match sys::seize(tid, ATTACH_OPTIONS) {
                        Ok(()) => {}
                        Err(Errno::ESRCH) => continue, // exited meanwhile
                        // Created by a seized thread: already ours (TRACECLONE).
                        Err(Errno::EPERM)
                            if procfs::status_field(
                                &format!("/proc/{pid}/task/{tid}/status"),
                                "TracerPid",
                            )
                            .as_deref()
                                == Some(&me.to_string()) => {}
                        Err(e) => {
                            return Err(TraceError::Ptrace {
                                op: "SEIZE",
                                tid,
                                source: e,
                            })
                        }
                    }
                    self.expected.remove(&tid);
                    self.threads.insert(tid, Thread::default());
                    new = true;
                }
                if !new {
                    break;
                }
            }
            let resume = match self.stop_all()? {
                Ok(r) => r,
                Err(_) => return Err(TraceError::ExitedDuringAttach { pid }),
            };
            let tasks = procfs::tasks(pid).map_err(|_| TraceError::ExitedDuringAttach { pid })?;
            if tasks.iter().all(|t| self.threads.contains_key(t)) {
                break resume;
            }
            // A thread appeared that no event announced: seize it too.
            // The stopped ones stay stopped (a second interrupt is harmless).
        };
        if !self.threads.contains_key(&pid) {
            return Err(TraceError::ExitedDuringAttach { pid });
        }
        // Everything is stopped: arm, open counters, start measuring.
        let mut tids: Vec<Tid> = self.threads.keys().copied().collect();
        tids.sort_unstable();
        if self.count && self.hw {
            for &tid in &tids {
                let c = counter::open(tid, false).map_err(|e| match e.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => TraceError::CounterUnavailable {
                        reason: format!(
                            "perf_event_open on thread {tid}: {e}{}",
                            procfs::perf_paranoid_hint()
                        ),
                    },
                    _ => TraceError::Counter { tid, source: e },
                })?;
                self.threads.get_mut(&tid).expect("known").counter = Some(c);
            }
        }
        self.arm(pid)?;
        self.execed = true;
        self.images = 1;
        self.nthreads = tids.len() as u32;
        let started = Instant::now();
        self.emit(TraceEvent::Exec {
            image: 0,
            tid: pid,
            cost: 0,
            probes: self.armed.next,
        });
        for &tid in tids.iter().filter(|&&t| t != pid) {
            self.emit(TraceEvent::ThreadStart { tid });
        }
        if !self.hw {
            for &tid in &tids {
                let regs = sys::getregs(tid).map_err(ptrace_err("GETREGS", tid))?;
                self.step_boundary(tid, &regs);
            }
        }
        for (&tid, &sig) in &resume {
            self.resume_from_stop(tid, sig)?;
        }
        // Measure until a stop request, the deadline or the process's end.
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
                    let left = d.saturating_duration_since(Instant::now());
                    (left.as_millis() as i32).saturating_add(1)
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
        match self.stop_all()? {
            Err(status) => Ok((Ending::Exited(status), started.elapsed())),
            Ok(stopped) => {
                let elapsed = started.elapsed();
                self.detach_all(&stopped)?;
                Ok((ending, elapsed))
            }
        }
    }

    /// Resume a thread stopped by `stop_all` with the signal it recorded.
    fn resume_from_stop(&mut self, tid: Tid, sig: i32) -> Result<(), TraceError> {
        if sig == LISTEN {
            return match sys::listen(tid) {
                Ok(()) | Err(Errno::ESRCH) => Ok(()),
                Err(e) => Err(TraceError::Ptrace {
                    op: "LISTEN",
                    tid,
                    source: e,
                }),
            };
        }
        self.resume(tid, sig)
    }

    /// Stop every thread (`PTRACE_INTERRUPT`) and wait until each one (and
    /// every task announced by a clone/fork event) is in a ptrace-stop or
    /// gone. Returns, per stopped thread, the signal to deliver when it is
    /// resumed or detached (0 none, `LISTEN` group-stop), or the process's
    /// exit status if it ended meanwhile. Stops met on the way are accounted
    /// as usual (hits, steps, thread exits) once measuring has started.
    #[allow(clippy::type_complexity)]
    fn stop_all(&mut self) -> Result<Result<HashMap<Tid, i32>, ExitStatus>, TraceError> {
        let mut stopped: HashMap<Tid, i32> = HashMap::new();
        let mut awaiting: HashSet<Tid> = self.threads.keys().copied().collect();
        for &tid in &awaiting {
            match sys::interrupt(tid) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => {
                    return Err(TraceError::Ptrace {
                        op: "INTERRUPT",
                        tid,
                        source: e,
                    })
                }
            }
        }
        awaiting.extend(self.expected.iter().copied());
        loop {
            // Safety net: a task that no longer exists will never report.
            awaiting.retain(|&t| procfs::exists(t));
            if awaiting.is_empty() {
                return Ok(Ok(stopped));
            }
            let (tid, sig, event) = match sys::wait_any().map_err(TraceError::Wait)? {
                Wait::Exited(tid, code) => {
                    self.gone(tid, &mut awaiting, &mut stopped);
                    if tid == self.pid {
                        return Ok(Err(ExitStatus::Exited(code)));
                    }
                    continue;
                }
                Wait::Signaled(tid, s) => {
                    self.gone(tid, &mut awaiting, &mut stopped);
                    if tid == self.pid {
                        return Ok(Err(ExitStatus::Signaled(s)));
                    }
                    continue;
                }
                Wait::Stopped { tid, sig, event } => (tid, sig, event),
            };
            awaiting.remove(&tid);
            if !self.threads.contains_key(&tid) {
                if let Some(inject) = self.new_task_stopped(tid, sig, event)? {
                    stopped.insert(tid, inject);
                }
                continue;
            }
            match event {
                0 if sig == libc::SIGTRAP => {
                    let inject = if self.execed {
                        self.sigtrap(tid)?
                    } else {
                        Some(libc::SIGTRAP) // not measuring yet: the program's own
                    };
                    if let Some(inject) = inject {
                        if let Some(th) = self.threads.get_mut(&tid) {
                            th.in_flight = false;
                        }
                        stopped.insert(tid, inject);
                    }
                }
                0 => {
                    // Signal-delivery-stop: keep the signal for the resume/detach.
                    if let Some(th) = self.threads.get_mut(&tid) {
                        th.in_flight = false; // a pending step trap would have come first
                    }
                    stopped.insert(tid, sig);
                }
                sys::PTRACE_EVENT_STOP => {
                    // The interrupt (or a group-stop) is reported before pending
                    // signals: a step's or a probe's SIGTRAP may still be queued.
                    // Let it be dequeued (no instruction runs before that) so it
                    // is accounted and never reaches the detached program.
                    if procfs::thread_signal_pending(self.pid, tid, libc::SIGTRAP) {
                        match sys::cont(tid, 0) {
                            Ok(()) => {
                                awaiting.insert(tid);
                                continue;
                            }
                            Err(Errno::ESRCH) => continue,
                            Err(e) => {
                                return Err(TraceError::Ptrace {
                                    op: "CONT",
                                    tid,
                                    source: e,
                                })
                            }
                        }
                    }
                    if let Some(th) = self.threads.get_mut(&tid) {
                        th.in_flight = false; // the step had not executed
                    }
                    let group_stop = matches!(
                        sig,
                        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                    );
                    stopped.insert(tid, if group_stop { LISTEN } else { 0 });
                }
                sys::PTRACE_EVENT_EXIT => {
                    // Exiting: account its tail and let it go; it is not detached.
                    stopped.remove(&tid);
                    self.on_stop(tid, sig, event)?;
                }
                sys::PTRACE_EVENT_EXEC => {
                    // The process exec'd: the old image and its patches are gone,
                    // the other threads too. Only the exec'ing thread remains.
                    let former = sys::geteventmsg(tid).map(|m| m as Tid).unwrap_or(tid);
                    let mut th = self.threads.remove(&former).unwrap_or_default();
                    th.in_flight = false;
                    let others: Vec<Tid> = self.threads.keys().copied().collect();
                    for o in others {
                        self.reap(o);
                    }
                    self.threads.insert(tid, th);
                    self.armed = Armed::default();
                    awaiting.clear();
                    stopped.clear();
                    stopped.insert(tid, 0);
                }
                libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK | libc::PTRACE_EVENT_CLONE => {
                    self.note_new(tid);
                    if let Ok(new) = sys::geteventmsg(tid) {
                        if self.expected.contains(&(new as Tid)) {
                            awaiting.insert(new as Tid);
                        }
                    }
                    stopped.insert(tid, 0);
                }
                _ => {
                    stopped.insert(tid, 0);
                }
            }
        }
    }

    /// A task died while stopping everything.
    fn gone(&mut self, tid: Tid, awaiting: &mut HashSet<Tid>, stopped: &mut HashMap<Tid, i32>) {
        awaiting.remove(&tid);
        stopped.remove(&tid);
        if !self.threads.contains_key(&tid) {
            self.note_seen(tid);
        }
        self.reap(tid);
    }

    /// All threads are stopped: restore the probes, move threads stopped
    /// just past an `int3` back onto the (restored) mark, report each
    /// thread's tail and detach everything, delivering recorded signals.
    fn detach_all(&mut self, stopped: &HashMap<Tid, i32>) -> Result<(), TraceError> {
        let mut first_err = None;
        let patches: Vec<Patch> = self.armed.patched.drain(..).collect();
        let patched: HashSet<u64> = patches.iter().map(|p| p.addr).collect();
        if !patched.is_empty() {
            let pid = self.pid;
            match Mem::open(pid) {
                Ok(mem) => {
                    for p in &patches {
                        if let Err(source) = mem.write(p.addr, &p.orig[..p.len]) {
                            first_err.get_or_insert(TraceError::Proc { pid, source });
                        }
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
                        first_err.get_or_insert(TraceError::Ptrace {
                            op: "SETREGS",
                            tid,
                            source: e,
                        });
                    }
                }
            }
        }
        self.armed = Armed::default();
        // Tails: every live thread's work since its last event.
        let mut live: Vec<Tid> = self
            .threads
            .iter()
            .filter(|(_, th)| !th.exit_reported)
            .map(|(&t, _)| t)
            .collect();
        live.sort_unstable();
        for tid in live {
            let cost = if self.hw {
                self.hw_cost(tid, 0).unwrap_or(0)
            } else {
                std::mem::take(&mut self.threads.get_mut(&tid).expect("known").pending)
            };
            if let Some(th) = self.threads.get_mut(&tid) {
                th.exit_reported = true;
                th.counter = None;
            }
            self.emit(TraceEvent::ThreadExit { tid, cost });
        }
        for &tid in &tids {
            let sig = stopped[&tid];
            match sys::detach_sig(tid, if sig == LISTEN { 0 } else { sig }) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => {
                    first_err.get_or_insert(TraceError::Ptrace {
                        op: "DETACH",
                        tid,
                        source: e,
                    });
                }
            }
        }
        self.threads.clear();
        first_err.map_or(Ok(()), Err)
    }

    /// After an error while attached: stop, restore, detach (best effort);
    /// the process is left running.
    fn abandon(&mut self) {
        if self.threads.is_empty() {
            return;
        }
        if let Ok(Ok(stopped)) = self.stop_all() {
            let _ = self.detach_all(&stopped);
        }
    }
}
