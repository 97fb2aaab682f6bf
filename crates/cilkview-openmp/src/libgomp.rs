//! gcc's OpenMP runtime, libgomp: the check that a program uses one whose ABI the preload
//! library knows.

use object::{Object, ObjectSection, ObjectSymbol};

use crate::check::{LibraryFile, Linked, RuntimeError, RuntimeLibrary};
use crate::runtime::{Description, Runtime};
use crate::wire::{Counter, OPENMP_COUNTERS};

/// gcc's OpenMP runtime (`gcc -fopenmp`, `gfortran -fopenmp`).
pub struct Libgomp;

impl Runtime for Libgomp {
    fn description(&self) -> &'static Description {
        &Description {
            name: "libgomp",
            model: "OpenMP",
            option: "--openmp",
            built_with: "gcc -fopenmp",
            libraries: &["libgomp.so"],
            files: "libgomp.so.1",
        }
    }

    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError> {
        let path = self.library_of(program)?;
        let abi = abi_of(&LibraryFile::read(&path)?)?;
        Ok(RuntimeLibrary { path, abi })
    }

    fn preload_library(&self) -> &'static [u8] {
        crate::OPENMP_SO
    }

    fn counters(&self) -> &'static [Counter] {
        OPENMP_COUNTERS
    }
}

/// The lowest and the first unknown libgomp ABI versions: GOMP_5.0.1 (gcc 11, when
/// `GOMP_task` got its `detach` argument) up to, not including, GOMP_6.
const OLDEST: [u32; 3] = [5, 0, 1];
const TOO_NEW: [u32; 3] = [6, 0, 0];

/// The newest `GOMP_x.y[.z]` version node of a libgomp (its names are in `.dynstr`), checked.
fn abi_of(lib: &LibraryFile) -> Result<String, RuntimeError> {
    let file = lib.parse()?;
    let strings = file
        .section_by_name(".dynstr")
        .and_then(|s| s.data().ok())
        .unwrap_or_default();
    let newest = strings
        .split(|&b| b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
        .filter_map(|s| Some((version(s)?, s)))
        .max();
    let has_gomp_task = file.dynamic_symbols().any(|s| s.name() == Ok("GOMP_task"));
    match newest {
        Some((v, name)) if has_gomp_task && v >= OLDEST && v < TOO_NEW => Ok(name.to_owned()),
        other => Err(RuntimeError::UnknownAbi {
            path: lib.path.clone(),
            found: other.map_or("no GOMP_ version".into(), |(_, n)| n.to_owned()),
            option: "--openmp",
            known: "it knows GOMP_5.0.1 to GOMP_5.1.x: gcc 11 to 14, tested with gcc 12",
        }),
    }
}

/// `GOMP_5.1` → [5, 1, 0]; not a version node name → None.
fn version(name: &str) -> Option<[u32; 3]> {
    let digits = name.strip_prefix("GOMP_")?;
    let mut v = [0u32; 3];
    let mut parts = digits.split('.');
    for slot in v.iter_mut() {
        match parts.next() {
            Some(p) => *slot = p.parse().ok()?,
            None => break,
        }
    }
    parts.next().is_none().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_nodes_parse_and_order() {
        assert_eq!(version("GOMP_5.0.1"), Some([5, 0, 1]));
        assert_eq!(version("GOMP_5.1"), Some([5, 1, 0]));
        assert_eq!(version("GOMP_task"), None);
        assert_eq!(version("GOMP_PLUGIN_1.0"), None);
        assert_eq!(version("GOMP_1.2.3.4"), None);
        assert!(version("GOMP_5.0.1").unwrap() >= OLDEST);
        assert!(version("GOMP_5.0").unwrap() < OLDEST);
        assert!(version("GOMP_5.1.2").unwrap() < TOO_NEW);
        assert!(version("GOMP_6.0").unwrap() >= TOO_NEW);
    }
}
