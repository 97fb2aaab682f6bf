//! `--json --profile` on a profile of ~65,000 calling contexts (fixtures/many_contexts.c, whose
//! paths are known by construction): the contexts are rows of numbers, one line each, so the file
//! stays about 50 bytes per context, and `report` reads it back to the same outputs.

mod common;

use common::{bin, fixture, profiled};

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_profile_of_65_000_contexts_is_a_few_megabytes_and_reads_back() {
    let exe = fixture("many_contexts");
    let dir = tempfile::tempdir().unwrap();
    let Some((v, _)) = profiled(&exe, "emulate", &[], &[], dir.path()) else {
        return;
    };
    let json = dir.path().join("r.json");
    let bytes = std::fs::read(&json).unwrap();
    let contexts = v["call_contexts"].as_array().unwrap();
    let sites = v["call_sites"].as_array().unwrap().len();
    // g's 8 sites and main's call: 109,601 paths, kept up to 2 x 9 + 65,536 contexts, then at
    // most one more per site directly under the root.
    assert_eq!(sites, 9);
    assert!(
        (2 * sites + 65_536..=2 * sites + 65_536 + sites).contains(&contexts.len()),
        "{} contexts",
        contexts.len()
    );
    // Rows of ten numbers, ~50 bytes each (objects took ~300: 20 MB for this run).
    assert!(contexts.iter().all(|c| c.as_array().unwrap().len() == 10));
    assert!(
        bytes.len() < 64 * contexts.len(),
        "{} bytes for {} contexts",
        bytes.len(),
        contexts.len()
    );
    // The local spans on span (column 9) add up to the span.
    let local: u64 = contexts.iter().map(|c| c[9].as_u64().unwrap()).sum();
    assert_eq!(local, v["span"].as_u64().unwrap());
    // `report` re-renders the same profile from the file.
    let out = bin()
        .arg("report")
        .arg(&json)
        .arg("--profile")
        .arg(dir.path().join("q"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for ext in ["csv", "folded", "work.folded", "callgrind"] {
        let read = |p: &str| std::fs::read(dir.path().join(format!("{p}.{ext}"))).unwrap();
        assert!(read("q") == read("p"), "{ext} differs after report");
    }
}
