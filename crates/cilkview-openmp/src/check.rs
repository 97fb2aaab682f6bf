//! Before the run: what a program links (its needed libraries, found as the loader would), and
//! why a runtime's option cannot measure it.

use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::{Endianness, Object, ObjectSymbol};

/// Why a runtime's option cannot measure a program; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
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
        "{} is statically linked: {option} replaces {runtime}'s entry points with LD_PRELOAD, \
         which needs a dynamically linked program (build it without -static)",
        path.display()
    )]
    Static {
        path: PathBuf,
        option: &'static str,
        runtime: &'static str,
    },
    #[error(
        "{} uses none of the runtimes {option} measures ({runtimes}: none among its needed \
         libraries): {option} is for programs built with {builds}",
        path.display()
    )]
    NoRuntime {
        path: PathBuf,
        option: &'static str,
        /// The runtimes, e.g. `libgomp, libomp`.
        runtimes: String,
        /// How programs get them, e.g. `gcc -fopenmp or clang -fopenmp`.
        builds: String,
    },
    #[error(
        "{} does not use {runtime} (no {files} among its needed libraries): {option} is for \
         programs built with {built_with}",
        path.display()
    )]
    NotUsed {
        path: PathBuf,
        option: &'static str,
        runtime: &'static str,
        /// Its library files, e.g. `libgomp.so.1`.
        files: &'static str,
        /// How programs get it, e.g. `gcc -fopenmp`.
        built_with: &'static str,
    },
    #[error(
        "cannot find {library}, which {} needs (in its RUNPATH, LD_LIBRARY_PATH or the \
         system's library folders)",
        path.display()
    )]
    NotFound { path: PathBuf, library: String },
    #[error(
        "{} uses {construct} ({symbol}), which makes {runtime} abort in a team of one thread \
         ({bug}); {option} runs each parallel region with one thread, so it cannot measure this \
         program",
        path.display()
    )]
    AbortsInATeamOfOne {
        path: PathBuf,
        option: &'static str,
        runtime: &'static str,
        /// The construct, e.g. `detach tasks`, and the entry point that shows it.
        construct: &'static str,
        symbol: &'static str,
        /// The runtime's bug report.
        bug: &'static str,
    },
    #[error("{} has ABI {found}, which {option} does not know ({known})", path.display())]
    UnknownAbi {
        path: PathBuf,
        found: String,
        option: &'static str,
        /// The versions it knows, e.g. `it knows GOMP_5.0.1 to GOMP_5.1.x: gcc 11 to 14, …`.
        known: &'static str,
    },
}

/// The runtime library a program will load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeLibrary {
    pub path: PathBuf,
    /// Its ABI, e.g. libgomp's newest symbol version `GOMP_5.1`.
    pub abi: String,
}

/// What the dynamic loader will be asked for: a program's needed libraries and where it looks.
#[derive(Clone, Debug)]
pub struct Linked {
    pub path: PathBuf,
    /// DT_NEEDED names, in order.
    pub needed: Vec<String>,
    runpath: Vec<String>,
    /// The functions and data it takes from its libraries (undefined dynamic symbols).
    imports: Vec<String>,
}

impl Linked {
    /// Reads a program's dynamic entries; `Ok(None)` for a `#!` script (not checked); an error
    /// names `option` and `runtime` for a static program.
    pub fn read(
        program: &Path,
        option: &'static str,
        runtime: &'static str,
    ) -> Result<Option<Linked>, RuntimeError> {
        let io = |source| RuntimeError::Io {
            path: program.to_owned(),
            source,
        };
        let data = std::fs::read(program).map_err(io)?;
        if data.starts_with(b"#!") {
            return Ok(None);
        }
        let format = |source| RuntimeError::Format {
            path: program.to_owned(),
            source,
        };
        let file = ElfFile64::<Endianness>::parse(&*data).map_err(format)?;
        let (needed, runpath) = dynamic_entries(&file, &data).map_err(format)?;
        let path = program.to_owned();
        if file.section_by_name(".interp").is_none() && needed.is_empty() {
            return Err(RuntimeError::Static {
                path,
                option,
                runtime,
            });
        }
        let imports = file
            .dynamic_symbols()
            .filter(|sym| sym.is_undefined())
            .filter_map(|sym| sym.name().ok().map(str::to_owned))
            .collect();
        Ok(Some(Linked {
            path,
            needed,
            runpath,
            imports,
        }))
    }

    /// The first needed library whose name starts with one of `prefixes`.
    pub fn needs(&self, prefixes: &[&str]) -> Option<&str> {
        self.needed
            .iter()
            .find(|n| prefixes.iter().any(|p| n.starts_with(p)))
            .map(String::as_str)
    }

    /// Whether the program itself takes `symbol` from a library.
    pub fn imports(&self, symbol: &str) -> bool {
        self.imports.iter().any(|s| s == symbol)
    }

    /// Where the loader would find the needed library `name`.
    pub fn find(&self, name: &str) -> Result<PathBuf, RuntimeError> {
        let origin = self.path.parent().unwrap_or(Path::new("."));
        find_library(name, &self.runpath, origin).ok_or_else(|| RuntimeError::NotFound {
            path: self.path.clone(),
            library: name.to_owned(),
        })
    }
}

/// A runtime library's bytes, read for its checks.
pub(crate) struct LibraryFile {
    pub path: PathBuf,
    pub data: Vec<u8>,
}

impl LibraryFile {
    pub fn read(path: &Path) -> Result<LibraryFile, RuntimeError> {
        let data = std::fs::read(path).map_err(|source| RuntimeError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(LibraryFile {
            path: path.to_owned(),
            data,
        })
    }

    pub fn parse(&self) -> Result<object::File<'_>, RuntimeError> {
        object::File::parse(&*self.data).map_err(|source| RuntimeError::Format {
            path: self.path.clone(),
            source,
        })
    }

    /// That it exports every one of `symbols`, the entry points `option`'s library needs; else
    /// an unknown ABI naming the first missing one and what `option` knows (`known`).
    pub fn require(
        &self,
        symbols: &[&str],
        option: &'static str,
        known: &'static str,
    ) -> Result<(), RuntimeError> {
        let file = self.parse()?;
        let exported: Vec<&str> = file
            .dynamic_symbols()
            .filter_map(|s| s.name().ok())
            .collect();
        match symbols.iter().find(|s| !exported.contains(s)) {
            None => Ok(()),
            Some(missing) => Err(RuntimeError::UnknownAbi {
                path: self.path.clone(),
                found: format!("no {missing}"),
                option,
                known,
            }),
        }
    }
}

/// The text after `key` in `data`, up to the next NUL or newline, trimmed: a library's version
/// string (e.g. `OMP API version: 5.0 (201611)`); `None` where missing, empty or over 40 bytes.
pub(crate) fn text_after<'a>(data: &'a [u8], key: &[u8]) -> Option<&'a str> {
    let at = data.windows(key.len()).position(|w| w == key)? + key.len();
    let end = data[at..].iter().position(|&b| b == 0 || b == b'\n')?;
    let text = std::str::from_utf8(&data[at..at + end]).ok()?.trim();
    (!text.is_empty() && text.len() < 40).then_some(text)
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
