//! `cilkview-rs bench`: real runs of real programs at each worker count. The numbers asserted
//! do not depend on how loaded the machine is: the trial order (a probe whose k-th run sleeps a
//! known time), medians taken from the trials, speedup at P = 1, what each run saw in its
//! environment and affinity mask.

mod common;

use cilkview_fixtures::skip;
use common::bench::*;
use common::bin;

/// Trials 1, 2, 3 sleep 50, 400 and 100 ms: the median is the 100 ms trial (the mean would be
/// 183 ms), the min the first and the max the second; T(1)/T(1) is exactly 1.
#[test]
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
/// variables, and P CPUs in its affinity mask; the warm-ups first, one per P, then the trials in rounds (every P in turn).
#[test]
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
    // The warm-ups, P = 1 then 2; then two rounds, each P = 1 then 2.
    for (k, line) in lines.iter().enumerate() {
        let p = k % 2 + 1;
        assert_eq!(
            line,
            &format!("run={k} cilk={p} omp={p} rayon={p} extra={p} cpus={p}"),
        );
    }
}

/// More workers than CPUs: refused before anything runs, unless --oversubscribe (then the P
/// workers share every CPU available). 256 is a valid count, refused only for want of CPUs.
#[test]
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
        assert_eq!(out.status.code(), Some(common::TOOL_FAILED));
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
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
        assert_eq!(out.status.code(), Some(common::TOOL_FAILED), "{list}");
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
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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

/// --bandwidth: P copies at once vs one alone, a ratio and a verdict in words.
#[test]
#[ignore = "slow: runs cilkview-rs bench on compiled programs"]
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
