//! `--profile PREFIX` and `--top N` (on `run`, `attach` and `report`): call-site profiles
//! (Cilkprof). The analysis profiles when a prefix is given; the exporters are cilkview-report's.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use cilkview_report::RunReport;
use clap::Args;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Call-site profile")]
pub struct ProfileOptions {
    /// Profile call sites (Cilkprof): write PREFIX.csv, PREFIX.folded, PREFIX.svg (flame graph of
    /// the critical path), PREFIX.work.svg (of the work) and PREFIX.callgrind (for KCachegrind),
    /// add the "top call sites on the span" table to the report and `call_sites` to --json.
    #[arg(long, value_name = "PREFIX")]
    pub profile: Option<PathBuf>,
    /// Profile region LABEL (cv_region_begin/end, every instance of it) instead of the whole
    /// program: a run's whole-program profile is often mostly its serial start-up.
    #[arg(long, value_name = "LABEL", requires = "profile")]
    pub profile_region: Option<String>,
    /// Rows of the "top call sites on the span" table (default 10).
    #[arg(long, value_name = "N", requires = "profile",
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    top: Option<u64>,
}

impl ProfileOptions {
    /// Whether the run profiles call sites.
    pub fn enabled(&self) -> bool {
        self.profile.is_some()
    }

    /// `--top`, as a count.
    pub fn top(&self) -> Option<usize> {
        self.top.map(|n| n as usize)
    }

    /// `report --profile`: the saved report must have a call-site profile, of the region
    /// `--profile-region` names if it names one.
    pub fn check_report(&self, report: &RunReport, file: &Path) -> Result<()> {
        if self.enabled() && (report.call_sites.is_none() || report.call_contexts.is_none()) {
            bail!(
                "{} has no call-site profile (`call_sites`): it was written by a run without \
                 --profile; run again with --profile PREFIX --json FILE",
                file.display()
            );
        }
        if let Some(label) = &self.profile_region {
            if report.profile_region.as_ref() != Some(label) {
                let has = match &report.profile_region {
                    Some(other) => format!("of region \"{other}\""),
                    None => "of the whole program".to_string(),
                };
                bail!(
                    "{}'s call-site profile is {has}, not of region \"{label}\" (a saved \
                     profile cannot be narrowed); run again with --profile-region {label}",
                    file.display()
                );
            }
        }
        Ok(())
    }
}
