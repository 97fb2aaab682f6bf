//! The call-site profile outputs (CSV, top-sites table, folded stacks and flame graph, Callgrind,
//! JSON) on a profile the engine computes from the Cilkprof paper's quicksort (Figure 1) as a
//! synthetic event stream, whose numbers are known by construction.

use cilkview_engine::{CallSite, Config, Engine, Event, EventKind, EventKind::*, Report};
use cilkview_report::{
    read_json, CallgrindExporter, CounterMode, CounterReport, Destination, Ending, ExitStatus,
    Exporter, FlameGraphExporter, JsonExporter, ProfileCsvExporter, RunInfo, RunReport, SiteName,
    TopSitesExporter,
};

const COARSENING: u64 = 32;

struct Stream {
    engine: Engine,
    pending: u64,
}

impl Stream {
    fn ev(&mut self, kind: EventKind, site: u64) {
        let cost = std::mem::take(&mut self.pending);
        self.engine
            .process(Event::at(cost, kind, CallSite::new(site)));
    }
}

/// pqsort as in the engine's profile_cases test: partition at line 20, spawn at 21, call at 22,
/// main's call at 31.
fn pqsort(s: &mut Stream, n: u64, depth: u32) {
    if n < COARSENING {
        s.pending += n;
        return;
    }
    s.pending += 1;
    s.ev(FunctionEnter, 20);
    s.pending += n;
    s.ev(FunctionExit, 0);
    let a = if depth % 2 == 0 { 2 * n / 5 } else { 3 * n / 5 };
    s.ev(Spawn, 21);
    pqsort(s, a, depth + 1);
    s.ev(SpawnReturn, 0);
    s.ev(FunctionEnter, 22);
    pqsort(s, n - a, depth + 1);
    s.ev(FunctionExit, 0);
    s.ev(Sync, 0);
}

/// (span, partition's share of it).
fn pqsort_span(n: u64, depth: u32) -> (u64, u64) {
    if n < COARSENING {
        return (n, 0);
    }
    let a = if depth % 2 == 0 { 2 * n / 5 } else { 3 * n / 5 };
    let (sa, pa) = pqsort_span(a, depth + 1);
    let (sb, pb) = pqsort_span(n - a, depth + 1);
    let (s, p) = if sa > sb { (sa, pa) } else { (sb, pb) };
    (1 + n + s, n + p)
}

const N: u64 = 100_000;

fn engine_report() -> Report {
    let mut s = Stream {
        engine: Engine::with_profile(Config::default()),
        pending: 5,
    };
    s.ev(FunctionEnter, 31);
    pqsort(&mut s, N, 0);
    s.ev(FunctionExit, 0);
    s.engine.charge(7);
    s.engine.finish()
}

fn info() -> RunInfo {
    RunInfo {
        program: "./qsort".into(),
        args: vec![N.to_string()],
        ending: Ending::Exited(ExitStatus::Exited(0)),
        counter: CounterReport {
            mode: CounterMode::Step,
            reason: "test".into(),
            notes: Vec::new(),
            runs: 1,
            noise: None,
        },
        unit: cilkview_events::CostUnit::Instructions,
        burden: 15_000,
        span_coefficient: 0.85,
        max_cores: 8,
    }
}

fn report() -> RunReport {
    let r = engine_report();
    RunReport::new(info(), &r, |i| i.to_string()).with_profile(r.profile.as_ref().unwrap(), |s| {
        let line = s.site.key();
        SiteName {
            function: if line == 31 { "main" } else { "pqsort" }.into(),
            location: format!("qsort.c:{line}"),
            address: Some(0x1000 + line),
            callee: Some("pqsort".into()),
        }
    })
}

