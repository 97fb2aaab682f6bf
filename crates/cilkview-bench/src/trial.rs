//! One run of the program: bound to a set of CPUs, with the worker-count variables set, timed
//! from spawn to exit.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::BenchError;

/// The runs started and not yet reaped (their pids cannot be reused while listed).
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// The signal that interrupted the benchmark (0: none).
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

fn interrupted() -> Result<(), BenchError> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => Ok(()),
        signal => Err(BenchError::Interrupted { signal }),
    }
}

/// The signals that stop a benchmark: what `kill` sends, a closed terminal, Ctrl-C and Ctrl-\\,
/// and the other catchable ones whose default ends a process and that someone else sends.
pub const BENCH_STOP_SIGNALS: [i32; 9] = [
    nix::libc::SIGTERM,
    nix::libc::SIGHUP,
    nix::libc::SIGINT,
    nix::libc::SIGQUIT,
    nix::libc::SIGUSR1,
    nix::libc::SIGUSR2,
    nix::libc::SIGALRM,
    nix::libc::SIGVTALRM,
    nix::libc::SIGPROF,
];

/// Until the guard is dropped, `signals` sent to the tool stop the benchmark: every run in
/// progress is killed (SIGKILL) and the runs return [`BenchError::Interrupted`] (none starts
/// after), so the caller ends cleanly with what it has instead of dying with the benchmarked
/// program left running.
pub fn interrupt_on(signals: &[i32]) -> std::io::Result<InterruptGuard> {
    let mut incoming = signal_hook::iterator::Signals::new(signals)?;
    let handle = incoming.handle();
    let thread = std::thread::Builder::new()
        .name("cilkview-bench-interrupt".into())
        .spawn(move || {
            for sig in incoming.forever() {
                INTERRUPTED.store(sig, Ordering::SeqCst);
                let running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
                for &pid in running.iter() {
                    let _ = nix::sys::signal::kill(
                        Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
            }
        })?;
    Ok(InterruptGuard {
        handle,
        thread: Some(thread),
    })
}

/// Keeps [`interrupt_on`]'s handling until dropped.
#[must_use = "the handling stops when the guard is dropped"]
pub struct InterruptGuard {
    handle: signal_hook::iterator::Handle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for InterruptGuard {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What to run and how.
#[derive(Clone, Debug)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Variables set to the worker count (CILK_NWORKERS, OMP_NUM_THREADS, …).
    pub workers_env: Vec<String>,
    /// Let the program's stdout/stderr through instead of capturing them.
    pub show_output: bool,
}

/// A started run.
pub struct Started {
    child: Child,
    start: Instant,
}

impl Launch {
    /// Starts the program with `workers` in the worker variables, bound to `cpus`.
    pub fn start(&self, workers: u32, cpus: CpuSet) -> Result<Started, BenchError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args).stdin(Stdio::null());
        for name in &self.workers_env {
            cmd.env(name, workers.to_string());
        }
        if !self.show_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        bind(&mut cmd, cpus);
        interrupted()?;
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        let start = Instant::now();
        let child = cmd.spawn().map_err(|source| BenchError::Spawn {
            program: self.program.clone(),
            source,
        })?;
        running.push(child.id() as i32);
        drop(running);
        Ok(Started { child, start })
    }
}

/// Binds the child to `cpus` between fork and exec, as `taskset` does.
#[allow(unsafe_code)]
fn bind(cmd: &mut Command, cpus: CpuSet) {
    // SAFETY: the closure runs in the forked child before exec. It only makes the
    // sched_setaffinity system call (async-signal-safe: no allocation, no locks) on a CpuSet
    // copied into the closure before the fork, and turns its failure into an io::Error.
    unsafe {
        cmd.pre_exec(move || {
            sched_setaffinity(Pid::from_raw(0), &cpus).map_err(std::io::Error::from)
        });
    }
}

/// How a run ended.
pub struct Finished {
    pub elapsed: Duration,
    pub status: ExitStatus,
    /// What the program printed (stdout then stderr), when it was captured.
    pub output: String,
}

impl Started {
    /// Waits for the program (reading its captured output meanwhile). Its pid leaves the
    /// running list before it is reaped, so an interruption never signals a reused pid.
    pub fn wait(mut self) -> Result<Finished, BenchError> {
        use nix::sys::wait::{waitid, Id, WaitPidFlag};
        let start = self.start;
        let pid = self.child.id() as i32;
        let read = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_end(&mut bytes);
                }
                bytes
            })
        };
        let out = read(self.child.stdout.take().map(|p| Box::new(p) as _));
        let err = read(self.child.stderr.take().map(|p| Box::new(p) as _));
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
        let ended = loop {
            match waitid(Id::Pid(Pid::from_raw(pid)), flags) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other,
            }
        };
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|&p| p != pid);
        let elapsed = start.elapsed();
        ended.map_err(|e| BenchError::Wait(e.into()))?;
        let status = self.child.wait().map_err(BenchError::Wait)?;
        let mut output = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
        output.push_str(&String::from_utf8_lossy(&err.join().unwrap_or_default()));
        interrupted()?;
        Ok(Finished {
            elapsed,
            status,
            output,
        })
    }
}

impl Finished {
    /// Fails unless the program exited with status 0.
    pub fn check(self, cores: u32, trial: String) -> Result<Finished, BenchError> {
        if self.status.success() {
            return Ok(self);
        }
        Err(BenchError::TrialFailed {
            cores,
            trial,
            code: self.status.code(),
            signal: self.status.signal(),
            output: self.output,
        })
    }
}
