//! Re-rendering a saved report derives what the measures and the model determine: a JSON holding
//! only work, span, burdened span and counts renders the full report.

use std::path::Path;

use cilkview_report::{read_json, TextExporter};

fn saved(json: &str) -> cilkview_report::RunReport {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    std::fs::write(&path, json).unwrap();
    read_json(&path).unwrap_or_else(|e| panic!("{e}"))
}

const MINIMAL: &str = r#"{"work": 1000000, "span": 10000, "burdened_span": 40000,
    "spawns": 100, "syncs": 50,
    "regions": [{"label": "inner", "work": 5000, "span": 1000, "burdened_span": 2000}]}"#;

#[test]
fn a_report_of_measures_only_renders_in_full() {
    let mut r = saved(MINIMAL);
    r.derive(None, None);
    assert_eq!(r.measures.parallelism, 100.0);
    assert_eq!(r.measures.burdened_parallelism, 25.0);
    assert_eq!(r.average_maximal_strand, 1e6 / 251.0);
    assert_eq!(r.speedup.len(), 5, "P = 2 … 32, the default");
    // T1 / (T1/P + 2δ(1−1/P)·burdened span) with δ 0.85: 1e6 / (5e5 + 0.85·4e4).
    assert_eq!(r.speedup[0].lower, 1e6 / (5e5 + 0.85 * 40000.0));
    assert_eq!(r.regions[0].measures.parallelism, 5.0);
    assert_eq!(r.regions[0].measures.burdened_parallelism, 2.5);
    let text = TextExporter::to_text(&r);
    for line in [
        "Parallelism: 100.00\n",
        "Burdened parallelism: 25.00\n",
        "Average maximal strand: 3,984 instructions (work per strand between marks)\n",
        "2 processors: 1.87 – 2.00\n",
        "32 processors: 10.30 – 32.00\n",
        "3) Region \"inner\"\n",
        "Model: burden 15,000 instructions per continuation, span coefficient 0.85\n",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert!(text.starts_with("cilkview-rs: (program not recorded) (its end is not recorded)\n"));
}

#[test]
fn max_cores_and_span_coefficient_recompute_the_table_and_nothing_else_changes() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
    let original = read_json(&path).unwrap();
    let mut same = original.clone();
    same.derive(None, None);
    assert_eq!(same, original, "stored derived values are kept");

    let mut r = original.clone();
    r.derive(Some(4), Some(1.0));
    assert_eq!(r.span_coefficient, 1.0);
    let cores: Vec<u32> = r.speedup.iter().map(|s| s.cores).collect();
    assert_eq!(cores, [2, 4]);
    let (t1, b) = (5570609776.0, 262078779.0);
    assert_eq!(r.speedup[1].lower, t1 / (t1 / 4.0 + 2.0 * 0.75 * b));
    assert_eq!(r.measures.work, original.measures.work);
}
