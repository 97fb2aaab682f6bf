//! `cilkview-rs completions SHELL`: a completion script for SHELL (clap_complete), from the same
//! clap command that parses the command line.

use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use clap_complete::Shell;

const BIN_NAME: &str = "cilkview-rs";

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell, e.g. bash (`cilkview-rs completions bash > ~/.local/share/bash-completion/completions/cilkview-rs`).
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn completions(args: CompletionsArgs) -> Result<ExitCode> {
    let mut command = crate::cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, BIN_NAME, &mut script);
    if args.shell == Shell::Bash {
        script = bash_case_arms_fixed(&String::from_utf8_lossy(&script), BIN_NAME).into_bytes();
    }
    crate::print_stdout(&script, "the completion script")
}

/// clap_complete 4.6's bash script (clap-rs/clap#6421, unreleased fix #6428) spells a subcommand's
/// state `cilkview__rs__subcmd__run` where its loop sets it, but `cilkview__subcmd__rs__subcmd__run)`
/// where its `case` arms match it (the bin name's hyphen taken for a subcommand separator): no arm
/// matches, and nothing completes after the subcommand. The arms are respelled as the loop spells
/// them; a script without the misspelling (a fixed clap_complete) is returned unchanged.
fn bash_case_arms_fixed(script: &str, bin_name: &str) -> String {
    let wrong = bin_name.replace('-', "__subcmd__");
    let right = bin_name.replace('-', "__");
    if wrong == right {
        return script.to_string();
    }
    let mut fixed = String::with_capacity(script.len());
    for line in script.split_inclusive('\n') {
        let arm = line.trim_start();
        let indent = &line[..line.len() - arm.len()];
        match arm.strip_prefix(wrong.as_str()) {
            Some(rest) if rest.starts_with("__subcmd__") || rest.starts_with(')') => {
                fixed.push_str(indent);
                fixed.push_str(&right);
                fixed.push_str(rest);
            }
            _ => fixed.push_str(line),
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_arms_spelled_as_the_loop_sets_them() {
        let script = "            cilkview__rs,run)\n                cmd=\"cilkview__rs__subcmd__run\"\n        \
                      cilkview__subcmd__rs__subcmd__run)\n        cilkview__rs)\n";
        let fixed = bash_case_arms_fixed(script, "cilkview-rs");
        assert_eq!(
            fixed,
            "            cilkview__rs,run)\n                cmd=\"cilkview__rs__subcmd__run\"\n        \
             cilkview__rs__subcmd__run)\n        cilkview__rs)\n"
        );
        assert_eq!(bash_case_arms_fixed(&fixed, "cilkview-rs"), fixed);
        assert_eq!(bash_case_arms_fixed(script, "plain"), script);
    }
}
