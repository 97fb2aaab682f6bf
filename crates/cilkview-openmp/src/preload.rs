//! The library in a private temporary folder, and the environment the program gets.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use crate::{Counts, PRELOAD_SO};

/// The preload library written to a private temporary folder (removed when this is dropped),
/// beside the file it writes its counts to.
pub struct Preload {
    dir: tempfile::TempDir,
    library: PathBuf,
    counts: PathBuf,
}

impl Preload {
    /// Writes the library to a new private folder (mode 0700, under TMPDIR).
    pub fn new() -> io::Result<Preload> {
        let dir = tempfile::Builder::new()
            .prefix("cilkview-openmp-")
            .tempdir()?;
        let library = dir.path().join("libcilkview-openmp.so");
        std::fs::write(&library, PRELOAD_SO)?;
        let counts = dir.path().join("counts");
        Ok(Preload {
            dir,
            library,
            counts,
        })
    }

    /// The library's path.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The variables to set for the program only: `LD_PRELOAD` with the library appended to
    /// the user's (`user_preload`, the tool's own `LD_PRELOAD`), and where the library writes
    /// its counts. The library removes itself and its variables from the program's environment
    /// when it starts.
    ///
    /// `team`: `--omp-team K`, each active parallel region as K virtual threads (below 2: off).
    pub fn environment(
        &self,
        user_preload: Option<&OsStr>,
        team: u32,
    ) -> Vec<(OsString, OsString)> {
        let mut preload = OsString::new();
        if let Some(user) = user_preload.filter(|u| !u.is_empty()) {
            preload.push(user);
            preload.push(":");
        }
        preload.push(&self.library);
        let mut env = vec![
            ("LD_PRELOAD".into(), preload),
            (
                "CILKVIEW_OPENMP_LIBRARY".into(),
                self.library.clone().into(),
            ),
            ("CILKVIEW_OPENMP_COUNTS".into(), self.counts.clone().into()),
        ];
        if team > 1 {
            env.push(("CILKVIEW_OPENMP_TEAM".into(), team.to_string().into()));
        }
        env
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
