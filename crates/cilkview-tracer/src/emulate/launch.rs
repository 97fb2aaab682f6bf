//! Finding a plugin-capable `qemu-x86_64`, checking the program, and starting
//! it under QEMU with the plugin (from a memfd), the record ring, the threads' shared states and
//! the two pipes (the bell and the replies).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use nix::fcntl::OFlag;
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};

use crate::{TraceError, TraceOptions};

/// The emulated CPU: a fixed model, so that glibc's CPU-dependent choices (string
/// functions, cache sizes) and hence the counts are the same on every host.
/// Haswell (AVX2, BMI2, FMA, MOVBE, ERMS: what glibc's x86-64-v3 paths use, all
/// emulated by QEMU 7.2's TCG), minus the features TCG lacks (which would make
/// QEMU print warnings on the program's stderr).
pub const CPU_MODEL: &str = "Haswell-v4,-pcid,-x2apic,-tsc-deadline,-invpcid,-spec-ctrl";

/// A plugin-capable emulator.
#[derive(Clone, Debug)]
pub struct Emulator {
    pub path: PathBuf,
    pub version: String,
}

/// How to install a plugin-capable emulator.
const INSTALL: &str =
    "apt-get install qemu-user (Debian bookworm's 7.2; QEMU 6.0-8.x built with plugin support)";

/// Why no plugin-capable `qemu-x86_64` is usable, and the fix.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("qemu-x86_64 not found in PATH: {INSTALL}")]
    NotFound,
    #[error("{}: cannot read its version from `{line}`", .path.display())]
    NoVersion { path: PathBuf, line: String },
    #[error(
        "{} is QEMU {version}; the cilkview plugin uses plugin API v1, which QEMU 6.0-8.x load \
         (QEMU 9+ refuses it): {INSTALL}",
        .path.display()
    )]
    Version { path: PathBuf, version: String },
    #[error(
        "{} ({line}) was built without plugin support (`-plugin` is an unknown option; \
         Debian's static builds are): {INSTALL}",
        .path.display()
    )]
    NoPlugins { path: PathBuf, line: String },
    #[error("cannot run {}: {error}", .path.display())]
    CannotRun {
        path: PathBuf,
        error: std::sync::Arc<std::io::Error>,
    },
    #[error(
        "{} did not answer `--version` / `-h` within {} s",
        .path.display(),
        ASK_TIME_LIMIT.as_secs()
    )]
    NoAnswer { path: PathBuf },
}

/// Find `qemu-x86_64` in PATH and check that it takes API-v1 plugins. Cached.
pub fn find() -> Result<Emulator, EmulatorError> {
    static CACHE: OnceLock<Result<Emulator, EmulatorError>> = OnceLock::new();
    CACHE.get_or_init(find_uncached).clone()
}

fn find_uncached() -> Result<Emulator, EmulatorError> {
    let path = search_path(OsStr::new("qemu-x86_64")).ok_or(EmulatorError::NotFound)?;
    let (first, plugins) = match read_emulator(&path) {
        Some(said) => said,
        None => ask_emulator(&path)?,
    };
    let version = first
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .unwrap_or("")
        .to_string();
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or_else(|| EmulatorError::NoVersion {
            path: path.clone(),
            line: first.clone(),
        })?;
    if !(6..=8).contains(&major) {
        return Err(EmulatorError::Version { path, version });
    }
    if !plugins {
        return Err(EmulatorError::NoPlugins { path, line: first });
    }
    Ok(Emulator {
        path,
        version: first,
    })
}

/// The emulator's `--version` line and whether it takes plugins, read from its ELF file: the
/// line is a string of its read-only data, and a build with plugin support exports the plugin
/// API (`qemu_plugin_register_vcpu_tb_exec_cb`) to the plugins it loads. No process started
/// (asking QEMU costs ~10 ms a question). Only the read-only data and the dynamic symbols' names
/// are read, each section at once (a tenth of the file: reading it all, or each name apart, was
/// most of the tool's own start-up); QEMU imports no plugin API, so the name in `.dynstr` is
/// its export. `None` if that cannot be read there (not an ELF file, e.g. a wrapper script; no
/// version line): ask it.
fn read_emulator(path: &Path) -> Option<(String, bool)> {
    use object::{Object, ObjectSection, SectionKind};
    let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
    let elf = object::File::parse(&cache).ok()?;
    let line = elf
        .sections()
        .filter(|s| {
            matches!(
                s.kind(),
                SectionKind::ReadOnlyData | SectionKind::ReadOnlyString
            )
        })
        .find_map(|s| {
            let data = s.data().ok()?;
            let at = memchr::memmem::find(data, b"qemu-x86_64 version ")?;
            let len = data[at..].iter().position(|&b| b == b'\n' || b == 0)?;
            Some(
                String::from_utf8_lossy(&data[at..at + len])
                    .trim()
                    .to_string(),
            )
        })?;
    let plugins = elf
        .section_by_name(".dynstr")
        .and_then(|s| s.data().ok())
        .is_some_and(|names| {
            memchr::memmem::find(names, b"\0qemu_plugin_register_vcpu_tb_exec_cb\0").is_some()
        });
    Some((line, plugins))
}

