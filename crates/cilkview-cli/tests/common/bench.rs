//! Support of the `bench` tests: the probe program, OpenMP builds, running `cilkview-rs bench`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, compile_source, skip, BuildOptions, Lang};
use serde_json::Value;

use super::bin;

/// Held by every test here, so that they do not run at once (the test harness runs a binary's
/// tests in parallel threads): a benchmark must not measure another test's programs, nor the
/// analysis runs that bind themselves to CPU 0.
pub static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn timing() -> std::sync::MutexGuard<'static, ()> {
    TIMING.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn probe() -> PathBuf {
    build(
        "bench_probe",
        &BuildOptions::default().compiler("gcc").opt(2),
    )
}

pub fn openmp_opts() -> BuildOptions {
    BuildOptions::default()
        .compiler("gcc")
        .opt(2)
        .flag("-fopenmp")
}

/// The `-fopenmp` build of a fixture with its marks (the one that runs in parallel; the
/// unmarked build is `common::openmp`); `None`, said aloud, where gcc cannot build OpenMP
/// programs.
pub fn marked_openmp(name: &str) -> Option<PathBuf> {
    let probe = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n";
    if let Err(e) = compile_source("omp_works", probe, Lang::C, &openmp_opts()) {
        skip(format!(
            "gcc -fopenmp does not work here (libgomp missing? .ci/run installs it): {e}"
        ));
        return None;
    }
    Some(build(name, &openmp_opts()))
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn bench(args: &[&std::ffi::OsStr]) -> std::process::Output {
    bin()
        .arg("bench")
        .args(args)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap()
}

pub fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The real-time priority of the timed benchmarks (`chrt -f 1`): the lowest, above every
/// ordinary process, below the kernel's own real-time threads.
pub const RT_PRIORITY: &str = "1";

/// How a timing test's benchmarks run, chosen by [`timed`]: under SCHED_FIFO (`chrt -f 1`) where
/// the system permits it, else plainly on a quiet machine. Holds a lock that keeps the timed
/// benchmarks of every test process on the machine (other `cargo test` runs, other checkouts)
/// from overlapping, while the test holds it.
pub struct Timed {
    realtime: bool,
    /// How the measures were taken, to print beside them.
    pub conditions: String,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// How the timing tests here may measure a speedup at 2 cores; `None`, after a visible
/// [`skip`] saying why, when they cannot: fewer than 2 CPUs, or a busy machine where real-time
/// scheduling is not available.
///
/// A benchmark at 2 cores on a shared machine measures its neighbours (a 2-thread libgomp team
/// whose threads are preempted waits for them). Under SCHED_FIFO the benchmarked program (it
/// inherits the tool's policy) runs before every ordinary process, as on an idle machine; the
/// kernel's real-time throttling (`kernel.sched_rt_runtime_us`, 95% of each second by default)
/// still leaves the others their share, and each timed `bench` here lasts a few seconds. It is
/// preferred even when the load average is low: that average is of the last minute, and says
/// nothing of the next few seconds.
pub fn timed() -> Option<Timed> {
    let cpus = cpus();
    if cpus < 2 {
        skip("one CPU: no speedup at 2 cores to measure");
        return None;
    }
    let load = load_average();
    let (realtime, conditions) = match realtime_refused() {
        None => (
            true,
            format!(
                "under SCHED_FIFO (chrt -f {RT_PRIORITY}), load average {load:.2} on {cpus} CPUs"
            ),
        ),
        Some(why) if load > cpus as f64 - 0.5 => {
            skip(format!(
                "load average {load:.2} on {cpus} CPUs: a speedup at 2 cores needs them idle, \
                 and real-time scheduling, which would give them to the benchmark, is not \
                 available: {why}"
            ));
            return None;
        }
        Some(why) => (
            false,
            format!(
                "plainly (no real-time scheduling: {why}), load average {load:.2} on {cpus} CPUs"
            ),
        ),
    };
    let path = std::env::temp_dir().join("cilkview-rs-timed-benchmarks.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .unwrap_or_else(|(_, e)| panic!("locking {}: {e}", path.display()));
    Some(Timed {
        realtime,
        conditions,
        _lock: lock,
    })
}

impl Timed {
    /// `cilkview-rs bench ARGS`, under SCHED_FIFO when chosen.
    pub fn bench(&self, args: &[&std::ffi::OsStr]) -> std::process::Output {
        let tool = assert_cmd::cargo::cargo_bin("cilkview-rs");
        let mut cmd = if self.realtime {
            let mut chrt = cilkview_fixtures::command("chrt");
            chrt.args(["-f", RT_PRIORITY]).arg(tool);
            chrt
        } else {
            cilkview_fixtures::command(tool)
        };
        cmd.arg("bench").args(args);
        assert_cmd::Command::from_std(cmd)
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    }
}

/// Why the timed benchmarks cannot run under SCHED_FIFO here, if they cannot: real-time
/// throttling off (a real-time program that spins could then starve the machine), or
/// `chrt -f 1` refused (not root and no RLIMIT_RTPRIO, a cgroup without real-time runtime, no
/// CAP_SYS_NICE in a container) or missing. Tried, not assumed.
pub fn realtime_refused() -> Option<String> {
    const RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
    match std::fs::read_to_string(RUNTIME).map(|s| s.trim().parse::<i64>()) {
        Ok(Ok(-1)) => {
            return Some(format!(
                "real-time throttling is off ({RUNTIME} is -1): a real-time benchmark could \
                 starve the machine"
            ))
        }
        Ok(Ok(0)) => return Some(format!("no real-time runtime ({RUNTIME} is 0)")),
        Ok(Ok(_)) => {}
        _ => return Some(format!("cannot read {RUNTIME}")),
    }
    match cilkview_fixtures::command("chrt")
        .args(["-f", RT_PRIORITY, "true"])
        .output()
    {
        Err(e) => Some(format!("chrt (util-linux) cannot run: {e}")),
        Ok(out) if !out.status.success() => Some(format!(
            "`chrt -f {RT_PRIORITY} true` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(_) => None,
    }
}

/// The load average of the last minute (0 if unreadable).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The measures at P = 2 of a `bench --json` report: `P=2: 0.45 [0.41 – 0.50], predicted
/// 0.11 – 2.00: inside`, and its placement.
pub fn at_two(bench_json: &Value) -> (String, String) {
    let two = &bench_json["results"][1];
    assert_eq!(two["cores"], 2, "{bench_json}");
    let s = &two["speedup"];
    let placement = two["placement"].as_str().unwrap_or("none").to_string();
    (
        format!(
            "P=2: speedup {:.2} [{:.2} – {:.2}], predicted {:.2} – {:.2}: {placement}",
            s["median"].as_f64().unwrap(),
            s["min"].as_f64().unwrap(),
            s["max"].as_f64().unwrap(),
            two["predicted"]["lower"].as_f64().unwrap_or(f64::NAN),
            two["predicted"]["upper"].as_f64().unwrap_or(f64::NAN),
        ),
        placement,
    )
}
