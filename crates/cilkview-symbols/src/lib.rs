//! # cilkview-symbols
//!
//! Names for code addresses of one ELF file, for call-site profiles: function and `file:line` from
//! the file's DWARF or from its separate debug file (found by build-id under
//! `/usr/lib/debug/.build-id/xx/yyyy.debug`, or by `.gnu_debuglink`); a stripped file falls back
//! to `symbol+0xoffset` (symbol table, else dynamic symbols), then to the bare address.
//!
//! Addresses are **file-relative**, as the tracer's probe offsets: relative to the lowest
//! `PT_LOAD` mapping (its `p_vaddr` rounded down to the page), so the same offset works for a PIE
//! loaded anywhere and for a fixed-address executable.
//!
//! Code inlined from the Rust `cilkview` crate (its marks: `cilkview::join`, `cilkview::function`,
//! …) is named where the program calls into the crate: inlined frames of functions of that crate
//! are skipped from the innermost outwards ([`is_marks_library`]), as a `cilkview.h` mark, a bare
//! asm statement, has no frame of its own.
//!
//! [`Symbolizer::return_address_rule`] reads the file's `.eh_frame` call-frame information and
//! tells how to find the return address at a given code address (CFA = register + offset, return
//! address at CFA − 8 on x86-64): what a backend that can read `rsp`/`rbp` at a mark needs to
//! recover the caller's return address, i.e. the call site.

#![forbid(unsafe_code)]

mod debugfile;
mod unwind;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment};

pub use unwind::{CfaRule, ReturnAddressRule};

/// The default root of separate debug files.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an ELF file we can read: {source}")]
    Format {
        path: PathBuf,
        source: object::Error,
    },
    #[error("{path}: no PT_LOAD segment, not a loadable program")]
    NoLoad { path: PathBuf },
    #[error("cannot read the DWARF of {path}: {source}")]
    Dwarf { path: PathBuf, source: gimli::Error },
    #[error("{path} has no call-frame information for offset {offset:#x}")]
    NoCfi { path: PathBuf, offset: u64 },
    #[error("the call-frame information of {path} at offset {offset:#x}: {what}")]
    Cfi {
        path: PathBuf,
        offset: u64,
        what: String,
    },
}

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// What is known about one address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Symbol {
    /// The file-relative address that was looked up.
    pub offset: u64,
    /// The innermost function (inlined or not) containing it, demangled.
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The nearest symbol at or below the address and the distance to it.
    pub symbol: Option<(String, u64)>,
}

/// A source path from DWARF (absolute: the build directory, DW_AT_comp_dir, joined with the
/// file's name) as the user reads it: relative to the working directory when it lies under it.
fn as_the_user_reads_it(file: &str) -> String {
    static CWD: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let cwd = CWD.get_or_init(|| std::env::current_dir().ok());
    cwd.as_deref()
        .and_then(|cwd| Path::new(file).strip_prefix(cwd).ok())
        .filter(|rel| !rel.as_os_str().is_empty())
        .map_or_else(|| file.to_string(), |rel| rel.display().to_string())
}

impl Symbol {
    /// `file:line`, else `symbol+0xoff`, else `0xaddress`.
    pub fn location(&self) -> String {
        match (&self.file, self.line, &self.symbol) {
            (Some(f), Some(l), _) => format!("{f}:{l}"),
            (_, _, Some((s, off))) => format!("{s}+{off:#x}"),
            _ => format!("{:#x}", self.offset),
        }
    }

    /// The function's name, else the symbol's, else `??`.
    pub fn function_name(&self) -> String {
        self.function
            .clone()
            .or_else(|| self.symbol.as_ref().map(|(s, _)| s.clone()))
            .unwrap_or_else(|| "??".into())
    }
}

/// Symbol information of one ELF file.
pub struct Symbolizer {
    path: PathBuf,
    /// Lowest `PT_LOAD` `p_vaddr`, page-aligned: file-relative offset 0.
    base: u64,
    dwarf: Option<addr2line::Context<Reader>>,
    /// The separate debug file the DWARF came from, if any.
    debug_file: Option<PathBuf>,
    /// (address, demangled name), sorted.
    symbols: Vec<(u64, String)>,
    unwind: unwind::Cfi,
    /// `PT_LOAD` segments: [start, end) virtual addresses.
    segments: Vec<(u64, u64)>,
}

const PAGE: u64 = 4096;

/// Whether a demangled function name is one of the Rust `cilkview` crate's (`cilkview::join`,
/// `<cilkview::FunctionGuard as core::ops::drop::Drop>::drop`, …): code of the marks, inlined
/// into the program, that call-site names skip.
pub fn is_marks_library(function: &str) -> bool {
    function
        .strip_prefix('<')
        .unwrap_or(function)
        .starts_with("cilkview::")
}

