//! `--plot`: the pictures plotters draws are valid SVG and PNG and show every series.

use std::path::Path;

use cilkview_report::{
    read_json, render_plot, Destination, Exporter, MeasuredPoint, PlotExporter, PlotFormat,
    RunReport, SpeedupPlot, PLOT_SIZE,
};

fn figure6() -> RunReport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/figure6.json");
    read_json(&path).expect("fixtures/figure6.json")
}

/// Speedups like the crosses of the paper's Figure 2 (quicksort on 8 cores).
fn figure2_measured() -> Vec<MeasuredPoint> {
    [1.0, 1.9, 2.7, 3.4, 4.0, 4.6, 5.1, 5.6]
        .iter()
        .enumerate()
        .map(|(i, &s)| MeasuredPoint {
            cores: i as u32 + 1,
            median: s,
            min: if i == 0 { 1.0 } else { s * 0.95 },
            max: if i == 0 { 1.0 } else { s * 1.04 },
        })
        .collect()
}

/// Figure 6's report with Figure 2's measured speedups (`run --bench`).
fn figure6_measured() -> RunReport {
    let mut report = figure6();
    report.measured = figure2_measured();
    report
}

/// Saves a picture where `CILKVIEW_PLOT_DIR` says (to look at it), else nowhere.
fn keep(name: &str, bytes: &[u8]) {
    if let Some(dir) = std::env::var_os("CILKVIEW_PLOT_DIR") {
        std::fs::write(Path::new(&dir).join(name), bytes).unwrap();
    }
}

fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap());
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

#[test]
fn png_with_prediction_and_measurements() {
    let exporter = PlotExporter {
        path: "profile.png".into(),
        region: None,
    };
    let artifacts = exporter.render(&figure6_measured()).unwrap();
    assert_eq!(artifacts.len(), 1);
    assert_eq!(
        artifacts[0].destination,
        Destination::File("profile.png".into())
    );
    let png = &artifacts[0].bytes;
    keep("figure6.png", png);
    assert_eq!(png_size(png), PLOT_SIZE);
    // A drawn picture, not a blank canvas: the decoded pixels hold the band's blue, the span
    // law's red and the measured points' orange.
    let img = image::load_from_memory(png).unwrap().to_rgb8();
    let has = |rgb: [u8; 3]| img.pixels().any(|p| p.0 == rgb);
    assert!(has([0xbc, 0xd6, 0xee]), "no shaded range");
    assert!(has([0xd6, 0x27, 0x28]), "no span law");
    assert!(has([0x1f, 0x77, 0xb4]), "no burdened bound");
    assert!(has([0xe0, 0x6c, 0x00]), "no measured points");
    // Text was drawn (dark anti-aliased glyph pixels in the title strip).
    let dark_in_title = (0..PLOT_SIZE.0)
        .flat_map(|x| (0..40).map(move |y| (x, y)))
        .filter(|&(x, y)| img.get_pixel(x, y).0.iter().all(|&c| c < 80))
        .count();
    assert!(
        dark_in_title > 200,
        "no title text ({dark_in_title} dark pixels)"
    );
}

#[test]
fn svg_names_every_series_and_the_parallelisms() {
    let exporter = PlotExporter {
        path: "profile.svg".into(),
        region: None,
    };
    let svg = String::from_utf8(
        exporter
            .render(&figure6_measured())
            .unwrap()
            .remove(0)
            .bytes,
    )
    .unwrap();
    keep("figure6.svg", svg.as_bytes());
    assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
    assert!(svg.trim_end().ends_with("</svg>"));
    for text in [
        "qsort: parallelism 21.31, burdened parallelism 21.26",
        "Work law",
        "Span law: speedup ≤ parallelism (21.31)",
        "Burdened speedup (lower bound)",
        "Estimated speedup range",
        "Measured speedup",
        "Cores (P)",
    ] {
        assert!(svg.contains(text), "no {text:?} in the SVG");
    }
    // The shaded range is one polygon; the 8 measured points have 8 error bars (3 lines each).
    assert!(svg.contains("<polygon"));
}

#[test]
fn measured_only_and_bad_extension() {
    let plot = SpeedupPlot {
        program: "./omp_loop".into(),
        prediction: None,
        measured: figure2_measured()[..2].to_vec(),
        max_cores: 2,
    };
    let png = render_plot(&plot, PlotFormat::Png).unwrap();
    keep("measured_only.png", &png);
    assert_eq!(png_size(&png), PLOT_SIZE);
    let svg = String::from_utf8(render_plot(&plot, PlotFormat::Svg).unwrap()).unwrap();
    assert!(svg.contains("omp_loop: measured speedup"));
    let err = PlotFormat::of(Path::new("out.pdf")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "out.pdf: a plot file must end in .svg or .png"
    );
}

