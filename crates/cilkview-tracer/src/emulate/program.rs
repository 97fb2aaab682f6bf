//! Checking the program to run under the emulator: found, executable, an x86-64 ELF file or a
//! script (its `#!` line read as the kernel reads it), and what emulation cannot give it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::{TraceError, TraceOptions};

/// `name` as the kernel's execvp would find it: as given if it has a slash, else in PATH.
pub fn search_path(name: &OsStr) -> Option<PathBuf> {
    if name.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(name));
    }
    which::which(name).ok()
}

/// How the emulator runs a program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runnable {
    /// An x86-64 ELF program.
    Elf,
    /// A `#!` script whose interpreter is an x86-64 ELF program: run as the kernel runs it, the
    /// interpreter (with the line's argument, if any) given the script's path.
    Script {
        interpreter: PathBuf,
        arg: Option<std::ffi::OsString>,
    },
}

/// Why the emulator cannot run a program that exists and is executable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A `#!` script whose interpreter is not an x86-64 ELF program (a script itself, or a
    /// program for another machine).
    Script,
    /// A 32-bit ELF program.
    Bits32,
    /// An ELF program for another machine.
    OtherMachine,
}

impl Refusal {
    fn what(self) -> &'static str {
        match self {
            Refusal::Script => "a script whose interpreter is not an x86-64 ELF program",
            Refusal::Bits32 => "a 32-bit program",
            Refusal::OtherMachine => "not an x86-64 program",
        }
    }

    /// The error of `--counter emulate` for `path`.
    pub fn error(self, path: &Path) -> TraceError {
        TraceError::Emulator {
            message: format!(
                "`{}` is {}; the emulator runs x86-64 ELF programs only: {}",
                path.display(),
                self.what(),
                crate::backend::use_instead(cilkview_events::CounterMode::Emulate)
            ),
        }
    }

    /// Why `--counter auto` passes emulation over for `path` (the next counter, single-stepping,
    /// can run it).
    pub fn passed_over(self, path: &Path) -> String {
        let path = path.display();
        match self {
            Refusal::Script => format!(
                "emulation: `{path}` is a script whose interpreter is not an x86-64 ELF \
                 program, so it is single-stepped; to count the program it starts by emulation \
                 (thousands of times faster), run that program itself"
            ),
            _ => format!(
                "emulation: `{path}` is {}; the emulator runs x86-64 ELF programs only",
                self.what()
            ),
        }
    }
}

/// What the program's set-user-ID / set-group-ID bits give it natively and emulation cannot:
/// QEMU runs it with the caller's ids (its own exec of QEMU is an ordinary one). `None` if it
/// has neither bit.
pub fn set_id(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = path.metadata().ok()?;
    let mode = meta.mode();
    let (uid, gid) = (mode & 0o4000 != 0, mode & 0o2000 != 0);
    let what = match (uid, gid) {
        (true, true) => format!(
            "set-user-ID (owner uid {}) and set-group-ID (gid {})",
            meta.uid(),
            meta.gid()
        ),
        (true, false) => format!("set-user-ID (owner uid {})", meta.uid()),
        (false, true) => format!("set-group-ID (gid {})", meta.gid()),
        (false, false) => return None,
    };
    Some(format!("`{}` is {what}", path.display()))
}

/// The program to run: found, executable, an x86-64 ELF file or a script the emulator can run.
pub fn check_program(opts: &TraceOptions) -> Result<(PathBuf, Runnable), TraceError> {
    let (path, runnable) = inspect_program(opts)?;
    match runnable {
        Ok(how) => Ok((path, how)),
        Err(r) => Err(r.error(&path)),
    }
}

/// A program found and executable: its path, and how the emulator runs it or why it cannot.
pub type Inspected = (PathBuf, Result<Runnable, Refusal>);

