//! `--profile`: call-site profiles (Cilkprof) measured on real programs, under emulation and
//! single-stepping. fixtures/profile_known.c has per-site numbers known by construction (CV_WORK:
//! exactly 2N + 2 instructions, plus a few dozen per invocation for calls, prologues and marks);
//! fixtures/qsort_profile.c is the Cilkprof paper's quicksort.

mod common;

use cilkview_fixtures::{build, skip, BuildOptions};
use common::{bin, fixture, profiled};
use serde_json::Value;

/// The line of `fixtures/NAME.c` holding `marker`, as `.c:LINE`: how a location ends (the
/// fixture is compiled from a copy named `NAME.N.N.c`).
fn line_of(name: &str, marker: &str) -> String {
    let path = cilkview_fixtures::fixtures_dir().join(format!("{name}.c"));
    let src = std::fs::read_to_string(path).unwrap();
    let n = src
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} in {name}"));
    format!(".c:{}", n + 1)
}

/// The call site of `kind` at `location` (see [`line_of`]) in fixture `stem`.
fn site<'a>(json: &'a Value, stem: &str, location: &str, kind: &str) -> &'a Value {
    json["call_sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            let at = s["location"].as_str().unwrap();
            at.ends_with(location) && at.contains(stem) && s["kind"] == kind
        })
        .unwrap_or_else(|| panic!("{kind} site {location} in {}", json["call_sites"]))
}

fn ws(v: &Value) -> (u64, u64) {
    (v["work"].as_u64().unwrap(), v["span"].as_u64().unwrap())
}

