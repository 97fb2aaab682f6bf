//! # cilkview-engine
//!
//! The pure counting engine of cilkview-rs: a stream of fork-join [`Event`]s in, [`Report`] out —
//! work, span, burdened span, spawns and syncs of the whole run and of each labeled region, as the
//! Cilkview algorithm computes them (He, Leiserson, Leiserson, SPAA 2010, Figure 13), extended to
//! parallel loops and regions. No I/O, no unsafe code.
//!
//! ```
//! use cilkview_engine::{Engine, Event, EventKind::*};
//! let mut engine = Engine::default();
//! // spawn a child of cost 10, run 10 in the continuation, sync.
//! for e in [Event::new(1, Spawn), Event::new(10, SpawnReturn), Event::new(10, Sync)] {
//!     engine.process(e);
//! }
//! let report = engine.finish();
//! assert_eq!((report.total.work, report.total.span), (21, 11));
//! assert_eq!(report.total.burdened_span, 1 + 15_000 + 10);
//! ```
//!
//! With [`Engine::with_profile`], enters and spawns may carry a [`CallSite`], and the report also
//! says where the work and the span come from, per call site (Cilkprof):
//!
//! ```
//! use cilkview_engine::{CallSite, Config, Engine, Event, EventKind::*};
//! let mut engine = Engine::with_profile(Config::default());
//! let (helper, sibling) = (CallSite::new(0x4011a7), CallSite::new(0x4011c3));
//! for e in [
//!     Event::at(1, Spawn, sibling),         // spawn a child of cost 10 …
//!     Event::new(10, SpawnReturn),
//!     Event::at(0, FunctionEnter, helper),  // … and call a serial helper of cost 50
//!     Event::new(50, FunctionExit),
//!     Event::new(0, Sync),
//! ] {
//!     engine.process(e);
//! }
//! let report = engine.finish();
//! let profile = report.profile.unwrap();
//! let h = profile.sites.iter().find(|s| Some(s.site) == helper).unwrap();
//! assert_eq!((h.local_on_span.span, report.total.span), (50, 51)); // the helper holds the span
//! ```
//!
//! The model and every formula are explained in `docs/engine.md`.

#![forbid(unsafe_code)]

mod engine;
mod event;
mod frame;
mod loops;
mod measures;
mod observer;
mod paths;
mod profile;
mod what_if;

pub use engine::{Config, Engine, Steps, DEFAULT_BURDEN, DEFAULT_BURDEN_NS};
pub use event::{Event, EventKind, RegionId};
pub use measures::{
    contention_bound, core_counts, speedup, speedup_with_task_cost, Anomalies, Measures,
    RegionMeasures, Report, Speedup, DEFAULT_SPAN_COEFFICIENT,
};
pub use profile::{CallSite, ContextProfile, Profile, SiteKind, SiteProfile, WorkSpan};
pub use what_if::{
    parallelism_if_parallel, plan, what_if, what_if_part, Change, ContextCost, Plan, PlanStep,
    SiteChange,
};