/// The program to run, found and executable, and how the emulator runs it, or why it cannot.
pub fn inspect_program(opts: &TraceOptions) -> Result<Inspected, TraceError> {
    let exec_err = |source: std::io::Error| TraceError::Exec {
        program: opts.program.clone(),
        source,
    };
    let path = search_path(opts.program.as_os_str())
        .ok_or_else(|| exec_err(std::io::Error::from_raw_os_error(nix::libc::ENOENT)))?;
    let meta = path.metadata().map_err(exec_err)?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(exec_err(std::io::Error::from_raw_os_error(
            nix::libc::EACCES,
        )));
    }
    let head = read_head(&path).map_err(exec_err)?;
    if let Some((interpreter, arg)) = parse_shebang(&head) {
        let runnable = match read_head(&interpreter).ok().and_then(|h| elf_kind(&h)) {
            Some(Ok(())) => Ok(Runnable::Script { interpreter, arg }),
            _ => Err(Refusal::Script),
        };
        return Ok((path, runnable));
    }
    match elf_kind(&head) {
        Some(kind) => Ok((path, kind.map(|()| Runnable::Elf))),
        None => Err(exec_err(std::io::Error::from_raw_os_error(
            nix::libc::ENOEXEC,
        ))),
    }
}

/// The first 256 bytes of a file (as much as the kernel reads to tell its format).
fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    File::open(path)?.take(256).read_to_end(&mut head)?;
    Ok(head)
}

/// An ELF file's kind from its first bytes: `Ok` for x86-64, else why the emulator cannot run
/// it; `None` if it is not ELF.
fn elf_kind(head: &[u8]) -> Option<Result<(), Refusal>> {
    if !head.starts_with(b"\x7fELF") || head.len() < 20 {
        return None;
    }
    let machine = u16::from_le_bytes([head[18], head[19]]);
    Some(if head[4] == 1 {
        Err(Refusal::Bits32)
    } else if head[4] != 2 || machine != 62 {
        Err(Refusal::OtherMachine)
    } else {
        Ok(())
    })
}

/// The interpreter and argument on the `#!` line of the file at `path`, if it is a script.
pub fn read_shebang(path: &Path) -> Option<(PathBuf, Option<std::ffi::OsString>)> {
    parse_shebang(&read_head(path).ok()?)
}

/// A `#!` line's interpreter and argument, by the kernel's rules: the interpreter up to a blank,
/// then at most one argument, the rest of the line with its ends' blanks stripped.
fn parse_shebang(head: &[u8]) -> Option<(PathBuf, Option<std::ffi::OsString>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let line = &line[line.iter().position(|b| !blank(b)).unwrap_or(line.len())..];
    let end = line.iter().position(blank).unwrap_or(line.len());
    if end == 0 {
        return None;
    }
    let rest = &line[end..];
    let rest = &rest[rest.iter().position(|b| !blank(b)).unwrap_or(rest.len())..];
    let rest = &rest[..rest.iter().rposition(|b| !blank(b)).map_or(0, |i| i + 1)];
    let os = |b: &[u8]| OsStr::from_bytes(b).to_os_string();
    Some((
        PathBuf::from(os(&line[..end])),
        (!rest.is_empty()).then(|| os(rest)),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shebang_line_reads_as_the_kernel_reads_it() {
        let read = |line: &[u8]| {
            parse_shebang(line).map(|(i, a)| {
                (
                    i.to_string_lossy().into_owned(),
                    a.map(|a| a.to_string_lossy().into_owned()),
                )
            })
        };
        let some = |i: &str, a: Option<&str>| Some((i.to_string(), a.map(str::to_string)));
        assert_eq!(read(b"#!/bin/sh\nexit 0\n"), some("/bin/sh", None));
        assert_eq!(
            read(b"#! \t/bin/sh -e \t\nexit"),
            some("/bin/sh", Some("-e"))
        );
        // One argument: the rest of the line, blanks inside kept.
        assert_eq!(
            read(b"#!/usr/bin/env python3 -u x\n"),
            some("/usr/bin/env", Some("python3 -u x"))
        );
        assert_eq!(read(b"#!/bin/true"), some("/bin/true", None));
        assert_eq!(read(b"#! \n"), None);
        assert_eq!(read(b"\x7fELF"), None);
    }
}
