//! `--what-if SITE=Kx|par|par:K` and `--target-parallelism P` (on `run`, `attach` and
//! `report`): computed from the call-site profile by cilkview-report and the engine
//! (docs/what-if.md); a run with them profiles call sites.

use anyhow::{bail, Result};
use cilkview_report::{RunReport, WhatIfSpec};
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "What if")]
pub struct WhatIfOptions {
    /// Predict the measures had the code of SITE been K times faster (SITE=Kx) or parallel,
    /// perfectly (SITE=par) or K ways (SITE=par:K). SITE: a call site's `file:line`, a function
    /// (every call of it) or region:LABEL. Repeatable: the changes combine. Profiles call sites.
    #[arg(long = "what-if", value_name = "SITE=CHANGE", value_parser = parse_spec)]
    pub what_if: Vec<WhatIfSpec>,
    /// The shortest list of call sites whose parallelization brings the parallelism to P
    /// (greedily by span removed), each with the parallelism after it. Profiles call sites.
    #[arg(long, value_name = "P", value_parser = parse_target)]
    pub target_parallelism: Option<f64>,
}

fn parse_spec(s: &str) -> Result<WhatIfSpec, String> {
    s.parse()
        .map_err(|e: cilkview_report::WhatIfError| e.to_string())
}

fn parse_target(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 1.0 => Ok(p),
        _ => Err("expected a parallelism of at least 1, e.g. 16".into()),
    }
}

impl WhatIfOptions {
    /// Whether the run must profile call sites for these options.
    pub fn needs_profile(&self) -> bool {
        self.target_parallelism.is_some()
            || self
                .what_if
                .iter()
                .any(|s| !matches!(s.site, cilkview_report::SiteRef::Region(_)))
    }

    /// The region labels the SPECs name (checked against the program's before it runs).
    pub fn region_labels(&self) -> impl Iterator<Item = &String> {
        self.what_if.iter().filter_map(|s| match &s.site {
            cilkview_report::SiteRef::Region(l) => Some(l),
            _ => None,
        })
    }

    /// Before the run: the options it can honour (a profile of the whole run).
    pub fn check_request(&self, profile_region: Option<&str>) -> Result<()> {
        if let (true, Some(label)) = (self.needs_profile(), profile_region) {
            bail!(
                "--what-if and --target-parallelism need the call-site profile of the whole run, \
                 not of region \"{label}\" (--profile-region): drop one or the other"
            );
        }
        Ok(())
    }

    /// Before the run: every FUNCTION a SPEC names is a marked function of `program` or of
    /// `preloaded` (where that can be known before it runs).
    pub fn check_functions(
        &self,
        program: &std::path::Path,
        preloaded: Option<&std::path::Path>,
        name: &str,
    ) -> Result<()> {
        let wanted: Vec<(&WhatIfSpec, &String)> = self
            .what_if
            .iter()
            .filter_map(|s| match &s.site {
                cilkview_report::SiteRef::Function(f) => Some((s, f)),
                _ => None,
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut known = std::collections::BTreeSet::new();
        for image in [Some(program), preloaded].into_iter().flatten() {
            match cilkview_analysis::marked_functions(image) {
                Some(names) => known.extend(names),
                None => return Ok(()),
            }
        }
        for (spec, function) in wanted {
            if !known.contains(function) {
                let has: Vec<&str> = known.iter().map(String::as_str).take(12).collect();
                bail!(
                    "--what-if {spec}: {name} has no function {function} with cv_function() \
                     (a call of it is what FUNCTION names); its marked functions: {}",
                    if has.is_empty() {
                        "none".to_string()
                    } else {
                        has.join(", ")
                    }
                );
            }
        }
        Ok(())
    }

    /// Adds `what_if` and `target_plan` to the report.
    pub fn apply(&self, report: &mut RunReport) -> Result<()> {
        report.apply_what_if(&self.what_if)?;
        if let Some(p) = self.target_parallelism {
            report.apply_target(p)?;
        }
        Ok(())
    }
}
