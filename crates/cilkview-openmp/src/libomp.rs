//! LLVM's OpenMP runtime, libomp (`clang -fopenmp`; Intel's libiomp5 has the same `__kmpc_*`
//! ABI): the check that a program uses one whose entry points the preload library knows.

use crate::check::{text_after, LibraryFile, Linked, RuntimeError, RuntimeLibrary};
use crate::runtime::{Description, Runtime, TaskCost};
use crate::wire::{Counter, OPENMP_COUNTERS};

/// LLVM's OpenMP runtime (`clang -fopenmp`, `libomp.so.5`; `libiomp5.so`).
pub struct Libomp;

/// The needed-library names that are libomp.
const NAMES: [&str; 2] = ["libomp", "libiomp5"];

/// The entry points the library calls whatever the program does: without one of them the ABI
/// is not the one it knows.
const REQUIRED: [&str; 7] = [
    "__kmpc_fork_call",
    "__kmpc_push_num_threads",
    "__kmpc_global_thread_num",
    "__kmpc_omp_task_alloc",
    "__kmpc_omp_task",
    "__kmpc_omp_task_begin_if0",
    "__kmpc_omp_task_complete_if0",
];

/// The entry point of a `detach` clause: libomp (LLVM 14) aborts where a detached task is
/// created in a team of one thread, as every region is under the preload library (measured:
/// `fixtures/omp_adversarial.c detach` also aborts without the tool at OMP_NUM_THREADS=1).
const DETACH: &str = "__kmpc_task_allow_completion_event";

impl Runtime for Libomp {
    fn description(&self) -> &'static Description {
        &Description {
            name: "libomp",
            model: "OpenMP",
            option: "--openmp",
            built_with: "clang -fopenmp",
            libraries: &NAMES,
            files: "libomp.so.5 or libiomp5.so",
        }
    }

    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError> {
        let path = self.library_of(program)?;
        let abi = abi_of(&LibraryFile::read(&path)?)?;
        if program.imports(DETACH) {
            return Err(RuntimeError::AbortsInATeamOfOne {
                path: program.path.clone(),
                option: "--openmp",
                runtime: "libomp",
                construct: "detach tasks",
                symbol: DETACH,
                bug: "llvm/llvm-project#66654: LLVM 14's libomp fails the assertion \
                      th_task_team == t_task_team at the region's end",
            });
        }
        Ok(RuntimeLibrary { path, abi })
    }

    fn preload_library(&self) -> &'static [u8] {
        crate::KMP_SO
    }

    /// libomp's cost per task at 2 threads, measured as libgomp's (`CC=clang
    /// scripts/bench-omp-task-cost.sh`, docs/openmp.md "libomp's cost per task"): 0.5–2.1 µs,
    /// 8k–15k instructions for the finest tasks, the same order as libgomp's: the same default
    /// keeps the lower bound below every speedup measured.
    fn task_cost(&self) -> TaskCost {
        TaskCost {
            instructions: crate::DEFAULT_TASK_COST,
            nanoseconds: crate::DEFAULT_TASK_COST_NS,
        }
    }

    fn counters(&self) -> &'static [Counter] {
        OPENMP_COUNTERS
    }
}

/// The library's OpenMP API version (its `@(#) … OMP API version: 5.0 (201611)` string), once
/// the entry points the preload library needs are found among its dynamic symbols.
fn abi_of(lib: &LibraryFile) -> Result<String, RuntimeError> {
    lib.require(
        &REQUIRED,
        "--openmp",
        "it knows libomp's __kmpc_ entry points: LLVM 14 and later, tested with 14",
    )?;
    Ok(api_version(&lib.data).unwrap_or_else(|| "__kmpc".into()))
}

/// `OpenMP 5.0 (201611)` from the text `OMP API version: 5.0 (201611)` in the library's data.
fn api_version(data: &[u8]) -> Option<String> {
    text_after(data, b"OMP API version: ").map(|v| format!("OpenMP {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_version_is_read_from_the_librarys_text() {
        let data = b"\0@(#) LLVM OMP API version: 5.0 (201611)\0more";
        assert_eq!(api_version(data).as_deref(), Some("OpenMP 5.0 (201611)"));
        assert_eq!(api_version(b"nothing here"), None);
        assert_eq!(api_version(b"OMP API version: \0"), None);
    }
}
