//! The analysis on a thread of its own (`CILKVIEW_ANALYSIS_THREAD=1`, cilkview-analysis's
//! `pipeline.rs`) against the same run with one thread (`=0`): under emulation (exact counts)
//! every output is byte for byte the same, profiles included; under `--counter native` the
//! hits and the fork-join shape are.

mod common;

use std::path::Path;

use cilkview_fixtures::build;
use common::{native, static_opts, std_bin};
use serde_json::Value;

/// Stderr, exit status, the JSON report, the profile's files (path and bytes).
type Outputs = (String, Option<i32>, String, Vec<(String, Vec<u8>)>);

/// What `run ARGS EXE PROGRAM_ARGS` wrote with the analysis thread `on` or off: its stderr,
/// exit status, JSON report and the files of `--profile` (name and bytes), in `dir`.
fn outputs(on: bool, dir: &Path, args: &[&str], exe: &Path, program_args: &[&str]) -> Outputs {
    let json = dir.join("r.json");
    // The variable reaches the program's environment too: values of one length, so that the
    // program's own start-up (the loader and libc read the environment) counts the same.
    let out = std_bin()
        .env("CILKVIEW_ANALYSIS_THREAD", if on { "1" } else { "0" })
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg(exe)
        .args(program_args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = std::fs::read_to_string(&json).unwrap_or_else(|_| panic!("no JSON: {stderr}"));
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("p."))
        })
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    (stderr, out.status.code(), report, files)
}

#[test]
#[ignore = "slow: runs cilkview-rs under emulation on compiled programs"]
fn emulated_runs_are_byte_identical_with_the_analysis_thread() {
    if let Err(why) = cilkview_fixtures::emulator() {
        cilkview_fixtures::skip(why);
        return;
    }
    let fib = build("fib", &static_opts());
    let regions = build("known_regions", &static_opts());
    for (exe, args, program_args) in [
        (&fib, &["--counter", "emulate"][..], &["18"][..]),
        (&fib, &["--counter", "emulate", "--profile"], &["16"]),
        (&regions, &["--counter", "emulate", "--profile"], &[]),
    ] {
        let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let with_prefix = |dir: &Path| {
            let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            if a.last().is_some_and(|s| s == "--profile") {
                a.push(dir.join("p").display().to_string());
            }
            a
        };
        let (a1, a2) = (with_prefix(one.path()), with_prefix(two.path()));
        let a1: Vec<&str> = a1.iter().map(String::as_str).collect();
        let a2: Vec<&str> = a2.iter().map(String::as_str).collect();
        let direct = outputs(false, one.path(), &a1, exe, program_args);
        let piped = outputs(true, two.path(), &a2, exe, program_args);
        assert_eq!(direct.1, Some(0), "{}", direct.0);
        assert_eq!(piped.0, direct.0, "stderr, {args:?}");
        assert_eq!(piped.1, direct.1);
        assert_eq!(piped.2, direct.2, "the JSON report, {args:?}");
        let names = |f: &[(String, Vec<u8>)], dir: &Path| {
            f.iter()
                .map(|(n, b)| (n.replace(&dir.display().to_string(), "D"), b.len()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&piped.3, two.path()), names(&direct.3, one.path()));
        for ((_, a), (_, b)) in direct.3.iter().zip(&piped.3) {
            // The profile's files name their own path nowhere: compared byte for byte.
            assert!(a == b, "a profile file differs, {args:?}");
        }
        if args.contains(&"--profile") {
            assert!(
                direct.3.len() >= 5,
                "the profile's files: {:?}",
                names(&direct.3, one.path())
            );
        }
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs --counter native on compiled programs"]
fn native_runs_count_the_same_hits_with_the_analysis_thread() {
    if !native() {
        return;
    }
    let fib = build("fib", &static_opts());
    let get = |on: bool| {
        let dir = tempfile::tempdir().unwrap();
        let (stderr, code, report, _) =
            outputs(on, dir.path(), &["--counter", "native"], &fib, &["22"]);
        assert_eq!(code, Some(0), "{stderr}");
        serde_json::from_str::<Value>(&report).unwrap()
    };
    let (direct, piped) = (get(false), get(true));
    // fib(22): 28,656 spawns, each with its sync, entry and exit marks.
    assert_eq!(piped["spawns"], 28_656);
    for key in ["events", "spawns", "syncs"] {
        assert_eq!(piped[key], direct[key], "{key}");
    }
    assert!(piped["work"].as_u64().unwrap() > 0);
}
