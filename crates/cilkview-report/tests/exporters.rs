use std::path::{Path, PathBuf};

use cilkview_fixtures::gnuplot_render;
use cilkview_report::{
    read_json, Destination, Exporter, GnuplotExporter, JsonExporter, TextExporter,
};

fn figure6() -> cilkview_report::RunReport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
    read_json(&path).expect("fixtures/figure6.json")
}

/// The text report of the paper's Figure 6 numbers reads as Figure 6, line for line.
#[test]
fn text_report_reads_as_figure_6() {
    let text = TextExporter::to_text(&figure6());
    let figure_6 = "\
1) Parallelism Profile
Work: 5,570,609,776 instructions
Span: 261,374,874 instructions
Burdened span: 262,078,779 instructions
Parallelism: 21.31
Burdened parallelism: 21.26
Spawns: 8,518,398
Syncs: 8,518,398
Average maximal strand: 218 instructions (work per strand between marks)

2) Speedup Estimate
2 processors: 1.85 – 2.00
4 processors: 3.23 – 4.00
8 processors: 5.13 – 8.00
16 processors: 7.27 – 16.00
32 processors: 9.20 – 21.31
";
    assert!(text.contains(figure_6), "got:\n{text}");
    assert!(
        text.starts_with("cilkview-rs: ./qsort 100000000 (exited with status 0)\n"),
        "{text}"
    );
}

#[test]
fn json_round_trips_with_exactly_the_documented_keys() {
    let report = figure6();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let exporter = JsonExporter { path: path.clone() };
    let artifacts = exporter.render(&report).unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(artifacts[0].destination, Destination::File(path.clone()));
    std::fs::write(&path, &artifacts[0].bytes).unwrap();
    assert_eq!(read_json(&path).unwrap(), report);
    let value: serde_json::Value = serde_json::from_slice(&artifacts[0].bytes).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "version",
            "program",
            "args",
            "exit_status",
            "counter",
            "unit",
            "burden",
            "span_coefficient",
            "work",
            "span",
            "burdened_span",
            "parallelism",
            "burdened_parallelism",
            "spawns",
            "syncs",
            "events",
            "average_maximal_strand",
            "speedup",
            "regions"
        ]
    );
}

#[test]
fn reading_a_file_that_is_not_a_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.json");
    std::fs::write(&path, "{\"hello\": 1}").unwrap();
    let e = read_json(&path).unwrap_err().to_string();
    assert!(e.contains("is not a cilkview-rs JSON report"), "{e}");
    let e = read_json(&dir.path().join("missing.json"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("cannot read"), "{e}");
}

fn write_all(artifacts: &[cilkview_report::Artifact]) -> Vec<PathBuf> {
    artifacts
        .iter()
        .map(|a| match &a.destination {
            Destination::File(p) => {
                std::fs::write(p, &a.bytes).unwrap();
                p.clone()
            }
            Destination::Stderr | Destination::Stdout => panic!("gnuplot writes files"),
        })
        .collect()
}

/// `gnuplot PREFIX.plt`, run in the folder, draws PREFIX.png without editing the script.
#[test]
#[ignore = "slow: runs gnuplot"]
fn gnuplot_script_renders_a_png() {
    let dir = tempfile::tempdir().unwrap();
    let exporter = GnuplotExporter {
        prefix: dir.path().join("qsort profile"),
        region: None,
    };
    let files = write_all(&exporter.render(&figure6()).unwrap());
    assert_eq!(files.len(), 2);
    let dat = std::fs::read_to_string(&files[0]).unwrap();
    // 32 data rows for cores 1..=32; the last is the span law at 32 cores.
    let rows: Vec<&str> = dat.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 32);
    assert!(rows[31].starts_with("32\t32\t21.31"), "{}", rows[31]);
    if let Some(png) = gnuplot_render(dir.path(), "qsort profile.plt", "qsort profile.png") {
        assert!(png.len() > 5000, "a PNG of {} bytes", png.len());
    }
}

/// The gnuplot picture and the one cilkview-rs draws look alike: the same title and axes, the
/// same x range, the same legend entries.
#[test]
fn gnuplot_and_plotters_pictures_have_one_look() {
    let report = figure6();
    let dir = tempfile::tempdir().unwrap();
    let plt = GnuplotExporter {
        prefix: dir.path().join("g"),
        region: None,
    }
    .render(&report)
    .unwrap()
    .remove(1);
    let plt = String::from_utf8(plt.bytes).unwrap();
    let svg = cilkview_report::PlotExporter {
        path: dir.path().join("p.svg"),
        region: None,
    }
    .render(&report)
    .unwrap()
    .remove(0);
    let svg = String::from_utf8(svg.bytes).unwrap();
    let title = "qsort: parallelism 21.31, burdened parallelism 21.26";
    assert!(plt.contains(&format!("set title '{title}'")), "{plt}");
    assert!(svg.contains(title));
    for words in [
        "Cores (P)",
        "Speedup T(1)/T(P)",
        "Estimated speedup range",
        "Work law: speedup ≤ P",
        "Span law: speedup ≤ parallelism (21.31)",
        "Burdened speedup (lower bound)",
    ] {
        assert!(plt.contains(words), "{words} in {plt}");
        assert!(
            svg.contains(&words.replace('≤', "&#8804;")) || svg.contains(words),
            "{words} in the SVG"
        );
    }
    assert!(plt.contains("set xrange [0.8:32.2]"), "{plt}");
}

/// The Counter line is one short line; each note follows as one `note:` line, its long form
/// under it only with `-v`; JSON keeps the notes as a list with their ids and reads them back.
#[test]
fn counter_notes_are_lines_of_their_own() {
    let mut report = figure6();
    report.counter.reason = "chosen by auto (hw unavailable here)".into();
    report.counter.notes = vec![
        cilkview_events::Note::new("passed-over", "hw: no PMU"),
        cilkview_events::Note::new("emulator", "qemu-x86_64 version 7.2.22")
            .with_detail("emulated CPU: -cpu Haswell-v4"),
    ];
    let text = TextExporter::to_text(&report);
    assert!(
        text.contains(
            "\nCounter: hw — chosen by auto (hw unavailable here)\nnote: hw: no PMU\n\
             note: qemu-x86_64 version 7.2.22\nModel: "
        ),
        "{text}"
    );
    let verbose = TextExporter { verbose: true }.text(&report);
    assert!(
        verbose.contains("note: qemu-x86_64 version 7.2.22\n      emulated CPU: -cpu Haswell-v4\n"),
        "{verbose}"
    );
    let json = JsonExporter {
        path: "r.json".into(),
    }
    .render(&report)
    .unwrap();
    let value: serde_json::Value = serde_json::from_slice(&json[0].bytes).unwrap();
    assert_eq!(value["counter"]["notes"][1]["id"], "emulator");
    assert_eq!(value["counter"]["notes"][0].get("detail"), None);
    let back: cilkview_report::RunReport = serde_json::from_slice(&json[0].bytes).unwrap();
    assert_eq!(back.counter.notes, report.counter.notes);
}
