//! `--what-if SITE=Kx|par|par:K` and `--target-parallelism P` in the report model: the sites a
//! SPEC names, resolved as the profile names them, and the engine's what-if and plan over the
//! report's calling-context tree (docs/what-if.md). JSON `what_if` and `target_plan`.

use std::fmt;
use std::str::FromStr;

use cilkview_engine::{Change, ContextCost, Measures, Speedup};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{speedup_table, MeasuresReport, RunReport};

/// What a SPEC names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteRef {
    /// `file:line` (or any location the profile writes, `symbol+0x…`): the call sites there.
    Location(String),
    /// A function name: every call of it (the sites whose callee it is).
    Function(String),
    /// `region:LABEL`: the code between cv_region_begin/end of LABEL, every instance.
    Region(String),
}

/// One `--what-if SITE=Kx|par|par:K`.
#[derive(Clone, Debug, PartialEq)]
pub struct WhatIfSpec {
    pub site: SiteRef,
    pub change: Change,
    /// As the user wrote it.
    pub text: String,
}

/// Why a SPEC cannot be read or applied.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WhatIfError {
    #[error("\"{0}\": expected SITE=Kx, SITE=par or SITE=par:K (e.g. fib.c:12=2x, helper=par, region:solve=par:4)")]
    Syntax(String),
    #[error("\"{0}\": K must be a number above 0 (K times faster; below 1, slower)")]
    Factor(String),
    #[error("--what-if {spec}: no call site of the profile is {what}{hint}")]
    UnknownSite {
        spec: String,
        what: String,
        hint: String,
    },
    #[error("--what-if {spec}: the report has no region \"{label}\" (its regions: {known})")]
    UnknownRegion {
        spec: String,
        label: String,
        known: String,
    },
    #[error("--what-if and --target-parallelism need the call-site profile of the whole run; {0}")]
    NoProfile(String),
    #[error("--what-if region:LABEL cannot be combined with other SPECs (a region's code and a call site's may overlap)")]
    RegionMixed,
}

impl FromStr for WhatIfSpec {
    type Err = WhatIfError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || WhatIfError::Syntax(text.to_string());
        let (site, change) = text.rsplit_once('=').ok_or_else(syntax)?;
        let site = site.trim();
        if site.is_empty() {
            return Err(syntax());
        }
        let factor = |k: &str| match k.trim().parse::<f64>() {
            Ok(k) if k.is_finite() && k > 0.0 => Ok(k),
            _ => Err(WhatIfError::Factor(text.to_string())),
        };
        let change = match change.trim() {
            "par" => Change::Parallel(None),
            c if c.starts_with("par:") => Change::Parallel(Some(factor(&c[4..])?)),
            c if c.ends_with('x') => Change::Faster(factor(&c[..c.len() - 1])?),
            _ => return Err(syntax()),
        };
        let site = if let Some(label) = site.strip_prefix("region:") {
            SiteRef::Region(label.to_string())
        } else if looks_like_location(site) {
            SiteRef::Location(site.to_string())
        } else {
            SiteRef::Function(site.to_string())
        };
        Ok(WhatIfSpec {
            site,
            change,
            text: text.to_string(),
        })
    }
}

/// `file:line`, `symbol+0x…` or an address, as opposed to a function name (C++ names have `::`).
fn looks_like_location(site: &str) -> bool {
    let file_line = site.rsplit_once(':').is_some_and(|(f, l)| {
        !f.ends_with(':') && !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())
    });
    file_line || site.contains("+0x") || site.starts_with("0x")
}

impl fmt::Display for WhatIfSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The measures before or after a what-if, with their speedup table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhatIfMeasures {
    #[serde(flatten)]
    pub measures: MeasuresReport,
    pub speedup: Vec<Speedup>,
}

/// One SPEC and the call sites it names (indices into `call_sites`; none for a region).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhatIfChangeReport {
    pub spec: String,
    pub sites: Vec<usize>,
}

/// `--what-if`: the run's measures and those had the SPECs' code changed. Work is exact; the
/// span is the measured critical path with its strands rescaled — a lower bound of the span
/// after the change, equal to it while that path stays the longest (docs/what-if.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhatIfReport {
    pub changes: Vec<WhatIfChangeReport>,
    pub before: WhatIfMeasures,
    pub after: WhatIfMeasures,
}

