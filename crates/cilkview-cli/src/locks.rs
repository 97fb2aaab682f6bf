//! `run --locks`: the program's lock calls marked by a preload library (`cilkview-openmp`'s
//! `LockPreload`; docs/locks.md).

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, Result};
use cilkview_openmp::LockPreload;
use clap::Args;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Contention")]
pub struct LockOptions {
    /// Mark the program's lock calls (pthread mutexes and spin locks, rwlocks taken for
    /// writing) with a preload library: the report lists each lock by its acquiring call site
    /// with the work done while holding it, and bounds the speedup by the work over the most
    /// held lock's (a dynamically linked program only).
    #[arg(long)]
    pub locks: bool,
}

/// Checks the program and writes the library, before anything runs; `None` without --locks.
pub fn prepare(options: &LockOptions, program: &Path) -> Result<Option<LockPreload>> {
    if !options.locks {
        return Ok(None);
    }
    let preload = LockPreload::new(program)
        .with_context(|| format!("cannot analyze {} with --locks", program.display()))?;
    Ok(Some(preload))
}

/// Adds the library of `locks` (if any) to the program's variables `env`.
pub fn add_to(locks: Option<&LockPreload>, env: &mut Vec<(OsString, OsString)>) {
    if let Some(l) = locks {
        l.add_to(env, std::env::var_os("LD_PRELOAD").as_deref());
    }
}
