//! Before the run: the program is dynamically linked against a libgomp whose ABI the preload
//! library knows.

use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::{Endianness, Object, ObjectSection, ObjectSymbol};

/// Why `--openmp` cannot measure a program; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenMpError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a 64-bit ELF program: {source}", path.display())]
    Format {
        path: PathBuf,
        source: object::Error,
    },
    #[error(
        "{} is statically linked: --openmp replaces libgomp's entry points with LD_PRELOAD, which \
         needs a dynamically linked program (build it without -static)",
        path.display()
    )]
    Static { path: PathBuf },
    #[error(
        "{} uses LLVM's OpenMP runtime ({runtime}): --openmp knows gcc's libgomp only; build it \
         with gcc -fopenmp, or with clang -fopenmp=libgomp",
        path.display()
    )]
    LlvmRuntime { path: PathBuf, runtime: String },
    #[error(
        "{} does not use libgomp (no libgomp.so.1 among its needed libraries): --openmp is for \
         programs built with gcc -fopenmp",
        path.display()
    )]
    NoLibgomp { path: PathBuf },
    #[error(
        "cannot find libgomp.so.1, which {} needs (in its RUNPATH, LD_LIBRARY_PATH or the \
         system's library folders)",
        path.display()
    )]
    LibgompNotFound { path: PathBuf },
    #[error(
        "{} has ABI {found}, which --openmp does not know (it knows GOMP_5.0.1 to GOMP_5.1.x: gcc \
         11 to 14, tested with gcc 12)",
        path.display()
    )]
    UnknownAbi { path: PathBuf, found: String },
}

/// The libgomp a program will load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Libgomp {
    pub path: PathBuf,
    /// Its newest symbol version, e.g. `GOMP_5.1`.
    pub abi: String,
}

/// The lowest and the first unknown libgomp ABI versions: GOMP_5.0.1 (gcc 11, when
/// `GOMP_task` got its `detach` argument) up to, not including, GOMP_6.
const OLDEST: [u32; 3] = [5, 0, 1];
const TOO_NEW: [u32; 3] = [6, 0, 0];

/// Checks that `program` (an ELF file; a `#!` script is not checked: `Ok(None)`) is dynamically
/// linked against a libgomp whose ABI the preload library knows, and returns it.
pub fn check_program(program: &Path) -> Result<Option<Libgomp>, OpenMpError> {
    let io = |source| OpenMpError::Io {
        path: program.to_owned(),
        source,
    };
    let data = std::fs::read(program).map_err(io)?;
    if data.starts_with(b"#!") {
        return Ok(None);
    }
    let format = |source| OpenMpError::Format {
        path: program.to_owned(),
        source,
    };
    let file = ElfFile64::<Endianness>::parse(&*data).map_err(format)?;
    let (needed, runpath) = dynamic_entries(&file, &data).map_err(format)?;
    let path = program.to_owned();
    if file.section_by_name(".interp").is_none() && needed.is_empty() {
        return Err(OpenMpError::Static { path });
    }
    if let Some(llvm) = needed
        .iter()
        .find(|n| n.starts_with("libomp") || n.starts_with("libiomp"))
    {
        return Err(OpenMpError::LlvmRuntime {
            path,
            runtime: llvm.clone(),
        });
    }
    let Some(name) = needed.iter().find(|n| n.starts_with("libgomp.so")) else {
        return Err(OpenMpError::NoLibgomp { path });
    };
    let origin = program.parent().unwrap_or(Path::new("."));
    let lib = find_library(name, &runpath, origin)
        .ok_or(OpenMpError::LibgompNotFound { path: path.clone() })?;
    let abi = abi_of(&lib)?;
    Ok(Some(Libgomp { path: lib, abi }))
}

type Entries = (Vec<String>, Vec<String>);

/// DT_NEEDED names and DT_RUNPATH/DT_RPATH folders.
fn dynamic_entries(file: &ElfFile64<Endianness>, data: &[u8]) -> object::Result<Entries> {
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, data)?;
    let (mut needed, mut runpath) = (Vec::new(), Vec::new());
    if let Some((dyns, link)) = sections.dynamic(endian, data)? {
        let strings = sections.strings(endian, data, link)?;
        for d in dyns {
            let tag = d.d_tag(endian) as u32;
            if tag == elf::DT_NEEDED || tag == elf::DT_RUNPATH || tag == elf::DT_RPATH {
                let s = String::from_utf8_lossy(d.string(endian, strings)?).into_owned();
                if tag == elf::DT_NEEDED {
                    needed.push(s);
                } else {
                    runpath.extend(s.split(':').map(str::to_owned));
                }
            }
        }
    }
    Ok((needed, runpath))
}

/// Where the dynamic loader would find `name`: RUNPATH ($ORIGIN = the program's folder),
/// LD_LIBRARY_PATH, then the system's folders.
fn find_library(name: &str, runpath: &[String], origin: &Path) -> Option<PathBuf> {
    let origin = origin.to_string_lossy();
    let env = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let system = [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
        "/usr/local/lib",
    ];
    runpath
        .iter()
        .map(|d| d.replace("$ORIGIN", &origin).replace("${ORIGIN}", &origin))
        .chain(env.split(':').filter(|d| !d.is_empty()).map(str::to_owned))
        .chain(system.iter().map(|d| d.to_string()))
        .map(|d| Path::new(&d).join(name))
        .find(|p| p.is_file())
}

/// The newest `GOMP_x.y[.z]` version node of a libgomp (its names are in `.dynstr`), checked.
fn abi_of(lib: &Path) -> Result<String, OpenMpError> {
    let data = std::fs::read(lib).map_err(|source| OpenMpError::Io {
        path: lib.to_owned(),
        source,
    })?;
    let file = object::File::parse(&*data).map_err(|source| OpenMpError::Format {
        path: lib.to_owned(),
        source,
    })?;
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
        other => Err(OpenMpError::UnknownAbi {
            path: lib.to_owned(),
            found: other.map_or("no GOMP_ version".into(), |(_, n)| n.to_owned()),
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
