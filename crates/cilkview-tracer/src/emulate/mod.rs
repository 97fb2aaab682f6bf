//! Counting by emulation: the program runs under `qemu-x86_64` (user mode)
//! with the cilkview TCG plugin (crate `cilkview-qemu-plugin`), which counts
//! each thread's instructions exactly and streams the marks' hits here through
//! a ring in shared memory (`ring.rs`). Same events and invariant as [`crate::run`]. See `docs/emulation.md`.

mod emulator;
pub(crate) mod isa;
mod launch;
mod program;
mod protocol;
mod ring;
mod world;

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;

use nix::libc;

pub use emulator::{EmulatorError, CPU_MODEL};
pub use program::read_shebang;
pub use program::Refusal;
pub(crate) use program::{inspect_program, set_id};
use protocol::Record;

use crate::probe_check::check_probes;
use crate::procfs::{self, Mem};
use crate::{
    CounterInfo, CounterMode, EventSink, ExitStatus, Outcome, Probe, TraceError, TraceEvent,
    TraceOptions,
};

/// What an emulated run did beyond its events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmulationNotes {
    /// The emulator used (path and version line).
    pub emulator: String,
    /// The program exec'd this image, which qemu-user ran natively: nothing
    /// after the exec is counted (the threads' costs end at the exec).
    pub native_exec: Option<PathBuf>,
    /// Images the program exec'd that ran under the emulator, counted (the plugin follows an
    /// exec of an x86-64 ELF program or of a script whose interpreter is one), in order.
    pub followed_execs: Vec<PathBuf>,
    /// Processes the program forked: they ran unharmed, uncounted.
    pub forked_children: Vec<i32>,
}

/// Whether a plugin-capable `qemu-x86_64` is installed: `Ok(what was found)`
/// (path and version), or `Err(why not, and the fix)`.
pub fn emulator_available() -> Result<String, EmulatorError> {
    emulator::find().map(|e| format!("{} ({})", e.path.display(), e.version))
}

/// Run `opts.program` to completion under the emulator, feeding `sink`. The same contract as
/// the ptrace backend: `probes_for` is asked for the executable, its loader, and each file
/// mapped executable later, in mapping order; events arrive in order; their costs add up to
/// [`Outcome::total_cost`]. The counts are those of the emulated CPU [`CPU_MODEL`].
/// `opts.counter` and `opts.bind_cpu` are ignored. Also returns what ran outside the count
/// (forked children, an exec'd image); the counter's notes say it too.
pub fn run_emulated(
    opts: &TraceOptions,
    sink: &mut dyn EventSink,
) -> Result<(Outcome, EmulationNotes), TraceError> {
    let emu = emulator::find().map_err(|e| TraceError::CounterUnavailable {
        mode: CounterMode::Emulate,
        reason: e.to_string(),
    })?;
    let (pinned, dispatch) = crate::dispatch::pin(opts, cilkview_events::CostUnit::Instructions);
    let opts = &pinned;
    let (program, how) = program::check_program(opts)?;
    let mut launched = launch::launch(&emu, &program, &how, opts)?;
    let pid = launched.child.id() as i32;
    // Signals sent to the tool go to QEMU, which delivers them to the program.
    crate::signals::forward::launched(pid);
    let mut s = EmulatedRun::new(pid, opts.program.clone());
    let pumped = s.pump(&mut launched, sink);
    if let Err(e) = pumped {
        let _ = launched.child.kill();
        let _ = launched.child.wait();
        crate::signals::forward::ended();
        return Err(e);
    }
    let status = launched.child.wait().map_err(TraceError::Wait);
    if !s.at_exit {
        // No exit path ran in QEMU: what the threads had buffered is in the shared slots.
        s.leftovers(&mut launched.threads, &mut launched.replies, sink)?;
    }
    drop(launched.replies);
    crate::signals::forward::ended();
    let status = status?;
    let status = s.finish(status, sink)?;
    let notes = EmulationNotes {
        emulator: format!("{} ({})", emu.path.display(), emu.version),
        native_exec: s.native_exec.clone(),
        followed_execs: s.followed.clone(),
        forked_children: s.forks.clone(),
    };
    let outcome = Outcome {
        status,
        counter: CounterInfo {
            kind: CounterMode::Emulate,
            reason: "emulated".into(),
            notes: s
                .notes(&emu, &program, &notes, status)
                .into_iter()
                .chain(dispatch)
                .collect(),
            bias: 0,
            unit: cilkview_events::CostUnit::Instructions,
        },
        hits: s.hits,
        tail_cost: s.tail,
        total_cost: s.total,
        threads: s.seen.len() as u32,
    };
    Ok((outcome, notes))
}