/// How long the emulator may take to answer `--version` and `-h` (~10 ms normally).
const ASK_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The emulator's `--version` line and whether `-h` lists `-plugin`, asked at once, each in a
/// process group of its own, killed (with whatever it started) if it has not answered within
/// [`ASK_TIME_LIMIT`].
fn ask_emulator(path: &Path) -> Result<(String, bool), EmulatorError> {
    let cannot_run = |error| EmulatorError::CannotRun {
        path: path.to_owned(),
        error: std::sync::Arc::new(error),
    };
    use std::os::unix::process::CommandExt;
    let ask = |arg: &str| {
        Command::new(path)
            .arg(arg)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(cannot_run)
    };
    let (version_of, help_of) = (ask("--version")?, ask("-h")?);
    let deadline = std::time::Instant::now() + ASK_TIME_LIMIT;
    let output = |mut child: Child| {
        let answered = loop {
            match child.try_wait() {
                Ok(Some(_)) => break true,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(2))
                }
                _ => break false,
            }
        };
        // Whatever it started goes too (it could hold the pipe open).
        crate::sys::kill(-(child.id() as i32), nix::libc::SIGKILL);
        if !answered {
            let _ = child.wait();
            return Err(EmulatorError::NoAnswer {
                path: path.to_owned(),
            });
        }
        child.wait_with_output().map_err(cannot_run)
    };
    let (out, help) = (output(version_of), output(help_of));
    let (out, help) = (out?, help?);
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("").trim().to_string();
    Ok((
        first,
        String::from_utf8_lossy(&help.stdout).contains("-plugin"),
    ))
}

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

/// The program to run, found and executable, and how the emulator runs it, or why it cannot.
#[allow(clippy::type_complexity)]
pub fn inspect_program(
    opts: &TraceOptions,
) -> Result<(PathBuf, Result<Runnable, Refusal>), TraceError> {
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

/// QEMU's environment for a guest that is to see `vars` (in this order), and the `-E VAR=VALUE`
/// options for the variables QEMU would take as its own options (`QEMU_*`: `QEMU_STRACE`,
/// `QEMU_GDB`, …), which are kept out of QEMU's environment. QEMU 7.2 builds the guest's
/// environment by putting each variable of its own, then of `-E`, at the front of a list, so
/// its environment is the guest's reversed, and the `QEMU_*` variables come first in the
/// guest's (in their order). A `QEMU_*` variable whose value has a comma cannot be passed
/// (`-E` splits at commas): it is left out (see [`unpassable`]).
pub fn qemu_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> (Vec<std::ffi::OsString>, Vec<std::ffi::OsString>) {
    let mut env = Vec::new();
    let mut qemu = Vec::new();
    for (k, v) in vars {
        let mut kv = k.clone();
        kv.push("=");
        kv.push(&v);
        if !k.as_bytes().starts_with(b"QEMU_") {
            env.push(kv);
        } else if !v.as_bytes().contains(&b',') {
            qemu.push(kv);
        }
    }
    env.reverse();
    qemu.reverse();
    (env, qemu)
}

/// The `QEMU_*` variables of the tool's environment that the guest cannot get (see
/// [`qemu_environment`]).
pub fn unpassable() -> Vec<String> {
    std::env::vars_os()
        .filter(|(k, v)| k.as_bytes().starts_with(b"QEMU_") && v.as_bytes().contains(&b','))
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect()
}

/// A running emulated program and the analyzer's ends of the ring and the pipes.
pub struct Launched {
    pub child: Child,
    /// The plugin's records (see `ring`).
    pub ring: File,
    /// The plugin's bell: a byte when records wait in the ring, its end when QEMU is gone.
    pub bell: File,
    /// Replies to the plugin's requests.
    pub replies: File,
    /// The threads' states, shared with the plugin (see `protocol::slot`).
    pub threads: File,
}

fn os_err(what: &str) -> impl Fn(nix::errno::Errno) -> TraceError + '_ {
    move |e| TraceError::Spawn {
        program: PathBuf::from(what),
        source: std::io::Error::from(e),
    }
}

