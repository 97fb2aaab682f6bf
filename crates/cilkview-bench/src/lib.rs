//! # cilkview-bench
//!
//! Runs a program natively at each worker count P: bound to P CPUs (its CPU affinity, as
//! `taskset` sets it) with the worker-count variables parallel runtimes read (`CILK_NWORKERS`,
//! `OMP_NUM_THREADS`, `RAYON_NUM_THREADS`, and any others named) set to P. Warm-up runs, then
//! trials in rounds (each round every P in turn); the median time with its minimum and maximum;
//! speedup T(1)/T(P) and efficiency.
//! [`compare`] puts the measured speedups beside a predicted range per P (Cilkview's
//! benchmarking, section 4 of the paper); [`bandwidth`] is the paper's section 5 test for a
//! program limited by memory bandwidth.
#![deny(unsafe_code)]

mod bandwidth;
mod compare;
mod cores;
mod model;
mod stats;
mod trial;

use std::path::PathBuf;

pub use bandwidth::{bandwidth, BandwidthReport, BandwidthVerdict, CONTENTION, LIMITED};
pub use compare::{compare, Placement};
pub use cores::{available_cpus, parse_cores, MAX_CORES};
pub use model::{json_schema, BenchReport, CoresResult, JSON_VERSION};
pub use stats::Summary;
pub use trial::{interrupt_on, InterruptGuard, Launch, BENCH_STOP_SIGNALS};

use crate::trial::Finished;

/// The variables always set to the worker count.
pub const WORKER_VARIABLES: [&str; 3] = ["CILK_NWORKERS", "OMP_NUM_THREADS", "RAYON_NUM_THREADS"];

/// How to benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub program: PathBuf,
    pub args: Vec<std::ffi::OsString>,
    /// Worker counts, ascending. P = 1 (the baseline of the speedups) is added if missing.
    pub cores: Vec<u32>,
    /// Timed runs per worker count (≥ 1).
    pub trials: u32,
    /// Untimed runs before the trials of each worker count.
    pub warmup: u32,
    /// Variables set to the worker count besides [`WORKER_VARIABLES`].
    pub extra_workers_env: Vec<String>,
    pub show_output: bool,
    /// Allow P larger than the CPUs available (the P workers then share all of them).
    pub oversubscribe: bool,
}

/// What the benchmark is doing, for a progress display.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// About to start `what` (`"benchmarking"`, `"bandwidth test"`): `runs` runs in all
    /// (warm-ups included).
    Begin { what: &'static str, runs: u64 },
    /// One run ended.
    Ran {
        cores: u32,
        /// `None` for a warm-up run.
        trial: Option<u32>,
        seconds: f64,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot read or set CPU affinity: {0}")]
    Affinity(nix::Error),
    #[error("{cores} workers asked for, but only {available} CPU(s) are available to this process (use --oversubscribe to run anyway, sharing the CPUs)")]
    TooManyCores { cores: u32, available: usize },
    #[error("no core counts to run")]
    NoCores,
    #[error("--trials must be at least 1")]
    NoTrials,
    #[error("cannot run {program}: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot wait for the program: {0}")]
    Wait(std::io::Error),
    #[error("the program failed at P={cores} ({trial}): {}", ending(*code, *signal))]
    TrialFailed {
        cores: u32,
        trial: String,
        code: Option<i32>,
        signal: Option<i32>,
        /// What it printed (empty when its output was shown, not captured).
        output: String,
    },
    #[error("--bandwidth needs a largest core count of at least 2")]
    BandwidthNeedsTwo,
    /// A signal asked the tool to stop (see [`interrupt_on`]): the running program was killed.
    #[error("interrupted by signal {signal}: the benchmarked program was killed")]
    Interrupted { signal: i32 },
}

fn ending(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(sig)) => format!("killed by signal {sig}"),
        (Some(c), None) => format!("exited with status {c}"),
        (None, None) => "ended abnormally".into(),
    }
}

impl BenchOptions {
    fn launch(&self) -> Launch {
        let mut workers_env: Vec<String> = WORKER_VARIABLES.iter().map(|s| s.to_string()).collect();
        for name in &self.extra_workers_env {
            if !workers_env.contains(name) {
                workers_env.push(name.clone());
            }
        }
        Launch {
            program: self.program.clone(),
            args: self.args.clone(),
            workers_env,
            show_output: self.show_output,
        }
    }

    /// The worker counts to run (with P = 1), checked against the CPUs available.
    pub fn checked_cores(&self, available: usize) -> Result<Vec<u32>, BenchError> {
        if self.cores.is_empty() {
            return Err(BenchError::NoCores);
        }
        if self.trials == 0 {
            return Err(BenchError::NoTrials);
        }
        let mut cores = self.cores.clone();
        cores.push(1);
        cores.sort_unstable();
        cores.dedup();
        let max = *cores.last().unwrap_or(&1);
        if max as usize > available && !self.oversubscribe {
            return Err(BenchError::TooManyCores {
                cores: max,
                available,
            });
        }
        Ok(cores)
    }
}

/// Runs the benchmark. Stops at the first failed run (warm-ups included).
pub fn run(
    opts: &BenchOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<BenchReport, BenchError> {
    let available = available_cpus()?;
    let cores = opts.checked_cores(available.len())?;
    let launch = opts.launch();
    progress(Progress::Begin {
        what: "benchmarking",
        runs: cores.len() as u64 * u64::from(opts.warmup + opts.trials),
    });
    let cpu_sets = cores
        .iter()
        .map(|&p| cores::cpu_set(&available, p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut run_once = |p: u32, cpus, trial: Option<u32>| -> Result<Finished, BenchError> {
        let label = match trial {
            Some(t) => format!("trial {t}"),
            None => "warm-up".into(),
        };
        let done = launch.start(p, cpus)?.wait()?.check(p, label)?;
        progress(Progress::Ran {
            cores: p,
            trial,
            seconds: done.elapsed.as_secs_f64(),
        });
        Ok(done)
    };
    for (&p, &cpus) in cores.iter().zip(&cpu_sets) {
        for _ in 0..opts.warmup {
            run_once(p, cpus, None)?;
        }
    }
    // The trials in rounds, each round every P in turn: a machine whose speed drifts (a VM's
    // host, a laptop's clock) moves every P's times alike, not the P timed last.
    let mut times: Vec<(u32, Vec<f64>)> = cores.iter().map(|&p| (p, Vec::new())).collect();
    for t in 1..=opts.trials {
        for ((p, samples), &cpus) in times.iter_mut().zip(&cpu_sets) {
            samples.push(run_once(*p, cpus, Some(t))?.elapsed.as_secs_f64());
        }
    }
    Ok(BenchReport::new(opts, available.len(), times))
}
