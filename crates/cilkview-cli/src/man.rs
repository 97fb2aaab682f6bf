//! `cilkview-rs man [SUBCOMMAND]`: the man page (roff, clap_mangen) of cilkview-rs or of one of
//! its subcommands, from the same clap command that parses the command line, with the sections
//! a man page has that clap does not know: EXIT STATUS and EXAMPLES.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use roff::{roman, Roff};

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
    render(&page, args.subcommand.as_deref(), &mut roff)?;
    crate::print_stdout(&roff, "the man page")
}

/// clap_mangen's sections in its order, but the after-help (the exit statuses, which it would
/// title "EXTRA") as EXIT STATUS, then EXAMPLES.
fn render(page: &clap::Command, sub: Option<&str>, w: &mut Vec<u8>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(page.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    if page.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(w)?;
    }
    if page.get_subcommands().any(|c| !c.is_hide_set()) {
        man.render_subcommands_section(w)?;
    }
    let mut roff = Roff::new();
    if page.get_after_help().is_some() {
        roff.control("SH", ["EXIT STATUS"]).control("nf", []);
        for line in crate::exit::EXIT_STATUS_HELP.lines().skip(1) {
            roff.text([roman(line.trim_start())]);
        }
        roff.control("fi", []);
    }
    roff.control("SH", ["EXAMPLES"]);
    for (what, line) in examples(sub) {
        roff.control("PP", [])
            .text([roman(*what)])
            .control("RS", [])
            .control("nf", [])
            .text([roman(*line)])
            .control("fi", [])
            .control("RE", []);
    }
    roff.to_writer(w)?;
    if page.get_version().is_some() {
        man.render_version_section(w)?;
    }
    Ok(())
}

/// Each page's examples: what it does, then the command line.
fn examples(sub: Option<&str>) -> Examples {
    match sub {
        None => TOP_EXAMPLES,
        Some("run") => RUN_EXAMPLES,
        Some("attach") => ATTACH_EXAMPLES,
        Some("report") => REPORT_EXAMPLES,
        Some("bench") => BENCH_EXAMPLES,
        Some("header") => HEADER_EXAMPLES,
        Some("completions") => COMPLETIONS_EXAMPLES,
        Some("man") => MAN_EXAMPLES,
        Some("schema") => SCHEMA_EXAMPLES,
        Some(_) => OTHER_EXAMPLES,
    }
}

/// Examples of a page: (what it does, the command line).
type Examples = &'static [(&'static str, &'static str)];

const TOP_EXAMPLES: Examples = &[
    (
        "Analyse a marked program; the report goes to standard error:",
        "cilkview-rs run ./fib 30",
    ),
    (
        "Keep the report as JSON and draw the speedup bounds:",
        "cilkview-rs run --json fib.json --plot fib.svg ./fib 30",
    ),
    (
        "Measure a running process for 10 seconds:",
        "cilkview-rs attach --duration 10 1234",
    ),
    (
        "Compare real speedups with the saved prediction:",
        "cilkview-rs bench --analysis fib.json ./fib 30",
    ),
];

const RUN_EXAMPLES: Examples = &[
    (
        "Analyse a marked program (options end at PROGRAM):",
        "cilkview-rs run ./fib 30",
    ),
    (
        "Time strands at native speed instead of counting instructions:",
        "cilkview-rs run --counter native ./fib 30",
    ),
    (
        "Profile call sites; the 10 heaviest in the text:",
        "cilkview-rs run --profile fib --top 10 ./fib 30",
    ),
    (
        "Fail a CI job when parallelism drops below 8:",
        "cilkview-rs run --fail-below parallelism=8 ./fib 30",
    ),
    (
        "An unmodified OpenMP program, through libgomp's wrappers:",
        "cilkview-rs run --openmp ./omp_app",
    ),
    (
        "Analyse, then benchmark on 1, 2 and 4 cores:",
        "cilkview-rs run --bench --cores 1,2,4 ./fib 30",
    ),
];

const ATTACH_EXAMPLES: Examples = &[
    (
        "Measure process 1234 until Ctrl-C:",
        "cilkview-rs attach 1234",
    ),
    (
        "Measure it for 10 seconds and keep the JSON:",
        "cilkview-rs attach --duration 10 --json app.json 1234",
    ),
];

const REPORT_EXAMPLES: Examples = &[
    (
        "Show a saved report with a 64-core table:",
        "cilkview-rs report --max-cores 64 fib.json",
    ),
    (
        "Gate on a saved report:",
        "cilkview-rs report --fail-below parallelism=8 fib.json",
    ),
];

const BENCH_EXAMPLES: Examples = &[
    (
        "Run on 1, 2 and 4 cores, 5 trials each:",
        "cilkview-rs bench --cores 1,2,4 --trials 5 ./fib 30",
    ),
    (
        "Beside the predicted range of a saved analysis:",
        "cilkview-rs bench --analysis fib.json ./fib 30",
    ),
];

const HEADER_EXAMPLES: Examples = &[(
    "Write the annotation header:",
    "cilkview-rs header > cilkview.h",
)];

const COMPLETIONS_EXAMPLES: Examples = &[(
    "Install bash completion:",
    "cilkview-rs completions bash > ~/.local/share/bash-completion/completions/cilkview-rs",
)];

const MAN_EXAMPLES: Examples = &[("Read the page of run:", "cilkview-rs man run | man -l -")];

const SCHEMA_EXAMPLES: Examples = &[(
    "The JSON Schema of run --json:",
    "cilkview-rs schema run > run.schema.json",
)];

const OTHER_EXAMPLES: Examples = &[("Show this page:", "cilkview-rs man")];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every example is a command line the tool accepts, on the page of its own subcommand.
    #[test]
    fn every_example_parses() {
        let command = crate::cli::command();
        let pages = command
            .get_subcommands()
            .map(|c| Some(c.get_name().to_string()))
            .chain([None]);
        for page in pages {
            for (_, line) in examples(page.as_deref()) {
                let words: Vec<&str> = line
                    .split_whitespace()
                    .take_while(|w| !matches!(*w, ">" | "|"))
                    .collect();
                if let Some(sub) = &page {
                    assert_eq!(words.get(1), Some(&sub.as_str()), "{line}");
                }
                if let Err(e) = crate::cli::command().try_get_matches_from(&words) {
                    panic!("{line}: {e}");
                }
            }
        }
    }
}
