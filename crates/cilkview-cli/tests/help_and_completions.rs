//! What the tool says about itself, as users of perf, valgrind and hyperfine expect: `--help`
//! with headings and within 80 columns, `attach --help` listing only the counters that attach,
//! bash completions that complete after a subcommand, and man pages that man renders.

mod common;

use common::{assert_success, bin, TOOL_FAILED};

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn help_has_headings_wraps_and_names_no_repository_path() {
    for (sub, headings) in [
        (
            "run",
            &[
                "Counting:",
                "Model:",
                "Outputs:",
                "CI gates:",
                "Call-site profile:",
                "Benchmark:",
                "OpenMP and oneTBB:",
            ][..],
        ),
        ("attach", &["Arguments:", "Counting:", "Outputs:"]),
        ("report", &["Arguments:", "Model:", "Outputs:"]),
        (
            "bench",
            &["Arguments:", "Benchmark:", "Prediction:", "Outputs:"],
        ),
    ] {
        let out = bin()
            .env("COLUMNS", "80")
            .args([sub, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        for h in headings {
            assert!(
                help.lines().any(|l| l == *h),
                "{sub} --help lacks {h}: {help}"
            );
        }
        for line in help.lines() {
            assert!(
                line.chars().count() <= 80,
                "{sub} --help, wider than 80: {line}"
            );
        }
        assert!(
            !help.contains("docs/") && !help.contains(".md"),
            "{sub} --help names a file of the repository: {help}"
        );
    }
}

/// `attach --help` lists only the counters that can attach (emulation launches the program), and
/// `attach --counter emulate` is still refused with its reason rather than as an unknown value;
/// `run --help` says emulation's slowdown as the warning of a long emulated run does.
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn attach_lists_only_the_counters_that_attach() {
    let help = bin().args(["attach", "--help"]).output().unwrap();
    assert_success(&help);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    assert!(
        help.contains("- native:") && help.contains("- step:"),
        "{help}"
    );
    assert!(!help.contains("emulate"), "{help}");
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(
            "- auto: The hardware counter if it passes its self-test here, else the \
                        native counter, else single-step"
        ),
        "attach's auto must not promise emulation: {words}"
    );
    let hw = bin()
        .args(["attach", "--counter", "hw", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&hw.stderr);
    if err.contains("requested but unavailable") {
        // The advice names a counter that attaches (never emulate, which attach refuses).
        assert!(!err.contains("--counter emulate"), "{err}");
        assert!(err.contains("use --counter native"), "{err}");
    } else {
        cilkview_fixtures::skip("the hardware counter works here: attach needs no advice");
    }
    let run_help = bin().args(["run", "--help"]).output().unwrap();
    let run_help = String::from_utf8_lossy(&run_help.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(run_help.contains("- emulate:"), "{run_help}");
    assert!(run_help.contains("3-40x slower than native"), "{run_help}");
    let refused = bin()
        .args(["attach", "--counter", "emulate", "1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(TOOL_FAILED));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("needs a ptrace counter"), "{err}");
}

/// What bash's own completion offers for `cilkview-rs WORDS…` (the last word the one being
/// completed), driving the generated script's completion function as `complete -F` would.
fn bash_completes(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let words_quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\n\
         f=$(complete -p cilkview-rs | sed -E 's/.*-F ([^ ]+) .*/\\1/')\n\
         COMP_WORDS=(cilkview-rs {})\n\
         COMP_CWORD={}\n\
         \"$f\" cilkview-rs \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words_quoted.join(" "),
        words.len()
    );
    let out = cilkview_fixtures::command("bash")
        .arg("-c")
        .arg(program)
        .output()
        .unwrap();
    assert_success(&out);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Bash completes a subcommand's options after the subcommand (clap-rs/clap#6421: the script's
/// case arms never matched a hyphenated binary's subcommands) and a value's choices after its
/// option, as well as the subcommands themselves.
#[test]
#[ignore = "slow: runs cilkview-rs and bash"]
fn bash_completes_after_the_subcommand() {
    let out = bin().args(["completions", "bash"]).output().unwrap();
    assert_success(&out);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cilkview-rs.bash");
    std::fs::write(&path, &out.stdout).unwrap();
    assert_eq!(bash_completes(&path, &["ru"]), ["run"]);
    assert_eq!(
        bash_completes(&path, &["run", "--pro"]),
        ["--profile", "--profile-region"]
    );
    assert_eq!(
        bash_completes(&path, &["run", "--counter", "em"]),
        ["emulate"]
    );
    assert_eq!(bash_completes(&path, &["bench", "--band"]), ["--bandwidth"]);
}

/// `completions bash` is a script bash parses and that completes the subcommands and options;
/// `man` is roff that man renders, with the options and the exit statuses.
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn completions_and_man_pages() {
    let out = bin().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let script = String::from_utf8(out.stdout).unwrap();
    for word in ["cilkview-rs", "--plot-region", "--profile", "schema"] {
        assert!(script.contains(word), "{word} in {script}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cilkview-rs.bash");
    std::fs::write(&path, &script).unwrap();
    let check = cilkview_fixtures::command("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert_success(&check);

    for (page, says) in [(None, "cilkview-rs-run(1)"), (Some("run"), "--plot-region")] {
        let mut cmd = bin();
        cmd.arg("man").args(page);
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        let roff = String::from_utf8(out.stdout).unwrap();
        assert!(roff.starts_with(".ie") || roff.contains("\n.TH "), "{roff}");
        let path = dir.path().join("page.1");
        std::fs::write(&path, &roff).unwrap();
        if cilkview_fixtures::command("man")
            .arg("--version")
            .output()
            .is_err()
        {
            cilkview_fixtures::skip("man is not installed: the page is not rendered");
            continue;
        }
        let shown = cilkview_fixtures::command("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "200")
            .output()
            .unwrap();
        assert_success(&shown);
        // Overstruck bold (c\bc) and underline (_\bc) read as plain text.
        let mut text = String::new();
        for c in String::from_utf8_lossy(&shown.stdout).chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        let text = text.replace(['\u{2010}', '\u{2212}'], "-");
        assert!(text.contains(says), "{page:?}: {text}");
        assert!(text.contains("127"), "{page:?}: exit statuses in {text}");
        for section in ["\nEXIT STATUS\n", "\nEXAMPLES\n"] {
            assert!(text.contains(section), "{page:?}: {section} in {text}");
        }
        assert!(!text.contains("\nEXTRA\n"), "{page:?}: {text}");
    }
    let out = bin().args(["man", "nope"]).output().unwrap();
    assert_eq!(out.status.code(), Some(TOOL_FAILED));
}
