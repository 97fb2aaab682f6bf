//! `cilkview-rs man [SUBCOMMAND]`: the man page (roff, clap_mangen) of cilkview-rs or of one of
//! its subcommands, from the same clap command that parses the command line.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args, Debug)]
pub struct ManArgs {
    /// A subcommand (run, attach, report, bench, …): its own page, cilkview-rs-SUBCOMMAND(1).
    /// Read one with `cilkview-rs man run | man -l -`.
    #[arg(value_name = "SUBCOMMAND")]
    pub subcommand: Option<String>,
}

pub fn man(args: ManArgs) -> Result<ExitCode> {
    let mut command = crate::cli::command();
    command.build();
    let page = match &args.subcommand {
        None => command,
        Some(name) => {
            let names: Vec<String> = command
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            let sub = command
                .find_subcommand(name)
                .with_context(|| {
                    format!("no subcommand `{name}` (subcommands: {})", names.join(", "))
                })?
                .clone();
            let name = format!("cilkview-rs-{}", sub.get_name());
            sub.name(name.clone()).bin_name(name)
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff)?;
    crate::print_stdout(&roff, "the man page")
}
