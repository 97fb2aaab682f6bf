//! `cilkview-rs run --openmp`: unmodified parallel programs, through a preload library per
//! runtime.
//!
//! A runtime ([`Runtime`]: gcc's libgomp, [`Libgomp`]; LLVM's libomp, [`Libomp`]; oneTBB's
//! libtbb, [`Libtbb`], under `run --tbb`) is measured by a C library compiled by
//! this crate's build script (`preload/`) into a shared object that the program gets with
//! `LD_PRELOAD` (and nothing else does): its wrappers of the runtime's entry points run the
//! program as its serial elision (one thread, every task run where it is created) and carry
//! `cilkview.h` marks where the elision's dag has its spawns, syncs, loops and regions. What it
//! does, construct by construct: `docs/openmp.md`.
//!
//! This crate also checks, before anything runs, that a program uses a runtime whose ABI the
//! library knows ([`choose`]), writes the library to a private temporary file and says which
//! environment the program gets ([`Preload`]), and reads back what the library saw ([`Counts`];
//! its counters and warnings are defined once, in [`wire`], and rendered into the C side).

#![forbid(unsafe_code)]

mod check;
mod counts;
mod libgomp;
mod libomp;
mod libtbb;
mod locks;
mod preload;
mod runtime;
mod sites;
pub mod wire;

pub use check::{Linked, RuntimeError, RuntimeLibrary};
pub use counts::{Counts, ThreadQuery};
pub use libgomp::Libgomp;
pub use libomp::Libomp;
pub use libtbb::Libtbb;
pub use locks::{LockError, LockPreload, LOCKS_SO};
pub use preload::Preload;
pub use runtime::{choose, Runtime, TaskCost, OPENMP_RUNTIMES, TBB_RUNTIMES};
pub use sites::name_thread_query;

/// The OpenMP preload library (libgomp's wrappers), a shared object for x86-64 Linux.
pub static OPENMP_SO: &[u8] = include_bytes!(env!("CILKVIEW_OPENMP_SO"));
/// The OpenMP preload library of LLVM's libomp (its `__kmpc_*` wrappers), likewise.
pub static KMP_SO: &[u8] = include_bytes!(env!("CILKVIEW_KMP_SO"));
/// The oneTBB preload library (its `tbb::detail::r1` wrappers), likewise.
pub static TBB_SO: &[u8] = include_bytes!(env!("CILKVIEW_TBB_SO"));

/// libgomp's cost per task at 2 threads, in instructions: every task goes through a locked team
/// queue, ~0.7–0.8 µs per task measured on BOTS (`docs/openmp.md`). The default of `--task-cost`
/// for libgomp, and for libomp, whose cost measured the same way is of the same order.
pub const DEFAULT_TASK_COST: u64 = 10_000;
/// The same as a time, for a run whose costs are nanoseconds (`--counter native` measuring
/// time): 2.5 µs, at or above every cost per task at 2 threads measured by
/// `scripts/bench-omp-task-cost.sh` (libgomp 1.2–2.4 µs, libomp 0.5–2.1 µs), so that the lower
/// bound stays below the measured speedups (docs/openmp.md, "Calibration").
pub const DEFAULT_TASK_COST_NS: u64 = 2_500;
