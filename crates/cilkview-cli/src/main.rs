//! `cilkview-rs`: scalability analysis of fork-join programs from one serial run.

mod attach;
mod bench;
mod cli;
mod gate;
mod outputs;
mod run;
mod session;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Attach(args) => attach::attach(args),
        Command::Report(args) => outputs::report(args),
        Command::Bench(args) => bench::bench(args),
        Command::Header => {
            print!("{}", cilkview_marks::HEADER);
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
