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
//! The model and every formula are explained in `docs/engine.md`.

#![forbid(unsafe_code)]

mod engine;
mod event;
mod measures;
mod prof;
mod profile;
mod profiler;

pub use engine::{Config, Engine, DEFAULT_BURDEN};
pub use event::{Event, EventKind, RegionId};
pub use measures::{
    core_counts, speedup, Anomalies, Measures, RegionMeasures, Report, Speedup,
    DEFAULT_SPAN_COEFFICIENT,
};
pub use profile::{CallSite, ContextProfile, Profile, SiteKind, SiteProfile, WorkSpan};
