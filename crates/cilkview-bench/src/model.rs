//! The benchmark's results; their serde form is documented in docs/json-schema.md.

use serde::{Deserialize, Serialize};

use cilkview_engine::Speedup;

use crate::{BandwidthReport, BenchOptions, Placement, Summary};

/// The results at one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoresResult {
    pub cores: u32,
    /// Every trial's wall-clock time, seconds, in the order run.
    pub seconds: Vec<f64>,
    /// Median, minimum and maximum of `seconds`.
    pub time: Summary,
    /// T(1)/T(P) with medians; `min`/`max` divide T(1)'s median by this P's slowest/fastest trial.
    pub speedup: Summary,
    /// Median speedup / P.
    pub efficiency: f64,
    /// The predicted range at this P, when a prediction was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Speedup>,
    /// Where the measured speedup lies relative to `predicted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The version of the JSON format of [`BenchReport`], its `version` key: raised when a key
/// changes meaning or is removed (keys are only ever added otherwise).
pub const JSON_VERSION: u32 = 1;

fn json_version() -> u32 {
    JSON_VERSION
}

/// The JSON Schema (draft 2020-12) of `cilkview-rs bench --json`, derived from [`BenchReport`]'s
/// serde form.
pub fn json_schema() -> serde_json::Value {
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<BenchReport>();
    schema.insert(
        "title".into(),
        "cilkview-rs benchmark (bench --json)".into(),
    );
    schema.insert(
        "description".into(),
        format!(
            "The report of `cilkview-rs bench --json FILE`, format version {JSON_VERSION}: \
             measured times and speedups per worker count, beside a prediction if given."
        )
        .into(),
    );
    schema.to_value()
}

/// A whole benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchReport {
    /// The version of this JSON format ([`JSON_VERSION`]).
    #[serde(default = "json_version")]
    pub version: u32,
    pub program: String,
    pub args: Vec<String>,
    /// CPUs available to the tool when it ran.
    pub cpus_available: usize,
    pub trials: u32,
    pub warmup: u32,
    pub workers_env: Vec<String>,
    pub results: Vec<CoresResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<BandwidthReport>,
}

impl BenchReport {
    pub(crate) fn new(
        opts: &BenchOptions,
        cpus_available: usize,
        times: Vec<(u32, Vec<f64>)>,
    ) -> BenchReport {
        let t1 = times
            .iter()
            .find(|(p, _)| *p == 1)
            .map(|(_, s)| Summary::of(s).median)
            .unwrap_or(f64::NAN);
        let results = times
            .into_iter()
            .map(|(cores, seconds)| {
                let time = Summary::of(&seconds);
                let speedup = Summary {
                    median: t1 / time.median,
                    min: t1 / time.max,
                    max: t1 / time.min,
                };
                CoresResult {
                    cores,
                    efficiency: speedup.median / f64::from(cores),
                    seconds,
                    time,
                    speedup,
                    predicted: None,
                    placement: None,
                }
            })
            .collect();
        BenchReport {
            version: JSON_VERSION,
            program: opts.program.display().to_string(),
            args: opts
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cpus_available,
            trials: opts.trials,
            warmup: opts.warmup,
            workers_env: opts.launch().workers_env,
            results,
            bandwidth: None,
        }
    }
}
