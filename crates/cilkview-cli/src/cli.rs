//! Command-line interface (clap derive).

use std::ffi::OsString;
use std::path::PathBuf;

use cilkview_analysis::{Cost, CounterMode, Model, DEFAULT_SPAN_COEFFICIENT};
use cilkview_bench::parse_cores;
use cilkview_report::{ExportOptions, Gate, PlotFormat};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "cilkview-rs",
    version,
    about = "Scalability analysis of fork-join programs from one serial run: work, span, burdened \
             span, parallelism and speedup bounds (the Cilkview model)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a program marked with cilkview.h and report its scalability (on stderr).
    Run(RunArgs),
    /// Measure a running process until Ctrl-C, SIGTERM, --duration or its exit, then detach.
    Attach(AttachArgs),
    /// Re-render a JSON report saved by `run --json` (text, gnuplot, gates) without running anything.
    Report(ReportArgs),
    /// Run a program natively at each worker count (CPU affinity + CILK_NWORKERS,
    /// OMP_NUM_THREADS, …) and report its measured speedups, beside a prediction if given.
    Bench(BenchArgs),
    /// Print the cilkview.h annotation header (e.g. `cilkview-rs header > cilkview.h`).
    Header,
    /// Print the JSON Schema of `run --json` (or of `bench --json`).
    Schema(crate::schema::SchemaArgs),
    /// Print a shell completion script.
    Completions(crate::completions::CompletionsArgs),
    /// Print the man page (roff) of cilkview-rs or of one subcommand.
    Man(crate::man::ManArgs),
}

fn parse_span_coefficient(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() && d >= 0.0 => Ok(d),
        _ => Err("expected a number ≥ 0 (Cilkview uses 0.85)".into()),
    }
}

/// The largest `--burden`: 10^9 instructions or nanoseconds, far above any steal's cost, and
/// small enough that the burdened sums of any run of fewer than ~10^10 spawns fit in 64 bits.
pub const MAX_BURDEN: u64 = 1_000_000_000;

fn parse_burden(s: &str) -> Result<Cost, String> {
    parse_cost(s, "Cilkview uses 15000", "5us, 2500ns, 0.01ms")
}

/// `--task-cost`: as [`parse_burden`], bounded alike.
pub fn parse_task_cost(s: &str) -> Result<Cost, String> {
    parse_cost(s, "the default is 10000", "2.5us, 2500ns")
}

/// A number of instructions (at most [`MAX_BURDEN`]), or a time with its unit (ns, us, µs, ms,
/// s; at most 1 s); `usual` and `times` complete the messages.
fn parse_cost(s: &str, usual: &str, times: &str) -> Result<Cost, String> {
    let help = || {
        format!(
            "expected a whole number of instructions ≥ 0 ({usual}), or a time for --counter \
             native such as {times}"
        )
    };
    if let Ok(n) = s.parse::<u64>() {
        return if n <= MAX_BURDEN {
            Ok(Cost::instructions(n))
        } else {
            Err(format!("at most {MAX_BURDEN} instructions ({usual})"))
        };
    }
    let split = s
        .find(|c: char| c.is_alphabetic() || c == 'µ')
        .ok_or_else(help)?;
    let (value, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(help()),
    };
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * scale <= MAX_BURDEN as f64 => {
            Ok(Cost::nanoseconds((v * scale).round() as u64))
        }
        Ok(v) if v.is_finite() && v >= 0.0 => Err(format!("at most {MAX_BURDEN}ns (1s)")),
        _ => Err(help()),
    }
}

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Model")]
pub struct ModelOptions {
    /// Burden of a steal put on every continuation edge: instructions, or a time such as `5us`
    /// with --counter native where it measures time (no user-space rdpmc) [default: 15000
    /// instructions; 5us for a time]
    #[arg(long, value_name = "INSTRUCTIONS|TIME", value_parser = parse_burden,
          allow_negative_numbers = true)]
    pub burden: Option<Cost>,
    /// Span coefficient δ of the speedup lower bound T1 / (T1/P + 2δ(1−1/P)·burdened span).
    #[arg(long, value_name = "D", default_value_t = DEFAULT_SPAN_COEFFICIENT,
          value_parser = parse_span_coefficient, allow_negative_numbers = true)]
    pub span_coefficient: f64,
    /// Largest core count of the speedup table (P = 2, 4, 8, … up to it).
    #[arg(long, value_name = "P", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=4096), allow_negative_numbers = true)]
    pub max_cores: u32,
}