/// The plugin sent something that is not its protocol.
fn bad(m: String) -> TraceError {
    TraceError::Emulator {
        message: format!("corrupt record stream from the emulator's plugin: {m}"),
    }
}

/// The analyzer's side of one run.
struct EmulatedRun {
    pid: i32,
    program: PathBuf,
    next: usize,
    started: bool,
    seen: HashSet<i32>,
    live: HashSet<i32>,
    hits: u64,
    tail: u64,
    total: u64,
    /// Thread counts at an exec the program attempted, its path and the thread that made it.
    snapshot: HashMap<i32, u64>,
    exec_path: Option<Vec<u8>>,
    exec_tid: i32,
    /// Images started so far (the executable, then each one exec'd under the emulator), and
    /// the cost the next one's `Exec` event carries (the exec'ing thread's count at its exec).
    images: u32,
    exec_cost: u64,
    /// Images the program exec'd that ran under the emulator (counted), in order.
    followed: Vec<PathBuf>,
    native_exec: Option<PathBuf>,
    at_exit: bool,
    /// The program died of this signal, sent by no thread of its own (a fault, a kill from
    /// outside): QEMU 7.2 ran no plugin callback; the buffered hits and the threads' counts were
    /// read from the shared slots (`leftovers`).
    lost_at_death: Option<i32>,
    forks: Vec<i32>,
    self_signals: HashSet<i32>,
    /// The thread of the previous record (0: none): seen, and snapshot dropped.
    last_tid: i32,
    /// The plugin's descriptors the program closed (`Record::FdsLost`), and the files it mapped
    /// for execution after the reply pipe was closed (not instrumented).
    fds_lost: u64,
    unseen: Vec<PathBuf>,
    /// What the emulator changed in the program's world (`Record::World`), in order.
    world: std::collections::BTreeSet<(u8, u32)>,
    /// The program died of a signal nothing in it sent (SIGILL, SIGABRT): it may be the
    /// emulator's own (an instruction it lacks, a failed assertion), said in the reason.
    unexplained: Option<i32>,
}

impl EmulatedRun {
    fn new(pid: i32, program: PathBuf) -> EmulatedRun {
        EmulatedRun {
            pid,
            program,
            next: 0,
            started: false,
            seen: HashSet::from([pid]),
            live: HashSet::from([pid]),
            hits: 0,
            tail: 0,
            total: 0,
            snapshot: HashMap::new(),
            exec_path: None,
            exec_tid: 0,
            images: 0,
            exec_cost: 0,
            followed: Vec::new(),
            native_exec: None,
            at_exit: false,
            lost_at_death: None,
            forks: Vec::new(),
            self_signals: HashSet::new(),
            last_tid: 0,
            fds_lost: 0,
            unseen: Vec::new(),
            world: std::collections::BTreeSet::new(),
            unexplained: None,
        }
    }

    fn emit(&mut self, sink: &mut dyn EventSink, ev: TraceEvent) {
        self.total += ev.cost();
        match ev {
            TraceEvent::Hit { .. } => self.hits += 1,
            TraceEvent::ThreadExit { cost, .. } => self.tail += cost,
            _ => {}
        }
        sink.event(ev);
    }

    fn thread(&mut self, sink: &mut dyn EventSink, tid: i32) {
        if tid == self.last_tid {
            return;
        }
        self.last_tid = tid;
        if !self.snapshot.is_empty() {
            // A later event of the thread: its snapshot is stale.
            self.snapshot.remove(&tid);
        }
        if self.seen.insert(tid) {
            self.live.insert(tid);
            self.emit(sink, TraceEvent::ThreadStart { tid });
        }
    }

