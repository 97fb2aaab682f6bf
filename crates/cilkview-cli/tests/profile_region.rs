//! `--profile-region LABEL`: the call-site profile of one region, measured on
//! fixtures/profile_region.c (a serial start-up and end around a region "kernel" run twice, whose
//! numbers are known by construction: CV_WORK is exactly 2N + 2 instructions).

mod common;

use std::path::Path;

use cilkview_fixtures::build;
use common::{bin, finish, fixture, start, static_opts};
use serde_json::Value;

/// `run --profile DIR/p --profile-region kernel --json DIR/r.json` with `counter`: the JSON, or
/// `None` (after saying why) where that counter cannot run here.
fn region_profiled(exe: &Path, counter: &str, dir: &Path) -> Option<Value> {
    let options = ["--profile-region", "kernel"];
    let (json, stderr) = common::profiled(exe, counter, &options, &[], dir)?;
    assert!(
        stderr.contains("call sites on the span of region kernel"),
        "{stderr}"
    );
    Some(json)
}

fn ws(v: &Value) -> (u64, u64) {
    (v["work"].as_u64().unwrap(), v["span"].as_u64().unwrap())
}

/// The line of fixtures/profile_region.c holding `marker`, as `.c:LINE`.
fn line_of(marker: &str) -> String {
    let path = cilkview_fixtures::fixtures_dir().join("profile_region.c");
    let src = std::fs::read_to_string(path).unwrap();
    let n = src.lines().position(|l| l.contains(marker)).unwrap();
    format!(".c:{}", n + 1)
}

