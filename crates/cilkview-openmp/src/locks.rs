//! `run --locks`: the preload library that marks the program's lock acquires and releases
//! (`preload/locks.c`; docs/locks.md), written to a private temporary folder, and the program's
//! environment.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use crate::check::{Linked, RuntimeError};

/// Why `--locks` cannot measure a program.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Not an ELF program it can preload into (static, unreadable, not ELF).
    #[error(transparent)]
    Program(#[from] RuntimeError),
    #[error(
        "{} is a `#!` script: --locks preloads its library into the program, and the library \
         leaves the environment of the programs it starts; give the program itself",
        path.display()
    )]
    Script { path: PathBuf },
    #[error("cannot write the --locks preload library: {0}")]
    Io(#[from] io::Error),
}

/// The `--locks` preload library, a shared object for x86-64 Linux.
pub static LOCKS_SO: &[u8] = include_bytes!(env!("CILKVIEW_LOCKS_SO"));

/// The `--locks` library written to a private temporary folder (removed when this is dropped).
pub struct LockPreload {
    _dir: tempfile::TempDir,
    library: PathBuf,
}

impl LockPreload {
    /// Checks that `program` can be reached by a preload library (a dynamically linked ELF
    /// file), then writes the library to a new private folder (mode 0700, under TMPDIR).
    pub fn new(program: &Path) -> Result<LockPreload, LockError> {
        // A static program is refused there (LD_PRELOAD cannot reach it).
        if Linked::read(program, "--locks", "libc")?.is_none() {
            return Err(LockError::Script {
                path: program.to_owned(),
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("cilkview-locks-")
            .tempdir()?;
        let library = dir.path().join("libcilkview-locks.so");
        std::fs::write(&library, LOCKS_SO)?;
        Ok(LockPreload { _dir: dir, library })
    }

    /// The library's path.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// Adds the library to the program's variables `env` (appended to the `LD_PRELOAD` already
    /// there, else to `user_preload`, the tool's own), with the variable naming it (the library
    /// removes itself from the program's `LD_PRELOAD` when it starts).
    pub fn add_to(&self, env: &mut Vec<(OsString, OsString)>, user_preload: Option<&OsStr>) {
        let append = |to: &OsStr| {
            let mut preload = OsString::from(to);
            if !preload.is_empty() {
                preload.push(":");
            }
            preload.push(&self.library);
            preload
        };
        match env.iter_mut().find(|(k, _)| k == "LD_PRELOAD") {
            Some((_, value)) => *value = append(value),
            None => env.push((
                "LD_PRELOAD".into(),
                append(user_preload.unwrap_or_default()),
            )),
        }
        env.push(("CILKVIEW_LOCKS_LIBRARY".into(), self.library.clone().into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_appended_to_the_preload_already_set() {
        let preload = LockPreload {
            _dir: tempfile::tempdir().unwrap(),
            library: "/t/locks.so".into(),
        };
        let mut env = vec![("LD_PRELOAD".into(), "/u.so:/t/omp.so".into())];
        preload.add_to(&mut env, Some(OsStr::new("/ignored.so")));
        assert_eq!(env[0].1, "/u.so:/t/omp.so:/t/locks.so");
        assert_eq!(env[1].0, "CILKVIEW_LOCKS_LIBRARY");
        let mut env = Vec::new();
        preload.add_to(&mut env, Some(OsStr::new("/u.so")));
        assert_eq!(env[0].1, "/u.so:/t/locks.so");
        let mut env = Vec::new();
        preload.add_to(&mut env, None);
        assert_eq!(env[0].1, "/t/locks.so");
    }
}