    /// Read and act on the plugin's records until every writer closed the bell pipe and the ring
    /// is empty.
    fn pump(
        &mut self,
        l: &mut launch::Launched,
        sink: &mut dyn EventSink,
    ) -> Result<(), TraceError> {
        let mut ring = ring::RingReader::new(&l.ring).map_err(TraceError::Wait)?;
        let pid = nix::unistd::Pid::from_raw(self.pid);
        loop {
            // The bell ends when QEMU exits, or earlier if the program closed the plugin's end
            // (close_range): then QEMU's process says whether the stream is over. After QEMU's
            // exit path ran, the end is the end.
            let at_exit = self.at_exit;
            let mut alive = || {
                use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
                let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
                !at_exit && matches!(waitid(Id::Pid(pid), flags), Ok(WaitStatus::StillAlive))
            };
            match ring.next(&mut &l.bell, &mut alive) {
                Ok(Some(c)) if c.hits_only => self.hits(c.tid, ring.words(c.range), sink),
                Ok(Some(c)) => self.chunk(c.tid, ring.words(c.range), &mut l.replies, sink)?,
                Ok(None) => return Ok(()),
                Err(ring::ReadError::Io(e)) => return Err(TraceError::Wait(e)),
                Err(ring::ReadError::Bad(m)) => return Err(bad(m)),
            }
        }
    }

    /// A chunk of thread `tid` whose words are all hits without operands (the plugin says so:
    /// nearly every chunk), handed over as they are, not looked through.
    fn hits(&mut self, tid: i32, words: &[u64], sink: &mut dyn EventSink) {
        debug_assert_eq!(
            protocol::hit_run(words),
            words.len(),
            "a chunk of hits only"
        );
        if words.is_empty() {
            return;
        }
        self.thread(sink, tid);
        let seen = sink.hits(tid, words);
        self.total += seen.cost;
        self.hits += seen.hits;
    }

    /// The records of one chunk of thread `tid`.
    fn chunk(
        &mut self,
        tid: i32,
        words: &[u64],
        replies: &mut File,
        sink: &mut dyn EventSink,
    ) -> Result<(), TraceError> {
        let mut i = 0;
        while i < words.len() {
            // The hot path: a run of hits of the chunk's thread without operands, handed over
            // as they are (they are `PackedHit` words).
            let run = protocol::hit_run(&words[i..]);
            if run > 0 {
                self.hits(tid, &words[i..i + run], sink);
                i += run;
                continue;
            }
            let r = protocol::decode_one(words, &mut i).map_err(|e| bad(e.0))?;
            self.record(r, tid, replies, sink)?;
        }
        Ok(())
    }

    /// QEMU died without running the plugin's exit path (a fault of the program, a kill from
    /// outside): the records each thread had buffered, and its count since its last event, are
    /// still in the shared slots. Hits are processed; each live thread's count becomes its tail.
    fn leftovers(
        &mut self,
        threads: &mut File,
        replies: &mut File,
        sink: &mut dyn EventSink,
    ) -> Result<(), TraceError> {
        use protocol::slot;
        use std::io::Seek;
        let mut all = Vec::new();
        threads
            .seek(std::io::SeekFrom::Start(0))
            .and_then(|_| threads.read_to_end(&mut all))
            .map_err(TraceError::Wait)?;
        let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8"));
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
        for b in all.chunks_exact(slot::BYTES) {
            let tid = u32_at(b, slot::TID) as i32;
            if tid == 0 || u32_at(b, slot::LIVE) == 0 {
                continue;
            }
            let len = (u32_at(b, slot::LEN) as usize).min(protocol::CHUNK_WORDS - 1);
            let words: Vec<u64> = (1..=len).map(|k| u64_at(b, slot::BUF + 8 * k)).collect();
            self.chunk(tid, &words, replies, sink)?;
            if self.live.contains(&tid) {
                self.snapshot.insert(tid, u64_at(b, slot::COUNT));
            }
        }
        Ok(())
    }

