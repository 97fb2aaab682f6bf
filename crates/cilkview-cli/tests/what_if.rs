//! `--what-if` and `--target-parallelism` checked against the programs they predict:
//! fixtures/whatif_known.c is compiled as it is and as its variants (the helper really 4 times
//! cheaper, really split 4 ways, the plan's first step really applied), each measured with the
//! exact emulation counter, and the prediction made from the original's run compared with the
//! variant's measures. docs/what-if.md says what the differences left are (the fixed cost of a
//! call the variant did not change; the spawns it added).

mod common;

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, skip};
use common::{analyze_with, bin, static_opts};
use serde_json::Value;

const FIXTURE: &str = "whatif_known";
/// CV_WORK iterations of the whole helper (four pieces) in the original.
const HELPER_N: u64 = 400_000;

fn variant(define: Option<&str>) -> PathBuf {
    let opts = static_opts();
    build(FIXTURE, &define.map_or(opts.clone(), |d| opts.define(d)))
}

/// `run --counter emulate --json` of `exe` with `options`: its JSON and stderr, `None` (skipped)
/// without the emulator.
fn measure(exe: &Path, options: &[&str]) -> Option<(Value, String)> {
    if let Err(why) = cilkview_fixtures::emulator() {
        skip(why);
        return None;
    }
    let a = analyze_with(exe, &[&["--counter", "emulate"], options].concat(), &[]);
    let stderr = a.stderr();
    assert_eq!(a.code(), Some(0), "{stderr}");
    Some((a.json, stderr))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The location (as the profile writes it, without an address) of the call at `marker`.
fn location(json: &Value, marker: &str) -> String {
    let src =
        std::fs::read_to_string(cilkview_fixtures::fixtures_dir().join(format!("{FIXTURE}.c")))
            .unwrap();
    let line = src.lines().position(|l| l.contains(marker)).unwrap() + 1;
    let suffix = format!(".c:{line}");
    json["call_sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["location"].as_str().unwrap().split(" @").next().unwrap())
        .find(|l| l.ends_with(&suffix))
        .unwrap_or_else(|| panic!("no site at {suffix}"))
        .to_string()
}

/// The sites whose callee is `callee`.
fn calls_of<'a>(json: &'a Value, callee: &str) -> Vec<&'a Value> {
    json["call_sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["callee"] == callee)
        .collect()
}

/// `report FILE --what-if SPEC --json`: the saved run's what-if.
fn report_what_if(saved: &Value, spec: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.json"), dir.path().join("out.json"));
    std::fs::write(&input, serde_json::to_vec(saved).unwrap()).unwrap();
    let out = bin()
        .arg("report")
        .arg(&input)
        .args(["--what-if", spec, "--json"])
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_str(&std::fs::read_to_string(output).unwrap()).unwrap();
    json["what_if"].clone()
}

/// The original, measured with `--what-if helper=4x --target-parallelism 1.5`.
fn original() -> Option<Value> {
    let (json, stderr) = measure(
        &variant(None),
        &["--what-if", "helper=4x", "--target-parallelism", "1.5"],
    )?;
    assert!(
        stderr.contains("What if") && stderr.contains("Plan for parallelism 1.5"),
        "{stderr}"
    );
    Some(json)
}

/// `|got - expected| <= tolerance`, said with `what`.
fn within(what: &str, got: u64, expected: f64, tolerance: f64) {
    assert!(
        (got as f64 - expected).abs() <= tolerance,
        "{what}: got {got}, expected {expected} ± {tolerance}"
    );
}

/// The helper 4 times faster, predicted from the original (by the function, by its call site's
/// `file:line` on `report`, and by the four calls of `piece`), against the original rebuilt with
/// a 4 times smaller CV_WORK. The variant speeds up only the CV_WORK loops (2n of each 2n + 2
/// instructions); the prediction speeds up all the site's code, the calls' fixed cost included:
/// it is below the variant by 3/4 of what the variant did not change (2 per piece + the fixed
/// cost, known from the profile: the site's work less its CV_WORK's), up to rounding (±1).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn four_times_faster_is_the_four_times_cheaper_variant() {
    let Some(base) = original() else { return };
    let Some((cheaper, _)) = measure(&variant(Some("HELPER_N=100000")), &[]) else {
        return;
    };
    let loops = 4 * (2 * HELPER_N / 4 + 2);
    let helper = calls_of(&base, "helper");
    assert_eq!(helper.len(), 1, "one call of helper");
    let fixed = u(&helper[0]["on_work"], "work") - loops + 8;
    let by_function = base["what_if"]["after"].clone();
    let by_location = report_what_if(&base, &format!("{}=4x", location(&base, "SITE_HELPER")));
    assert_eq!(
        by_location["after"], by_function,
        "file:line and function name the same code"
    );
    for key in ["work", "span"] {
        within(
            &format!("helper=4x {key}"),
            u(&cheaper, key),
            u(&by_function, key) as f64 + 0.75 * fixed as f64,
            1.0,
        );
    }
    // The four calls of piece: their fixed cost only (helper's own is not in them).
    let pieces = calls_of(&base, "piece");
    assert_eq!(pieces.len(), 4, "four call sites of piece");
    let piece_work: u64 = pieces.iter().map(|s| u(&s["on_work"], "work")).sum();
    let fixed = piece_work - loops + 8;
    let after = report_what_if(&base, "piece=4x")["after"].clone();
    for key in ["work", "span"] {
        within(
            &format!("piece=4x {key}"),
            u(&cheaper, key),
            u(&after, key) as f64 + 0.75 * fixed as f64,
            1.0,
        );
    }
    // The measured side of the report: the original's own measures.
    assert_eq!(u(&base["what_if"]["before"], "work"), u(&base, "work"));
}

