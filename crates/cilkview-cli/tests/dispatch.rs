//! glibc's dispatch: the instruction counters pin it (GLIBC_TUNABLES, said in the report);
//! `--host-dispatch` keeps the host's, and is refused where nothing is pinned.

mod common;

use common::{bin, fixture, TOOL_FAILED};
use serde_json::Value;

fn reason(args: &[&str]) -> String {
    let out = bin()
        .args(["run", "--json", "-"])
        .args(args)
        .arg(fixture("known_spawn"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    common::counter_says(&report)
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn the_report_says_the_dispatch_is_pinned_or_not() {
    let pinned = reason(&["--counter", "step"]);
    assert!(
        pinned.contains("glibc dispatch pinned to the emulated CPU's (GLIBC_TUNABLES"),
        "{pinned}"
    );
    assert!(
        pinned.contains("--host-dispatch keeps this CPU's"),
        "{pinned}"
    );
    let host = reason(&["--counter", "step", "--host-dispatch"]);
    assert!(
        host.contains("glibc dispatch not pinned (--host-dispatch)"),
        "{host}"
    );
    assert!(!host.contains("GLIBC_TUNABLES"), "{host}");
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn host_dispatch_is_refused_where_nothing_is_pinned() {
    // attach: the process has started with its environment.
    let out = bin()
        .args(["attach", "--host-dispatch", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--host-dispatch"), "{err}");
    // The native counter measuring time runs the program as it is.
    if !common::native_measures_time() {
        return;
    }
    let out = bin()
        .args(["run", "--counter", "native", "--host-dispatch", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(TOOL_FAILED), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: --host-dispatch does not apply: --counter native measures time"),
        "{err}"
    );
}