/// The next frame (innermost first) whose function is not of the marks library; the frames of
/// the library before it are consumed. The innermost frame if the names cannot be read.
/// Whether a DWARF source path is a system header (inline code of libstdc++, glibc, gcc).
fn is_system_header(file: &str) -> bool {
    ["/usr/include/", "/usr/local/include/", "/usr/lib/gcc/"]
        .iter()
        .any(|p| file.starts_with(p))
}

fn next_outside_marks_library<'ctx, R: gimli::Reader>(
    frames: &mut addr2line::FrameIter<'ctx, R>,
) -> Option<addr2line::Frame<'ctx, R>> {
    loop {
        let frame = frames.next().ok()??;
        let library = frame
            .function
            .as_ref()
            .and_then(|f| f.demangle().ok())
            .is_some_and(|name| is_marks_library(&name));
        if !library {
            return Some(frame);
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, SymbolError> {
    std::fs::read(path).map_err(|source| SymbolError::Io {
        path: path.to_owned(),
        source,
    })
}

fn parse<'d>(path: &Path, data: &'d [u8]) -> Result<object::File<'d>, SymbolError> {
    object::File::parse(data).map_err(|source| SymbolError::Format {
        path: path.to_owned(),
        source,
    })
}

fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

fn load_dwarf(path: &Path, file: &object::File) -> Result<addr2line::Context<Reader>, SymbolError> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(gimli::EndianArcSlice::new(Arc::from(&*data), endian))
    })
    .map_err(|source| SymbolError::Dwarf {
        path: path.to_owned(),
        source,
    })?;
    addr2line::Context::from_dwarf(dwarf).map_err(|source| SymbolError::Dwarf {
        path: path.to_owned(),
        source,
    })
}

fn symbol_table(file: &object::File) -> Vec<(u64, String)> {
    let map = file.symbol_map();
    map.symbols()
        .iter()
        .map(|s| {
            let name = addr2line::demangle_auto(Cow::Borrowed(s.name()), None).into_owned();
            (s.address(), name)
        })
        .collect()
}

impl Symbolizer {
    /// Opens `path`, looking for separate debug files under [`DEBUG_ROOT`].
    pub fn open(path: &Path) -> Result<Symbolizer, SymbolError> {
        Symbolizer::open_with_debug_root(path, Path::new(DEBUG_ROOT))
    }

    /// Opens `path`, looking for separate debug files under `debug_root` (by build-id:
    /// `ROOT/.build-id/xx/yyyy.debug`; by `.gnu_debuglink`: beside the file, in its `.debug/`
    /// folder, and under `ROOT/` + the file's folder).
    pub fn open_with_debug_root(path: &Path, debug_root: &Path) -> Result<Symbolizer, SymbolError> {
        let data = read(path)?;
        let file = parse(path, &data)?;
        // `segments()` of an ELF file are its PT_LOAD segments.
        let base =
            file.segments()
                .map(|s| s.address())
                .min()
                .ok_or_else(|| SymbolError::NoLoad {
                    path: path.to_owned(),
                })?
                & !(PAGE - 1);
        let segments = file
            .segments()
            .map(|s| (s.address(), s.address() + s.size()))
            .collect();
        let mut symbols = symbol_table(&file);
        let unwind = unwind::Cfi::load(&file);
        let (dwarf, debug_file) = if has_dwarf(&file) {
            (Some(load_dwarf(path, &file)?), None)
        } else {
            match debugfile::find(path, &file, debug_root) {
                Some(debug_path) => {
                    let debug_data = read(&debug_path)?;
                    let debug = parse(&debug_path, &debug_data)?;
                    if symbols.is_empty() {
                        symbols = symbol_table(&debug);
                    } else {
                        // The debug file keeps the full symbol table a stripped file lost.
                        let full = symbol_table(&debug);
                        if full.len() > symbols.len() {
                            symbols = full;
                        }
                    }
                    let ctx = has_dwarf(&debug)
                        .then(|| load_dwarf(&debug_path, &debug))
                        .transpose()?;
                    (ctx, Some(debug_path))
                }
                None => (None, None),
            }
        };
        symbols.sort();
        Ok(Symbolizer {
            path: path.to_owned(),
            base,
            dwarf,
            debug_file,
            symbols,
            unwind,
            segments,
        })
    }

    /// The ELF virtual address of file-relative `offset`.
    pub fn address(&self, offset: u64) -> u64 {
        self.base.wrapping_add(offset)
    }

