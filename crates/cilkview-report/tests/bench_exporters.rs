//! `bench`'s outputs (and `run --bench`'s table) behind the exporter seam: a benchmark known by
//! construction (T(1) = 4 s, T(2) = 2.5 s, T(4) = 1.6 s), compared with Figure 6's analysis.

use std::path::Path;

use cilkview_bench::{BenchReport, CoresResult, Summary};
use cilkview_report::{
    compare, measured_points, read_json, BenchCsvExporter, BenchExportOptions, BenchPlotExporter,
    BenchTableExporter, ExportManager, Exporter, JsonExporter, RunReport,
};

fn figure6() -> RunReport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
    read_json(&path).expect("fixtures/figure6.json")
}

fn summary(median: f64, min: f64, max: f64) -> Summary {
    Summary { median, min, max }
}

/// Three worker counts, two trials each; speedups T(1)'s median over each.
fn benchmark() -> BenchReport {
    let result = |cores: u32, seconds: [f64; 2]| {
        let time = summary(
            (seconds[0] + seconds[1]) / 2.0,
            seconds[0].min(seconds[1]),
            seconds[0].max(seconds[1]),
        );
        let speedup = summary(4.0 / time.median, 4.0 / time.max, 4.0 / time.min);
        CoresResult {
            cores,
            seconds: seconds.to_vec(),
            time,
            efficiency: speedup.median / f64::from(cores),
            speedup,
            predicted: None,
            placement: None,
        }
    };
    BenchReport {
        version: cilkview_bench::JSON_VERSION,
        program: "./qsort".into(),
        args: vec!["1000000".into()],
        cpus_available: 4,
        trials: 2,
        warmup: 1,
        workers_env: vec!["CILK_NWORKERS".into(), "OMP_NUM_THREADS".into()],
        results: vec![
            result(1, [3.9, 4.1]),
            result(2, [2.4, 2.6]),
            result(4, [1.5, 1.7]),
        ],
        bandwidth: None,
    }
}

/// Runs under 5 ms (hyperfine's threshold) get a warning under the table; longer ones none.
#[test]
fn very_short_runs_are_warned_about() {
    let mut bench = benchmark();
    assert!(!BenchTableExporter::to_text(&bench).contains("warning:"));
    bench.results[1].time.min = 0.0028;
    let text = BenchTableExporter::to_text(&bench);
    assert!(
        text.contains("\nwarning: the fastest run took 2.8 ms: under 5 ms, starting the process"),
        "{text}"
    );
}

/// A median speedup above P (more than P workers can give) gets a note naming the likely causes.
#[test]
fn a_speedup_above_p_is_noted() {
    let mut bench = benchmark();
    assert!(!BenchTableExporter::to_text(&bench).contains("note:"));
    bench.results[1].speedup.median = 2.47;
    let text = BenchTableExporter::to_text(&bench);
    assert!(
        text.contains("\nnote: at P=2 the speedup 2.47 exceeds P: the machine's speed moved"),
        "{text}"
    );
}

#[test]
fn table_shows_each_worker_count_and_where_it_lies() {
    let mut bench = benchmark();
    let text = BenchTableExporter::to_text(&bench);
    assert!(text.starts_with(
        "cilkview-rs bench: ./qsort 1000000\n2 trial(s) per worker count after 1 warm-up \
         run(s); workers set by CILK_NWORKERS, OMP_NUM_THREADS; median [min – max]\n"
    ));
    assert!(!text.contains("predicted"), "{text}");
    assert!(
        text.contains("   2    2.5000 [2.4000 – 2.6000]      1.60 [1.54 – 1.67]         80%\n"),
        "{text}"
    );
    // Figure 6's qsort (parallelism 21.31, burdened 21.26) predicts 1.85–2 on 2 cores and
    // 3.23–4 on 4: the measured 1.60 and 2.50 lie below.
    compare(&mut bench, &figure6());
    let text = BenchTableExporter::to_text(&bench);
    assert!(text.contains("measured vs predicted"), "{text}");
    let two = text.lines().find(|l| l.starts_with("   2 ")).unwrap();
    assert!(
        two.ends_with("1.85 – 2.00  BELOW (slower than predicted)"),
        "{two}"
    );
    assert!(text.contains("\nBelow the predicted range: "), "{text}");
    // After an analysis's report (`run --bench`), a blank line first.
    let after = BenchTableExporter { after_report: true }
        .render(&bench)
        .unwrap()
        .remove(0);
    assert_eq!(after.bytes, format!("\n{text}").into_bytes());
}

