//! `cilkview-rs completions SHELL`: a completion script for SHELL (clap_complete), from the same
//! clap command that parses the command line.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use clap_complete::Shell;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell, e.g. bash (`cilkview-rs completions bash > ~/.local/share/bash-completion/completions/cilkview-rs`).
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut command = crate::cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "cilkview-rs", &mut script);
    crate::print_stdout(&script, "the completion script")
}
