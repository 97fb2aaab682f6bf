//! `cilkview-rs bench` (and `run --bench`): run the program natively at each worker count,
//! print the measured speedups beside the predicted range, write JSON/CSV/plot files.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use cilkview_bench::{
    available_cpus, parse_cores, BenchError, BenchOptions, BenchReport, Placement, Progress,
};
use cilkview_report::{
    read_json, render_plot, Exporter, MeasuredPoint, PlotExporter, PlotFormat, Reservation,
    RunReport, Speedup, SpeedupPlot,
};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A parsed `--cores LIST`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreList(pub Vec<u32>);

fn parse_core_list(s: &str) -> Result<CoreList, String> {
    parse_cores(s).map(CoreList)
}

/// A `--plot` file name: refused now, before anything runs, unless it ends in .svg or .png.
pub fn parse_plot_path(s: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(s);
    PlotFormat::of(&path)
        .map(|_| path)
        .map_err(|_| "a plot file must end in .svg or .png".to_string())
}

/// How to benchmark (shared by `bench` and `run --bench`).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Benchmark")]
pub struct BenchTuning {
    /// Worker counts to run, e.g. 1,2,4 or 1-8 [default: 1 to the number of CPUs available].
    /// P = 1, the baseline of the speedups, is always run.
    #[arg(long, value_name = "LIST", value_parser = parse_core_list)]
    pub cores: Option<CoreList>,
    /// Timed runs per worker count; the median is reported, with the min and max.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub trials: u32,
    /// Untimed runs before the trials of each worker count.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(0..=100))]
    pub warmup: u32,
    /// Another environment variable to set to the worker count (CILK_NWORKERS,
    /// OMP_NUM_THREADS and RAYON_NUM_THREADS always are). Repeatable.
    #[arg(long, value_name = "NAME")]
    pub workers_env: Vec<String>,
    /// Let the benchmarked runs' output through (it is discarded otherwise).
    #[arg(long)]
    pub show_output: bool,
    /// Allow more workers than CPUs available (they then share the CPUs).
    #[arg(long)]
    pub oversubscribe: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub tuning: BenchTuning,
    /// Also run the memory-bandwidth test: P copies of the serial program at once vs one alone
    /// (P = the largest core count).
    #[arg(long, help_heading = "Benchmark")]
    pub bandwidth: bool,
    /// A report saved by `cilkview-rs run --json`: show the predicted range beside each
    /// measured speedup.
    #[arg(long, value_name = "FILE.json", help_heading = "Prediction")]
    pub analysis: Option<PathBuf>,
    /// With --analysis: predict from this region's measures (cv_region_begin("LABEL")) instead
    /// of the whole run's (whose serial start-up weighs heavily on a small analysed input).
    #[arg(
        long,
        value_name = "LABEL",
        requires = "analysis",
        help_heading = "Prediction"
    )]
    pub region: Option<String>,
    /// Write the benchmark as JSON to FILE, `-` for standard output (its JSON Schema:
    /// `cilkview-rs schema bench`).
    #[arg(long, value_name = "FILE", help_heading = "Outputs")]
    pub json: Option<PathBuf>,
    /// Write one CSV row per worker count to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE", help_heading = "Outputs")]
    pub csv: Option<PathBuf>,
    /// Draw the measured speedups (and the prediction, with --analysis): FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE", value_parser = parse_plot_path, help_heading = "Outputs")]
    pub plot: Option<PathBuf>,
    /// The program, then its arguments. Options end at PROGRAM: everything after it is the
    /// program's (an optional `--` right after PROGRAM is dropped).
    #[arg(value_name = "PROGRAM [-- ARGS]", required = true, num_args = 1..,
          trailing_var_arg = true, help_heading = None::<&str>)]
    pub command: Vec<OsString>,
}

/// The predicted range at P of an analysis report.
pub fn predicted(report: &RunReport, cores: u32) -> Speedup {
    cilkview_report::predicted(report, cores)
}