impl ModelOptions {
    /// `--burden`, to be checked against the counter that will run.
    pub fn cost_option(&self) -> crate::counter_checks::CostOption {
        crate::counter_checks::CostOption {
            flag: "--burden",
            cost: self.burden,
            examples: crate::counter_checks::BURDEN_EXAMPLES,
        }
    }
}

impl From<&ModelOptions> for Model {
    fn from(m: &ModelOptions) -> Model {
        Model {
            burden: m.burden,
            span_coefficient: m.span_coefficient,
            max_cores: m.max_cores,
        }
    }
}

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Outputs")]
#[command(group(clap::ArgGroup::new("drawn").args(["plot", "gnuplot"]).multiple(true)))]
pub struct OutputOptions {
    /// Write the measures as JSON to FILE, `-` for standard output (after the program's own
    /// output; its JSON Schema: `cilkview-rs schema`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write PREFIX.dat and PREFIX.plt; `gnuplot PREFIX.plt` draws the scalability profile.
    #[arg(long, value_name = "PREFIX")]
    pub gnuplot: Option<PathBuf>,
    /// Draw the scalability profile (no gnuplot needed): FILE.svg or FILE.png.
    #[arg(long, value_name = "FILE", value_parser = parse_plot_path)]
    pub plot: Option<PathBuf>,
    /// Draw the region LABEL (cv_region_begin/end) instead of the whole program in --plot and
    /// --gnuplot (one of them is required): a small run's whole-program profile is mostly its
    /// serial start-up.
    #[arg(long, value_name = "LABEL", requires = "drawn")]
    pub plot_region: Option<String>,
    /// Exit non-zero if a measure falls below N (CI gate). MEASURE=N with MEASURE parallelism or
    /// burdened_parallelism, or region:LABEL:MEASURE=N. Repeatable.
    #[arg(long, value_name = "MEASURE=N", value_parser = Gate::parse, help_heading = "CI gates")]
    pub fail_below: Vec<Gate>,
    #[command(flatten)]
    pub profile: crate::profile::ProfileOptions,
    /// Show the long form of each `note:` line under the report's Counter line.
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub what_if: crate::what_if::WhatIfOptions,
}

impl From<&OutputOptions> for ExportOptions {
    fn from(o: &OutputOptions) -> ExportOptions {
        ExportOptions {
            json: o.json.clone(),
            gnuplot: o.gnuplot.clone(),
            plot: o.plot.clone(),
            plot_region: o.plot_region.clone(),
            gates: o.fail_below.clone(),
            profile: o.profile.profile.clone(),
            top: o.profile.top(),
            verbose: o.verbose,
        }
    }
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// How to measure strands: instructions, or time with `native`.
    #[arg(long, value_enum, default_value_t = CounterMode::Auto, help_heading = "Counting")]
    pub counter: CounterMode,
    /// With single-stepping, do not bind the program and the tracer to one CPU (binding makes
    /// stepping ~3x faster, but the program then sees a one-CPU affinity mask).
    #[arg(long, help_heading = "Counting")]
    pub no_cpu_binding: bool,
    /// Run the program with glibc's string functions and thresholds as this CPU makes them
    /// (its environment unchanged). By default the instruction counters set GLIBC_TUNABLES to
    /// pin them to the emulated CPU's, so that all of them count the same instructions.
    #[arg(long, help_heading = "Counting")]
    pub host_dispatch: bool,
    /// With --counter native: run the program N times; each strand's time is the median of its
    /// runs, which leaves out the runs an interruption of the machine lengthened (it rarely lands
    /// in the same strand twice), all scaled to sum to the median run's work;
    /// the report states the noise bound of work and span.
    /// The program's output appears N times; its marks must be hit in the same order each run
    /// (standard input reaches the first run only).
    /// `auto`: at least 3 runs, then until a run changes the span by 5% at most (60 s of runs,
    /// 100 runs at most).
    #[arg(
        long,
        value_name = "N|auto",
        default_value = "1",
        help_heading = "Counting"
    )]
    pub repeat: cilkview_analysis::Repeat,
    #[command(flatten)]
    pub model: ModelOptions,
    #[command(flatten)]
    pub output: OutputOptions,
    /// After the analysis, benchmark the program natively (as `cilkview-rs bench`) and show
    /// the measured speedups beside the prediction (table, --plot, --gnuplot).
    #[arg(long, help_heading = "Benchmark")]
    pub bench: bool,
    #[command(flatten)]
    pub bench_tuning: BenchTuning,
    #[command(flatten)]
    pub openmp: crate::openmp::OpenMpOptions,
    #[command(flatten)]
    pub locks: crate::locks::LockOptions,
    /// The program to run (searched in PATH when it has no slash), then its arguments. Options
    /// end at PROGRAM: everything after it is the program's (a `--` right after PROGRAM is
    /// dropped).
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true,
        help_heading = None::<&str>
    )]
    pub command: Vec<OsString>,
}

