//! What `run --openmp`'s preload library saw, and libgomp's per-task cost in the prediction.

use std::fmt::Write;

use cilkview_events::CostUnit;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `openmp` block of a report (present for `run --openmp`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OpenMpReport {
    /// The libgomp the program loaded, and its newest ABI version.
    pub libgomp: String,
    pub abi: String,
    /// Charged per spawn to the work of the predicted lower bound on ≥ 2 cores, in the report's
    /// unit (instructions, or nanoseconds with the native counter measuring time).
    pub task_cost: u64,
    /// `--omp-team K`: the outermost parallel region ran as K virtual threads (1: one thread).
    #[serde(default = "one")]
    pub team: u32,
    /// The library's counters (`tasks`, `undeferred_tasks`, `loops`, `chunks`, …), in its
    /// order; empty when it could not write them (the program did not exit normally).
    pub counts: Vec<OpenMpCount>,
    /// Code that asked for the thread number or count inside a parallel region: static loops
    /// and thread-id code, which one thread runs as one strand.
    pub thread_id_code: Vec<ThreadIdSite>,
}

fn one() -> u32 {
    1
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OpenMpCount {
    pub name: String,
    pub value: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadIdSite {
    /// Function and `file:line` (or `symbol+offset`) of the call.
    pub site: String,
    pub calls: u64,
}

impl OpenMpReport {
    /// The counter `name`, 0 when absent.
    pub fn count(&self, name: &str) -> u64 {
        self.counts
            .iter()
            .find(|c| c.name == name)
            .map_or(0, |c| c.value)
    }

    /// The text report's OpenMP section (costs in `unit`, the report's).
    pub fn to_text(&self, unit: CostUnit, out: &mut String) {
        let _ = writeln!(
            out,
            "OpenMP (--openmp): {} ({}); a task costs {} {unit} of work in the lower bound on 2 \
             cores or more",
            self.libgomp, self.abi, self.task_cost
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
