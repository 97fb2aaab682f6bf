//! Public API of `attach`: what to attach to, the outcome, and the entry point. The ptrace work
//! is in `ptrace/window.rs` (with `ptrace/stop_all.rs`, `ptrace/detach.rs`); the stop request
//! and the tool's signal guards in `signals/`.

use std::path::Path;
use std::time::Duration;

use crate::backend::FnSink;
use crate::{
    CounterInfo, CounterMode, Ending, Probe, ProbesError, StopFlag, TraceError, TraceEvent,
};

/// What to attach to and when to stop.
#[derive(Clone, Debug)]
pub struct AttachOptions {
    /// Process id (thread-group id) of a running process.
    pub pid: i32,
    pub counter: CounterMode,
    /// Stop measuring (and detach) after this long; `None`: until the stop
    /// flag is requested or the process exits.
    pub duration: Option<Duration>,
    /// Request a stop at any time (timer, signal handler, other thread).
    pub stop: StopFlag,
}

/// Summary of an attach session (same counts as [`crate::Outcome`], over
/// the attached window only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachOutcome {
    pub ending: Ending,
    pub counter: CounterInfo,
    /// Number of `Hit` events.
    pub hits: u64,
    /// Sum of the `ThreadExit` costs (thread tails, including the tails
    /// reported at detach).
    pub tail_cost: u64,
    /// Sum of all event costs: the user-space instructions of the window.
    pub total_cost: u64,
    /// Threads seen while attached.
    pub threads: u32,
    /// Wall time from the moment the probes were armed to the end.
    pub elapsed: Duration,
}

/// Attach to the running process `opts.pid`, measure until a stop request,
/// `opts.duration` or the process's exit, then (unless it exited) restore
/// every probe and detach: the process goes on as if never traced.
///
/// Every thread is seized (`PTRACE_SEIZE` without `EXITKILL`: the process
/// survives the tool) and stopped; `probes_for` is called with the
/// executable's path, then with each other file mapped executable (every
/// library already loaded, in order of load address), and later for each
/// library mapped while attached, as in [`crate::run`] (same numbering);
/// the event stream is that of [`crate::run`]: first
/// `Exec { image: 0, tid: pid, cost: 0 }`, then `ThreadStart` for every other
/// thread present, then hits, starts and exits as they happen. At detach each
/// live thread gets a final `ThreadExit { tid, cost }` carrying its tail since
/// its last event (the thread does not end: its measurement does), so the
/// costs cover the whole window. If this returns an error after the seize,
/// the process has been detached (probes restored) and left running.
pub fn attach<P, F>(
    opts: &AttachOptions,
    probes_for: P,
    on_event: F,
) -> Result<AttachOutcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    let (backend, info) = crate::choose_for_attach(opts.counter)?;
    backend.attach(
        opts,
        info,
        &mut FnSink {
            probes_for,
            on_event,
        },
    )
}
