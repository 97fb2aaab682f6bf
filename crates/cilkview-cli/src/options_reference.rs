//! docs/options.md: every subcommand's `--help`, generated from the clap command that parses the
//! command line (so the reference cannot drift from it). A test checks that the file is up to
//! date; `CILKVIEW_BLESS=1 cargo test -p cilkview-cli --bin cilkview-rs options_reference`
//! rewrites it.

use std::path::PathBuf;

/// Width the help is wrapped to in the file.
const WIDTH: usize = 100;

/// The Markdown of docs/options.md.
pub fn render() -> String {
    let mut command = crate::cli::command()
        .term_width(WIDTH)
        .max_term_width(WIDTH);
    command.build();
    let mut out = String::from(
        "# Options\n\n\
         Every subcommand's `cilkview-rs SUBCOMMAND --help`, generated from the command line's \
         own definition\n(`CILKVIEW_BLESS=1 cargo test -p cilkview-cli --bin cilkview-rs \
         options_reference`; a test\nchecks that this file is up to date). What the options do \
         in depth: [commands.md](commands.md).\n",
    );
    let mut section = |title: &str, help: String| {
        out.push_str(&format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    };
    section("cilkview-rs", command.render_long_help().to_string());
    // In the order `--help` lists them (clap's `mut_subcommand` moves the ones it edits last).
    let mut subs: Vec<(usize, String)> = command
        .get_subcommands()
        .map(|c| (c.get_display_order(), c.get_name().to_string()))
        .filter(|(_, n)| n != "help")
        .collect();
    subs.sort();
    let names = subs.into_iter().map(|(_, n)| n);
    for name in names {
        let sub = command.find_subcommand_mut(&name).expect("listed");
        section(
            &format!("cilkview-rs {name}"),
            sub.render_long_help().to_string(),
        );
    }
    out
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/options.md")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_reference_is_up_to_date() {
        let rendered = render();
        if std::env::var_os("CILKVIEW_BLESS").is_some() {
            std::fs::write(path(), &rendered).unwrap();
        }
        let on_disk = std::fs::read_to_string(path()).unwrap_or_default();
        assert!(
            on_disk == rendered,
            "docs/options.md is not the options' --help: regenerate it with \
             CILKVIEW_BLESS=1 cargo test -p cilkview-cli --bin cilkview-rs options_reference"
        );
    }
}