/// Start `program` under `emu` with the plugin, as `how` says.
pub fn launch(
    emu: &Emulator,
    program: &Path,
    how: &Runnable,
    opts: &TraceOptions,
) -> Result<Launched, TraceError> {
    // The plugin in a memfd: nothing to clean up, nothing another user can swap.
    let name = CString::new("cilkview-plugin.so").expect("no NUL");
    let so = memfd_create(&name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?;
    File::from(so.try_clone().map_err(|source| TraceError::Spawn {
        program: "memfd".into(),
        source,
    })?)
    .write_all(cilkview_qemu_plugin::PLUGIN_SO)
    .map_err(|source| TraceError::Spawn {
        program: "memfd".into(),
        source,
    })?;
    // Close-on-exec everywhere (other threads of ours may spawn processes
    // meanwhile); only QEMU gets its ends, moved high, in `pre_exec`.
    let (bell_r, bell_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(os_err("pipe"))?;
    let (rep_r, rep_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(os_err("pipe"))?;
    // The records go through a ring in shared memory, read in place (see ring.rs).
    let ring_name = CString::new("cilkview-records").expect("no NUL");
    let ring = File::from(
        memfd_create(&ring_name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?,
    );
    super::ring::ring_file(&ring).map_err(|source| TraceError::Spawn {
        program: "memfd".into(),
        source,
    })?;
    // The threads' states, shared: readable after a crash of the program (see protocol::slot).
    let shm_name = CString::new("cilkview-threads").expect("no NUL");
    let shm =
        memfd_create(&shm_name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?;
    let ours: [i32; 5] = [
        so.as_raw_fd(),
        bell_w.as_raw_fd(),
        rep_r.as_raw_fd(),
        shm.as_raw_fd(),
        ring.as_raw_fd(),
    ];
    // QEMU gets them at these numbers (high, where the plugin keeps them).
    let keep = crate::sys::high_fds(ours);
    let mut plugin = format!(
        "/proc/self/fd/{},out={},in={},so={},shm={},ring={},tool={}",
        keep[0],
        keep[1],
        keep[2],
        keep[0],
        keep[3],
        keep[4],
        std::process::id()
    );
    // The process's name, as the kernel would give it (the file's name; QEMU's otherwise).
    if let Some(name) = program.file_name().map(OsStr::as_bytes) {
        if !name.contains(&b',') {
            plugin += ",comm=";
            plugin += &String::from_utf8_lossy(&name[..name.len().min(15)]);
        }
    }
    let mut cmd = Command::new(&emu.path);
    cmd.arg("-cpu").arg(CPU_MODEL).arg("-plugin").arg(plugin);
    // The program's own variables, for the guest only (QEMU's -E splits its argument at commas:
    // one variable per -E, whose value must have none). A value with a comma (the pinned
    // GLIBC_TUNABLES) goes through QEMU's own environment, which the guest gets.
    let (with_comma, guest_only_vars): (Vec<_>, Vec<_>) = opts
        .env
        .iter()
        .partition(|(_, value)| value.as_bytes().contains(&b','));
    for (name, value) in guest_only_vars {
        let mut pair = name.clone();
        pair.push("=");
        pair.push(value);
        cmd.arg("-E").arg(pair);
    }
    cmd.arg("-0");
    match how {
        Runnable::Elf => cmd.arg(&opts.program).arg(program),
        // As the kernel: interpreter [argument] script (the path found) arguments.
        Runnable::Script { interpreter, arg } => {
            cmd.arg(interpreter).arg(interpreter).args(arg).arg(program)
        }
    }
    .args(&opts.args);
    crate::sys::prepare_child(
        &mut cmd,
        std::array::from_fn::<_, 5, _>(|i| (ours[i], keep[i])),
    );
    let vars = std::env::vars_os()
        .filter(|(k, _)| !with_comma.iter().any(|(name, _)| name == k))
        .chain(with_comma.iter().map(|&(k, v)| (k.clone(), v.clone())));
    let (env, guest_only) = qemu_environment(vars);
    let mut argv = vec![emu.path.as_os_str().to_owned()];
    // Before the other options: QEMU reads `-E` before it loads anything.
    for var in &guest_only {
        argv.push("-E".into());
        argv.push(var.clone());
    }
    argv.extend(cmd.get_args().map(OsStr::to_owned));
    let c = |s: &std::ffi::OsString| CString::new(s.as_bytes()).unwrap_or_default();
    crate::sys::exec_in_order(
        &mut cmd,
        argv.iter().map(c).collect(),
        env.iter().map(c).collect(),
    );
    let child = cmd.spawn().map_err(|source| TraceError::Spawn {
        program: emu.path.clone(),
        source,
    })?;
    drop::<[OwnedFd; 3]>([so, bell_w, rep_r]);
    Ok(Launched {
        ring,
        threads: File::from(shm),
        child,
        bell: File::from(bell_r),
        replies: File::from(rep_w),
    })
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

    #[test]
    #[ignore = "slow: runs qemu-x86_64"]
    fn reading_the_emulator_says_what_asking_it_says() {
        // Not an emulator: nothing read (an ELF file without the version line; a script).
        assert_eq!(read_emulator(Path::new("/bin/sh")), None);
        assert_eq!(read_emulator(Path::new("/etc/passwd")), None);
        let Some(path) = search_path(OsStr::new("qemu-x86_64")) else {
            cilkview_fixtures::skip("qemu-x86_64 not in PATH (apt-get install qemu-user)");
            return;
        };
        let read = read_emulator(&path).expect("qemu-x86_64 is an ELF file with a version line");
        assert!(read.0.starts_with("qemu-x86_64 version "), "{read:?}");
        assert_eq!(read, ask_emulator(&path).unwrap());
    }
}
