//! `cilkview-rs bench` (and `run --bench`): run the program natively at each worker count,
//! with a progress bar; the table, JSON, CSV and plot are cilkview-report's exporters.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use cilkview_bench::{available_cpus, BenchError, BenchOptions, BenchReport, Progress};
use cilkview_report::{read_json, BenchExportOptions, ExportManager, RunReport};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{program_and_args, BenchArgs, BenchTuning};

/// `cilkview-rs bench`.
pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    let (program, program_args) = program_and_args(&args.command);
    let program = crate::program::resolve(program)?;
    let analysis = match &args.analysis {
        Some(path) => Some(read_json(path)?.prediction(args.region.as_deref())?),
        None => None,
    };
    let opts = options(&args.tuning, &program, program_args)?;
    let mut outputs = ExportManager::bench(&BenchExportOptions {
        json: args.json,
        csv: args.csv,
        plot: args.plot,
        analysis: analysis.clone(),
        region: args.region,
    })?;
    let mut report = match measure(&opts, args.tuning.bandwidth) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    if let Some(a) = &analysis {
        cilkview_report::compare(&mut report, a);
    }
    outputs.write(&report, &mut std::io::stderr().lock())?;
    Ok(ExitCode::SUCCESS)
}

/// `run --bench`: benchmark the analysed program, its speedups compared with the analysis's
/// prediction (the caller shows them on the plots and the table after the report).
pub fn after_analysis(
    tuning: &BenchTuning,
    program: &Path,
    args: &[OsString],
    analysis: &RunReport,
) -> Result<std::result::Result<BenchReport, ExitCode>> {
    let opts = options(tuning, program, args)?;
    match measure(&opts, tuning.bandwidth) {
        Ok(mut report) => {
            cilkview_report::compare(&mut report, analysis);
            Ok(Ok(report))
        }
        Err(e) => failed(e).map(Err),
    }
}

/// Checks, before anything runs, what `bench` would refuse anyway.
pub fn precheck(tuning: &BenchTuning, program: &Path) -> Result<()> {
    options(tuning, program, &[]).map(|_| ())
}

fn options(tuning: &BenchTuning, program: &Path, args: &[OsString]) -> Result<BenchOptions> {
    let cores = match &tuning.cores {
        Some(c) => c.0.clone(),
        None => {
            let n = available_cpus()?.len() as u32;
            (1..=n.max(1)).collect()
        }
    };
    let opts = BenchOptions {
        program: program.to_owned(),
        args: args.to_vec(),
        cores,
        trials: tuning.trials,
        warmup: tuning.warmup,
        extra_workers_env: tuning.workers_env.clone(),
        show_output: tuning.show_output,
        oversubscribe: tuning.oversubscribe,
    };
    // Too many cores: say so before anything runs.
    opts.checked_cores(available_cpus()?.len())?;
    Ok(opts)
}

/// A progress bar on a terminal; nothing otherwise.
fn progress_display(show_output: bool) -> (ProgressBar, impl FnMut(Progress)) {
    // Hidden until the number of runs is known (then drawn on a terminal only, and not when the
    // runs' output goes there too: it would share lines with the bar).
    let terminal = std::io::stderr().is_terminal() && !show_output;
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} runs {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    let handle = bar.clone();
    let update = move |p: Progress| match p {
        Progress::Begin { what, runs } => {
            handle.set_prefix(what);
            handle.set_position(0);
            handle.set_length(runs);
            if terminal {
                handle.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
        Progress::Ran {
            cores,
            trial,
            seconds,
        } => {
            handle.inc(1);
            handle.set_message(match trial {
                Some(t) => format!("P={cores} trial {t}: {seconds:.3} s"),
                None => format!("P={cores} warm-up: {seconds:.3} s"),
            });
        }
    };
    (bar, update)
}

/// Runs the benchmark (and the bandwidth test) with a progress display.
fn measure(opts: &BenchOptions, bandwidth: bool) -> Result<BenchReport, BenchError> {
    // A signal to the tool kills the run in progress and ends the benchmark cleanly.
    let _interrupt = cilkview_bench::interrupt_on(&cilkview_bench::BENCH_STOP_SIGNALS)
        .map_err(BenchError::Wait)?;
    let (bar, mut update) = progress_display(opts.show_output);
    let result = cilkview_bench::run(opts, &mut update).and_then(|mut report| {
        if bandwidth {
            let copies = report.results.last().map_or(1, |r| r.cores);
            report.bandwidth = Some(cilkview_bench::bandwidth(opts, copies, &mut update)?);
        }
        Ok(report)
    });
    bar.finish_and_clear();
    result
}

/// A failed trial: its output, then the error line; the exit code is the program's.
fn failed(e: BenchError) -> Result<ExitCode> {
    if let BenchError::TrialFailed {
        code,
        signal,
        output,
        ..
    } = &e
    {
        let mut stderr = std::io::stderr().lock();
        if !output.is_empty() {
            let _ = writeln!(stderr, "cilkview-rs: output of the failed run:");
            let _ = stderr.write_all(output.as_bytes());
            if !output.ends_with('\n') {
                let _ = writeln!(stderr);
            }
        }
        let _ = writeln!(stderr, "error: {e}");
        let status = code.unwrap_or_else(|| 128 + signal.unwrap_or(0));
        return Ok(ExitCode::from(status.clamp(1, 255) as u8));
    }
    if let BenchError::Interrupted { signal } = e {
        let _ = writeln!(std::io::stderr().lock(), "error: {e}");
        return Ok(ExitCode::from((128 + signal).clamp(1, 255) as u8));
    }
    Err(e.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::CoreList;

    #[test]
    fn empty_core_list_is_refused() {
        if let Err(e) = options(
            &BenchTuning {
                cores: Some(CoreList(vec![])),
                trials: 1,
                ..Default::default()
            },
            Path::new("/bin/true"),
            &[],
        ) {
            assert!(e.to_string().contains("no core counts"), "{e}");
        } else {
            panic!("an empty core list was accepted");
        }
    }
}
