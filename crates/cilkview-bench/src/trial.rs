//! One run of the program: bound to a set of CPUs, with the worker-count variables set, timed
//! from spawn to exit.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::BenchError;

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
        let start = Instant::now();
        let child = cmd.spawn().map_err(|source| BenchError::Spawn {
            program: self.program.clone(),
            source,
        })?;
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
    /// Waits for the program (reading its captured output meanwhile).
    pub fn wait(self) -> Result<Finished, BenchError> {
        let start = self.start;
        let out = self.child.wait_with_output().map_err(BenchError::Wait)?;
        let elapsed = start.elapsed();
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(Finished {
            elapsed,
            status: out.status,
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