/// The report whose measures predict: the whole run, or one region's measures in its place.
fn prediction_source(mut report: RunReport, region: Option<&str>) -> Result<RunReport> {
    let Some(label) = region else {
        return Ok(report);
    };
    let Some(r) = report.regions.iter().find(|r| r.label == label).cloned() else {
        let known: Vec<&str> = report.regions.iter().map(|r| r.label.as_str()).collect();
        anyhow::bail!(
            "the analysis has no region \"{label}\" (its regions: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    report.program = format!("{} [{label}]", report.program);
    report.measures = r.measures;
    Ok(report)
}

/// The measured speedups as plot points.
pub fn measured_points(bench: &BenchReport) -> Vec<MeasuredPoint> {
    bench
        .results
        .iter()
        .map(|r| MeasuredPoint {
            cores: r.cores,
            median: r.speedup.median,
            min: r.speedup.min,
            max: r.speedup.max,
        })
        .collect()
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
pub fn measure(opts: &BenchOptions, bandwidth: bool) -> Result<BenchReport, BenchError> {
    // A signal to the tool kills the run in progress and ends the benchmark cleanly.
    let _interrupt =
        cilkview_bench::interrupt_on(&cilkview_bench::STOP_SIGNALS).map_err(BenchError::Wait)?;
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
pub fn failed(e: BenchError) -> Result<ExitCode> {
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

/// The table on stderr.
pub fn table(report: &BenchReport) -> String {
    let mut out = String::new();
    let mut command = report.program.clone();
    for a in &report.args {
        command.push(' ');
        command.push_str(a);
    }
    let _ = writeln!(
        out,
        "cilkview-rs bench: {command}\n{} trial(s) per worker count after {} warm-up run(s); \
         workers set by {}; median [min – max]",
        report.trials,
        report.warmup,
        report.workers_env.join(", ")
    );
    let predicted = report.results.iter().any(|r| r.predicted.is_some());
    let _ = write!(
        out,
        "{:>4}  {:>26}  {:>22}  {:>10}",
        "P", "time (s)", "speedup", "efficiency"
    );
    if predicted {
        let _ = write!(out, "  {:>15}  measured vs predicted", "predicted");
    }
    let _ = writeln!(out);
    for r in &report.results {
        let _ = write!(
            out,
            "{:>4}  {:>26}  {:>22}  {:>9.0}%",
            r.cores,
            format!(
                "{:.4} [{:.4} – {:.4}]",
                r.time.median, r.time.min, r.time.max
            ),
            format!(
                "{:.2} [{:.2} – {:.2}]",
                r.speedup.median, r.speedup.min, r.speedup.max
            ),
            r.efficiency * 100.0
        );
        if let (Some(p), Some(place)) = (&r.predicted, r.placement) {
            let _ = write!(
                out,
                "  {:>15}  {}",
                format!("{:.2} – {:.2}", p.lower, p.upper),
                match place {
                    Placement::Inside => "inside",
                    Placement::Above => "ABOVE (faster than predicted)",
                    Placement::Below => "BELOW (slower than predicted)",
                }
            );
        }
        let _ = writeln!(out);
    }
    if report
        .results
        .iter()
        .any(|r| r.placement == Some(Placement::Below))
    {
        let _ = writeln!(
            out,
            "Below the predicted range: something the instruction counts cannot see holds the \
             program back (memory bandwidth, contention, false sharing, the runtime's own costs). \
             Try --bandwidth."
        );
    }
    if let Some(b) = &report.bandwidth {
        let _ = writeln!(
            out,
            "Memory bandwidth: {} copies at once {:.4} s [{:.4} – {:.4}], one alone {:.4} s: {}",
            b.copies,
            b.together.median,
            b.together.min,
            b.together.max,
            b.alone.median,
            b.explain()
        );
    }
    out
}

/// One CSV row.
#[derive(serde::Serialize)]
struct CsvRow {
    cores: u32,
    time_median: f64,
    time_min: f64,
    time_max: f64,
    speedup_median: f64,
    speedup_min: f64,
    speedup_max: f64,
    efficiency: f64,
    predicted_lower: Option<f64>,
    predicted_upper: Option<f64>,
    placement: Option<&'static str>,
}

fn csv_bytes(report: &BenchReport) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for r in &report.results {
        w.serialize(CsvRow {
            cores: r.cores,
            time_median: r.time.median,
            time_min: r.time.min,
            time_max: r.time.max,
            speedup_median: r.speedup.median,
            speedup_min: r.speedup.min,
            speedup_max: r.speedup.max,
            efficiency: r.efficiency,
            predicted_lower: r.predicted.map(|p| p.lower),
            predicted_upper: r.predicted.map(|p| p.upper),
            placement: r.placement.map(Placement::as_str),
        })?;
    }
    w.into_inner().context("cannot encode the CSV")
}

/// `cilkview-rs bench`.
pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    let (program, program_args) = crate::cli::program_and_args(&args.command);
    let program = crate::program::resolve(program)?;
    let analysis = match &args.analysis {
        Some(path) => Some(prediction_source(read_json(path)?, args.region.as_deref())?),
        None => None,
    };
    let opts = options(&args.tuning, &program, program_args)?;
    let to_stdout = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if to_stdout(&args.json) && to_stdout(&args.csv) {
        anyhow::bail!(
            "--json - and --csv - would both write to standard output: name a file for one"
        );
    }
    let files: Vec<PathBuf> = [&args.json, &args.csv, &args.plot]
        .into_iter()
        .flatten()
        .filter(|p| p.as_os_str() != "-")
        .cloned()
        .collect();
    let mut reserved = Reservation::reserve(files)?;

    let mut report = match measure(&opts, args.bandwidth) {
        Ok(r) => r,
        Err(e) => return failed(e),
    };
    if let Some(a) = &analysis {
        cilkview_bench::compare(&mut report, |p| Some(predicted(a, p)));
    }
    eprint!("{}", table(&report));
    if let Some(path) = &args.json {
        let mut bytes = serde_json::to_vec_pretty(&report)?;
        bytes.push(b'\n');
        write(path, &bytes)?;
    }
    if let Some(path) = &args.csv {
        write(path, &csv_bytes(&report)?)?;
    }
    if let Some(path) = &args.plot {
        let measured = measured_points(&report);
        let bytes = match &analysis {
            Some(a) => {
                // The title names the program benchmarked, not the (serial) build analysed.
                let mut titled = a.clone();
                titled.program = match &args.region {
                    Some(label) => format!("{} [{label}]", report.program),
                    None => report.program.clone(),
                };
                PlotExporter {
                    path: path.clone(),
                    measured,
                }
                .render(&titled)?
                .remove(0)
                .bytes
            }
            None => {
                let max_cores = measured.iter().map(|m| m.cores).max().unwrap_or(1);
                let plot = SpeedupPlot {
                    program: report.program.clone(),
                    prediction: None,
                    measured,
                    max_cores,
                };
                render_plot(&plot, PlotFormat::of(path)?)?
            }
        };
        write(path, &bytes)?;
    }
    reserved.keep();
    Ok(ExitCode::SUCCESS)
}

/// Writes an output file; `-` is standard output.
fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|()| out.flush())
            .context("cannot write to standard output");
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// `run --bench`: benchmark the analysed program; the points go on the plots and the table
/// (printed by the caller after the analysis report) compares them with the prediction.
pub fn after_analysis(
    tuning: &BenchTuning,
    program: &Path,
    args: &[OsString],
    analysis: &RunReport,
) -> Result<std::result::Result<BenchReport, ExitCode>> {
    let opts = options(tuning, program, args)?;
    match measure(&opts, false) {
        Ok(mut report) => {
            cilkview_bench::compare(&mut report, |p| Some(predicted(analysis, p)));
            Ok(Ok(report))
        }
        Err(e) => failed(e).map(Err),
    }
}

/// Checks, before anything runs, what `bench` would refuse anyway.
pub fn precheck(tuning: &BenchTuning, program: &Path) -> Result<()> {
    options(tuning, program, &[]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dash_dash_after_the_program_is_dropped() {
        let c: Vec<OsString> = ["./app", "--", "--json", "x"].map(OsString::from).to_vec();
        let (p, a) = crate::cli::program_and_args(&c);
        assert_eq!(p, "./app");
        assert_eq!(a, ["--json", "x"].map(OsString::from).to_vec());
        let c: Vec<OsString> = ["./app", "--json", "x"].map(OsString::from).to_vec();
        assert_eq!(crate::cli::program_and_args(&c).1.len(), 2);
    }

    #[test]
    fn empty_core_list_is_refused() {
        assert!(parse_core_list("").is_err());
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