/// The gnuplot files gain the measured points: a second data block (`index 1`) and an
/// error-bar plot of it; gnuplot still draws the script.
#[test]
#[ignore = "slow: runs gnuplot"]
fn gnuplot_files_carry_the_measured_points() {
    use cilkview_report::GnuplotExporter;
    let dir = tempfile::tempdir().unwrap();
    let exporter = GnuplotExporter {
        prefix: dir.path().join("qsort"),
        region: None,
    };
    for a in exporter.render(&figure6_measured()).unwrap() {
        let Destination::File(path) = a.destination else {
            panic!("gnuplot writes files")
        };
        std::fs::write(path, a.bytes).unwrap();
    }
    let dat = std::fs::read_to_string(dir.path().join("qsort.dat")).unwrap();
    let (prediction, measured) = dat.split_once("\n\n\n").expect("two data blocks");
    assert_eq!(
        prediction.lines().filter(|l| !l.starts_with('#')).count(),
        32
    );
    let rows: Vec<&str> = measured.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[1], "2\t1.900000\t1.805000\t1.976000");
    let plt = std::fs::read_to_string(dir.path().join("qsort.plt")).unwrap();
    assert!(
        plt.contains("index 1 using 1:2:3:4 with yerrorbars"),
        "{plt}"
    );
    if let Some(png) = cilkview_fixtures::gnuplot_render(dir.path(), "qsort.plt", "qsort.png") {
        assert!(png.len() > 5000);
    }
}

/// `--what-if`: its range is drawn beside the measured one, named in the legend; absent without.
#[test]
fn svg_draws_the_what_if_range_beside_the_measured_one() {
    let mut report = figure6();
    let before = report.measures.clone();
    let mut after = before.clone();
    after.span /= 2;
    after.burdened_span /= 2;
    let measures = |m: &cilkview_report::MeasuresReport| cilkview_report::WhatIfMeasures {
        measures: cilkview_report::MeasuresReport::of(&m.measured()),
        speedup: Vec::new(),
    };
    let exporter = PlotExporter {
        path: "profile.svg".into(),
        region: None,
    };
    let svg =
        |r: &RunReport| String::from_utf8(exporter.render(r).unwrap().remove(0).bytes).unwrap();
    assert!(!svg(&report).contains("What-if"));
    report.what_if = Some(cilkview_report::WhatIfReport {
        changes: Vec::new(),
        before: measures(&before),
        after: measures(&after),
    });
    let drawn = svg(&report);
    keep("figure6_what_if.svg", drawn.as_bytes());
    for text in ["What-if: upper bound", "What-if: burdened lower bound"] {
        assert!(drawn.contains(text), "no {text:?} in the SVG");
    }
    // Two more dashed series than without: the two bounds after the change.
    assert!(drawn.matches("<polyline").count() > svg(&figure6()).matches("<polyline").count());
    // --gnuplot: two more columns (only then) and their two series.
    let gnuplot = cilkview_report::GnuplotExporter {
        prefix: "g".into(),
        region: None,
    };
    let files = gnuplot.render(&report).unwrap();
    let (dat, plt) = (
        String::from_utf8(files[0].bytes.clone()).unwrap(),
        String::from_utf8(files[1].bytes.clone()).unwrap(),
    );
    assert!(
        dat.contains("upper\twhat_if_lower\twhat_if_upper\n"),
        "{dat}"
    );
    let row2: Vec<f64> = dat
        .lines()
        .nth(4)
        .unwrap()
        .split('\t')
        .map(|v| v.parse().unwrap())
        .collect();
    let after = cilkview_engine::speedup(
        &report.what_if.as_ref().unwrap().after.measures.measured(),
        2,
        report.span_coefficient,
    );
    assert_eq!(row2.len(), 7);
    assert!((row2[5] - after.lower).abs() < 1e-6 && (row2[6] - after.upper).abs() < 1e-6);
    assert!(
        plt.contains("using 1:7") && plt.contains("What-if: burdened lower bound"),
        "{plt}"
    );
    let plain = gnuplot.render(&figure6()).unwrap();
    assert!(!String::from_utf8_lossy(&plain[0].bytes).contains("what_if"));
}
