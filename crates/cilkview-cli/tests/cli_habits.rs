//! The command line's habits, as perf, valgrind, hyperfine and coreutils have them: unknown
//! options are errors, options that need another are errors without it, the tool's own failures
//! exit with statuses no program's is confused with, `-` is standard output, the JSON outputs
//! follow the printed JSON Schema (the help's headings, completions and man pages:
//! help_and_completions.rs).

use std::ffi::OsStr;
use std::path::Path;

mod common;

use common::{assert_success, bin, run_tool, TOOL_FAILED};

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
    let out = run_tool(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "{err}");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
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
#[ignore = "slow: runs cilkview-rs"]
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
#[ignore = "slow: runs cilkview-rs"]
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

/// former spellings are still read (fixtures/figure6.json says "hardware").
#[test]
#[ignore = "slow: runs cilkview-rs"]
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
        err.contains("[possible values: auto, hw, emulate, step, native]"),
        "{err}"
    );
}

/// The JSON Schema `cilkview-rs schema` prints, compiled by a validator.
fn schema(of: &str) -> jsonschema::Validator {
    let out = bin().args(["schema", of]).output().unwrap();
    assert!(out.status.success());
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{schema}"
    );
    jsonschema::validator_for(&schema).unwrap()
}

fn assert_valid(validator: &jsonschema::Validator, json: &serde_json::Value) {
    let errors: Vec<String> = validator
        .iter_errors(json)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{json}");
}