#[test]
fn csv_and_json_carry_the_prediction() {
    let mut bench = benchmark();
    compare(&mut bench, &figure6());
    let csv = String::from_utf8(BenchCsvExporter::to_csv(&bench).unwrap()).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "cores,time_median,time_min,time_max,speedup_median,speedup_min,speedup_max,efficiency,\
         predicted_lower,predicted_upper,placement"
    );
    assert_eq!(lines.len(), 4);
    assert!(lines[1].starts_with("1,4.0,3.9,4.1,1.0,"), "{}", lines[1]);
    assert!(lines[1].ends_with(",1.0,1.0,inside"), "{}", lines[1]);
    assert!(lines[3].ends_with(",below"), "{}", lines[3]);
    let json = JsonExporter { path: "-".into() }
        .render(&bench)
        .unwrap()
        .remove(0);
    let value: serde_json::Value = serde_json::from_slice(&json.bytes).unwrap();
    assert_eq!(value["results"][1]["predicted"]["cores"], 2);
    assert_eq!(value["results"][1]["placement"], "below");
    assert!(json.bytes.ends_with(b"}\n"));
}

#[test]
fn plot_titles_the_program_run_and_its_region() {
    let bench = benchmark();
    let svg = |analysis: Option<RunReport>, region: Option<&str>| {
        let exporter = BenchPlotExporter {
            path: "b.svg".into(),
            analysis,
            region: region.map(String::from),
        };
        String::from_utf8(exporter.render(&bench).unwrap().remove(0).bytes).unwrap()
    };
    let alone = svg(None, None);
    assert!(alone.contains("qsort: measured speedup"), "measured only");
    assert!(!alone.contains("Span law"));
    let predicted = svg(Some(figure6()), None);
    assert!(predicted.contains("qsort: parallelism 21.31"));
    assert!(predicted.contains("Measured speedup"));
    let mut analysis = figure6();
    analysis.program = "./qsort-serial".into();
    assert!(svg(Some(analysis), Some("sort")).contains("qsort [sort]: parallelism 21.31"));
    assert_eq!(measured_points(&bench)[2].median, 2.5);
}

#[test]
fn bench_outputs_are_reserved_and_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = BenchExportOptions {
        json: Some(dir.path().join("b.json")),
        csv: Some(dir.path().join("b.csv")),
        plot: Some(dir.path().join("b.png")),
        ..Default::default()
    };
    let manager = ExportManager::bench(&options).unwrap();
    for f in ["b.json", "b.csv", "b.png"] {
        assert!(dir.path().join(f).exists(), "{f} reserved");
    }
    // The benchmark failed: nothing is left behind.
    drop(manager);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let mut manager = ExportManager::bench(&options).unwrap();
    let mut stderr = Vec::new();
    assert!(manager.write(&benchmark(), &mut stderr).unwrap());
    drop(manager);
    assert!(String::from_utf8(stderr)
        .unwrap()
        .starts_with("cilkview-rs bench: ./qsort"));
    let csv = std::fs::read_to_string(dir.path().join("b.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
    assert!(std::fs::read(dir.path().join("b.png"))
        .unwrap()
        .starts_with(b"\x89PNG"));

    let both = BenchExportOptions {
        json: Some("-".into()),
        csv: Some("-".into()),
        ..Default::default()
    };
    let err = ExportManager::bench(&both)
        .err()
        .expect("two outputs on stdout");
    assert_eq!(
        err.to_string(),
        "--json - and --csv - would both write to standard output: name a file for one"
    );
}

#[test]
fn a_region_to_predict_from_must_exist() {
    let whole = figure6().prediction(None).unwrap();
    assert_eq!(whole, figure6());
    let err = figure6().prediction(Some("sort")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the analysis has no region \"sort\" (its regions: none)"
    );
}
