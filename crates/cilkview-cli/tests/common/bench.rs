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

/// The `-fopenmp` build of a fixture (the one that runs in parallel); `None`, said aloud, where
/// gcc cannot build OpenMP programs.
pub fn openmp(name: &str) -> Option<PathBuf> {
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
