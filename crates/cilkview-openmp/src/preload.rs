//! The library in a private temporary folder, and the environment the program gets.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use crate::{Counts, Runtime};

/// A runtime's preload library written to a private temporary folder (removed when this is
/// dropped), beside the file it writes its counts to.
pub struct Preload {
    runtime: &'static dyn Runtime,
    dir: tempfile::TempDir,
    library: PathBuf,
    counts: PathBuf,
}

impl Preload {
    /// Writes `runtime`'s library to a new private folder (mode 0700, under TMPDIR).
    pub fn new(runtime: &'static dyn Runtime) -> io::Result<Preload> {
        let dir = tempfile::Builder::new()
            .prefix("cilkview-openmp-")
            .tempdir()?;
        let library = dir.path().join("libcilkview-openmp.so");
        std::fs::write(&library, runtime.preload_library())?;
        let counts = dir.path().join("counts");
        Ok(Preload {
            runtime,
            dir,
            library,
            counts,
        })
    }

    /// The library's path.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The runtime it wraps.
    pub fn runtime(&self) -> &'static dyn Runtime {
        self.runtime
    }

    /// The variables to set for the program only ([`Runtime::environment`]).
    pub fn environment(
        &self,
        user_preload: Option<&OsStr>,
        team: u32,
    ) -> Vec<(OsString, OsString)> {
        self.runtime
            .environment(&self.library, &self.counts, user_preload, team)
    }

    /// What the library saw, once the program has ended (`None`: it wrote nothing complete).
    pub fn counts(&self) -> Option<Counts> {
        let text = std::fs::read_to_string(&self.counts).ok()?;
        Counts::parse(&text)
    }

    /// The private folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