/// Sites that share a function, a location and a kind (gcc inlines fib into itself: dozens of
/// `fib.c:9 fib call`) are told apart by their address; the others keep their plain location.
#[test]
fn sites_sharing_a_line_are_told_apart() {
    let r = engine_report();
    let report = RunReport::new(info(), &r, |i| i.to_string()).with_profile(
        r.profile.as_ref().unwrap(),
        |s| {
            let line = s.site.key();
            SiteName {
                function: if line == 31 { "main" } else { "pqsort" }.into(),
                location: if line == 31 {
                    "qsort.c:31"
                } else {
                    "qsort.c:20"
                }
                .into(),
                address: Some(0x1000 + line),
                callee: None,
            }
        },
    );
    let sites = report.call_sites.unwrap();
    let names: std::collections::BTreeSet<(String, String, String)> = sites
        .iter()
        .map(|s| (s.function.clone(), s.location.clone(), s.kind.clone()))
        .collect();
    assert_eq!(names.len(), sites.len(), "{sites:?}");
    for s in &sites {
        if s.function == "main" {
            assert_eq!(s.location, "qsort.c:31");
        }
    }
    let calls: Vec<&str> = sites
        .iter()
        .filter(|s| s.function == "pqsort" && s.kind == "call")
        .map(|s| s.location.as_str())
        .collect();
    assert_eq!(calls.len(), 2, "{sites:?}");
    assert!(
        calls.iter().all(|l| l.starts_with("qsort.c:20 @0x10")),
        "{calls:?}"
    );
    // The spawn, alone of its kind there, keeps the plain location.
    assert!(
        sites
            .iter()
            .any(|s| s.kind == "spawn" && s.location == "qsort.c:20"),
        "{sites:?}"
    );
}

#[test]
fn json_has_call_sites_only_when_profiled() {
    let r = engine_report();
    let plain = RunReport::new(info(), &r, |i| i.to_string());
    let plain_json = serde_json::to_value(&plain).unwrap();
    assert!(plain_json.get("call_sites").is_none() && plain_json.get("call_contexts").is_none());

    let report = report();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let bytes = &JsonExporter { path: path.clone() }.render(&report).unwrap()[0].bytes;
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(read_json(&path).unwrap(), report);
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    let sites = v["call_sites"].as_array().unwrap();
    assert_eq!(sites.len(), 4);
    let keys: Vec<&str> = sites[0]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "location",
            "function",
            "callee",
            "kind",
            "invocations",
            "on_work",
            "on_span",
            "local_on_span",
            "top_caller"
        ]
    );
    // The synthetic sites carry no caller function: each is alone in its own, so its
    // top-caller invocations are its top-call-site ones.
    for s in sites {
        assert_eq!(s["top_caller"], s["on_work"]);
    }
    // A report written before top-caller measurements still reads (the key is absent).
    let mut old = v.clone();
    for s in old["call_sites"].as_array_mut().unwrap() {
        s.as_object_mut().unwrap().remove("top_caller");
    }
    std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
    let old = read_json(&path).unwrap();
    assert!(old.call_sites.as_deref().unwrap()[0].top_caller.is_none());
    let csv = ProfileCsvExporter::to_csv(&old).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert!(
        csv.lines().nth(1).unwrap().ends_with(",,,,112954.00"),
        "{csv}"
    );
    let (span, partition) = pqsort_span(N, 0);
    let part = sites
        .iter()
        .find(|s| s["location"] == "qsort.c:20")
        .unwrap();
    assert_eq!(part["kind"], "call");
    assert_eq!(part["local_on_span"]["span"], partition);
    assert_eq!(v["span"], span + 12);
    let spawn = sites
        .iter()
        .find(|s| s["location"] == "qsort.c:21")
        .unwrap();
    assert_eq!(spawn["kind"], "spawn");
}

