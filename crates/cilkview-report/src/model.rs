//! The report model: what one analysis found, independent of how it is shown. Its serde form is
//! the JSON schema documented in docs/json-schema.md (stable: add keys only with a version note).

use cilkview_engine::{core_counts, speedup_with_task_cost, Measures, Report, Speedup};
use cilkview_events::{CostUnit, CounterInfo, CounterMode, Ending, ExitStatus, Note};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CallContextReport, CallSiteReport};

/// Which instruction counter produced the costs, and why it was chosen.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CounterReport {
    /// `"hw"`, `"emulate"`, `"step"` or `"native"` in JSON (`"hardware"` and `"single-step"` read
    /// as aliases).
    pub mode: CounterMode,
    /// Why this counter was used, in a few words (e.g. "chosen by auto (hw unavailable here)").
    pub reason: String,
    /// Everything else said about the measurement, one note each (`id`, one-line `text`, long
    /// `detail`): why other counters were passed over, the emulator, what emulation changed,
    /// what ran uncounted. Absent in older reports (their reason held it all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// How many runs of the program the costs come from: each strand estimated from them
    /// (`run --repeat`, the native counter). Written only when more than 1.
    #[serde(default = "one_run", skip_serializing_if = "is_one_run")]
    #[schemars(default = "one_run")]
    pub runs: u32,
    /// The machine's noise over those runs, measuring time (`run --repeat`, 2 runs or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<TimeNoise>,
}

/// How far a time measured over repeated runs can be trusted, in the report's unit: the runs'
/// own work spread (the same program, taking more or less time: the machine's doing) and the
/// span with each strand at its shortest run (what is left of the noise on the critical path
/// lies between it and the reported span).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimeNoise {
    /// The least and the most work of one run, over the runs whose strands all matched the
    /// first run's (absent when they departed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_work_least: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_work_most: Option<u64>,
    /// The median run's work (the lower middle one of an even number): with many runs, one
    /// slowed run moves the most, not this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_work_median: Option<u64>,
    /// The span with each strand at its shortest run (3 runs or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_at_shortest: Option<u64>,
    /// The run (its number, from 1) whose work the report's work is, where the strands' typical
    /// costs were scaled to the median run's work (3 runs or more): the counter's notes (a mark
    /// hit's cost, the waits for the analysis) are that run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_run: Option<u32>,
}

fn one_run() -> u32 {
    1
}

fn is_one_run(runs: &u32) -> bool {
    *runs == 1
}

impl Default for CounterReport {
    /// A saved report that does not say.
    fn default() -> CounterReport {
        CounterReport {
            mode: CounterMode::Auto,
            reason: "not recorded in the report".into(),
            notes: Vec::new(),
            runs: 1,
            noise: None,
        }
    }
}

/// A derived measure not read yet (JSON has no NaN, so it never comes from a file).
fn underived() -> f64 {
    f64::NAN
}

/// A derived measure as written: JSON has no NaN or infinity, so an undefined one (a span of 0)
/// is written `null`, and read back as not derived.
fn nullable<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The version of the JSON format of [`RunReport`], its `version` key: raised when a key changes
/// meaning or is removed (keys are only ever added otherwise). Version 1 is the first to carry
/// the key; a report without one reads as the current version. Version 2: `call_contexts` are
/// rows of numbers instead of objects (version 1's objects still read). Version 3: `run
/// --openmp`'s block is `runtime` (with its `name`), not `openmp` (still read).
pub const JSON_VERSION: u32 = 3;

fn json_version() -> u32 {
    JSON_VERSION
}

fn unrecorded() -> String {
    "(program not recorded)".into()
}

fn default_burden() -> u64 {
    cilkview_engine::DEFAULT_BURDEN
}

fn default_span_coefficient() -> f64 {
    cilkview_engine::DEFAULT_SPAN_COEFFICIENT
}

impl From<&CounterInfo> for CounterReport {
    fn from(info: &CounterInfo) -> CounterReport {
        CounterReport {
            mode: info.kind,
            reason: info.reason.clone(),
            notes: info.notes.clone(),
            runs: 1,
            noise: None,
        }
    }
}

/// The measures of a whole run or of one region, as written in its JSON object (flattened into
/// it: these keys stand beside the others, in this order). Only `work`, `span` and
/// `burdened_span` are required when read back; the derived ones are NaN until
/// [`MeasuresReport::derive`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasuresReport {
    pub work: u64,
    pub span: u64,
    pub burdened_span: u64,
    /// Derived.
    #[serde(default = "underived", deserialize_with = "nullable")]
    pub parallelism: f64,
    /// Derived.
    #[serde(default = "underived", deserialize_with = "nullable")]
    pub burdened_parallelism: f64,
    #[serde(default)]
    pub spawns: u64,
    #[serde(default)]
    pub syncs: u64,
}

