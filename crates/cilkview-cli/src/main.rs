//! `cilkview-rs`: scalability analysis of fork-join programs from one serial run.
//!
//! One module per subcommand; the pipeline is `cilkview-analysis`, the outputs and gates
//! `cilkview-report`.

#![forbid(unsafe_code)]

mod attach;
mod bench;
mod cli;
mod completions;
mod counter_checks;
mod exit;
mod locks;
mod man;
#[cfg(test)]
mod new_counter_tests;
mod openmp;
#[cfg(test)]
mod options_reference;
mod profile;
mod program;
mod progress;
mod report;
mod run;
mod schema;
mod what_if;

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::Command;

fn main() -> ExitCode {
    let cli = match cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors exit 125 (as env's and timeout's do), not clap's 2: a code programs
            // use too. --help and --version exit 0.
            let _ = e.print();
            return if e.exit_code() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(exit::TOOL_FAILED)
            };
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Attach(args) => attach::attach(args),
        Command::Report(args) => report::report(args),
        Command::Bench(args) => bench::bench(args),
        Command::Header => print_stdout(cilkview_analysis::HEADER.as_bytes(), "the header"),
        Command::Schema(args) => schema::schema(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => man::man(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: what went wrong, with its causes. (If stderr is closed too, there is no
            // one left to tell.)
            let _ = writeln!(std::io::stderr().lock(), "error: {}", error_line(&e));
            exit::of_error(&e)
        }
    }
}

/// `cilkview-rs header`, `schema`, `completions`, `man`: `bytes` (`what`) on stdout. A reader
/// that went away (`| head -1`) is no error; a full disk is.
fn print_stdout(bytes: &[u8], what: &str) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).with_context(|| format!("cannot write {what} to standard output")),
    }
}

/// An error and its causes on one line, each cause once: a message that already ends with its
/// cause's text (`#[error("cannot read {path}: {source}")]`) is not followed by it again.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) || line.contains(&format!("{text}: ")) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// The exit code once the report is written: failure when a `--fail-below` gate failed.
fn gate_exit_code(gates_passed: bool) -> ExitCode {
    if gates_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