/// The options of `run` that tune `--bench`: an error without it (not silently ignored).
const BENCH_TUNING: [&str; 7] = [
    "cores",
    "trials",
    "warmup",
    "workers_env",
    "show_output",
    "oversubscribe",
    "bandwidth",
];

/// The clap command: the derived one, with what derive cannot say (`run`'s benchmark options
/// require `--bench`; the exit statuses after each program-running command's help).
pub fn command() -> clap::Command {
    Cli::command()
        .after_help(crate::exit::EXIT_STATUS_HELP)
        .mut_subcommand("run", |run| {
            BENCH_TUNING
                .iter()
                .fold(run, |run, id| run.mut_arg(*id, |a| a.requires("bench")))
                .after_help(crate::exit::EXIT_STATUS_HELP)
        })
        .mut_subcommand("bench", |c| c.after_help(crate::exit::EXIT_STATUS_HELP))
        .mut_subcommand("attach", |c| c.after_help(crate::exit::EXIT_STATUS_HELP))
}

/// The command line, parsed (`--help`, `--version` and usage errors as clap errors).
pub fn parse() -> Result<Cli, clap::Error> {
    let mut matches = command().try_get_matches()?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// `PROGRAM [--] ARGS…` (at least PROGRAM, as clap requires): the program as the user named it,
/// and its arguments — everything after it, without a leading `--` separator.
pub fn program_and_args(command: &[OsString]) -> (&OsString, &[OsString]) {
    let rest = &command[1..];
    let args = match rest.first() {
        Some(first) if first == "--" => &rest[1..],
        _ => rest,
    };
    (&command[0], args)
}

impl RunArgs {
    /// The program to run, as the user named it.
    pub fn program(&self) -> &OsString {
        program_and_args(&self.command).0
    }

    /// Its arguments: everything after PROGRAM, without a leading `--` separator.
    pub fn args(&self) -> &[OsString] {
        program_and_args(&self.command).1
    }
}

/// The longest `--duration`: 10^9 s, about 31 years.
pub const MAX_DURATION_SECS: f64 = 1e9;

fn parse_duration(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() && d > 0.0 && d <= MAX_DURATION_SECS => Ok(d),
        Ok(d) if d > MAX_DURATION_SECS => Err(format!(
            "at most {MAX_DURATION_SECS:.0} seconds (about 31 years); leave --duration out to \
             measure until Ctrl-C or the process's end"
        )),
        _ => Err("expected a number of seconds > 0, e.g. 10 or 0.5".into()),
    }
}

/// `attach --counter`: `emulate`, which can only launch a program, is hidden from the help and
/// the completions, but still parsed, so that attach refuses it with its reason; `auto` says
/// what it tries when attaching.
fn attach_counter() -> impl clap::builder::TypedValueParser<Value = CounterMode> {
    use clap::{builder::TypedValueParser, ValueEnum};
    let values = CounterMode::value_variants()
        .iter()
        .filter_map(ValueEnum::to_possible_value)
        .map(|v| {
            let launches = v.get_name() == CounterMode::Emulate.name();
            let v = if v.get_name() == CounterMode::Auto.name() {
                v.help(
                    "The hardware counter if it passes its self-test here, else the native \
                     counter, else single-step",
                )
            } else {
                v
            };
            v.hide(launches)
        });
    clap::builder::PossibleValuesParser::new(values)
        .map(|name: String| CounterMode::from_str(&name, true).expect("one of the listed values"))
}