impl MeasuresReport {
    /// The engine's measures with what derives from them.
    pub fn of(m: &Measures) -> MeasuresReport {
        MeasuresReport {
            work: m.work,
            span: m.span,
            burdened_span: m.burdened_span,
            parallelism: m.parallelism(),
            burdened_parallelism: m.burdened_parallelism(),
            spawns: m.spawns,
            syncs: m.syncs,
        }
    }

    /// The measured values (not the derived ones), as the engine's [`Measures`].
    pub fn measured(&self) -> Measures {
        Measures {
            work: self.work,
            span: self.span,
            burdened_span: self.burdened_span,
            spawns: self.spawns,
            syncs: self.syncs,
        }
    }

    /// Fills in the derived measures that were not read (NaN); stored ones are kept.
    pub fn derive(&mut self) {
        let m = self.measured();
        if self.parallelism.is_nan() {
            self.parallelism = m.parallelism();
        }
        if self.burdened_parallelism.is_nan() {
            self.burdened_parallelism = m.burdened_parallelism();
        }
    }
}

/// The measures of one label, accumulated over its occurrences.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RegionReport {
    pub label: String,
    #[serde(flatten)]
    pub measures: MeasuresReport,
    /// Marks hit in it, each ending one of its strands (after each of its begins, up to and
    /// including its end), over every time it ran; absent in a report from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<u64>,
}

/// A whole analysis report. Field order is the JSON key order. Reading one back, only `work`,
/// `span` and `burdened_span` are required: what is derivable from them (marked "derived") may be
/// absent and is then NaN or empty until [`RunReport::derive`] fills it in; other absent keys take
/// the defaults of `run`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunReport {
    /// The version of this JSON format ([`JSON_VERSION`]).
    #[serde(default = "json_version")]
    pub version: u32,
    #[serde(default = "unrecorded")]
    pub program: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The program's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<i32>,
    /// The signal that killed the program, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(default)]
    pub counter: CounterReport,
    /// What work, span and the burden count: `"instructions"`, or `"nanoseconds"` (the native
    /// counter measuring time).
    #[serde(default)]
    pub unit: CostUnit,
    #[serde(default = "default_burden")]
    pub burden: u64,
    #[serde(default = "default_span_coefficient")]
    pub span_coefficient: f64,
    /// The whole run's measures.
    #[serde(flatten)]
    pub measures: MeasuresReport,
    /// Marks hit (events consumed by the engine).
    #[serde(default)]
    pub events: u64,
    /// Derived.
    #[serde(default = "underived", deserialize_with = "nullable")]
    pub average_maximal_strand: f64,
    /// Derived.
    #[serde(default)]
    pub speedup: Vec<Speedup>,
    #[serde(default)]
    pub regions: Vec<RegionReport>,
    /// Present when the measures come from `cilkview-rs attach`: they cover only that window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachReport>,
    /// The region (`--profile-region LABEL`) that `call_sites` and `call_contexts` profile,
    /// every instance of it; absent: they profile the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_region: Option<String>,
    /// Per-call-site profile (Cilkprof), present only when the run was profiled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_sites: Option<Vec<CallSiteReport>>,
    /// The calling-context tree of the profile; the first context is the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_contexts: Option<Vec<CallContextReport>>,
    /// `--what-if`: the measures before and after changing the named code (docs/what-if.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<crate::WhatIfReport>,
    /// `--target-parallelism`: the call sites to parallelize, greedily by span removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_plan: Option<crate::PlanReport>,
    /// Present for `run --openmp`: what the runtime's preload library saw, and the runtime's
    /// per-task cost in the prediction (`openmp` in reports of version 0.1 read as well).
    #[serde(default, alias = "openmp", skip_serializing_if = "Option::is_none")]
    pub runtime: Option<crate::RuntimeReport>,
    /// `run --locks`: the work held under each lock, by acquiring call site (docs/locks.md);
    /// the speedup table is bounded by the most held one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locks: Option<crate::LocksReport>,
    /// `report --against EXACT.json`: a report by time beside an exact one of the same program,
    /// time per instruction over the work and over the span (docs/counters.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<crate::AgainstReport>,
    /// Things the user should know (no marks found, partial stream, …). Shown in the text report;
    /// not part of the JSON schema.
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// The speedups measured by `run --bench`, drawn on the plots beside the prediction; not part
    /// of the JSON schema (`bench --json` writes them).
    #[serde(skip)]
    pub measured: Vec<crate::MeasuredPoint>,
}

impl AttachReport {
    /// The window of process `pid` measured from `started_at` (RFC 3339) for `seconds`, which
    /// ended as `ending` says.
    pub fn new(pid: i32, started_at: String, seconds: f64, ending: Ending) -> AttachReport {
        AttachReport {
            pid,
            started_at,
            seconds,
            ended: ending.name().to_string(),
        }
    }
}

/// The window of an `attach` session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttachReport {
    pub pid: i32,
    /// When measuring began, RFC 3339 (UTC).
    pub started_at: String,
    /// How long it lasted.
    pub seconds: f64,
    /// Why it ended: `"stopped"` (Ctrl-C or SIGTERM), `"duration"` (`--duration` elapsed) or
    /// `"exited"` (the process ended).
    pub ended: String,
}

