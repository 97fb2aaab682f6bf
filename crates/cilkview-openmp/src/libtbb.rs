//! oneTBB (`g++ … -ltbb`, `libtbb.so.12`): the check that a program uses a libtbb whose entry
//! points the preload library knows (docs/runtimes.md).

use crate::check::{text_after, LibraryFile, Linked, RuntimeError, RuntimeLibrary};
use crate::runtime::{Description, Runtime, TaskCost};
use crate::wire::{Counter, TBB_COUNTERS, TBB_ENTRY_POINTS};

/// oneTBB's scheduler library, `libtbb.so.12` (oneTBB 2021, interface 12).
pub struct Libtbb;

/// The needed-library names that are oneTBB's scheduler (not libtbbmalloc).
const NAMES: [&str; 2] = ["libtbb.so", "libtbb_debug.so"];

impl Runtime for Libtbb {
    fn description(&self) -> &'static Description {
        &Description {
            name: "libtbb",
            model: "oneTBB",
            option: "--tbb",
            built_with: "g++ or clang++ … -ltbb",
            libraries: &NAMES,
            files: "libtbb.so.12",
        }
    }

    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError> {
        let path = self.library_of(program)?;
        let abi = abi_of(&LibraryFile::read(&path)?)?;
        Ok(RuntimeLibrary { path, abi })
    }

    fn preload_library(&self) -> &'static [u8] {
        crate::TBB_SO
    }

    fn counters(&self) -> &'static [Counter] {
        TBB_COUNTERS
    }

    /// A spawned task's own cost in libtbb (allocation, its deque, the context, the wait):
    /// ~990 instructions per task at one thread (callgrind, task_group fib(20) less fib(18),
    /// g++ -O2, oneTBB 2021.8), ~300 ns per task (fib(30) at one thread, 0.25 s for 832,039
    /// tasks, AMD EPYC); stealing at 2 threads or more costs more.
    fn task_cost(&self) -> TaskCost {
        TaskCost {
            instructions: 1_000,
            nanoseconds: 300,
        }
    }

    fn virtual_team(&self) -> bool {
        false
    }
}

/// The library's version (its `oneTBB: VERSION\t\t2021.8` string), once the entry points the
/// preload library wraps are found among its dynamic symbols.
fn abi_of(lib: &LibraryFile) -> Result<String, RuntimeError> {
    let symbols: Vec<&str> = TBB_ENTRY_POINTS.iter().map(|(_, symbol)| *symbol).collect();
    lib.require(
        &symbols,
        "--tbb",
        "it knows oneTBB 2021's tbb::detail::r1 entry points (libtbb.so.12), tested with \
         2021.8; the older TBB 2020 (libtbb.so.2) is not known",
    )?;
    Ok(version(&lib.data).unwrap_or_else(|| "oneTBB (interface 12)".into()))
}

/// `oneTBB 2021.8` from the text `oneTBB: VERSION\t\t2021.8` in the library's data.
fn version(data: &[u8]) -> Option<String> {
    text_after(data, b"oneTBB: VERSION").map(|v| format!("oneTBB {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_librarys_text() {
        let data = b"\0oneTBB: VERSION\t\t2021.8\0oneTBB: INTERFACE VERSION\t12080\0";
        assert_eq!(version(data).as_deref(), Some("oneTBB 2021.8"));
        assert_eq!(version(b"nothing here"), None);
        assert_eq!(version(b"oneTBB: VERSION\0"), None);
    }
}
