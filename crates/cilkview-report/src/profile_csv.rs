//! `PREFIX.csv` of `--profile PREFIX`: one row per call site, the columns of the Cilkprof paper's
//! Figure 2 plus the invocations and the names, then the top-caller columns of Figure 7 (empty for
//! a report that has none) and the parallelism of the run were the site perfectly parallel
//! (`parallelism_if_parallel`, docs/what-if.md; empty for a region's profile); a last row, kind `outside`, holds the code outside every call site,
//! so that the `local_*_on_span` columns add up to the span (docs/json-schema.md documents the
//! columns).

use std::path::PathBuf;

use crate::{prefixed, Artifact, Destination, ExportError, Exporter, RunReport};

pub struct ProfileCsvExporter {
    pub prefix: PathBuf,
}

const HEADER: [&str; 17] = [
    "location",
    "function",
    "kind",
    "invocations",
    "work_on_work",
    "span_on_work",
    "parallelism_on_work",
    "work_on_span",
    "span_on_span",
    "parallelism_on_span",
    "local_work_on_span",
    "local_span_on_span",
    "local_parallelism_on_span",
    "top_caller_work",
    "top_caller_span",
    "top_caller_parallelism",
    "parallelism_if_parallel",
];

/// The `location` of the last row: the code under no call site.
pub const OUTSIDE: &str = "(outside every call site)";

impl ProfileCsvExporter {
    /// The CSV text of the report's call sites.
    pub fn to_csv(report: &RunReport) -> Result<Vec<u8>, ExportError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        let if_parallel = report.parallelism_if_parallel();
        for (i, s) in report
            .call_sites
            .as_deref()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let top_caller = match s.top_caller {
                Some(t) => [
                    t.work.to_string(),
                    t.span.to_string(),
                    format!("{:.2}", t.parallelism()),
                ],
                None => Default::default(),
            };
            let [tc_work, tc_span, tc_parallelism] = top_caller;
            w.write_record([
                s.location.clone(),
                s.function.clone(),
                s.kind.clone(),
                s.invocations.to_string(),
                s.on_work.work.to_string(),
                s.on_work.span.to_string(),
                format!("{:.2}", s.on_work.parallelism()),
                s.on_span.work.to_string(),
                s.on_span.span.to_string(),
                format!("{:.2}", s.on_span.parallelism()),
                s.local_on_span.work.to_string(),
                s.local_on_span.span.to_string(),
                format!("{:.2}", s.local_on_span.parallelism()),
                tc_work,
                tc_span,
                tc_parallelism,
                if_parallel
                    .get(i)
                    .map(|p| format!("{p:.2}"))
                    .unwrap_or_default(),
            ])?;
        }
        if report.call_sites.is_some() {
            let outside = report.outside_call_sites();
            let mut row = vec![String::new(); HEADER.len()];
            row[0] = OUTSIDE.into();
            row[2] = "outside".into();
            row[10] = outside.work.to_string();
            row[11] = outside.span.to_string();
            row[12] = format!("{:.2}", outside.parallelism());
            w.write_record(&row)?;
        }
        w.into_inner()
            .map_err(|e| ExportError::Io("CSV", e.into_error()))
    }
}

impl Exporter for ProfileCsvExporter {
    fn destinations(&self) -> Vec<Destination> {
        vec![Destination::File(prefixed(&self.prefix, "csv"))]
    }

    fn render(&self, report: &RunReport) -> Result<Vec<Artifact>, ExportError> {
        Ok(vec![Artifact {
            destination: Destination::File(prefixed(&self.prefix, "csv")),
            bytes: Self::to_csv(report)?,
        }])
    }
}