    fn record(
        &mut self,
        r: Record,
        tid: i32,
        replies: &mut File,
        sink: &mut dyn EventSink,
    ) -> Result<(), TraceError> {
        match r {
            Record::Hit {
                probe,
                cost,
                operand,
            } => {
                self.thread(sink, tid);
                self.emit(
                    sink,
                    TraceEvent::Hit {
                        probe: probe as usize,
                        tid,
                        cost,
                        operand,
                    },
                );
            }
            Record::ThreadExit { tid, cost } => {
                self.thread(sink, tid);
                if self.live.remove(&tid) {
                    self.emit(sink, TraceEvent::ThreadExit { tid, cost });
                }
            }
            Record::Request { base, path } => {
                let answer = self.answer(base, &path, sink);
                let bytes = match &answer {
                    Ok((first, probes)) => protocol::reply(*first, probes),
                    Err(_) => protocol::refusal(),
                };
                // A failed write means QEMU is gone; its status tells why.
                let _ = replies.write_all(&bytes);
                answer?;
            }
            Record::Start => self.start(sink),
            Record::Image => {
                self.image_execed(sink);
                // A failed write means QEMU is gone; its status tells why.
                let _ = replies.write_all(&protocol::image_ack());
            }
            Record::Fork { pid } => self.forks.push(pid),
            Record::Exec { path } => {
                self.exec_path = Some(path);
                self.exec_tid = tid;
            }
            Record::ExecFailed => {
                self.exec_path = None;
                self.snapshot.clear();
            }
            Record::Snapshot { tid, cost } => {
                self.last_tid = 0; // the next event of any thread supersedes its snapshot
                self.snapshot.insert(tid, cost);
            }
            Record::Exit { .. } => {}
            Record::AtExit => self.at_exit = true,
            Record::SelfSignal { sig } => {
                self.self_signals.insert(sig);
            }
            Record::Unseen { path } => self.unseen.push(PathBuf::from(OsStr::from_bytes(&path))),
            Record::FdsLost { mask } => self.fds_lost |= mask,
            Record::World { what, detail } => {
                self.world.insert((what, detail));
            }
            Record::NoOperand { probe } => return Err(no_operand(probe)),
        }
        Ok(())
    }

    /// The program's image starts: its `Exec` event, the cost before it its own.
    fn start(&mut self, sink: &mut dyn EventSink) {
        self.started = true;
        let probes = self.next;
        let (image, cost) = (self.images, std::mem::take(&mut self.exec_cost));
        self.images += 1;
        self.emit(
            sink,
            TraceEvent::Exec {
                image,
                tid: self.pid,
                cost,
                probes,
            },
        );
    }

    /// The exec announced last succeeded, and the plugin followed it (a new QEMU runs the new
    /// image): the other threads ended at the exec, at their snapshots; the exec'ing thread's
    /// count goes with the new image's `Exec` event (at its `Start`), as the ptrace backend's;
    /// the probes' numbering restarts.
    fn image_execed(&mut self, sink: &mut dyn EventSink) {
        let exec_tid = std::mem::replace(&mut self.exec_tid, 0);
        self.exec_cost = self.snapshot.remove(&exec_tid).unwrap_or(0);
        let mut ended: Vec<i32> = self.live.iter().copied().collect();
        ended.sort_unstable();
        for tid in ended {
            // The exec'ing thread goes on as the process's only thread (its id the process's:
            // one that was not the leader also ends, as the ptrace backend sees it).
            let goes_on = tid == exec_tid && tid == self.pid;
            if !goes_on {
                let cost = self.snapshot.get(&tid).copied().unwrap_or(0);
                self.live.remove(&tid);
                self.emit(sink, TraceEvent::ThreadExit { tid, cost });
            }
        }
        // After the exec the process has one thread, its id the process's.
        self.live.insert(self.pid);
        self.seen.insert(self.pid);
        self.last_tid = 0;
        self.snapshot.clear();
        self.next = 0;
        if let Some(path) = self.exec_path.take() {
            self.followed.push(PathBuf::from(OsStr::from_bytes(&path)));
        }
    }