    /// Whether the file (or its debug file) has DWARF line information.
    pub fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    /// The separate debug file in use, if any.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_file.as_deref()
    }

    /// What is at file-relative `offset`.
    pub fn lookup(&self, offset: u64) -> Symbol {
        self.lookup_at(offset, self.address(offset))
    }

    /// A call site given by its return address (file-relative): looks up the byte before it, in
    /// the call instruction, so that a call ending a function or a line is named correctly.
    pub fn lookup_return_address(&self, offset: u64) -> Symbol {
        self.lookup_at(offset, self.address(offset).wrapping_sub(1))
    }

    /// A call site given by its return address, as [`Symbolizer::lookup_return_address`], but
    /// named in the program's own code: where the call was inlined from a system header
    /// (`/usr/include`, e.g. `std::mutex::lock` calling `pthread_mutex_lock`), the innermost
    /// frame outside the system headers, and its line (the user's `lock_guard`, say).
    pub fn lookup_call_in_own_code(&self, offset: u64) -> Symbol {
        let mut out = self.lookup_return_address(offset);
        if !out.file.as_deref().is_some_and(is_system_header) {
            return out;
        }
        let probe = self.address(offset).wrapping_sub(1);
        let Some(Ok(mut frames)) = self
            .dwarf
            .as_ref()
            .map(|c| c.find_frames(probe).skip_all_loads())
        else {
            return out;
        };
        while let Ok(Some(frame)) = frames.next() {
            let Some(loc) = frame.location else { continue };
            let Some(file) = loc.file.filter(|f| !is_system_header(f)) else {
                continue;
            };
            out.function = frame
                .function
                .as_ref()
                .and_then(|f| f.demangle().ok())
                .map(|n| n.into_owned());
            out.file = Some(as_the_user_reads_it(file));
            out.line = loc.line;
            break;
        }
        out
    }

    /// Whether file-relative `offset` lies in one of the file's `PT_LOAD` segments.
    pub fn contains(&self, offset: u64) -> bool {
        let a = self.address(offset);
        self.segments.iter().any(|&(lo, hi)| lo <= a && a < hi)
    }

    /// If the code at file-relative `offset` is a function inlined into another, the place of
    /// the inlined call: the calling function and the call's `file:line` (DWARF inline frames).
    pub fn inlined_call(&self, offset: u64) -> Option<Symbol> {
        let ctx = self.dwarf.as_ref()?;
        let mut frames = ctx
            .find_frames(self.address(offset))
            .skip_all_loads()
            .ok()?;
        // The innermost frame outside the marks library: the inlined function itself.
        next_outside_marks_library(&mut frames)?;
        let caller = frames.next().ok()??;
        let mut out = Symbol {
            offset,
            ..Symbol::default()
        };
        out.function = caller
            .function
            .as_ref()
            .and_then(|f| f.demangle().ok())
            .map(|n| n.into_owned());
        if let Some(loc) = caller.location {
            out.file = loc.file.map(as_the_user_reads_it);
            out.line = loc.line;
        }
        Some(out)
    }

    fn lookup_at(&self, offset: u64, probe: u64) -> Symbol {
        let mut out = Symbol {
            offset,
            ..Symbol::default()
        };
        let i = self.symbols.partition_point(|(a, _)| *a <= probe);
        if i > 0 {
            let (a, name) = &self.symbols[i - 1];
            out.symbol = Some((name.clone(), probe - a));
        }
        if let Some(ctx) = &self.dwarf {
            if let Ok(mut frames) = ctx.find_frames(probe).skip_all_loads() {
                if let Some(frame) = next_outside_marks_library(&mut frames) {
                    out.function = frame
                        .function
                        .as_ref()
                        .and_then(|f| f.demangle().ok())
                        .map(|n| n.into_owned());
                    if let Some(loc) = frame.location {
                        out.file = loc.file.map(as_the_user_reads_it);
                        out.line = loc.line;
                    }
                }
            }
            if out.line.is_none() {
                if let Ok(Some(loc)) = ctx.find_location(probe) {
                    out.file = loc.file.map(as_the_user_reads_it);
                    out.line = loc.line;
                }
            }
        }
        out
    }

    /// How to find the return address at file-relative `offset` (a mark's address) from the
    /// registers there, by the file's `.eh_frame` CFI.
    /// `function_start` is file-relative.
    pub fn return_address_rule(&self, offset: u64) -> Result<ReturnAddressRule, SymbolError> {
        let rule = self.unwind.rule(self.address(offset));
        rule.map(|r| ReturnAddressRule {
            function_start: r.function_start.wrapping_sub(self.base),
            ..r
        })
        .map_err(|e| match e {
            unwind::UnwindError::NoFde => SymbolError::NoCfi {
                path: self.path.clone(),
                offset,
            },
            e => SymbolError::Cfi {
                path: self.path.clone(),
                offset,
                what: e.to_string(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::is_marks_library;

    #[test]
    fn the_cilkview_crates_frames_are_the_marks_library() {
        for name in [
            "cilkview::function",
            "cilkview::parallel::join<rs_fib::fib::{{closure}}, rs_fib::fib::{{closure}}, u64, u64>",
            "<cilkview::FunctionGuard as core::ops::drop::Drop>::drop",
        ] {
            assert!(is_marks_library(name), "{name}");
        }
        for name in [
            "rs_fib::fib",
            "cilkview_demo::main",
            "<rs_fib::Tree as cilkview::Something>::f",
            "cilkview",
        ] {
            assert!(!is_marks_library(name), "{name}");
        }
    }
}