#[test]
fn contexts_are_rows_one_line_each_and_version_1_objects_still_read() {
    let report = report();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let bytes = &JsonExporter { path: path.clone() }.render(&report).unwrap()[0].bytes;
    let text = String::from_utf8(bytes.clone()).unwrap();
    let v: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    assert_eq!(v["version"], 3);
    let contexts = report.call_contexts.as_deref().unwrap();
    let rows = v["call_contexts"].as_array().unwrap();
    assert_eq!(rows.len(), contexts.len());
    // [parent, site, invocations, on_work.work, on_work.span, local_work, on_span.work,
    // on_span.span, local_on_span.work, local_on_span.span]
    let root = &contexts[0];
    assert_eq!(
        rows[0],
        serde_json::json!([
            null,
            null,
            root.invocations,
            root.on_work.work,
            root.on_work.span,
            root.local_work,
            root.on_span.work,
            root.on_span.span,
            root.local_on_span.work,
            root.local_on_span.span
        ])
    );
    assert_eq!(rows[1][0], 0);
    // One line per context, the rest of the report indented as before.
    let first = format!("    [null, null, {}, ", root.invocations);
    assert!(text.contains(&format!("\n{first}")), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("    [")).count(),
        contexts.len()
    );
    assert!(text.contains("\n  \"work\": "), "{text}");
    // A report of version 1 (contexts as objects) reads as the same report.
    let mut old = v.clone();
    old["version"] = 1.into();
    old["call_contexts"] = contexts
        .iter()
        .map(|c| {
            let mut o = serde_json::json!({
                "invocations": c.invocations,
                "on_work": { "work": c.on_work.work, "span": c.on_work.span },
                "local_work": c.local_work,
                "on_span": { "work": c.on_span.work, "span": c.on_span.span },
                "local_on_span": { "work": c.local_on_span.work, "span": c.local_on_span.span },
            });
            if let (Some(p), Some(s)) = (c.parent, c.site) {
                o["parent"] = p.into();
                o["site"] = s.into();
            }
            o
        })
        .collect();
    std::fs::write(&path, serde_json::to_vec_pretty(&old).unwrap()).unwrap();
    let read = read_json(&path).unwrap();
    assert_eq!(read.call_contexts, report.call_contexts);
}

#[test]
fn csv_has_the_columns_of_figure_2() {
    let report = report();
    let a = ProfileCsvExporter {
        prefix: "out/qsort".into(),
    }
    .render(&report)
    .unwrap();
    assert_eq!(a[0].destination, Destination::File("out/qsort.csv".into()));
    let mut rd = csv::Reader::from_reader(a[0].bytes.as_slice());
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header[..4], ["location", "function", "kind", "invocations"]);
    assert_eq!(header.len(), 17);
    assert_eq!(
        header[13..],
        [
            "top_caller_work",
            "top_caller_span",
            "top_caller_parallelism",
            "parallelism_if_parallel"
        ]
    );
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 5);
    // The last row is the code outside every call site: the local span column adds up to the
    // span.
    let outside = &rows[4];
    assert_eq!(
        (&outside[0], &outside[2]),
        ("(outside every call site)", "outside")
    );
    assert_eq!(&outside[11], "12");
    let local_spans: u64 = rows.iter().map(|r| r[11].parse::<u64>().unwrap()).sum();
    assert_eq!(local_spans, report.measures.span);
    let (_, partition) = pqsort_span(N, 0);
    let part = rows.iter().find(|r| &r[0] == "qsort.c:20").unwrap();
    assert_eq!(&part[1], "pqsort");
    assert_eq!(&part[11], partition.to_string());
    assert_eq!(&part[9], "1.00", "partition is serial on the span");
    let top = rows.iter().find(|r| &r[0] == "qsort.c:31").unwrap();
    assert_eq!(&top[3], "1");
    assert_eq!(top[4].parse::<u64>().unwrap(), report.measures.work - 12);
    // No caller functions: top-caller = top-call-site.
    assert_eq!((&top[13], &top[14], &top[15]), (&top[4], &top[5], &top[6]));
    // Were the outermost call parallel, only the 12 units outside every site would be serial;
    // were partition parallel, its span would leave the critical path.
    let expect = |span: u64| format!("{:.2}", report.measures.work as f64 / span as f64);
    assert_eq!(&top[16], expect(12));
    assert_eq!(&part[16], expect(report.measures.span - partition));
    assert_eq!(&outside[16], "");
}

