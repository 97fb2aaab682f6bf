//! `report TIME.json --against EXACT.json`: a time report set beside an exact one of the same
//! program (docs/counters.md, "Time against instructions"): the numbers are the two reports'
//! own, the finding line follows them, and reports that do not fit are refused in one line.

mod common;

use std::path::Path;

use cilkview_fixtures::build;
use common::{bin, native_measures_time, static_opts};
use serde_json::Value;

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The spawn tree (16 leaves of arithmetic: its critical path is the same code as its work),
/// measured by emulation and by time (`--repeat 3`), then compared.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_time_report_beside_an_exact_one() {
    if !native_measures_time() {
        cilkview_fixtures::skip("the native counter counts instructions here (rdpmc)");
        return;
    }
    if let Err(why) = cilkview_fixtures::emulator() {
        cilkview_fixtures::skip(why);
        return;
    }
    let exe = build("coarse_tree", &static_opts());
    let dir = tempfile::tempdir().unwrap();
    let (exact, time, both) = (
        dir.path().join("exact.json"),
        dir.path().join("time.json"),
        dir.path().join("both.json"),
    );
    measure(&exe, &["emulate"], &exact);
    measure(&exe, &["native", "--repeat", "3"], &time);
    let out = bin()
        .arg("report")
        .arg(&time)
        .arg("--against")
        .arg(&exact)
        .arg("--json")
        .arg(&both)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains(&format!(
            "Time per instruction (against {}, counted by emulate)",
            exact.display()
        )),
        "{text}"
    );
    let (e, t, b) = (json(&exact), json(&time), json(&both));
    let parts = b["against"]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["label"], "");
    assert_eq!(parts[1]["label"], "tree");
    let u = |v: &Value, k: &str| v[k].as_f64().unwrap();
    let region = |v: &Value| v["regions"][0].clone();
    for (part, e, t) in [
        (&parts[0], e.clone(), t.clone()),
        (&parts[1], region(&e), region(&t)),
    ] {
        let work = u(&t, "work") / u(&e, "work");
        let span = u(&t, "span") / u(&e, "span");
        assert!((u(part, "work_ns_per_instruction") - work).abs() < 1e-9 * work);
        assert!((u(part, "span_slower") - span / work).abs() < 1e-9 * span / work);
        // The leaves are the arithmetic the work is made of: no slower per instruction.
        assert!(u(part, "span_slower") < 2.0, "{part}");
    }
    assert!(!text.contains("the critical path runs"), "{text}");
    the_other_way_round_is_refused(&exact, &time);
}

/// The tree measured by `counter` into `file`.
fn measure(exe: &Path, counter: &[&str], file: &Path) {
    bin()
        .args(["run", "--counter"])
        .args(counter)
        .arg("--json")
        .arg(file)
        .arg(exe)
        .args(["4", "2000000"])
        .assert()
        .success();
}

/// The exact report given as the time one: one line, before anything is written.
fn the_other_way_round_is_refused(exact: &Path, time: &Path) {
    let wrong = bin()
        .arg("report")
        .arg(exact)
        .arg("--against")
        .arg(time)
        .output()
        .unwrap();
    assert_eq!(wrong.status.code(), Some(125));
    assert_eq!(
        String::from_utf8_lossy(&wrong.stderr),
        format!(
            "error: --against compares a report by time with an exact one: {} counts \
             instructions, not nanoseconds\n",
            exact.display()
        )
    );
}
