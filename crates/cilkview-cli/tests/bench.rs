//! `cilkview-rs bench`: real runs of real programs at each worker count. The numbers asserted
//! do not depend on how loaded the machine is: the trial order (a probe whose k-th run sleeps a
//! known time), medians taken from the trials, speedup at P = 1, what each run saw in its
//! environment and affinity mask, and the OpenMP fixtures' analyses (known by construction).

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, compile_source, skip, BuildOptions, Lang};
use serde_json::Value;

mod common;

use common::{analyze, bin, fixture};

/// Held by every test here, so that they do not run at once (the test harness runs a binary's
/// tests in parallel threads): a benchmark must not measure another test's programs, nor the
/// analysis runs that bind themselves to CPU 0.
static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn timing() -> std::sync::MutexGuard<'static, ()> {
    TIMING.lock().unwrap_or_else(|e| e.into_inner())
}

fn probe() -> PathBuf {
    build(
        "bench_probe",
        &BuildOptions::default().compiler("gcc").opt(2),
    )
}

fn openmp_opts() -> BuildOptions {
    BuildOptions::default()
        .compiler("gcc")
        .opt(2)
        .flag("-fopenmp")
}

/// The `-fopenmp` build of a fixture (the one that runs in parallel); `None`, said aloud, where
/// gcc cannot build OpenMP programs.
fn openmp(name: &str) -> Option<PathBuf> {
    let probe = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n";
    if let Err(e) = compile_source("omp_works", probe, Lang::C, &openmp_opts()) {
        skip(format!(
            "gcc -fopenmp does not work here (libgomp missing? .ci/run installs it): {e}"
        ));
        return None;
    }
    Some(build(name, &openmp_opts()))
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn bench(args: &[&std::ffi::OsStr]) -> std::process::Output {
    bin()
        .arg("bench")
        .args(args)
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn os<S: AsRef<std::ffi::OsStr> + ?Sized>(s: &S) -> &std::ffi::OsStr {
    s.as_ref()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn log_lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Trials 1, 2, 3 sleep 50, 400 and 100 ms: the median is the 100 ms trial (the mean would be
/// 183 ms), the min the first and the max the second; T(1)/T(1) is exactly 1.
#[test]
fn trials_are_medians_and_speedup_at_one_is_exactly_one() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let json = dir.path().join("bench.json");
    let out = bench(&[
        os("--cores"),
        os("1"),
        os("--trials"),
        os("3"),
        os("--warmup"),
        os("0"),
        os("--json"),
        json.as_os_str(),
        probe().as_os_str(),
        log.as_os_str(),
        os("50,400,100"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the program's output is discarded");
    let j = read_json(&json);
    let r = &j["results"][0];
    assert_eq!(r["cores"], 1);
    let s: Vec<f64> = r["seconds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(s.len(), 3);
    assert!(s[0] >= 0.050 && s[1] >= 0.400 && s[2] >= 0.100, "{s:?}");
    assert!(s[0] < s[2] && s[2] < s[1], "trial order {s:?}");
    assert_eq!(r["time"]["median"].as_f64().unwrap(), s[2]);
    assert_eq!(r["time"]["min"].as_f64().unwrap(), s[0]);
    assert_eq!(r["time"]["max"].as_f64().unwrap(), s[1]);
    assert_eq!(r["speedup"]["median"].as_f64().unwrap(), 1.0);
    assert_eq!(r["efficiency"].as_f64().unwrap(), 1.0);
    assert_eq!(log_lines(&log).len(), 3, "no warm-up run");
    let table = stderr(&out);
    assert!(table.contains("3 trial(s) per worker count"), "{table}");
    assert!(table.contains("1.00 ["), "{table}");
}

/// Each run sees P in CILK_NWORKERS, OMP_NUM_THREADS, RAYON_NUM_THREADS and --workers-env
/// variables, and P CPUs in its affinity mask; warm-ups run first at each P.
#[test]
fn environment_and_affinity_reach_the_program() {
    let _timing = timing();
    if cpus() < 2 {
        skip("fewer than 2 CPUs available: cannot bench at P = 2");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = bench(&[
        os("--cores"),
        os("1-2"),
        os("--trials"),
        os("2"),
        os("--warmup"),
        os("1"),
        os("--workers-env"),
        os("PROBE_WORKERS"),
        probe().as_os_str(),
        log.as_os_str(),
        os("1"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = log_lines(&log);
    assert_eq!(
        lines.len(),
        6,
        "1 warm-up + 2 trials at P = 1 and 2: {lines:?}"
    );
    for (k, line) in lines.iter().enumerate() {
        let p = if k < 3 { 1 } else { 2 };
        assert_eq!(
            line,
            &format!("run={k} cilk={p} omp={p} rayon={p} extra={p} cpus={p}"),
        );
    }
}

/// More workers than CPUs: refused before anything runs, unless --oversubscribe (then the P
/// workers share every CPU available). 256 is a valid count, refused only for want of CPUs.
#[test]
fn more_cores_than_cpus_needs_oversubscribe() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let n = cpus();
    let too_many = (n + 1).to_string();
    for p in [too_many.as_str(), "256"] {
        if p == "256" && n >= 256 {
            continue;
        }
        let out = bench(&[
            os("--cores"),
            os(p),
            probe().as_os_str(),
            log.as_os_str(),
            os("1"),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert_eq!(
            err,
            format!(
                "error: {p} workers asked for, but only {n} CPU(s) are available to this process \
                 (use --oversubscribe to run anyway, sharing the CPUs)\n"
            )
        );
        assert!(!log.exists(), "the program ran");
    }
    let out = bench(&[
        os("--cores"),
        os(&too_many),
        os("--oversubscribe"),
        os("--trials"),
        os("1"),
        os("--warmup"),
        os("0"),
        probe().as_os_str(),
        log.as_os_str(),
        os("1"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines = log_lines(&log);
    assert_eq!(
        lines,
        vec![
            "run=0 cilk=1 omp=1 rayon=1 extra=- cpus=1".to_string(),
            format!("run=1 cilk={too_many} omp={too_many} rayon={too_many} extra=- cpus={n}"),
        ]
    );
}

#[test]
fn malformed_core_lists_are_refused_before_anything_runs() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    for (list, says) in [
        ("", "empty item"),
        ("0", "out of range"),
        ("1,,2", "empty item"),
        ("two", "not a core count"),
        ("4-2", "backwards"),
        ("1-x", "not a core count"),
        ("5000", "out of range"),
    ] {
        let out = bench(&[
            os("--cores"),
            os(list),
            probe().as_os_str(),
            log.as_os_str(),
            os("1"),
        ]);
        assert_eq!(out.status.code(), Some(2), "{list}");
        let err = stderr(&out);
        assert!(err.starts_with("error: "), "{list}: {err}");
        assert!(err.lines().next().unwrap().contains(says), "{list}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!log.exists(), "{list}: the program ran");
    }
}

/// A failed trial stops the benchmark: its captured output, then one error line with its exit
/// status (or signal); our exit status is the program's.
#[test]
fn a_failing_trial_stops_with_its_status_and_output() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let out = bin()
        .args(["bench", "--cores", "1", "--trials", "3", "--warmup", "0"])
        .arg(probe())
        .arg(&log)
        .arg("1")
        .env("PROBE_FAIL_AT", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let err = stderr(&out);
    assert!(err.contains("probe: failing at run 1\n"), "{err}");
    assert!(err.contains("probe: something went wrong\n"), "{err}");
    assert!(
        err.ends_with("error: the program failed at P=1 (trial 2): exited with status 7\n"),
        "{err}"
    );
    assert_eq!(log_lines(&log).len(), 2, "stopped at the failed trial");

    let log = dir.path().join("log2");
    let out = bin()
        .args(["bench", "--cores", "1", "--trials", "2", "--warmup", "1"])
        .arg(probe())
        .arg(&log)
        .arg("1")
        .env("PROBE_KILL_AT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + 9));
    assert!(
        stderr(&out).ends_with("error: the program failed at P=1 (warm-up): killed by signal 9\n"),
        "{}",
        stderr(&out)
    );
}

/// Options end at PROGRAM: `bench PROG --json x` gives `--json x` to the program.
#[test]
fn options_end_at_the_program() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let not_ours = dir.path().join("x.json");
    for dash in [false, true] {
        let mut cmd = bin();
        cmd.args(["bench", "--cores", "1", "--trials", "1", "--warmup", "0"])
            .arg(probe());
        if dash {
            cmd.arg("--");
        }
        let out = cmd
            .arg(&log)
            .arg("1")
            .arg("--json")
            .arg(&not_ours)
            .arg("--show-output")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(!not_ours.exists(), "--json after PROGRAM was taken as ours");
        assert!(
            out.stdout.is_empty(),
            "--show-output after PROGRAM was taken as ours"
        );
    }
    // --show-output before PROGRAM is ours: the program's stdout comes through.
    let out = bin()
        .args([
            "bench",
            "--cores",
            "1",
            "--trials",
            "1",
            "--warmup",
            "0",
            "--show-output",
        ])
        .arg(probe())
        .arg(&log)
        .arg("1")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("probe run 2 slept 1 ms"));
}

/// The OpenMP fixtures' serial builds, analysed: numbers known by construction.
#[test]
fn openmp_fixtures_analysed_serially() {
    let _timing = timing();
    // 8 iterations of 20,001 instructions: parallelism 8.
    let a = analyze(&fixture("omp_loop"), &["8", "10000"]);
    let r = a.region("loop");
    let par = r["parallelism"].as_f64().unwrap();
    assert!((7.9..=8.0).contains(&par), "{par}");
    assert!(r["work"].as_u64().unwrap() >= 8 * 20_001);
    assert_eq!(r["spawns"], 7, "a divide-and-conquer loop of 8 iterations");
    // 200 tasks of ~50 instructions, each continuation burdened with 15,000 instructions:
    // plenty of parallelism, a burdened parallelism near zero.
    let a = analyze(&fixture("omp_fine"), &["200", "20", "1"]);
    let r = a.region("tasks");
    assert_eq!(r["spawns"], 200);
    assert!(r["parallelism"].as_f64().unwrap() > 5.0, "{r}");
    assert!(r["burdened_parallelism"].as_f64().unwrap() < 0.01, "{r}");
    assert!(r["burdened_span"].as_u64().unwrap() >= 199 * 15_000, "{r}");
    // fib(14) with tasks above 8: 33 spawns (fib calls with n >= 8 that spawn).
    let a = analyze(&fixture("omp_fib"), &["14", "8"]);
    assert_eq!(a.region("fib")["spawns"], 33);
    assert!(a.stdout().contains("fib(14) = 377"));
}

/// The measured speedups beside the prediction: table, JSON, CSV, SVG and PNG.
#[test]
fn bench_against_an_analysis() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let analysis = dir.path().join("loop.json");
    let a = common::analyze_with(&fixture("omp_loop"), &[], &["8", "10000"]);
    std::fs::write(&analysis, a.json.to_string()).unwrap();
    let (json, csv, svg, png) = (
        dir.path().join("b.json"),
        dir.path().join("b.csv"),
        dir.path().join("b.svg"),
        dir.path().join("b.png"),
    );
    let cores = if cpus() >= 2 { "1,2" } else { "1" };
    let Some(exe) = openmp("omp_loop") else {
        return;
    };
    for plot in [&svg, &png] {
        let out = bench(&[
            os("--cores"),
            os(cores),
            os("--trials"),
            os("3"),
            os("--analysis"),
            analysis.as_os_str(),
            os("--region"),
            os("loop"),
            os("--json"),
            json.as_os_str(),
            os("--csv"),
            csv.as_os_str(),
            os("--plot"),
            plot.as_os_str(),
            exe.as_os_str(),
            os("8"),
            os("2000000"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let table = stderr(&out);
        assert!(table.contains("measured vs predicted"), "{table}");
        assert!(table.contains("1.00 – 1.00  inside"), "{table}");
    }
    let j = read_json(&json);
    let results = j["results"].as_array().unwrap();
    assert_eq!(results.len(), cores.split(',').count());
    let one = &results[0];
    assert_eq!(one["predicted"]["lower"].as_f64().unwrap(), 1.0);
    assert_eq!(one["predicted"]["upper"].as_f64().unwrap(), 1.0);
    assert_eq!(one["placement"], "inside");
    if let Some(two) = results.get(1) {
        // Parallelism 8: the upper bound at P = 2 is 2; the burdened bound below it.
        assert_eq!(two["predicted"]["upper"].as_f64().unwrap(), 2.0);
        let lower = two["predicted"]["lower"].as_f64().unwrap();
        assert!(lower > 1.0 && lower < 2.0, "{lower}");
        assert!(["inside", "above", "below"].contains(&two["placement"].as_str().unwrap()));
        let s = &two["speedup"];
        let (min, med, max) = (
            s["min"].as_f64().unwrap(),
            s["median"].as_f64().unwrap(),
            s["max"].as_f64().unwrap(),
        );
        assert!(min <= med && med <= max);
        assert!((two["efficiency"].as_f64().unwrap() - med / 2.0).abs() < 1e-12);
    }
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv_text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "cores,time_median,time_min,time_max,speedup_median,speedup_min,speedup_max,efficiency,\
         predicted_lower,predicted_upper,placement"
    );
    assert!(lines.next().unwrap().starts_with("1,"));
    assert!(csv_text.lines().next_back().unwrap().ends_with(",inside") || cores != "1");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg_text.contains("omp_loop [loop]: parallelism 8.00"),
        "title"
    );
    assert!(svg_text.contains("Measured speedup"));
    let png_bytes = std::fs::read(&png).unwrap();
    assert!(png_bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(png_bytes.len() > 20_000, "{} bytes", png_bytes.len());
}

/// `run --bench`: analysis, then the benchmark of the same program, and both on the plot.
#[test]
fn run_then_bench() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    let out = bin()
        .args([
            "run", "--bench", "--cores", "1", "--trials", "1", "--warmup", "0",
        ])
        .arg("--plot")
        .arg(&svg)
        .arg(fixture("omp_fib"))
        .args(["14", "8"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let analysis = err.find("1) Parallelism Profile").expect("the analysis");
    let table = err.find("cilkview-rs bench:").expect("the benchmark table");
    assert!(analysis < table, "{err}");
    assert!(err.contains("measured vs predicted"), "{err}");
    // Only the analysis run's output reaches stdout: the benchmark's is discarded.
    assert_eq!(String::from_utf8_lossy(&out.stdout), "fib(14) = 377\n");
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("Measured speedup") && svg_text.contains("Burdened speedup"));
}

/// --bandwidth: P copies at once vs one alone, a ratio and a verdict in words.
#[test]
fn bandwidth_test_reports_a_ratio_and_a_verdict() {
    let _timing = timing();
    if cpus() < 2 {
        skip("fewer than 2 CPUs available: no bandwidth test");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("b.json");
    let log = dir.path().join("log");
    let out = bench(&[
        os("--cores"),
        os("1,2"),
        os("--trials"),
        os("1"),
        os("--warmup"),
        os("0"),
        os("--bandwidth"),
        os("--json"),
        json.as_os_str(),
        probe().as_os_str(),
        log.as_os_str(),
        os("200"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let b = &read_json(&json)["bandwidth"];
    assert_eq!(b["copies"], 2);
    // Sleeping copies do not compete: each takes its 200 ms.
    assert!(b["alone"]["median"].as_f64().unwrap() >= 0.2);
    assert!(b["together"]["median"].as_f64().unwrap() >= 0.2);
    let ratio = b["ratio"].as_f64().unwrap();
    assert!(["independent", "contention", "limited"].contains(&b["verdict"].as_str().unwrap()));
    assert!(
        stderr(&out).contains(&format!("ratio {ratio:.2}")),
        "{}",
        stderr(&out)
    );
    // 2 runs at P = 1 and 2, then 1 alone + 2 copies; the copies ran with 1 worker on 1 CPU.
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 5, "{lines:?}");
    for line in &lines[2..] {
        assert!(
            line.ends_with("cilk=1 omp=1 rayon=1 extra=- cpus=1"),
            "{line}"
        );
    }
}

/// `report --plot`: the prediction alone, from a saved report, as a PNG and an SVG.
#[test]
fn report_draws_a_saved_analysis() {
    let _timing = timing();
    let dir = tempfile::tempdir().unwrap();
    let figure6 = cilkview_fixtures::fixtures_dir().join("figure6.json");
    for name in ["p.png", "p.svg"] {
        let plot = dir.path().join(name);
        let out = bin()
            .arg("report")
            .arg(&figure6)
            .arg("--plot")
            .arg(&plot)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let bytes = std::fs::read(&plot).unwrap();
        if name.ends_with("png") {
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        } else {
            let svg = String::from_utf8(bytes).unwrap();
            assert!(svg.contains("qsort: parallelism 21.31, burdened parallelism 21.26"));
            assert!(!svg.contains("Measured"), "nothing was measured");
        }
    }
    let out = bin()
        .arg("report")
        .arg(&figure6)
        .arg("--plot")
        .arg(dir.path().join("p.pdf"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("a plot file must end in .svg or .png"),
        "{}",
        stderr(&out)
    );
    // `run --plot` with a bad extension: refused before the program runs.
    let out = bin()
        .args(["run", "--plot", "profile.pdf"])
        .arg(fixture("omp_fib"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "the program ran");
    let err = stderr(&out);
    assert!(
        err.starts_with("error: invalid value 'profile.pdf' for '--plot <FILE>': a plot file must end in .svg or .png"),
        "{err}"
    );
}

/// The fine-grained fixture (one tiny task per element) runs slower on 2 workers than on 1:
/// libgomp's cost per task dwarfs the task (measured 0.35 here), while the prediction's burdened
/// bound, near zero, allows it: inside the predicted range, as in the paper's Figure 8.
#[test]
fn fine_grained_tasks_measure_a_slowdown() {
    let _timing = timing();
    if cpus() < 2 {
        skip("fewer than 2 CPUs available: cannot bench at P = 2");
        return;
    }
    let Some(exe) = openmp("omp_fine") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let analysis = dir.path().join("fine.json");
    let a = analyze(&fixture("omp_fine"), &["200", "20", "1"]);
    std::fs::write(&analysis, a.json.to_string()).unwrap();
    let json = dir.path().join("b.json");
    let out = bench(&[
        os("--cores"),
        os("1,2"),
        os("--analysis"),
        analysis.as_os_str(),
        os("--region"),
        os("tasks"),
        os("--trials"),
        os("5"),
        os("--json"),
        json.as_os_str(),
        exe.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let results = read_json(&json)["results"].clone();
    let two = &results[1];
    let speedup = two["speedup"]["median"].as_f64().unwrap();
    assert!(speedup < 0.9, "fine-grained tasks sped up: {results}");
    assert!(two["predicted"]["lower"].as_f64().unwrap() < 0.05);
    assert_eq!(two["placement"], "inside");
}