/// One step of the `--target-parallelism` plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanStepReport {
    /// Index into `call_sites`.
    pub site: usize,
    pub function: String,
    pub location: String,
    /// The span this step removes from the critical path.
    pub span_removed: u64,
    /// The span and the parallelism once this site and the ones before it are parallel.
    pub span: u64,
    pub parallelism: f64,
}

/// `--target-parallelism P`: the shortest list of call sites (greedy by span removed) whose
/// perfect parallelization brings the parallelism to P.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PlanReport {
    pub target: f64,
    pub reached: bool,
    /// The critical path's part under no call site: what parallelizing call sites leaves.
    pub serial_span: u64,
    pub steps: Vec<PlanStepReport>,
}

impl RunReport {
    /// The profile's calling-context tree as the engine's what-if reads it.
    fn context_costs(&self) -> Result<Vec<ContextCost>, WhatIfError> {
        if let Some(label) = &self.profile_region {
            return Err(WhatIfError::NoProfile(format!(
                "this profile is of region \"{label}\" (--profile-region)"
            )));
        }
        let contexts = self.call_contexts.as_deref().ok_or_else(|| {
            WhatIfError::NoProfile("this report has none (run with --what-if, or --profile)".into())
        })?;
        Ok(contexts
            .iter()
            .map(|c| ContextCost {
                parent: c.parent,
                site: c.site,
                local_work: c.local_work,
                local_span_on_span: c.local_on_span.span,
            })
            .collect())
    }

    /// The call sites a SPEC names; an error when none.
    fn resolve(&self, spec: &WhatIfSpec) -> Result<Vec<usize>, WhatIfError> {
        let sites = self.call_sites.as_deref().unwrap_or_default();
        let (found, what): (Vec<usize>, String) = match &spec.site {
            SiteRef::Location(l) => (
                (0..sites.len())
                    .filter(|&i| location_matches(&sites[i].location, l))
                    .collect(),
                format!("at {l}"),
            ),
            SiteRef::Function(f) => (
                (0..sites.len())
                    .filter(|&i| sites[i].callee.as_deref() == Some(f.as_str()))
                    .collect(),
                format!("a call of function {f}"),
            ),
            SiteRef::Region(_) => return Ok(Vec::new()),
        };
        if found.is_empty() {
            let mut known: Vec<String> = sites
                .iter()
                .map(|s| match &spec.site {
                    SiteRef::Function(_) => s.callee.clone().unwrap_or_default(),
                    _ => s
                        .location
                        .split(" @")
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                })
                .filter(|s| !s.is_empty())
                .collect();
            known.sort();
            known.dedup();
            known.truncate(8);
            let hint = if known.is_empty() {
                String::new()
            } else {
                format!(" (it has: {})", known.join(", "))
            };
            return Err(WhatIfError::UnknownSite {
                spec: spec.text.clone(),
                what,
                hint,
            });
        }
        Ok(found)
    }

    /// Checks that every SPEC names something in this report (before any long work, for
    /// `report`; after the run, for `run`).
    pub fn check_what_if(&self, specs: &[WhatIfSpec]) -> Result<(), WhatIfError> {
        self.what_if_after(specs).map(|_| ())
    }

