//! Finding a plugin-capable `qemu-x86_64`: read from its ELF file, or asked.

use std::ffi::OsStr;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use super::program::search_path;

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

#[cfg(test)]
mod tests {
    use super::*;

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
