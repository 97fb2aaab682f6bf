//! The build scripts' one way of compiling one C file into a shared object in `OUT_DIR` (the
//! QEMU plugin, the OpenMP preload library), with the C compiler the `cc` crate detects (`CC`,
//! or the target's default). `cc` builds static archives only; this runs its compiler with the
//! flags of a position-independent, hidden-by-default shared object.
//!
//! ```no_run
//! let so = cilkview_build::SharedObject::new("the OpenMP preload library", "preload/omp.c")
//!     .include("../cilkview-marks/include")
//!     .link("dl")
//!     .compile("cilkview_omp.so");
//! ```

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Flags every shared object gets: position-independent, only what it exports visible, warnings.
const FLAGS: [&str; 7] = [
    "-shared",
    "-fPIC",
    "-O2",
    "-fvisibility=hidden",
    "-Wall",
    "-Wextra",
    "-std=gnu11",
];

/// One C file to compile into a shared object.
pub struct SharedObject {
    /// What it is, for the panic messages ("the QEMU plugin").
    what: String,
    source: PathBuf,
    /// Flags after [`FLAGS`] (`-I` directories included), before the source.
    flags: Vec<OsString>,
    /// Libraries linked, after the source.
    libs: Vec<OsString>,
    frame_pointer: bool,
}

impl SharedObject {
    /// `source` (relative to the crate) compiled into a shared object; `what` names it in errors.
    pub fn new(what: &str, source: impl Into<PathBuf>) -> SharedObject {
        SharedObject {
            what: what.to_string(),
            source: source.into(),
            flags: Vec::new(),
            libs: Vec::new(),
            frame_pointer: true,
        }
    }

    /// One more compiler flag.
    pub fn flag(mut self, flag: impl Into<OsString>) -> SharedObject {
        self.flags.push(flag.into());
        self
    }

    /// Headers from `dir` too (`-I dir`).
    pub fn include(mut self, dir: impl AsRef<Path>) -> SharedObject {
        let mut flag = OsString::from("-I");
        flag.push(dir.as_ref());
        self.flags.push(flag);
        self
    }

    /// Links the library `name` (`-lname`).
    pub fn link(mut self, name: &str) -> SharedObject {
        self.libs.push(format!("-l{name}").into());
        self
    }

    /// No frame pointer (`cc` adds one with debug info): for code whose fast paths are a few
    /// dozen instructions, where a prologue would count.
    pub fn no_frame_pointer(mut self) -> SharedObject {
        self.frame_pointer = false;
        self
    }

    /// Compiles it into `OUT_DIR/file_name` and returns that path; panics (the build fails) with
    /// what went wrong and the compiler it ran.
    pub fn compile(self, file_name: &str) -> PathBuf {
        let so = out_dir().join(file_name);
        let mut build = cc::Build::new();
        build.cargo_metadata(false).opt_level(2);
        if !self.frame_pointer {
            build.force_frame_pointer(false);
        }
        let compiler = build.get_compiler();
        let status = compiler
            .to_command()
            .args(FLAGS)
            .args(&self.flags)
            .arg("-o")
            .arg(&so)
            .arg(&self.source)
            .args(&self.libs)
            .status();
        match status {
            Ok(s) if s.success() => so,
            Ok(s) => panic!(
                "compiling {} failed ({s}): {:?}",
                self.what,
                compiler.path()
            ),
            Err(e) => panic!(
                "cannot run the C compiler {:?} to build {}: {e}",
                compiler.path(),
                self.what
            ),
        }
    }
}

/// The build script's `OUT_DIR`.
pub fn out_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR (run from a build script)"))
}
