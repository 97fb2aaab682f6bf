//! A report narrowed to one labeled region: what `--plot-region LABEL` draws.

use crate::{speedup_table, ExportError, RunReport};

impl RunReport {
    /// This report with the measures of region `label` in place of the whole program's (its
    /// speedup table recomputed with the same model), titled `PROGRAM [region LABEL]`, without
    /// regions or profile. An error names the regions there are.
    pub fn focus(&self, label: &str) -> Result<RunReport, ExportError> {
        let Some(r) = self.regions.iter().find(|r| r.label == label) else {
            let known: Vec<&str> = self.regions.iter().map(|r| r.label.as_str()).collect();
            return Err(ExportError::NoSuchRegion {
                label: label.to_string(),
                known: if known.is_empty() {
                    "the report has no region".to_string()
                } else {
                    format!("its regions: {}", known.join(", "))
                },
            });
        };
        let m = r.measures();
        Ok(RunReport {
            program: format!("{} [region {label}]", self.program),
            work: m.work,
            span: m.span,
            burdened_span: m.burdened_span,
            parallelism: m.parallelism(),
            burdened_parallelism: m.burdened_parallelism(),
            spawns: m.spawns,
            syncs: m.syncs,
            average_maximal_strand: m.average_maximal_strand(),
            speedup: speedup_table(
                &m,
                self.max_cores(),
                self.span_coefficient,
                self.task_cost(),
            ),
            regions: Vec::new(),
            profile_region: None,
            call_sites: None,
            call_contexts: None,
            ..self.clone()
        })
    }
}