/// `got` is `expected` plus at most `overhead` instructions (calls, prologues, marks).
fn near(what: &str, got: (u64, u64), expected: (u64, u64), overhead: u64) {
    let ok = |g: u64, e: u64| g >= e && g <= e + overhead;
    assert!(
        ok(got.0, expected.0) && ok(got.1, expected.1),
        "{what}: got {got:?}, expected {expected:?} + at most {overhead}"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn known_sites_under_emulation_and_single_step() {
    let exe = fixture("profile_known");
    let mut sites = Vec::new();
    for counter in ["emulate", "step"] {
        let dir = tempfile::tempdir().unwrap();
        let Some((json, stderr)) = profiled(&exe, counter, &[], &[], dir.path()) else {
            continue;
        };
        let f = "profile_known";
        let at = |marker: &str, kind: &str| site(&json, f, &line_of(f, marker), kind).clone();
        check_calls_and_spawn(counter, &at);
        check_recursion(counter, &at);
        // Local spans on span of all sites plus the code outside them add up to the span.
        let total: u64 = json["call_sites"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["local_on_span"]["span"].as_u64().unwrap())
            .sum::<u64>()
            // The root context's local span on span (column 9 of its row).
            + json["call_contexts"][0][9].as_u64().unwrap();
        assert_eq!(total, json["span"].as_u64().unwrap(), "{counter}");
        assert!(stderr.contains("call sites on the span"), "{stderr}");
        assert!(stderr.contains(&line_of(f, "SITE_HELPER")), "{stderr}");
        sites.push(json["call_sites"].clone());
    }
    // Both backends see the same strands between marks, hence the same per-site numbers.
    if sites.len() == 2 {
        assert_eq!(sites[0], sites[1]);
    }
}

/// profile_known's serial helper, spawned sibling and nested calls, under `counter`; `at` finds a
/// site by its marker and kind.
fn check_calls_and_spawn(counter: &str, at: &dyn Fn(&str, &str) -> Value) {
    let (helper, sibling) = (at("SITE_HELPER", "call"), at("SITE_SIBLING", "spawn"));
    assert_eq!(
        (helper["function"].as_str(), helper["invocations"].as_u64()),
        (Some("run"), Some(1))
    );
    // The serial helper holds the critical path: on work = on span = local on span.
    for key in ["on_work", "on_span", "local_on_span"] {
        near(
            &format!("{counter}: helper {key}"),
            ws(&helper[key]),
            (100_002, 100_002),
            8,
        );
    }
    // The spawned sibling is off it.
    near(
        &format!("{counter}: sibling on work"),
        ws(&sibling["on_work"]),
        (20_002, 20_002),
        16,
    );
    assert_eq!(ws(&sibling["on_span"]), (0, 0), "{counter}");
    // Nested calls: outer's local part excludes its two inner sites.
    let outer = at("SITE_OUTER", "call");
    near(
        &format!("{counter}: outer on work"),
        ws(&outer["on_work"]),
        (14_006, 14_006),
        24,
    );
    near(
        &format!("{counter}: outer local"),
        ws(&outer["local_on_span"]),
        (2_004, 2_004),
        16,
    );
    for marker in ["SITE_INNER_1", "SITE_INNER_2"] {
        let inner = at(marker, "call");
        assert_eq!(inner["function"], "outer");
        assert_eq!(inner["invocations"], 1);
        near(
            &format!("{counter}: {marker}"),
            ws(&inner["local_on_span"]),
            (6_002, 6_002),
            4,
        );
    }
}

/// profile_known's recursion: down(3) and its own recursive site.
fn check_recursion(counter: &str, at: &dyn Fn(&str, &str) -> Value) {
    // Recursion: down(3) from run, then 3 invocations from down's own site; the recursive
    // site's on-work counts its top invocation only (no double counting).
    let (first, rec) = (at("SITE_DOWN", "call"), at("SITE_RECURSION", "call"));
    assert_eq!(
        (first["invocations"].as_u64(), rec["invocations"].as_u64()),
        (Some(1), Some(3))
    );
    near(
        &format!("{counter}: down on work"),
        ws(&first["on_work"]),
        (8_008, 8_008),
        40,
    );
    near(
        &format!("{counter}: down local"),
        ws(&first["local_on_span"]),
        (2_002, 2_002),
        12,
    );
    near(
        &format!("{counter}: recursion on work"),
        ws(&rec["on_work"]),
        (6_006, 6_006),
        30,
    );
    near(
        &format!("{counter}: recursion local"),
        ws(&rec["local_on_span"]),
        (6_006, 6_006),
        30,
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn quicksort_partition_holds_the_span() {
    let exe = build(
        "qsort_profile",
        &BuildOptions::default().compiler("gcc").opt(2),
    );
    let dir = tempfile::tempdir().unwrap();
    let Some((json, stderr)) = profiled(&exe, "emulate", &[], &["100000"], dir.path()) else {
        return;
    };
    let f = "qsort_profile";
    let partition = site(&json, f, &line_of(f, "SITE_PARTITION"), "call");
    let sort = site(&json, f, &line_of(f, "sample_qsort(a, a + n)"), "call");
    assert_eq!(partition["function"], "sample_qsort");
    // The sort's span (the main → sample_qsort site) is practically all partition's.
    let (local, whole) = (
        partition["local_on_span"]["span"].as_u64().unwrap(),
        sort["on_span"]["span"].as_u64().unwrap(),
    );
    assert!(
        local as f64 > 0.9 * whole as f64,
        "partition {local} of {whole}"
    );
    // The recursive sites run about serially on the span.
    for marker in ["SITE_SPAWN", "SITE_CALL"] {
        let s = site(
            &json,
            f,
            &line_of(f, marker),
            if marker == "SITE_SPAWN" {
                "spawn"
            } else {
                "call"
            },
        );
        let (w, sp) = ws(&s["on_span"]);
        assert!(w > sp, "{marker}: {s}");
    }
    check_table(&stderr, f);
    check_profile_files(dir.path(), &json);
    check_report_renders_the_same(dir.path());
}

/// The top-sites table of the report: partition's site first, with its file:line.
fn check_table(stderr: &str, f: &str) {
    let table: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("Top "))
        .collect();
    assert!(
        table.len() > 2 && table[2].contains(&line_of(f, "SITE_PARTITION")),
        "{stderr}"
    );
}

/// The profile's files (`p.*` in `dir`): CSV, folded stacks, SVG, callgrind; their totals are
/// the span.
fn check_profile_files(dir: &std::path::Path, json: &Value) {
    let read = |ext: &str| std::fs::read_to_string(dir.join(format!("p.{ext}"))).unwrap();
    let csv = read("csv");
    assert!(
        csv.starts_with("location,function,kind,invocations,"),
        "{csv}"
    );
    // A header, a row per site, a row for the code outside every call site; the local span on
    // span column adds up to the span.
    assert_eq!(
        csv.lines().count(),
        json["call_sites"].as_array().unwrap().len() + 2
    );
    let mut rows = csv::Reader::from_reader(csv.as_bytes());
    let local_spans: u64 = rows
        .records()
        .map(|r| r.unwrap()[11].parse::<u64>().unwrap())
        .sum();
    assert_eq!(local_spans, json["span"].as_u64().unwrap(), "{csv}");
    let folded = read("folded");
    let sum: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, json["span"].as_u64().unwrap());
    let svg = read("svg");
    assert!(svg.contains("<svg") && svg.contains("sample_qsort"), "svg");
    let callgrind = dir.join("p.callgrind");
    assert!(read("callgrind").starts_with("# callgrind format\n"));
    // (`callgrind_annotate --version` exits 255, so run it on the file to know if it is here.)
    match cilkview_fixtures::command("callgrind_annotate")
        .arg(&callgrind)
        .output()
    {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("PROGRAM TOTALS"),
                "{text}"
            );
            assert!(text.contains("sample_qsort"), "{text}");
            // The binary is never taken for source (the outside-every-site entry is `fl=???`).
            assert!(!text.contains("Auto-annotated source: ./"), "{text}");
            assert!(!text.contains("Auto-annotated source: /"), "{text}");
        }
        Err(_) => {
            skip("callgrind_annotate (valgrind) not installed: the .callgrind file is not parsed")
        }
    }
}