#[test]
fn top_sites_table_puts_partition_first() {
    let report = report();
    let text = TopSitesExporter { top: 2 }.to_text(&report);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Top 2 of 4 call sites on the span (by local span on span):"
    );
    assert!(lines[1].contains("local span on span"), "{text}");
    assert!(
        lines[2].trim_start().starts_with("qsort.c:20  pqsort"),
        "{text}"
    );
    let (span, partition) = pqsort_span(N, 0);
    let pct = format!("{:.1}%", 100.0 * partition as f64 / (span + 12) as f64);
    assert!(lines[2].contains(&pct), "{pct} in {text}");
    assert_eq!(lines.len(), 5, "{text}");
    assert!(lines[4].contains("outside every call site: 12"), "{text}");
    assert_eq!(TopSitesExporter::default().top, 10);
}

#[test]
fn a_span_mostly_outside_call_sites_points_to_profile_region_and_a_region_is_named() {
    let mut report = report();
    // The root's local span on span made most of the span (a long serial start-up).
    let extra = 2 * report.measures.span;
    report.call_contexts.as_mut().unwrap()[0].local_on_span.span += extra;
    report.measures.span += extra;
    let text = TopSitesExporter::default().to_text(&report);
    assert!(
        text.lines()
            .last()
            .unwrap()
            .contains("--profile-region LABEL profiles one region"),
        "{text}"
    );
    // A region's profile: named, percentages of the region's span, no hint.
    let mut region = self::report();
    region.profile_region = Some("sort".into());
    region.measures.span *= 4;
    let text = TopSitesExporter { top: 1 }.to_text(&region);
    assert!(
        text.starts_with("Top 1 of 4 call sites on the span of region sort "),
        "{text}"
    );
    let (span, partition) = pqsort_span(N, 0);
    let pct = format!("{:.1}%", 100.0 * partition as f64 / (span + 12) as f64);
    assert!(text.contains(&pct), "{pct} in {text}");
    assert!(!text.contains("--profile-region"), "{text}");
}

#[test]
fn sites_with_no_span_are_not_on_the_span() {
    let mut report = report();
    let sites = report.call_sites.as_mut().unwrap();
    sites[3].local_on_span.span = 0;
    let gone = sites[3].location.clone();
    let text = TopSitesExporter { top: 10 }.to_text(&report);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "Top 3 of 3 call sites on the span (by local span on span; 1 more have none of it):"
    );
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        !lines[2..5]
            .iter()
            .any(|l| l.trim_start().starts_with(&format!("{gone} "))),
        "{text}"
    );
}

#[test]
fn folded_stacks_add_up_to_the_span_and_draw_a_flame_graph() {
    let report = report();
    let folded = FlameGraphExporter::to_folded(&report);
    let total: u64 = folded
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, report.measures.span);
    // The code under no call site is its own bar; the stacks start at the outermost call site
    // (inferno's `all` is the one root: no second root named after the program).
    assert!(
        folded.lines().any(|l| l == "(outside every call site) 12"),
        "{folded}"
    );
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("main qsort.c:31;pqsort qsort.c:20 ")),
        "{folded}"
    );
    assert!(!folded.contains("qsort;"), "{folded}");
    let a = FlameGraphExporter { prefix: "p".into() }
        .render(&report)
        .unwrap();
    assert_eq!(a[1].destination, Destination::File("p.svg".into()));
    let svg = String::from_utf8(a[1].bytes.clone()).unwrap();
    assert!(svg.contains("<svg") && svg.contains("pqsort qsort.c:20"));
    // One root frame, `all`; the program is named in the title.
    assert_eq!(svg.matches("<title>all (").count(), 1, "{svg}");
    assert!(!svg.contains("<title>qsort ("), "{svg}");
    // The work's flame graph: every context's local work, adding up to the work.
    assert_eq!(a[2].destination, Destination::File("p.work.folded".into()));
    assert_eq!(a[3].destination, Destination::File("p.work.svg".into()));
    let work: u64 = String::from_utf8(a[2].bytes.clone())
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(work, report.measures.work);
    let svg = String::from_utf8(a[3].bytes.clone()).unwrap();
    assert!(svg.contains("Work of ") && svg.contains("pqsort qsort.c:20"));
}