/// The helper parallel 4 ways (`helper=par:4`: work kept, span divided by 4) against the original
/// with its first three pieces spawned: equal but for the three spawns' marks and the helper's
/// fixed cost, which the variant did not divide (at most 200 instructions here).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn parallel_four_ways_is_the_variant_split_four_ways() {
    let Some(base) = original() else { return };
    let Some((split, _)) = measure(&variant(Some("HELPER_PARALLEL")), &[]) else {
        return;
    };
    let after = report_what_if(&base, "helper=par:4")["after"].clone();
    assert_eq!(u(&after, "work"), u(&base, "work"));
    within(
        "par:4 work",
        u(&split, "work"),
        u(&after, "work") as f64,
        200.0,
    );
    within(
        "par:4 span",
        u(&split, "span"),
        u(&after, "span") as f64,
        200.0,
    );
    let gained = u(&base, "span") - u(&split, "span");
    assert!(gained > 590_000, "the variant's span fell by {gained}");
}

/// The plan's first step applied: the largest own code on the critical path is one of the four
/// pieces (ties: the first called); spawning it (the variant) takes it off the critical path, as
/// "perfectly parallel" predicts: the variant's span is the step's, but for the spawn's marks.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn the_plans_first_step_applied_gives_its_parallelism() {
    let Some(base) = original() else { return };
    let Some((applied, _)) = measure(&variant(Some("FIRST_SPAWNED")), &[]) else {
        return;
    };
    let plan = &base["target_plan"];
    assert_eq!(plan["reached"], true, "{plan}");
    let first = &plan["steps"][0];
    let at = location(&base, "SITE_PIECE_1");
    assert!(
        first["location"].as_str().unwrap().starts_with(&at),
        "{plan}"
    );
    assert!(u(first, "span_removed") > 2 * HELPER_N / 4, "{plan}");
    within(
        "first step's span",
        u(&applied, "span"),
        u(first, "span") as f64,
        100.0,
    );
    let measured = applied["parallelism"].as_f64().unwrap();
    let planned = first["parallelism"].as_f64().unwrap();
    assert!(
        (measured / planned - 1.0).abs() < 1e-3,
        "{measured} vs {planned}"
    );
    // Each step's parallelism is its span's.
    for step in plan["steps"].as_array().unwrap() {
        let p = u(&base, "work") as f64 / u(step, "span") as f64;
        assert!((step["parallelism"].as_f64().unwrap() - p).abs() < 1e-9);
    }
}

/// A SITE the profile does not have is one line naming what it has, and a non-zero exit; on
/// `report`, before anything is written.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn an_unknown_site_is_one_clear_error() {
    let Some(base) = original() else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.json");
    std::fs::write(&input, serde_json::to_vec(&base).unwrap()).unwrap();
    let out = bin()
        .arg("report")
        .arg(&input)
        .args(["--what-if", "nosuch=2x", "--json"])
        .arg(dir.path().join("out.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: --what-if nosuch=2x: no call site of the profile is a call of function nosuch (it has: ")
            && stderr.contains("helper"),
        "{stderr}"
    );
    assert!(!dir.path().join("out.json").exists());
}

/// `run --what-if FUNCTION=…` naming no marked function of the program is refused before it
/// runs, naming those it has.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn run_refuses_an_unknown_function_before_the_run() {
    let exe = variant(None);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = bin()
        .args(["run", "--what-if", "nosuch=par", "--json"])
        .arg(&json)
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("has no function nosuch with cv_function()")
            && stderr.ends_with("its marked functions: helper, piece, run, side, tail\n"),
        "{stderr}"
    );
    assert!(!json.exists(), "nothing written");
}
