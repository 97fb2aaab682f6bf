//! oneTBB (`g++ … -ltbb`, `libtbb.so.12`): the check that a program uses a libtbb whose entry
//! points the preload library knows (docs/runtimes.md).

use std::path::Path;

use object::{Object, ObjectSymbol};

use crate::check::{Linked, RuntimeError, RuntimeLibrary};
use crate::runtime::{Runtime, TaskCost};
use crate::wire::{Counter, TBB_COUNTERS, TBB_ENTRY_POINTS};

/// oneTBB's scheduler library, `libtbb.so.12` (oneTBB 2021, interface 12).
pub struct Libtbb;

/// The needed-library names that are oneTBB's scheduler (not libtbbmalloc).
const NAMES: [&str; 2] = ["libtbb.so", "libtbb_debug.so"];

impl Runtime for Libtbb {
    fn name(&self) -> &'static str {
        "libtbb"
    }

    fn model(&self) -> &'static str {
        "oneTBB"
    }

    fn option(&self) -> &'static str {
        "--tbb"
    }

    fn built_with(&self) -> &'static str {
        "g++ or clang++ … -ltbb"
    }

    fn uses(&self, program: &Linked) -> bool {
        program.needs(&NAMES).is_some()
    }

    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError> {
        let Some(name) = program.needs(&NAMES) else {
            return Err(RuntimeError::NotUsed {
                path: program.path.clone(),
                option: "--tbb",
                wanted: "oneTBB (no libtbb.so.12 among its needed libraries)",
                programs: "programs linked with -ltbb",
            });
        };
        let path = program.find(name)?;
        let abi = abi_of(&path)?;
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
    if let Some((_, missing)) = TBB_ENTRY_POINTS
        .iter()
        .find(|(_, symbol)| !exported.contains(symbol))
    {
        return Err(RuntimeError::UnknownAbi {
            path: lib.to_owned(),
            found: format!("no {missing}"),
            option: "--tbb",
            known: "it knows oneTBB 2021's tbb::detail::r1 entry points (libtbb.so.12), \
                    tested with 2021.8; the older TBB 2020 (libtbb.so.2) is not known",
        });
    }
    Ok(version(&data).unwrap_or_else(|| "oneTBB (interface 12)".into()))
}

/// `oneTBB 2021.8` from the text `oneTBB: VERSION\t\t2021.8` in the library's data.
fn version(data: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"oneTBB: VERSION";
    let at = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let end = data[at..].iter().position(|&b| b == 0 || b == b'\n')?;
    let text = std::str::from_utf8(&data[at..at + end]).ok()?.trim();
    (!text.is_empty() && text.len() < 40).then(|| format!("oneTBB {text}"))
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