#[test]
#[ignore = "slow: runs callgrind_annotate"]
fn callgrind_self_costs_add_up_and_callgrind_annotate_reads_it() {
    let report = report();
    let text = CallgrindExporter::to_callgrind(&report);
    assert!(text.starts_with("# callgrind format\n"));
    assert!(text.contains("events: Work Span\n"));
    // Self-cost lines follow `fn=` lines.
    let lines: Vec<&str> = text.lines().collect();
    let (mut work, mut span) = (0u64, 0u64);
    for w in lines.windows(2) {
        if w[0].starts_with("fn=") {
            let v: Vec<u64> = w[1].split(' ').map(|x| x.parse().unwrap()).collect();
            work += v[1];
            span += v[2];
        }
    }
    assert_eq!((work, span), (report.measures.work, report.measures.span));
    assert!(text.contains("cfn=pqsort qsort.c:20\ncalls="), "{text}");
    // The code under no call site has no source file: not the program, which
    // callgrind_annotate would read as source.
    assert!(
        text.contains("\nfl=???\nfn=./qsort 100000000 (outside call sites)\n")
            || text.contains("\nfl=???\nfn=./qsort (outside call sites)\n"),
        "{text}"
    );
    assert!(!text.contains("fl=./qsort"), "{text}");

    // callgrind_annotate --version exits 255: look for it by running it.
    if cilkview_fixtures::command("callgrind_annotate")
        .arg("--version")
        .output()
        .is_err()
    {
        return cilkview_fixtures::skip("callgrind_annotate is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("qsort.callgrind");
    std::fs::write(&path, &text).unwrap();
    let out = cilkview_fixtures::command("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let commas = |n: u64| {
        let digits = n.to_string();
        let groups: Vec<&str> = digits
            .as_bytes()
            .rchunks(3)
            .rev()
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        groups.join(",")
    };
    assert!(stdout.contains(&commas(report.measures.work)), "{stdout}");
    assert!(stdout.contains("pqsort qsort.c:20"), "{stdout}");
}

/// `what_if` and `target_plan` go to JSON and read back unchanged (a saved report re-renders
/// them); the partition site parallel takes its span off the critical path.
#[test]
fn what_if_and_plan_round_trip_through_json() {
    let mut report = report();
    let specs: Vec<cilkview_report::WhatIfSpec> = vec![
        "qsort.c:20=par".parse().unwrap(),
        "pqsort=2x".parse().unwrap(),
    ];
    report.apply_what_if(&specs).unwrap();
    report.apply_target(100.0).unwrap();
    let w = report.what_if.as_ref().unwrap();
    assert_eq!(w.changes[0].sites.len(), 1);
    assert!(w.after.measures.span < w.before.measures.span);
    let plan = report.target_plan.as_ref().unwrap();
    assert_eq!(plan.steps[0].location, "qsort.c:20", "partition first");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let bytes = &JsonExporter { path: path.clone() }.render(&report).unwrap()[0].bytes;
    std::fs::write(&path, bytes).unwrap();
    assert_eq!(read_json(&path).unwrap(), report);
    let unknown = report.apply_what_if(&["nosuch.c:1=2x".parse().unwrap()]);
    let message = unknown.unwrap_err().to_string();
    assert!(
        message
            .ends_with("is at nosuch.c:1 (it has: qsort.c:20, qsort.c:21, qsort.c:22, qsort.c:31)"),
        "{message}"
    );
}
