//! Testing aids, not for users (the `testing` feature, which the tracer's own tests enable):
//! the [`BreakpointsOnly`] backend and the free functions running it. They exercise the
//! patching, hit, operand and fork-scrubbing paths on machines without a PMU.

use std::path::Path;

use crate::backend::FnSink;
use crate::ptrace::counting::{Breakpoints, NullCounter};
use crate::{
    ptrace, AttachOptions, AttachOutcome, Backend, CounterInfo, CounterMode, EventSink, Outcome,
    Probe, ProbesError, TraceError, TraceEvent, TraceOptions, Unavailable,
};

/// Probes patched to `int3` exactly as with [`crate::Hardware`] but no counter (every cost is 0).
pub struct BreakpointsOnly;

impl Backend for BreakpointsOnly {
    fn mode(&self) -> CounterMode {
        CounterMode::Hardware
    }
    fn describe(&self) -> crate::Description {
        crate::Description {
            in_auto: false,
            attaches: true,
            binds_cpu: false,
            advice: "breakpoints only (testing): counts nothing",
        }
    }
    fn unit(&self) -> Option<cilkview_events::CostUnit> {
        Some(cilkview_events::CostUnit::Instructions)
    }
    fn check(&self) -> Result<CounterInfo, Unavailable> {
        Ok(CounterInfo {
            kind: CounterMode::Hardware,
            reason: "breakpoints only (testing)".into(),
            notes: Vec::new(),
            bias: 0,
            unit: cilkview_events::CostUnit::Instructions,
        })
    }
    fn run(
        &self,
        opts: &TraceOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<Outcome, TraceError> {
        ptrace::run(opts, info, Breakpoints::<NullCounter>::new(0), sink)
    }
    fn attach(
        &self,
        opts: &AttachOptions,
        info: CounterInfo,
        sink: &mut dyn EventSink,
    ) -> Result<AttachOutcome, TraceError> {
        ptrace::attach(opts, info, Breakpoints::<NullCounter>::new(0), sink)
    }
}

/// [`crate::run`] with the [`BreakpointsOnly`] backend.
pub fn run_breakpoints_only<P, F>(
    opts: &TraceOptions,
    probes_for: P,
    on_event: F,
) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    let b = BreakpointsOnly;
    let info = b.check().expect("always available");
    b.run(
        opts,
        info,
        &mut FnSink {
            probes_for,
            on_event,
        },
    )
}

/// [`crate::attach`] with the [`BreakpointsOnly`] backend.
pub fn attach_breakpoints_only<P, F>(
    opts: &AttachOptions,
    probes_for: P,
    on_event: F,
) -> Result<AttachOutcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    let b = BreakpointsOnly;
    let info = b.check().expect("always available");
    b.attach(
        opts,
        info,
        &mut FnSink {
            probes_for,
            on_event,
        },
    )
}

/// Make the native counter run its instructions path (as where user space can read the
/// counter with `rdpmc`) with a software event, each thread's task clock, standing in for the
/// instructions counter: the injected `perf_event_open`, `mmap`, `close` and `munmap`, the
/// counter pages, `READ` in the stubs and the tool's copies of the events run for real; the
/// page has no counter index, so every read gives the page's `offset` and no `rdpmc` runs. The
/// costs are not instructions. Call before the native counter's first use in the process.
pub fn native_software_stand_in() {
    crate::ptrace::counting::use_software_stand_in();
}