/// `report --profile` re-renders the same files from the JSON (`r.json` in `dir`).
fn check_report_renders_the_same(dir: &std::path::Path) {
    let read = |ext: &str| std::fs::read(dir.join(format!("p.{ext}"))).unwrap();
    let again = dir.join("again");
    let out = bin()
        .arg("report")
        .arg(dir.join("r.json"))
        .arg("--profile")
        .arg(&again)
        .arg("--top")
        .arg("2")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("Top 2 of "), "{text}");
    for ext in ["csv", "folded", "callgrind"] {
        let a = std::fs::read(dir.join(format!("again.{ext}"))).unwrap();
        assert_eq!(a, read(ext), "{ext}");
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn without_profile_no_call_sites_and_report_profile_needs_them() {
    let exe = fixture("known_spawn");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = bin()
        .args(["run", "--counter", "step", "--json"])
        .arg(&json)
        .arg(&exe)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = std::fs::read_to_string(&json).unwrap();
    assert!(!text.contains("call_sites") && !text.contains("call_contexts"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("call sites"), "{stderr}");
    let out = bin()
        .arg("report")
        .arg(&json)
        .arg("--profile")
        .arg(dir.path().join("p"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("no call-site profile"),
        "{stderr}"
    );
    assert!(!dir.path().join("p.csv").exists());
    // --top needs --profile.
    let out = bin()
        .args(["report", "--top", "3"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// Built without inlining: gcc -O2 inlines fib's recursion into clones of different per-call
/// costs, whose works are then not in the golden ratio (the measurement is still exact).
fn not_inlined(name: &str) -> std::path::PathBuf {
    build(name, &common::static_opts().flag("-fno-inline"))
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn top_caller_of_fib_is_in_the_golden_ratio() {
    let exe = not_inlined("fib");
    let dir = tempfile::tempdir().unwrap();
    let Some((json, _)) = profiled(&exe, "emulate", &[], &["20"], dir.path()) else {
        return;
    };
    let f = "fib";
    let (l17, l18, main) = (
        line_of(f, "cv_spawn(x = fib(n - 1))"),
        line_of(f, "y = fib(n - 2)"),
        line_of(f, "fib(n));"),
    );
    // Top-caller invocations: main → fib(20), and fib(20) → fib(19) (the spawn and the call in
    // it), fib(20) → fib(18): one each.
    let main = site(&json, f, &main, "call");
    assert_eq!(main["top_caller"], main["on_work"]);
    let (spawn, call, call18) = (
        site(&json, f, &l17, "spawn"),
        site(&json, f, &l17, "call"),
        site(&json, f, &l18, "call"),
    );
    for s in [spawn, call, call18] {
        assert_eq!(s["invocations"], 10_945, "{s}");
    }
    let (w19, w18) = (ws(&call["top_caller"]).0, ws(&call18["top_caller"]).0);
    // fib(20) = its own few instructions + fib(19) + fib(18).
    assert!(ws(&main["on_work"]).0 - (w19 + w18) < 40, "{main}");
    // The spawn holds the call plus the few instructions around it.
    let w_spawn = ws(&spawn["top_caller"]).0;
    assert!(w_spawn >= w19 && w_spawn - w19 < 40, "{spawn} {call}");
    // The paper's Figure 7: the ratio of lines 4 and 5 (here 17 and 18) is about φ.
    let ratio = w19 as f64 / w18 as f64;
    let phi = (1.0 + 5f64.sqrt()) / 2.0;
    assert!((ratio - phi).abs() < 1e-3 * phi, "{w19} / {w18} = {ratio}");
    // Top-call-site sums count nested fib(k) too: far more.
    assert!(ws(&call18["on_work"]).0 > 2 * w18, "{call18}");
    // The CSV has the same numbers in its top-caller columns.
    let csv = std::fs::read_to_string(dir.path().join("p.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(
        header[13..16],
        [
            "top_caller_work",
            "top_caller_span",
            "top_caller_parallelism"
        ]
    );
    assert!(
        csv.lines()
            .any(|l| l.contains(&l18) && l.split(',').nth(13) == Some(&w18.to_string())),
        "{csv}"
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn top_caller_of_mm_base_is_zero() {
    let exe = not_inlined("matmul_base");
    let dir = tempfile::tempdir().unwrap();
    let Some((json, _)) = profiled(&exe, "emulate", &[], &["16"], dir.path()) else {
        return;
    };
    let f = "matmul_base";
    let base = site(&json, f, &line_of(f, "SITE_BASE"), "call");
    let main = site(&json, f, &line_of(f, "SITE_MAIN"), "call");
    // (16 / 4)³ = 64 base cases, most of the work, none under the top-caller mm (Figure 10).
    assert_eq!(base["function"], "mm");
    assert_eq!(base["invocations"], 64);
    let (base_work, main_work) = (ws(&base["on_work"]).0, ws(&main["on_work"]).0);
    assert!(base_work > main_work / 2, "{base} {main}");
    assert_eq!(ws(&base["top_caller"]), (0, 0));
    assert_eq!(main["top_caller"], main["on_work"]);
    // The eight quadrant products of the top mm are its top-caller invocations: mm(8) each, all
    // the same work; together all of mm(16) but its own few instructions.
    let calls: Vec<(u64, u64)> = json["call_sites"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["function"] == "mm" && s["kind"] == "call" && s["invocations"] == 9)
        .map(|s| ws(&s["top_caller"]))
        .collect();
    assert_eq!(calls.len(), 8, "{}", json["call_sites"]);
    assert!(calls.iter().all(|&c| c == calls[0] && c.0 > 0), "{calls:?}");
    let quadrants: u64 = calls.iter().map(|c| c.0).sum();
    assert!(
        quadrants < main_work && main_work - quadrants < 400,
        "{quadrants} {main}"
    );
    let q1 = ws(&site(&json, f, &line_of(f, "SITE_Q1"), "spawn")["top_caller"]);
    assert!(
        q1.0 > calls[0].0 && q1.0 - calls[0].0 < 40,
        "{q1:?} {calls:?}"
    );
}

/// Locations read as the user reads them: relative to the working directory when the source lies
/// under it; and no two sites read the same — gcc -O2 inlines fib into itself, leaving many calls
/// on one source line, told apart by their address.
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn locations_are_relative_and_sites_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read_to_string(cilkview_fixtures::fixtures_dir().join("fib.c")).unwrap();
    let include = format!("-I{}", cilkview_fixtures::include_dir().display());
    cilkview_fixtures::compile_into(dir.path(), "fib", &source, &["-O2", "-g", &include]);
    let out = bin()
        .current_dir(dir.path())
        .args(["run", "--profile", "p", "--json", "r.json", "./fib", "12"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let sites = json["call_sites"].as_array().unwrap();
    assert!(sites.len() > 1, "{json}");
    let mut names = std::collections::BTreeSet::new();
    for s in sites {
        let location = s["location"].as_str().unwrap();
        assert!(location.starts_with("fib.c:"), "{location}");
        let name = (
            s["function"].to_string(),
            location.to_string(),
            s["kind"].to_string(),
        );
        assert!(names.insert(name), "two sites read {location}: {sites:?}");
    }
    assert!(
        sites
            .iter()
            .any(|s| s["location"].as_str().unwrap().contains(" @0x")),
        "gcc -O2 inlines fib into itself: some sites share a line ({sites:?})"
    );
}