/// `run --json` (with a call-site profile) and `bench --json` validate against the schemas
/// `cilkview-rs schema` prints, and carry their format's `version`; a report without `work`
/// does not validate.
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn json_outputs_validate_against_the_printed_schema() {
    let dir = tempfile::tempdir().unwrap();
    let run = schema("run");
    let json = dir.path().join("r.json");
    let exe = common::fixture("known_spawn");
    let out = bin()
        .args(["run", "--json"])
        .arg(&json)
        .arg("--profile")
        .arg(dir.path().join("p"))
        .arg(&exe)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_success(&out);
    let mut report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(
        report["call_sites"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{report}"
    );
    assert_eq!(report["version"], 3);
    assert_valid(&run, &report);
    report.as_object_mut().unwrap().remove("work");
    assert!(!run.is_valid(&report), "a report without work validates");

    let bench = schema("bench");
    let json = dir.path().join("b.json");
    let out = bin()
        .args([
            "bench", "--cores", "1", "--trials", "1", "--warmup", "0", "--json",
        ])
        .arg(&json)
        .arg("/bin/true")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    assert_success(&out);
    let mut measured: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(measured["version"], 1);
    assert_valid(&bench, &measured);
    measured["results"] = serde_json::json!("none");
    assert!(!bench.is_valid(&measured));
}

/// no file named `-`; so do `bench --json -` and `--csv -` (one of them at a time).
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn a_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args(["run", "--json", "-", "/bin/echo", "hello"])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = stdout
        .strip_prefix("hello\n")
        .unwrap_or_else(|| panic!("{stdout}"));
    let report: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(report["args"], serde_json::json!(["hello"]));
    assert!(
        err.contains("Parallelism Profile"),
        "the text report stays on stderr: {err}"
    );
    assert!(!dir.path().join("-").exists());

    let out = bin()
        .current_dir(dir.path())
        .args([
            "bench",
            "--cores",
            "1",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--csv",
            "-",
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    assert!(
        csv.starts_with("cores,time_median,") && csv.lines().nth(1).unwrap().starts_with("1,"),
        "{csv}"
    );
    assert!(!dir.path().join("-").exists());
    let (code, _, err) = tool(&[
        "bench".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        "--csv".as_ref(),
        "-".as_ref(),
        "/bin/true".as_ref(),
    ]);
    assert_eq!(code, Some(TOOL_FAILED), "{err}");
}

/// On a terminal (a pty made by `script`), the program's output lines stay whole: no spinner
/// shares a line with them. The program prints for ~2 s, long enough for a spinner to be drawn
/// between its lines (it ticks every 250 ms).
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn progress_never_shares_a_line_with_the_programs_output() {
    if !cilkview_fixtures::has_tool("script") {
        cilkview_fixtures::skip("script (util-linux) is not installed: no pty to test with");
        return;
    }
    let exe = cilkview_fixtures::compile_source(
        "slow_print",
        r#"
#include <stdio.h>
#include <unistd.h>
int main(void)
{
    for (int i = 1; i <= 3; i++) {
        printf("line %d\n", i);
        fflush(stdout);
        usleep(600000);
    }
    fprintf(stderr, "err line\n");
    return 0;
}
"#,
        cilkview_fixtures::Lang::C,
        &common::static_opts(),
    )
    .unwrap();
    let command = format!(
        "{} run {}",
        assert_cmd::cargo::cargo_bin("cilkview-rs").display(),
        exe.display()
    );
    let out = cilkview_fixtures::command("script")
        .args(["-qec", &command, "/dev/null"])
        .output()
        .unwrap();
    let tty = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    for line in ["line 1", "line 2", "line 3", "err line"] {
        assert!(
            tty.lines().any(|l| l == line),
            "{line:?} not whole on its line: {tty:?}"
        );
    }
    assert!(
        !tty.contains("marks hit") && !tty.contains('\u{1b}'),
        "{tty:?}"
    );
    assert!(tty.contains("Parallelism Profile"), "{tty:?}");
}

/// A region label that neither the program nor the libraries it links define is refused before
/// the program runs, naming the labels there are; one in a linked library is accepted; with a
/// program that can `dlopen`, labels cannot be known beforehand and are not checked.
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn region_labels_are_checked_before_the_program_runs() {
    let dir = tempfile::tempdir().unwrap();
    let include = format!("-I{}", cilkview_fixtures::include_dir().display());
    cilkview_fixtures::compile_into(
        dir.path(),
        "libregion.so",
        r#"#include "cilkview.h"
           int lib_kernel(int n) { cv_region_begin("in_lib"); int s = 0;
               for (int i = 0; i < n; i++) s += i; cv_region_end("in_lib"); return s; }"#,
        &[&include, "-O2", "-shared", "-fPIC"],
    );
    let lib = format!("-L{}", dir.path().display());
    let exe = cilkview_fixtures::compile_into(
        dir.path(),
        "uses_region",
        r#"#include <stdio.h>
           int lib_kernel(int n);
           int main(void) { printf("ran %d\n", lib_kernel(10)); return 0; }"#,
        &["-O2", &lib, "-lregion", "-Wl,-rpath,$ORIGIN"],
    );
    let svg = dir.path().join("r.svg");
    let plot = |label: &str, exe: &Path| {
        bin()
            .args(["run", "--plot"])
            .arg(&svg)
            .args(["--plot-region", label])
            .arg(exe)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap()
    };
    let out = plot("in_lbi", &exe);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(TOOL_FAILED), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: --plot-region names region \"in_lbi\", which {} never reports (its regions: in_lib)",
            exe.display()
        )
    );
    assert!(out.stdout.is_empty(), "the program ran");
    let (code, out, err) = tool(&[
        "run".as_ref(),
        "--fail-below".as_ref(),
        "region:nope:parallelism=1".as_ref(),
        exe.as_os_str(),
    ]);
    assert_eq!(code, Some(TOOL_FAILED), "{err}");
    assert!(
        err.starts_with("error: --fail-below names region \"nope\""),
        "{err}"
    );
    assert!(out.is_empty());

    let out = plot("in_lib", &exe);
    assert_success(&out);
    assert!(svg.is_file());

    // A program that imports dlopen may load a library defining any label: the run goes ahead
    // (and the label is looked for in what was measured, after it).
    let dlopens = cilkview_fixtures::compile_into(
        dir.path(),
        "dlopens",
        r#"#include <dlfcn.h>
           #include <stdio.h>
           int main(int argc, char **argv) { if (argc > 5) dlopen(argv[1], RTLD_NOW); puts("ran"); return 0; }"#,
        &["-O2", "-ldl"],
    );
    let out = plot("elsewhere", &dlopens);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.trim_end()
            .ends_with("error: no region \"elsewhere\" to plot (the report has no region)"),
        "{err}"
    );
}

/// An error that suggests another counter suggests the fastest that works here: without a
/// hardware counter, `--counter hw` advises emulation when a plugin-capable QEMU is installed
/// (not single-stepping, ~10^4 times slower).
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn a_suggested_counter_is_the_fastest_that_works_here() {
    let exe = common::fixture("known_spawn");
    let out = bin()
        .args(["run", "--counter", "hw"])
        .arg(&exe)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    if out.status.success() {
        cilkview_fixtures::skip("the hardware counter works here: nothing to advise");
        return;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(TOOL_FAILED), "{err}");
    let advice = if cilkview_fixtures::emulator().is_ok() {
        "use --counter emulate"
    } else {
        "use --counter step"
    };
    assert!(
        err.trim_end().ends_with(&format!("; {advice}")) || err.contains(&format!("; {advice} (")),
        "{err}"
    );
}
