//! `cilkview-rs report FILE.json`: re-render a saved report, without running anything; what is
//! derivable (parallelism, speedup table) is derived from the measures and the model.

use std::process::ExitCode;

use anyhow::{bail, Result};
use cilkview_report::{read_json, time_against_exact, ExportManager};

use crate::cli::ReportArgs;

pub fn report(args: ReportArgs) -> Result<ExitCode> {
    let mut report = read_json(&args.file)?;
    if let Some(burden) = args
        .burden
        .filter(|b| b.in_unit(report.unit) != Some(report.burden))
    {
        bail!(
            "--burden {burden} cannot be applied to a saved report: its burdened span was \
             measured with a burden of {} {} per continuation; run the program again \
             with --burden {burden}",
            report.burden,
            report.unit
        );
    }
    if let Some(exact_file) = &args.against {
        let exact = read_json(exact_file)?;
        report.against = Some(time_against_exact(
            &report,
            &args.file.display().to_string(),
            &exact,
            &exact_file.display().to_string(),
        )?);
    }
    // What the measures and the model determine, the report need not hold.
    report.derive(args.max_cores, args.span_coefficient);
    args.output.profile.check_report(&report, &args.file)?;
    args.output.what_if.apply(&mut report)?;
    let mut outputs = ExportManager::new(&(&args.output).into())?;
    let passed = outputs.write(&report, &mut std::io::stderr().lock())?;
    Ok(crate::gate_exit_code(passed))
}
