//! What a runtime's preload library saw (`run --openmp`), and the runtime's per-task cost in the
//! prediction.

use std::fmt::Write;

use cilkview_events::CostUnit;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `runtime` block of a report (present for `run --openmp`; read from the `openmp` key of
/// reports written before it was named so).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeReport {
    /// The runtime measured, e.g. `libgomp`.
    #[serde(default = "libgomp")]
    pub name: String,
    /// The programming model it runs (`OpenMP`) and the option that measured it (`--openmp`).
    #[serde(default = "openmp_model")]
    pub model: String,
    #[serde(default = "openmp_option")]
    pub option: String,
    /// The runtime library the program loaded, and its ABI (libgomp: its newest version node).
    #[serde(alias = "libgomp")]
    pub library: String,
    pub abi: String,
    /// Charged per spawn to the work of the predicted lower bound on ≥ 2 cores, in the report's
    /// unit (instructions, or nanoseconds with the native counter measuring time).
    pub task_cost: u64,
    /// `--omp-team K`: the outermost parallel region ran as K virtual threads (1: one thread).
    #[serde(default = "one")]
    pub team: u32,
    /// The library's counters (`tasks`, `undeferred_tasks`, `loops`, `chunks`, …), in its
    /// order; empty when it could not write them (the program did not exit normally).
    pub counts: Vec<RuntimeCount>,
    /// Code that asked for the thread number or count inside a parallel region: static loops
    /// and thread-id code, which one thread runs as one strand.
    pub thread_id_code: Vec<ThreadIdSite>,
}

fn one() -> u32 {
    1
}

fn libgomp() -> String {
    "libgomp".into()
}

fn openmp_model() -> String {
    "OpenMP".into()
}

fn openmp_option() -> String {
    "--openmp".into()
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuntimeCount {
    pub name: String,
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadIdSite {
    /// Function and `file:line` (or `symbol+offset`) of the call.
    pub site: String,
    pub calls: u64,
}

impl RuntimeReport {
    /// The counter `name`, 0 when absent.
    pub fn count(&self, name: &str) -> u64 {
        self.counts
            .iter()
            .find(|c| c.name == name)
            .map_or(0, |c| c.value)
    }

    /// The text report's section of the runtime (costs in `unit`, the report's).
    pub fn to_text(&self, unit: CostUnit, out: &mut String) {
        let _ = writeln!(
            out,
            "{} ({}): {} ({}); a task costs {} {unit} of work in the lower bound on 2 cores or \
             more",
            self.model, self.option, self.library, self.abi, self.task_cost
        );
        if self.team > 1 {
            let _ = writeln!(
                out,
                "  --omp-team {}: the outermost parallel region ran as {} virtual threads \
                 switched at barriers",
                self.team, self.team
            );
        }
        if self.counts.is_empty() {
            let _ = writeln!(
                out,
                "  the library wrote no counts (the program did not end through exit)"
            );
        } else {
            let line: Vec<String> = self
                .counts
                .iter()
                .filter(|c| c.value > 0)
                .map(|c| format!("{} {}", c.name.replace('_', " "), c.value))
                .collect();
            let _ = writeln!(
                out,
                "  seen: {}",
                if line.is_empty() {
                    "nothing".to_string()
                } else {
                    line.join(", ")
                }
            );
        }
        for s in &self.thread_id_code {
            let _ = writeln!(
                out,
                "  not split: thread-id code (a static loop or omp_get_thread_num) at {}, {} \
                 call(s): one thread runs it as one strand",
                s.site, s.calls
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_2_openmp_block_reads_as_the_runtime_block() {
        let old = r#"{"libgomp": "/usr/lib/x86_64-linux-gnu/libgomp.so.1", "abi": "GOMP_5.1",
            "task_cost": 10000, "counts": [{"name": "tasks", "value": 33}],
            "thread_id_code": []}"#;
        let r: RuntimeReport = serde_json::from_str(old).unwrap();
        assert_eq!(
            (r.name.as_str(), r.model.as_str(), r.option.as_str()),
            ("libgomp", "OpenMP", "--openmp")
        );
        assert_eq!(r.library, "/usr/lib/x86_64-linux-gnu/libgomp.so.1");
        assert_eq!((r.team, r.count("tasks"), r.count("loops")), (1, 33, 0));
        let mut text = String::new();
        r.to_text(CostUnit::Instructions, &mut text);
        assert!(text.starts_with(
            "OpenMP (--openmp): /usr/lib/x86_64-linux-gnu/libgomp.so.1 (GOMP_5.1); a task costs \
             10000 instructions"
        ));
    }
}
