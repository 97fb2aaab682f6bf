//! LLVM's OpenMP runtime, libomp (`clang -fopenmp`; Intel's libiomp5 has the same `__kmpc_*`
//! ABI): the check that a program uses one whose entry points the preload library knows.

use std::path::Path;

use object::{Object, ObjectSymbol};

use crate::check::{Linked, RuntimeError, RuntimeLibrary};
use crate::runtime::Runtime;
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
    fn name(&self) -> &'static str {
        "libomp"
    }

    fn model(&self) -> &'static str {
        "OpenMP"
    }

    fn option(&self) -> &'static str {
        "--openmp"
    }

    fn built_with(&self) -> &'static str {
        "clang -fopenmp"
    }

    fn uses(&self, program: &Linked) -> bool {
        program.needs(&NAMES).is_some()
    }

    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError> {
        let Some(name) = program.needs(&NAMES) else {
            return Err(RuntimeError::NotUsed {
                path: program.path.clone(),
                option: "--openmp",
                wanted: "libomp (no libomp.so.5 or libiomp5.so among its needed libraries)",
                programs: "programs built with clang -fopenmp",
            });
        };
        let path = program.find(name)?;
        let abi = abi_of(&path)?;
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

    fn counters(&self) -> &'static [Counter] {
        OPENMP_COUNTERS
    }

    fn virtual_team(&self) -> bool {
        false
    }
}

/// The library's OpenMP API version (its `@(#) … OMP API version: 5.0 (201611)` string), once
/// the entry points the preload library needs are found among its dynamic symbols.
fn abi_of(lib: &Path) -> Result<String, RuntimeError> {
    let data = std::fs::read(lib).map_err(|source| RuntimeError::Io {
        path: lib.to_owned(),
        source,
    })?;
    let file = object::File::parse(&*data).map_err(|source| RuntimeError::Format {
        path: lib.to_owned(),
        source,
    })?;
    let exported: Vec<&str> = file
        .dynamic_symbols()
        .filter_map(|s| s.name().ok())
        .collect();
    if let Some(missing) = REQUIRED.iter().find(|r| !exported.contains(r)) {
        return Err(RuntimeError::UnknownAbi {
            path: lib.to_owned(),
            found: format!("no {missing}"),
            option: "--openmp",
            known: "it knows libomp's __kmpc_ entry points: LLVM 14 and later, tested with 14",
        });
    }
    Ok(api_version(&data).unwrap_or_else(|| "__kmpc".into()))
}

/// `OpenMP 5.0 (201611)` from the text `OMP API version: 5.0 (201611)` in the library's data.
fn api_version(data: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"OMP API version: ";
    let at = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = data[at..].iter().position(|&b| b == 0 || b == b'\n')?;
    let text = std::str::from_utf8(&data[at..at + end]).ok()?.trim();
    (!text.is_empty() && text.len() < 40).then(|| format!("OpenMP {text}"))
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
