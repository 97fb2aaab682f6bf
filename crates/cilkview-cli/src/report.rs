//! `cilkview-rs report FILE.json`: re-render a saved report, without running anything.

use std::process::ExitCode;

use anyhow::Result;
use cilkview_report::{read_json, ExportManager};

use crate::cli::ReportArgs;

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let report = read_json(&args.file)?;
    args.output.profile.check_report(&report, &args.file)?;
    let mut outputs = ExportManager::new(&(&args.output).into())?;
    let passed = outputs.write(&report, &mut std::io::stderr().lock())?;
    Ok(crate::gate_exit_code(passed))
}