    /// The probes of the file at host address `base`, checked, and the index of the first.
    fn answer(
        &mut self,
        base: u64,
        path: &[u8],
        sink: &mut dyn EventSink,
    ) -> Result<(usize, Vec<Probe>), TraceError> {
        let image = PathBuf::from(OsStr::from_bytes(path));
        // A deleted or replaced file: read it through /proc/PID/map_files.
        let probe_path = if image.exists() {
            image.clone()
        } else {
            procfs::maps(self.pid)
                .ok()
                .and_then(|ms| ms.into_iter().find(|m| m.start == base))
                .map(|m| {
                    PathBuf::from(format!(
                        "/proc/{}/map_files/{:x}-{:x}",
                        self.pid, m.start, m.end
                    ))
                })
                .unwrap_or_else(|| image.clone())
        };
        let probes = sink
            .probes_for(&probe_path)
            .map_err(|message| TraceError::Probes {
                image: image.clone(),
                message,
            })?;
        sink.image_base(base);
        if !probes.is_empty() {
            let mem = Mem::open(self.pid).map_err(|source| TraceError::Proc {
                pid: self.pid,
                source,
            })?;
            check_probes(&mem, &image, base, &probes)?;
        }
        let first = self.next;
        self.next += probes.len();
        Ok((first, probes))
    }

    /// After the stream ended and QEMU was reaped: close the threads, and tell
    /// the program's own ending from the emulator's failures.
    fn finish(
        &mut self,
        status: std::process::ExitStatus,
        sink: &mut dyn EventSink,
    ) -> Result<ExitStatus, TraceError> {
        let prog = self.program.display().to_string();
        if !self.started {
            return Err(TraceError::Emulator {
                message: format!(
                    "qemu-x86_64 could not run `{prog}` ({status}; see its message above); \
                     {}",
                    crate::backend::use_instead(CounterMode::Emulate)
                ),
            });
        }
        let exec = self.exec_path.take().filter(|_| !self.at_exit);
        if let Some(path) = exec {
            self.native_exec = Some(PathBuf::from(OsStr::from_bytes(&path)));
        }
        // Threads still open (an exec, a fatal signal): their counts at the
        // last snapshot (taken at an exec or a signal the program sent itself).
        let mut open: Vec<i32> = self.live.iter().copied().collect();
        open.sort_unstable();
        for tid in open {
            let cost = self.snapshot.get(&tid).copied().unwrap_or(0);
            self.live.remove(&tid);
            self.emit(sink, TraceEvent::ThreadExit { tid, cost });
        }
        let normal_end = self.at_exit || self.native_exec.is_some();
        if let Some(sig) = status.signal().map(world::guest_signal) {
            // QEMU 7.2 ends the same way for the guest's fatal signal, a signal from outside and
            // its own faults (it takes them for the guest's) or failed assertions (abort): a
            // SIGILL or SIGABRT the program did not send itself is reported as its death, as
            // natively, and the reason says it may be the emulator's.
            let own = self.self_signals.contains(&sig);
            if !normal_end && !own && (sig == libc::SIGILL || sig == libc::SIGABRT) {
                self.unexplained = Some(sig);
            }
            if !normal_end && !own {
                self.lost_at_death = Some(sig);
            }
            return Ok(ExitStatus::Signaled(sig));
        }
        let code = status.code().unwrap_or(-1);
        if !normal_end {
            return Err(TraceError::Emulator {
                message: format!(
                    "qemu-x86_64 ended without finishing `{prog}` (exit status {code}; see its \
                     message above); {}",
                    crate::backend::use_instead(CounterMode::Emulate)
                ),
            });
        }
        Ok(ExitStatus::Exited(code))
    }
}

/// The plugin read no register for `probe`: its mark does not begin a translation block.
fn no_operand(probe: u64) -> TraceError {
    TraceError::Emulator {
        message: format!(
            "probe {probe} reports a register, but its mark does not begin a translation block, \
             so the emulator cannot read the register exactly; rebuild the program with the \
             current cilkview.h (its loop-begin mark starts with a jmp), or {}",
            crate::backend::use_instead(CounterMode::Emulate)
        ),
    }
}
