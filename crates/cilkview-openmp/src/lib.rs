//! `cilkview-rs run --openmp`: unmodified gcc OpenMP programs.
//!
//! `preload/cilkview_omp.c` is compiled by this crate's build script into a shared object that
//! the program gets with `LD_PRELOAD` (and nothing else does): its wrappers of libgomp's entry
//! points run the program as its serial elision (a team of one thread, every task run where it
//! is created) and carry `cilkview.h` marks where the elision's dag has its spawns, syncs,
//! loops and regions. What it does, construct by construction: `docs/openmp.md`.
//!
//! This crate also checks, before anything runs, that a program uses a libgomp whose ABI the
//! library knows ([`check_program`]), writes the library to a private temporary file and says
//! which environment the program gets ([`Preload`]), and reads back what the library saw
//! ([`Counts`]).

#![forbid(unsafe_code)]

mod check;
mod counts;
mod preload;
mod sites;

pub use check::{check_program, Libgomp, OpenMpError};
pub use counts::{Counts, ThreadQuery};
pub use preload::Preload;
pub use sites::name_thread_query;

/// The preload library, a shared object for x86-64 Linux.
pub static PRELOAD_SO: &[u8] = include_bytes!(env!("CILKVIEW_OPENMP_SO"));

/// libgomp's cost per task at 2 threads, in instructions: every task goes through a locked team
/// queue, ~0.7–0.8 µs per task measured on BOTS (`docs/openmp.md`). The default of `--task-cost`.
pub const DEFAULT_TASK_COST: u64 = 10_000;
/// The same as a time, for a run whose costs are nanoseconds (`--counter native` measuring
/// time): 2.5 µs, at or above every cost per task at 2 threads measured by
/// `scripts/bench-omp-task-cost.sh` (1.2–2.4 µs), so that the lower bound stays below the
/// measured speedups (docs/openmp.md, "Calibration").
pub const DEFAULT_TASK_COST_NS: u64 = 2_500;
