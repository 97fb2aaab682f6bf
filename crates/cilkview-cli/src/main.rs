//! `cilkview-rs`: scalability analysis of fork-join programs from one serial run.
//!
//! One module per subcommand; the pipeline is `cilkview-analysis`, the outputs and gates
//! `cilkview-report`.

#![forbid(unsafe_code)]

mod attach;
mod cli;
mod profile;
mod progress;
mod report;
mod run;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Attach(args) => attach::attach(args),
        Command::Report(args) => report::report(args),
        Command::Header => {
            print!("{}", cilkview_analysis::HEADER);
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // One line: what went wrong, with its causes.
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The exit code once the report is written: failure when a `--fail-below` gate failed.
fn gate_exit_code(gates_passed: bool) -> ExitCode {
    if gates_passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
