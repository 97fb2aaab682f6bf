//! The test tiers' convention, checked on the sources (docs/architecture.md, "Tests"): a test that
//! starts a process is `#[ignore = "slow: <what it runs>"]`; `cargo test --workspace` runs the
//! rest (the fast tier), `-- --include-ignored` everything.
//!
//! At run time [`cilkview_fixtures::slow_tier`] refuses a program in the fast tier; it sees the
//! processes the fixtures' helpers and [`cilkview_fixtures::command`] start. These checks cover
//! the rest: no test starts a process past them, and the tests of the tracer and of the
//! `cilkview-rs` binary (which start programs through the library under test) are all slow.

use std::path::{Path, PathBuf};

use cilkview_fixtures::repo_root;

/// The `.rs` files below `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The integration tests' sources: `crates/*/tests/**/*.rs`.
fn test_files() -> Vec<PathBuf> {
    let crates = repo_root().join("crates");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let tests = entry.unwrap().path().join("tests");
        if tests.is_dir() {
            files.extend(rust_files(&tests));
        }
    }
    assert!(files.len() > 30, "found only {files:?}");
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path:line: text` for each line of the file that `bad` says is wrong.
fn offending(path: &Path, bad: impl Fn(&str) -> bool) -> Vec<String> {
    let rel = path.strip_prefix(repo_root()).unwrap_or(path);
    read(path)
        .lines()
        .enumerate()
        .filter(|(_, line)| bad(line))
        .map(|(n, line)| format!("{}:{}: {}", rel.display(), n + 1, line.trim()))
        .collect()
}

#[test]
fn every_ignored_test_is_a_slow_one_and_says_what_it_runs() {
    let mut files = rust_files(&repo_root().join("crates"));
    files.extend(rust_files(&repo_root().join("fixtures")));
    let wrong: Vec<String> = files
        .iter()
        .flat_map(|f| {
            offending(f, |line| {
                let line = line.trim();
                line.starts_with("#[ignore")
                    && line.ends_with(']')
                    && !(line.starts_with("#[ignore = \"slow: ") && line.len() > 22)
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "#[ignore] marks the slow tier only, with what the test runs: \
         #[ignore = \"slow: <what it runs>\"]:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn tests_start_processes_through_the_fixtures_command() {
    let wrong: Vec<String> = test_files()
        .iter()
        .filter(|f| !f.starts_with(repo_root().join("crates/cilkview-fixtures")))
        .flat_map(|f| {
            offending(f, |line| {
                line.contains("Command::new(") || line.contains("Command::cargo_bin(")
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "a test starts a process with cilkview_fixtures::command(program) (or a fixtures helper), \
         which checks that the test is in the slow tier:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_tracers_and_the_binarys_tests_are_all_slow() {
    let mut wrong = Vec::new();
    for krate in ["cilkview-tracer", "cilkview-cli"] {
        for file in rust_files(&repo_root().join("crates").join(krate).join("tests")) {
            let text = read(&file);
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            for (n, line) in lines.iter().enumerate() {
                if *line != "#[test]" {
                    continue;
                }
                let attrs = lines[n + 1..].iter().take_while(|l| l.starts_with("#["));
                if !attrs.clone().any(|l| l.starts_with("#[ignore = \"slow: ")) {
                    let rel = file.strip_prefix(repo_root()).unwrap_or(&file);
                    wrong.push(format!("{}:{}", rel.display(), n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the tracer's and cilkview-rs's integration tests run programs (through the library \
         under test, which the fixtures' checks do not see): each is \
         #[ignore = \"slow: <what it runs>\"]:\n{}",
        wrong.join("\n")
    );
}
