//! # cilkview-analysis
//!
//! The pipeline of cilkview-rs, from a backend's events to the report model:
//!
//! * a backend (the ptrace tracer today) runs the program and asks, for each image it maps, which
//!   probes to watch: [`Session`] answers from the image's cilkview marks (`cilkview-marks`),
//!   numbering probes across the executable and its libraries;
//! * every probe hit becomes a fork-join event of the hitting thread's engine
//!   (`cilkview-engine`), one engine per thread; a wrapper program exec'ing the real one before
//!   any mark is dropped;
//! * at the end the threads combine as parallel computations, into a
//!   [`cilkview_report::RunReport`] with the warnings a user needs (no marks, marks that did not
//!   nest).
//!
//! [`Session`] is an [`EventSink`]: anything that produces the `TraceEvent` stream can feed it,
//! including tests with synthetic streams. [`run`] and [`attach`] drive it with the tracer.
//! A front end needs only this crate and `cilkview-report`.

#![forbid(unsafe_code)]

mod entry_points;
mod hit_path;
mod labels;
mod locks;
mod nesting;
mod noise;
mod pipeline;
mod progress;
mod region_profile;
mod repeat;
mod repeat_runs;
mod session;
mod sites;
mod time_warnings;

pub use entry_points::{
    attach, attach_chosen, check_program, choose_for_attach, choose_for_run, command_line, run,
    run_chosen, Analysis, AttachRequest, Chosen, Model, RunRequest, BURDEN_DEFAULT,
};
pub use labels::{marked_functions, region_labels};
pub use pipeline::pipelined;
pub use progress::{Progress, HITS_STEP};
pub use repeat_runs::Repeat;
pub use session::{MarksReader, Session};

pub use cilkview_engine::{DEFAULT_BURDEN, DEFAULT_BURDEN_NS, DEFAULT_SPAN_COEFFICIENT};
pub use cilkview_events::{
    Cost, CostDefault, CostUnit, CounterInfo, CounterMode, Ending, EventSink, ExitStatus, Probe,
    TraceEvent,
};
pub use cilkview_marks::{has_marks_section, has_rayon_marks, MarksError, HEADER};
pub use cilkview_tracer::{
    backends, forward_signals, ignore_terminal_interrupts, native_unit, read_shebang,
    survive_tool_death, Backend, Description, ForwardGuard, SignalGuard, StopFlag,
    TerminalInterruptGuard, TraceError, ATTACH_STOP_SIGNALS, FORWARDED_SIGNALS,
};

#[cfg(test)]
mod runs_tests;
#[cfg(test)]
mod tests;