#[derive(Args, Debug)]
pub struct AttachArgs {
    /// How to measure strands: instructions, or time with `native`.
    #[arg(long, value_parser = attach_counter(), default_value_t = CounterMode::Auto,
          help_heading = "Counting")]
    pub counter: CounterMode,
    /// Stop measuring and detach after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_duration, allow_negative_numbers = true,
          help_heading = "Counting")]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub model: ModelOptions,
    #[command(flatten)]
    pub output: OutputOptions,
    /// Refused with a reason (`run --locks` only: its library is preloaded at the start).
    #[arg(long, hide = true)]
    pub locks: bool,
    /// The process to measure.
    #[arg(value_name = "PID", value_parser = clap::value_parser!(i32).range(1..),
          help_heading = None::<&str>)]
    pub pid: i32,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A report written by `cilkview-rs run --json FILE`.
    #[arg(value_name = "FILE.json")]
    pub file: PathBuf,
    /// Span coefficient δ of the speedup table, recomputed (default: the report's).
    #[arg(long, value_name = "D", value_parser = parse_span_coefficient,
          allow_negative_numbers = true, help_heading = "Model")]
    pub span_coefficient: Option<f64>,
    /// Largest core count of the speedup table, recomputed (default: the report's).
    #[arg(long, value_name = "P",
          value_parser = clap::value_parser!(u32).range(1..=4096), allow_negative_numbers = true,
          help_heading = "Model")]
    pub max_cores: Option<u32>,
    /// Accepted only if equal to the report's burden: the burdened span was measured with it and
    /// cannot be recomputed without running the program again.
    #[arg(long, value_name = "INSTRUCTIONS|TIME", value_parser = parse_burden,
          allow_negative_numbers = true, help_heading = "Model")]
    pub burden: Option<Cost>,
    /// An exact report (`run --counter emulate --json`, or step, hw) of the same program and
    /// arguments, set beside FILE, a report by time: nanoseconds per instruction over the work
    /// and over the span of the whole program and of each region both have, and a line where
    /// the critical path runs twice as slow per instruction or more (its strands wait on memory
    /// or the kernel).
    #[arg(long, value_name = "EXACT.json")]
    pub against: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputOptions,
}

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
    /// Timed runs per worker count, in rounds that run every worker count in turn; the median
    /// is reported, with the min and max.
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
    /// Also run the memory-bandwidth test: P copies of the serial program at once vs one alone
    /// (P = the largest core count).
    #[arg(long)]
    pub bandwidth: bool,
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub tuning: BenchTuning,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_cost_is_instructions_or_a_time_as_a_burden() {
        assert_eq!(parse_task_cost("10000"), Ok(Cost::instructions(10000)));
        assert_eq!(parse_task_cost("2.5us"), Ok(Cost::nanoseconds(2500)));
        assert_eq!(parse_burden("5us"), Ok(Cost::nanoseconds(5000)));
        let e = parse_task_cost("lots").unwrap_err();
        assert!(
            e.contains("(the default is 10000)") && e.contains("such as 2.5us"),
            "{e}"
        );
        let e = parse_burden("lots").unwrap_err();
        assert!(
            e.contains("(Cilkview uses 15000)") && e.contains("such as 5us"),
            "{e}"
        );
        assert!(parse_task_cost("2s").is_err() && parse_task_cost("1000000001").is_err());
    }

    #[test]
    fn a_dash_dash_after_the_program_is_dropped() {
        let c: Vec<OsString> = ["./app", "--", "--json", "x"].map(OsString::from).to_vec();
        let (p, a) = program_and_args(&c);
        assert_eq!(p, "./app");
        assert_eq!(a, ["--json", "x"].map(OsString::from).to_vec());
        let c: Vec<OsString> = ["./app", "--json", "x"].map(OsString::from).to_vec();
        assert_eq!(program_and_args(&c).1.len(), 2);
    }

    #[test]
    fn empty_core_list_is_refused() {
        assert!(parse_core_list("").is_err());
    }
}