    fn what_if_after(
        &self,
        specs: &[WhatIfSpec],
    ) -> Result<(Vec<WhatIfChangeReport>, Measures), WhatIfError> {
        let before = self.measures.measured();
        let region = specs.iter().find_map(|s| match &s.site {
            SiteRef::Region(label) => Some((s, label)),
            _ => None,
        });
        if let Some((spec, label)) = region {
            if specs.len() > 1 {
                return Err(WhatIfError::RegionMixed);
            }
            let r = self
                .regions
                .iter()
                .find(|r| &r.label == label)
                .ok_or_else(|| WhatIfError::UnknownRegion {
                    spec: spec.text.clone(),
                    label: label.clone(),
                    known: self
                        .regions
                        .iter()
                        .map(|r| r.label.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
            let after = cilkview_engine::what_if_part(
                &before,
                r.measures.work,
                r.measures.span,
                spec.change,
            );
            let changes = vec![WhatIfChangeReport {
                spec: spec.text.clone(),
                sites: Vec::new(),
            }];
            return Ok((changes, after));
        }
        let contexts = self.context_costs()?;
        let mut changes = Vec::new();
        let mut applied = Vec::new();
        for spec in specs {
            let sites = self.resolve(spec)?;
            applied.push(cilkview_engine::SiteChange {
                sites: sites.clone(),
                change: spec.change,
            });
            changes.push(WhatIfChangeReport {
                spec: spec.text.clone(),
                sites,
            });
        }
        Ok((
            changes,
            cilkview_engine::what_if(&before, &contexts, &applied),
        ))
    }

    fn what_if_measures(&self, m: &Measures) -> WhatIfMeasures {
        WhatIfMeasures {
            measures: MeasuresReport::of(m),
            speedup: speedup_table(m, self.max_cores(), self.span_coefficient, self.task_cost()),
        }
    }

    /// Computes `what_if` for `specs` (none: nothing changes).
    pub fn apply_what_if(&mut self, specs: &[WhatIfSpec]) -> Result<(), WhatIfError> {
        if specs.is_empty() {
            return Ok(());
        }
        let (changes, after) = self.what_if_after(specs)?;
        self.what_if = Some(WhatIfReport {
            changes,
            before: self.what_if_measures(&self.measures.measured()),
            after: self.what_if_measures(&after),
        });
        Ok(())
    }

    /// Computes `target_plan` for parallelism `target`.
    pub fn apply_target(&mut self, target: f64) -> Result<(), WhatIfError> {
        let contexts = self.context_costs()?;
        let sites = self.call_sites.as_deref().unwrap_or_default();
        let plan = cilkview_engine::plan(&self.measures.measured(), &contexts, sites.len(), target);
        let steps = plan
            .steps
            .iter()
            .map(|s| PlanStepReport {
                site: s.site,
                function: sites[s.site].function.clone(),
                location: sites[s.site].location.clone(),
                span_removed: s.span_removed,
                span: s.after.span,
                parallelism: s.after.parallelism(),
            })
            .collect();
        self.target_plan = Some(PlanReport {
            target,
            reached: plan.reached,
            serial_span: plan.serial_span,
            steps,
        });
        Ok(())
    }

    /// Per call site, the parallelism of the run were that site alone perfectly parallel (the
    /// profile CSV's column); empty without a whole-run profile.
    pub fn parallelism_if_parallel(&self) -> Vec<f64> {
        let (Ok(contexts), Some(sites)) = (self.context_costs(), self.call_sites.as_deref()) else {
            return Vec::new();
        };
        cilkview_engine::parallelism_if_parallel(&self.measures.measured(), &contexts, sites.len())
    }
}

/// Whether a site's location is the one a SPEC names: equal, or a path ending in it
/// (`src/fib.c:12` for `fib.c:12`), or one of the sites of that location told apart by address.
fn location_matches(location: &str, wanted: &str) -> bool {
    let location = location.split(" @").next().unwrap_or(location);
    location == wanted
        || location
            .strip_suffix(wanted)
            .is_some_and(|head| head.ends_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_as_documented() {
        let spec: WhatIfSpec = "fib.c:12=2x".parse().unwrap();
        assert_eq!(spec.site, SiteRef::Location("fib.c:12".into()));
        assert_eq!(spec.change, Change::Faster(2.0));
        let spec: WhatIfSpec = "helper=par".parse().unwrap();
        assert_eq!(spec.site, SiteRef::Function("helper".into()));
        assert_eq!(spec.change, Change::Parallel(None));
        let spec: WhatIfSpec = "region:solve=par:4".parse().unwrap();
        assert_eq!(spec.site, SiteRef::Region("solve".into()));
        assert_eq!(spec.change, Change::Parallel(Some(4.0)));
        let spec: WhatIfSpec = "ns::f=1.5x".parse().unwrap();
        assert_eq!(spec.site, SiteRef::Function("ns::f".into()));
        for bad in [
            "fib.c:12", "=2x", "f=2", "f=0x", "f=-1x", "f=par:0", "f=parx", "f=infx",
        ] {
            assert!(bad.parse::<WhatIfSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_location_matches_a_path_ending_in_it() {
        assert!(location_matches("src/fib.c:12", "fib.c:12"));
        assert!(location_matches("fib.c:12 @0x1234", "fib.c:12"));
        assert!(!location_matches("myfib.c:12", "fib.c:12"));
        assert!(!location_matches("fib.c:123", "fib.c:12"));
    }
}