/// The sums of `key` over the sites of `kind` at `marker`'s line (the compiler may unroll the
/// region's loop: one site per copy), and their invocations.
fn sites_at(json: &Value, marker: &str, kind: &str, key: &str) -> ((u64, u64), u64) {
    let line = line_of(marker);
    let mut sum = ((0, 0), 0);
    for s in json["call_sites"].as_array().unwrap() {
        let at = s["location"].as_str().unwrap();
        if s["kind"] == kind && at.split(" @").next().unwrap().ends_with(&line) {
            let (w, sp) = ws(&s[key]);
            sum = (
                (sum.0 .0 + w, sum.0 .1 + sp),
                sum.1 + s["invocations"].as_u64().unwrap(),
            );
        }
    }
    sum
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn the_profile_of_a_region_is_the_regions_work_and_span_and_adds_up() {
    let exe = fixture("profile_region");
    let mut seen = Vec::new();
    for counter in ["emulate", "step"] {
        let dir = tempfile::tempdir().unwrap();
        let Some(json) = region_profiled(&exe, counter, dir.path()) else {
            continue;
        };
        assert_eq!(json["profile_region"], "kernel");
        let region = json["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == "kernel")
            .unwrap();
        let (work, span) = ws(region);
        // The profile's root is the region, exactly: its two instances, one after the other.
        // A context's row: [parent, site, invocations, on_work (work, span), local_work,
        // on_span (work, span), local_on_span (work, span)].
        let contexts = json["call_contexts"].as_array().unwrap();
        let col = |c: &Value, i: usize| c[i].as_u64().unwrap();
        let root = &contexts[0];
        assert_eq!((col(root, 3), col(root, 4)), (work, span), "{counter}");
        assert_eq!((col(root, 6), col(root, 7)), (work, span), "{counter}");
        // By construction: 2 x (20002 + 60002) of work, 2 x 60002 of span, plus the calls'.
        assert!((160_008..160_100).contains(&work), "{counter}: work {work}");
        assert!((120_004..120_100).contains(&span), "{counter}: span {span}");
        // The start-up (200002) and the end (100002) are the whole run's, not the region's.
        let whole = json["span"].as_u64().unwrap();
        assert!(whole >= span + 300_004, "{counter}: whole span {whole}");
        // The rows add up to the region's span: every site's local span on span, and the code
        // in the region outside every call site.
        let sites = json["call_sites"].as_array().unwrap();
        let local: u64 = sites.iter().map(|s| ws(&s["local_on_span"]).1).sum();
        let outside = col(root, 9);
        assert_eq!(local + outside, span, "{counter}");
        assert!(outside < 100, "{counter}: outside {outside}");
        let local_work: u64 = contexts.iter().map(|c| col(c, 5)).sum();
        assert_eq!(local_work, work, "{counter}");
        // right() holds the critical path; the spawned left() is off it.
        let (right, n) = sites_at(&json, "SITE_RIGHT", "call", "local_on_span");
        assert_eq!(n, 2, "{counter}");
        assert!(
            right.0 >= 120_004 && right.0 <= 120_020 && right.0 == right.1,
            "{counter}: right {right:?}"
        );
        let (left, n) = sites_at(&json, "SITE_LEFT", "spawn", "on_work");
        assert_eq!(n, 2, "{counter}");
        assert!(
            (40_004..40_040).contains(&left.0),
            "{counter}: left {left:?}"
        );
        assert_eq!(sites_at(&json, "SITE_LEFT", "spawn", "on_span").0, (0, 0));
        // The files: the flame graph's lines and callgrind's totals are the region's.
        let read =
            |ext: &str| std::fs::read_to_string(dir.path().join(format!("p.{ext}"))).unwrap();
        let folded = read("folded");
        let sum: u64 = folded
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(sum, span, "{folded}");
        assert!(
            folded
                .lines()
                .any(|l| l.starts_with("(outside every call site) ")),
            "{folded}"
        );
        assert!(
            read("svg").contains("[region kernel]"),
            "the title names the region"
        );
        assert!(
            read("callgrind").contains(&format!("\ntotals: {work} {span}\n")),
            "{counter}"
        );
        assert!(read("csv").contains(&format!(
            "(outside every call site),,outside,,,,,,,,{outside},{outside},"
        )));
        seen.push((work, span, right, left));
    }
    // Exact counters agree.
    if let [a, b] = &seen[..] {
        assert_eq!(a, b, "emulate and step");
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_mistyped_region_is_an_error_before_the_run_and_a_saved_profile_keeps_its_region() {
    let exe = fixture("profile_region");
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["run", "--profile"])
        .arg(dir.path().join("p"))
        .args(["--profile-region", "kernal"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        format!(
            "error: --profile-region names region \"kernal\", which {} never reports (its \
             regions: kernel)",
            exe.display()
        )
    );
    assert!(!dir.path().join("p.csv").exists());
    // It profiles: without --profile it is a usage error.
    let out = bin()
        .args(["run", "--profile-region", "kernel"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--profile <PREFIX>"));

    // `report` re-renders the region's profile, and says it cannot narrow another one.
    let Some(_) = region_profiled(&exe, "step", dir.path()) else {
        return;
    };
    let json = dir.path().join("r.json");
    let out = bin()
        .arg("report")
        .arg(&json)
        .arg("--profile")
        .arg(dir.path().join("q"))
        .args(["--profile-region", "kernel"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(dir.path().join("q.folded")).unwrap(),
        std::fs::read(dir.path().join("p.folded")).unwrap()
    );
    let out = bin()
        .arg("report")
        .arg(&json)
        .arg("--profile")
        .arg(dir.path().join("q"))
        .args(["--profile-region", "other"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("call-site profile is of region \"kernel\", not of region \"other\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn attach_checks_the_region_against_the_processs_executable_before_attaching() {
    let exe = build("long_running", &static_opts().flag("-pthread"));
    let p = start(&exe, &["3"]);
    let pid = p.child.id().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["attach", "--profile"])
        .arg(dir.path().join("p"))
        .args(["--profile-region", "kernel", &pid])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: --profile-region names region \"kernel\", which process {pid} ("
        )) && stderr.contains("never reports (it has no cv_region_begin)"),
        "{stderr}"
    );
    // Never attached: the process runs on to its normal end.
    let (stdout, code) = finish(p);
    assert_eq!(code, Some(0));
    assert!(stdout.contains("done "), "{stdout}");
}

/// An OpenMP program's parallel regions are reported by the preload library's marks, not the
/// program's: `--profile-region parallel` is checked against both and profiles them; a mistyped
/// label is refused before the run, listing the library's regions.
#[test]
#[ignore = "slow: runs cilkview-rs on a compiled OpenMP program"]
fn profile_region_parallel_of_an_openmp_program() {
    let Some(exe) = common::bench::marked_openmp("omp_nqueens") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = ["--openmp", "--profile-region", "parallel"];
    let Some((json, stderr)) = common::profiled(&exe, "emulate", &options, &[], dir.path()) else {
        return;
    };
    assert!(
        stderr.contains("call sites on the span of region parallel"),
        "{stderr}"
    );
    assert_eq!(json["profile_region"], "parallel");
    let wrong = bin()
        .args(["run", "--openmp", "--profile"])
        .arg(dir.path().join("q"))
        .args(["--profile-region", "parallell"])
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(common::TOOL_FAILED));
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        err.contains("names region \"parallell\"") && err.contains("parallel"),
        "{err}"
    );
    assert!(!dir.path().join("q.csv").exists(), "refused before the run");
}
