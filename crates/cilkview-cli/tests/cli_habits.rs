//! The command line's habits, as perf, valgrind, hyperfine and coreutils have them: unknown
//! options are errors, options that need another are errors without it, the tool's own failures
//! exit with statuses no program's is confused with, `-` is standard output, the help has
//! headings, completions, a man page and a JSON Schema.

use std::ffi::OsStr;
use std::path::Path;

mod common;

use common::{bin, TOOL_FAILED};

/// A shell script that would leave `ran` beside itself if it ran.
fn witness(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("witness.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch {}\n", dir.join("ran").display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// cilkview-rs with `args`: its status and stderr, asserting no panic.
fn tool(args: &[&OsStr]) -> (Option<i32>, String, String) {
    let out = bin()
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

#[test]
fn an_unknown_option_before_program_is_an_error_not_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let script = witness(dir.path());
    for sub in ["run", "bench"] {
        let (code, _, err) = tool(&[sub.as_ref(), "--bogus".as_ref(), script.as_os_str()]);
        assert_eq!(code, Some(TOOL_FAILED), "{sub}: {err}");
        assert!(
            err.starts_with("error: unexpected argument '--bogus' found"),
            "{sub}: {err}"
        );
        assert!(!dir.path().join("ran").exists(), "{sub}: the program ran");
    }
}

#[test]
fn benchmark_options_without_bench_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = witness(dir.path());
    for flags in [
        &["--trials", "5"][..],
        &["--cores", "1"],
        &["--warmup", "0"],
        &["--workers-env", "N"],
        &["--show-output"],
        &["--oversubscribe"],
    ] {
        let mut args: Vec<&OsStr> = vec!["run".as_ref()];
        args.extend(flags.iter().map(OsStr::new));
        args.push(script.as_os_str());
        let (code, _, err) = tool(&args);
        assert_eq!(code, Some(TOOL_FAILED), "{flags:?}: {err}");
        assert!(
            err.starts_with(
                "error: the following required arguments were not provided:\n  --bench"
            ),
            "{flags:?}: {err}"
        );
        assert!(
            !dir.path().join("ran").exists(),
            "{flags:?}: the program ran"
        );
    }
}

#[test]
fn help_and_version_exit_0_and_state_the_exit_statuses() {
    for sub in ["run", "bench", "attach"] {
        let (code, out, _) = tool(&[sub.as_ref(), "--help".as_ref()]);
        assert_eq!(code, Some(0), "{sub}");
        for line in ["125 ", "126 ", "127 "] {
            assert!(out.contains(line), "{sub} --help: {out}");
        }
    }
    let (code, out, _) = tool(&["--version".as_ref()]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("cilkview-rs "), "{out}");
}

#[test]
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

/// One spelling of each counter name, `--counter`'s, in the report and the JSON; the JSON's
/// former spellings are still read (fixtures/figure6.json says "hardware").
#[test]
fn counter_names_are_spelled_as_the_flag_spells_them() {
    let dir = tempfile::tempdir().unwrap();
    let figure6 = cilkview_fixtures::repo_root().join("fixtures/figure6.json");
    assert!(std::fs::read_to_string(&figure6)
        .unwrap()
        .contains(r#""mode": "hardware""#));
    let json = dir.path().join("r.json");
    let (code, _, err) = tool(&[
        "report".as_ref(),
        figure6.as_os_str(),
        "--json".as_ref(),
        json.as_os_str(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("\nCounter: hw — "), "{err}");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(saved["counter"]["mode"], "hw");
    // --counter takes the former JSON spellings as aliases: a bad name lists the real ones only.
    let (code, _, err) = tool(&[
        "run".as_ref(),
        "--counter".as_ref(),
        "magic".as_ref(),
        "/bin/true".as_ref(),
    ]);
    assert_eq!(code, Some(TOOL_FAILED), "{err}");
    assert!(
        err.contains("[possible values: auto, hw, emulate, step]"),
        "{err}"
    );
}