/// Everything about a run that is not a measure.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub program: String,
    pub args: Vec<String>,
    pub ending: Ending,
    pub counter: CounterReport,
    /// What the costs count (the counter's [`CounterInfo::unit`]).
    pub unit: CostUnit,
    pub burden: u64,
    pub span_coefficient: f64,
    pub max_cores: u32,
}

/// The speedup table for P = 2, 4, 8, … up to `max_cores`; `task_cost`: a runtime's cost per
/// spawn (`run --openmp`, else 0; `cilkview_engine::speedup_with_task_cost`).
pub fn speedup_table(m: &Measures, max_cores: u32, delta: f64, task_cost: u64) -> Vec<Speedup> {
    core_counts(max_cores)
        .into_iter()
        .map(|p| speedup_with_task_cost(m, p, delta, task_cost))
        .collect()
}

impl RunReport {
    /// Builds the report from the engine's measures; `label(id)` names region ids.
    pub fn new(info: RunInfo, report: &Report, label: impl Fn(u32) -> String) -> RunReport {
        let m = &report.total;
        let (exit_status, signal) = match info.ending.status() {
            Some(ExitStatus::Exited(code)) => (Some(code), None),
            Some(ExitStatus::Signaled(sig)) => (None, Some(sig)),
            None => (None, None),
        };
        RunReport {
            version: JSON_VERSION,
            program: info.program,
            args: info.args,
            exit_status,
            signal,
            unit: info.unit,
            counter: info.counter,
            burden: info.burden,
            span_coefficient: info.span_coefficient,
            measures: MeasuresReport::of(m),
            events: report.events,
            average_maximal_strand: m.average_maximal_strand(),
            speedup: speedup_table(m, info.max_cores, info.span_coefficient, 0),
            regions: report
                .regions
                .iter()
                .map(|r| RegionReport {
                    label: label(r.id.0),
                    measures: MeasuresReport::of(&r.measures),
                    events: Some(r.events),
                })
                .collect(),
            attach: None,
            profile_region: None,
            call_sites: None,
            call_contexts: None,
            what_if: None,
            target_plan: None,
            runtime: None,
            locks: None,
            against: None,
            warnings: Vec::new(),
            measured: Vec::new(),
        }
    }

    /// Fills in what is derivable from the measures and the model and was not read: parallelism,
    /// burdened parallelism, average maximal strand (also of each region) and the speedup table
    /// up to `max_cores` (or the stored table's, 32 without one). With `max_cores` or
    /// `span_coefficient` given (the `report` options), the speedup table is computed anew.
    /// Stored derived values are kept otherwise, so a re-rendered report is unchanged.
    pub fn derive(&mut self, max_cores: Option<u32>, span_coefficient: Option<f64>) {
        let m = self.measures.measured();
        self.measures.derive();
        if self.average_maximal_strand.is_nan() {
            self.average_maximal_strand = m.average_maximal_strand();
        }
        for r in &mut self.regions {
            r.measures.derive();
        }
        if let Some(delta) = span_coefficient {
            self.span_coefficient = delta;
        }
        if self.speedup.is_empty() || max_cores.is_some() || span_coefficient.is_some() {
            let cores = max_cores.unwrap_or(if self.speedup.is_empty() {
                32
            } else {
                self.max_cores()
            });
            self.speedup = speedup_table(&m, cores, self.span_coefficient, self.task_cost());
            self.bound_by_locks();
        }
    }

    /// The runtime's cost per spawn in the prediction: `run --openmp`'s task cost, else 0.
    pub fn task_cost(&self) -> u64 {
        self.runtime.as_ref().map_or(0, |o| o.task_cost)
    }

    /// Records what a runtime's preload library saw, and recomputes the speedup table with its
    /// task cost.
    pub fn set_runtime(&mut self, runtime: crate::RuntimeReport) {
        self.runtime = Some(runtime);
        self.speedup = speedup_table(
            &self.measures.measured(),
            self.max_cores(),
            self.span_coefficient,
            self.task_cost(),
        );
        self.bound_by_locks();
    }

    /// The largest core count of the speedup table (the report's `--max-cores`), 1 if empty.
    pub fn max_cores(&self) -> u32 {
        self.speedup.iter().map(|s| s.cores).max().unwrap_or(1)
    }

    /// How the program ended, in words.
    pub fn ending(&self) -> String {
        match (self.exit_status, self.signal) {
            (_, Some(sig)) => format!(
                "killed by signal {sig}{}",
                signal_name(sig)
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ),
            (Some(code), None) => format!("exited with status {code}"),
            (None, None) => "its end is not recorded".to_string(),
        }
    }
}

/// The usual name of a Linux signal number (`SIGSEGV` for 11).
pub fn signal_name(sig: i32) -> Option<&'static str> {
    nix::sys::signal::Signal::try_from(sig)
        .ok()
        .map(|s| s.as_str())
}
