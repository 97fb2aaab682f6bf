//! What the OpenMP tests of both runtimes (`openmp.rs`: gcc/libgomp, `openmp_clang.rs`:
//! clang/libomp) share about `fixtures/omp_known.c`: its hand-marked twin, its units of work,
//! and reading the runtime's counts.

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, BuildOptions};
use serde_json::Value;

use super::{analyze_with, Analysis};

/// The hand-marked twin: the same source, its cilkview.h marks, no -fopenmp.
pub fn twin(name: &str) -> PathBuf {
    build(name, &BuildOptions::default().compiler("gcc").opt(2))
}

/// The runtime library's count `name` (JSON `runtime.counts`).
pub fn count(a: &Analysis, name: &str) -> u64 {
    a.json["runtime"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("count {name} in {}", a.json["runtime"]))["value"]
        .as_u64()
        .unwrap()
}

/// `v[key]` as an integer (a panic naming it otherwise).
pub fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// omp_known's tasks or iterations per construct.
pub const N: u64 = 8;
/// The instructions argument of each unit, cv_work(W).
pub const W: u64 = 1_000_000;
/// One unit: cv_work(W) is 2W + 1 instructions.
pub const UNIT: u64 = 2 * W + 1;

/// omp_known's `MODE 4 200` under `--openmp`, single-stepped and emulated, their region
/// "parallel" with the same spawns and syncs and the same runtime counts (asserted here; the
/// caller checks the costs within its runtime's tolerance): both analyses, or `None`, said
/// aloud, where one of the counters cannot run here.
pub fn step_and_emulate(exe: &Path, mode: &str) -> Option<(Analysis, Analysis)> {
    let args = [mode, "4", "200"];
    let step = analyze_with(exe, &["--openmp", "--counter", "step"], &args);
    if step.json["counter"]["mode"] != "step" {
        cilkview_fixtures::skip("single-stepping not available here");
        return None;
    }
    let emu = analyze_with(exe, &["--openmp", "--counter", "emulate"], &args);
    if emu.code() != Some(0) {
        cilkview_fixtures::skip("qemu-x86_64 not available here");
        return None;
    }
    let (s, e) = (step.region("parallel"), emu.region("parallel"));
    for key in ["spawns", "syncs"] {
        assert_eq!(s[key], e[key], "{mode}: {key}: step {s} emulate {e}");
    }
    assert_eq!(
        step.json["runtime"]["counts"], emu.json["runtime"]["counts"],
        "{mode}"
    );
    Some((step, emu))
}
