//! A report narrowed to one labeled region: what `--plot-region LABEL` draws, and what
//! `bench --analysis FILE --region LABEL` predicts from.

use std::borrow::Cow;

use crate::{speedup_table, ExportError, MeasuresReport, RunReport};

impl RunReport {
    /// This report with the measures of region `label` in place of the whole program's (its
    /// speedup table recomputed with the same model), titled `PROGRAM [region LABEL]`, without
    /// regions or profile. An error names the regions there are.
    pub fn focus(&self, label: &str) -> Result<RunReport, ExportError> {
        let Some(r) = self.regions.iter().find(|r| r.label == label) else {
            return Err(ExportError::NoSuchRegion {
                label: label.to_string(),
                known: self.region_labels(),
            });
        };
        let m = r.measures.measured();
        Ok(RunReport {
            program: format!("{} [region {label}]", self.program),
            measures: MeasuresReport::of(&m),
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
            what_if: None,
            target_plan: None,
            // The locks' shares are of the whole run's work.
            locks: None,
            against: None,
            ..self.clone()
        })
    }

    /// This report, or its region `label` ([`RunReport::focus`]) if one is named.
    pub fn focused(&self, label: Option<&str>) -> Result<Cow<'_, RunReport>, ExportError> {
        match label {
            Some(label) => self.focus(label).map(Cow::Owned),
            None => Ok(Cow::Borrowed(self)),
        }
    }

    /// The analysis a benchmark is compared with (`bench --analysis FILE`): the whole run's
    /// measures, or those of region `label` (`--region`) in their place. An error names the
    /// regions there are.
    pub fn prediction(self, label: Option<&str>) -> Result<RunReport, ExportError> {
        match label {
            None => Ok(self),
            Some(label) => self
                .focus(label)
                .map_err(|_| ExportError::NoRegionToPredict {
                    label: label.to_string(),
                    known: self.region_labels(),
                }),
        }
    }

    fn region_labels(&self) -> Vec<String> {
        self.regions.iter().map(|r| r.label.clone()).collect()
    }
}

/// `its regions: a, b` (or `the report has no region`), for the error of `--plot-region`.
pub(crate) fn regions_to_plot(known: &[String]) -> String {
    if known.is_empty() {
        "the report has no region".to_string()
    } else {
        format!("its regions: {}", known.join(", "))
    }
}

/// `a, b` (or `none`), for the error of `bench --region`.
pub(crate) fn regions_to_predict(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_string()
    } else {
        known.join(", ")
    }
}
