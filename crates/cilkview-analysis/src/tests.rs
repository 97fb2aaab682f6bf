//! The pipeline on synthetic event streams: what a backend would send for known fork-join
//! shapes, and the exact measures that must come out. No process is run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cilkview_marks::{Mark, MarkKind, MarkedImage};
use cilkview_report::{RunInfo, RunReport};

use crate::{CounterInfo, CounterMode, Ending, EventSink, ExitStatus, Probe, Session, TraceEvent};
use cilkview_events::ProbesError;

use MarkKind::*;

pub(crate) const BURDEN: u64 = 100;

/// Images and their marks (kind, label), at addresses 0x1000, 0x1010, … of an image based at 0.
#[derive(Default)]
pub(crate) struct Files(HashMap<PathBuf, Vec<(MarkKind, Option<&'static str>)>>);

impl Files {
    pub(crate) fn with(mut self, path: &str, marks: &[(MarkKind, Option<&'static str>)]) -> Files {
        self.0.insert(PathBuf::from(path), marks.to_vec());
        self
    }

    pub(crate) fn read(&self, path: &Path) -> Result<MarkedImage, ProbesError> {
        let marks = self
            .0
            .get(path)
            .ok_or_else(|| format!("{}: not an ELF file", path.display()))?;
        Ok(MarkedImage {
            marks: marks
                .iter()
                .enumerate()
                .map(|(i, &(kind, label))| Mark {
                    kind,
                    address: 0x1000 + 16 * i as u64,
                    operand: (kind == LoopBegin).then_some(0),
                    label: label.map(str::to_string),
                })
                .collect(),
            base_vaddr: 0,
            position_independent: true,
        })
    }
}

pub(crate) fn info() -> RunInfo {
    RunInfo {
        program: "./synthetic".into(),
        args: vec![],
        ending: Ending::Exited(ExitStatus::Exited(0)),
        counter: (&CounterInfo {
            kind: CounterMode::Step,
            reason: "synthetic".into(),
            notes: Vec::new(),
            bias: 0,
            unit: cilkview_events::CostUnit::Instructions,
        })
            .into(),
        unit: cilkview_events::CostUnit::Instructions,
        burden: BURDEN,
        span_coefficient: 0.85,
        max_cores: 4,
    }
}

fn hit(probe: usize, tid: i32, cost: u64) -> TraceEvent {
    TraceEvent::Hit {
        probe,
        tid,
        cost,
        operand: None,
    }
}

pub(crate) fn exec(image: u32, tid: i32, cost: u64, probes: usize) -> TraceEvent {
    TraceEvent::Exec {
        image,
        tid,
        cost,
        probes,
    }
}

/// Feeds `images` (asked for in this order, as a backend would at the first exec) then `events`
/// to a session, as a backend would; returns the report of a complete (or `partial`) stream.
fn analyze(files: &Files, images: &[&str], events: &[TraceEvent], partial: bool) -> RunReport {
    analyze_with(BURDEN, files, images, events, partial)
}

/// [`analyze`] with another burden.
fn analyze_with(
    burden: u64,
    files: &Files,
    images: &[&str],
    events: &[TraceEvent],
    partial: bool,
) -> RunReport {
    let mut progress = ();
    let mut session = Session::new(burden, &mut progress).with_marks_reader(|p| files.read(p));
    for image in images {
        session.probes_for(Path::new(image)).unwrap();
    }
    for &e in events {
        session.event(e);
    }
    session.finish(info(), "./synthetic", partial)
}

fn measures(r: &RunReport) -> (u64, u64, u64, u64, u64) {
    (
        r.measures.work,
        r.measures.span,
        r.measures.burdened_span,
        r.measures.spawns,
        r.measures.syncs,
    )
}

pub(crate) const SPAWN_SYNC: &[(MarkKind, Option<&str>)] =
    &[(Spawn, None), (SpawnReturn, None), (Sync, None)];

#[test]
fn one_spawn_and_sync() {
    let files = Files::default().with("/prog", SPAWN_SYNC);
    // 1 before the spawn, a child of 10, a continuation of 10, 5 after the sync.
    let r = analyze(
        &files,
        &["/prog"],
        &[
            exec(0, 1, 0, 3),
            hit(0, 1, 1),
            hit(1, 1, 10),
            hit(2, 1, 10),
            TraceEvent::ThreadExit { tid: 1, cost: 5 },
        ],
        false,
    );
    assert_eq!(measures(&r), (26, 16, 1 + BURDEN + 10 + 5, 1, 1));
    assert_eq!(r.events, 3);
    assert_eq!(r.measures.parallelism, 26.0 / 16.0);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn measures_are_exact_up_to_2_64_and_a_warning_says_when_they_are_not() {
    // Two spawns and a sync: work 37, span 17, burdened span 2 burdens + 17. The engine's
    // sums wrap at 2^64, so the session checks the bound (cost + burden per spawn) once.
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let events = [
        exec(0, 1, 0, 3),
        hit(0, 1, 1),
        hit(1, 1, 10),
        hit(0, 1, 1),
        hit(1, 1, 10),
        hit(2, 1, 10),
        TraceEvent::ThreadExit { tid: 1, cost: 5 },
    ];
    let run = |burden| analyze_with(burden, &files, &["/prog"], &events, false);
    let largest = (u64::MAX - 37) / 2; // 37 + 2 × largest = 2^64 − 1
    let r = run(largest);
    assert_eq!(measures(&r), (37, 17, 2 * largest + 17, 2, 1));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let r = run(largest + 1);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].starts_with("the measures are not exact: 37 instructions plus a burden of"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn the_hit_shortcut_is_a_hit_event() {
    // Backends deliver plain hits through `EventSink::hit` (emulation): the same as the event.
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let mut progress = ();
    let mut session = Session::new(BURDEN, &mut progress).with_marks_reader(|p| files.read(p));
    session.probes_for(Path::new("/prog")).unwrap();
    session.event(exec(0, 1, 0, 3));
    for (probe, cost) in [(0, 1), (7, 2), (1, 10), (2, 10)] {
        session.hit(probe, 1, cost);
    }
    session.event(TraceEvent::ThreadExit { tid: 1, cost: 5 });
    let r = session.finish(info(), "./synthetic", false);
    // Probe 7 is not one of ours: its 2 instructions are work of the spawned child (12 in all,
    // against the continuation's 10).
    assert_eq!(measures(&r), (28, 1 + 12 + 5, 1 + BURDEN + 10 + 5, 1, 1));
    assert_eq!(r.events, 3);
}

#[test]
fn two_children_and_a_labeled_region() {
    let files = Files::default().with(
        "/prog",
        &[
            (RegionBegin, Some("phase")),
            (Spawn, None),
            (SpawnReturn, None),
            (Sync, None),
            (RegionEnd, Some("phase")),
        ],
    );
    // In the region: 2, child A 10, 1, child B 20, continuation 5, sync.
    let r = analyze(
        &files,
        &["/prog"],
        &[
            exec(0, 1, 0, 5),
            hit(0, 1, 7),
            hit(1, 1, 2),
            hit(2, 1, 10),
            hit(1, 1, 1),
            hit(2, 1, 20),
            hit(3, 1, 5),
            hit(4, 1, 0),
            TraceEvent::ThreadExit { tid: 1, cost: 3 },
        ],
        false,
    );
    // Span: 2 + 1 + child B; burdened: the continuation carries two burdens, 2 + 1 + 5 + 2·100.
    let region = (38, 23, 2 + 1 + 5 + 2 * BURDEN, 2, 1);
    assert_eq!(r.regions.len(), 1);
    assert_eq!(r.regions[0].label, "phase");
    assert_eq!(measures_of(&r.regions[0]), region);
    assert_eq!(measures(&r), (7 + 38 + 3, 7 + 23 + 3, 7 + 208 + 3, 2, 1));
}

fn measures_of(r: &cilkview_report::RegionReport) -> (u64, u64, u64, u64, u64) {
    (
        r.measures.work,
        r.measures.span,
        r.measures.burdened_span,
        r.measures.spawns,
        r.measures.syncs,
    )
}

#[test]
fn probes_are_numbered_across_libraries() {
    let files = Files::default()
        .with("/prog", &[(Spawn, None), (SpawnReturn, None)])
        .with("/lib/ld.so", &[])
        .with("/lib/libsync.so", &[(Sync, None)]);
    let mut progress = ();
    let mut session = Session::new(BURDEN, &mut progress).with_marks_reader(|p| files.read(p));
    let probes = |offsets: &[u64]| -> Vec<Probe> {
        offsets
            .iter()
            .map(|&offset| Probe::new(offset, None))
            .collect()
    };
    assert_eq!(
        session.probes_for(Path::new("/prog")).ok(),
        Some(probes(&[0x1000, 0x1010]))
    );
    assert_eq!(
        session.probes_for(Path::new("/lib/ld.so")).ok(),
        Some(vec![])
    );
    // A later image that is not ELF runs as unmarked code.
    assert_eq!(
        session.probes_for(Path::new("/usr/lib/other")).ok(),
        Some(vec![])
    );
    assert_eq!(
        session.probes_for(Path::new("/lib/libsync.so")).ok(),
        Some(probes(&[0x1000]))
    );
    for e in [exec(0, 1, 0, 3), hit(0, 1, 1), hit(1, 1, 10), hit(2, 1, 10)] {
        session.event(e);
    }
    // Probe 2 is the library's sync: the child and the continuation joined.
    let r = session.finish(info(), "./synthetic", false);
    assert_eq!(measures(&r), (21, 11, 1 + BURDEN + 10, 1, 1));
}

#[test]
fn the_first_image_must_be_readable() {
    let files = Files::default();
    let mut progress = ();
    let mut session = Session::new(BURDEN, &mut progress).with_marks_reader(|p| files.read(p));
    assert_eq!(
        session
            .probes_for(Path::new("/bin/nothing"))
            .map_err(|e| e.to_string()),
        Err("/bin/nothing: not an ELF file".to_string())
    );
}

#[test]
fn an_unknown_probe_is_charged_as_work() {
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let r = analyze(
        &files,
        &["/prog"],
        &[
            exec(0, 1, 0, 3),
            hit(0, 1, 1),
            hit(99, 1, 4),
            hit(1, 1, 6),
            hit(2, 1, 10),
        ],
        false,
    );
    // The 4 instructions before probe 99 belong to the child: 1 + (4 + 6) ‖ 10.
    assert_eq!(measures(&r), (21, 11, 1 + BURDEN + 10, 1, 1));
    assert_eq!(r.events, 3, "probe 99 is not a mark hit");
}

#[test]
fn a_wrapper_that_hit_no_mark_is_dropped_at_exec() {
    let files = Files::default()
        .with("/bin/sh", &[])
        .with("/prog", SPAWN_SYNC);
    let mut progress = ();
    let mut session = Session::new(BURDEN, &mut progress).with_marks_reader(|p| files.read(p));
    session.probes_for(Path::new("/bin/sh")).unwrap();
    session.event(exec(0, 1, 0, 0));
    session.event(TraceEvent::ThreadStart { tid: 2 });
    session.event(TraceEvent::ThreadExit { tid: 2, cost: 300 });
    session.probes_for(Path::new("/prog")).unwrap();
    // 500 instructions of the shell before its exec: not the program's work.
    for e in [
        exec(1, 1, 500, 3),
        hit(0, 1, 1),
        hit(1, 1, 10),
        hit(2, 1, 10),
    ] {
        session.event(e);
    }
    let r = session.finish(info(), "./synthetic", false);
    assert_eq!(measures(&r), (21, 11, 1 + BURDEN + 10, 1, 1));
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn a_program_that_hit_marks_before_an_exec_is_kept() {
    let files = Files::default()
        .with("/prog", SPAWN_SYNC)
        .with("/next", &[(Sync, None), (Spawn, None), (SpawnReturn, None)]);
    let mut progress = ();
    let mut session = Session::new(BURDEN, &mut progress).with_marks_reader(|p| files.read(p));
    session.probes_for(Path::new("/prog")).unwrap();
    for e in [exec(0, 1, 0, 3), hit(0, 1, 1), hit(1, 1, 10), hit(2, 1, 10)] {
        session.event(e);
    }
    // The next image's probes restart at 0: probe 1 is now a spawn, 2 its return, 0 the sync.
    session.probes_for(Path::new("/next")).unwrap();
    for e in [exec(1, 1, 4, 3), hit(1, 1, 2), hit(2, 1, 30), hit(0, 1, 3)] {
        session.event(e);
    }
    let r = session.finish(info(), "./synthetic", false);
    // (1 + 10 ‖ 10) then 4 + 2 of serial code, then (30 ‖ 3).
    assert_eq!(
        measures(&r),
        (
            21 + 6 + 33,
            11 + 6 + 30,
            (1 + BURDEN + 10) + 6 + (BURDEN + 3),
            2,
            2
        )
    );
}

#[test]
fn threads_combine_as_parallel_computations() {
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let r = analyze(
        &files,
        &["/prog"],
        &[
            exec(0, 1, 0, 3),
            hit(0, 1, 1),
            TraceEvent::ThreadStart { tid: 2 },
            hit(0, 2, 50),
            hit(1, 2, 40),
            hit(1, 1, 10),
            hit(2, 2, 2),
            TraceEvent::ThreadExit { tid: 2, cost: 8 },
            hit(2, 1, 10),
            TraceEvent::ThreadExit { tid: 1, cost: 0 },
        ],
        false,
    );
    // Thread 1: 1 + (10 ‖ 10): work 21, span 11. Thread 2: 50 + (40 ‖ 2) + 8: work 100, span 98.
    // Work adds up, span is the longer one.
    assert_eq!(measures(&r), (121, 98, 50 + BURDEN + 2 + 8, 2, 2));
    assert_eq!(r.events, 6);
}

#[test]
fn a_program_without_marks_is_reported_as_serial_with_a_warning() {
    let files = Files::default()
        .with("/prog", &[])
        .with("/lib/libc.so", &[]);
    let r = analyze(
        &files,
        &["/prog", "/lib/libc.so"],
        &[
            exec(0, 1, 0, 0),
            TraceEvent::ThreadExit { tid: 1, cost: 1234 },
        ],
        false,
    );
    assert_eq!(measures(&r), (1234, 1234, 1234, 0, 0));
    assert_eq!(
        r.warnings,
        [
            "./synthetic has no cilkview marks: measured as serial code (parallelism 1.00). \
          Mark its parallel structure with cilkview.h (`cilkview-rs header > cilkview.h`)."
        ]
    );
    // Marks in a library are marks of the program.
    let files = Files::default()
        .with("/prog", &[])
        .with("/lib/libm.so", SPAWN_SYNC);
    let r = analyze(
        &files,
        &["/prog", "/lib/libm.so"],
        &[exec(0, 1, 0, 3)],
        false,
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
}

#[test]
fn partial_streams_tolerate_closers_without_openers() {
    let files = Files::default().with(
        "/prog",
        &[
            (FunctionEnter, None),
            (FunctionExit, None),
            (SpawnReturn, None),
            (IterationBegin, None),
        ],
    );
    // Attached in the middle of a spawned child inside a function: its return and the
    // function's exit come without their openers.
    let closers = [exec(0, 1, 0, 4), hit(2, 1, 5), hit(1, 1, 5)];
    let complete = analyze(&files, &["/prog"], &closers, false);
    assert_eq!(complete.measures.work, 10);
    assert_eq!(complete.warnings.len(), 1, "{:?}", complete.warnings);
    // Which mark, where, how many times, in words (it was a Rust debug struct).
    assert_eq!(
        complete.warnings[0],
        "the marks did not nest as fork-join control should; measures may be off: the \
         function_exit mark at /prog address 0x1010 closed something never opened (once); the \
         spawn_return mark at /prog address 0x1020 closed something never opened (once); \
         `addr2line -e IMAGE ADDRESS` names the source line of a mark"
    );
    let partial = analyze(&files, &["/prog"], &closers, true);
    assert!(partial.warnings.is_empty(), "{:?}", partial.warnings);
    assert_eq!(partial.measures.work, 10);
    // What no window explains is still reported: an iteration outside any loop.
    let stray = analyze(&files, &["/prog"], &[exec(0, 1, 0, 4), hit(3, 1, 5)], true);
    assert_eq!(stray.warnings.len(), 1, "{:?}", stray.warnings);
    assert_eq!(
        stray.warnings[0],
        "the marks did not nest as fork-join control should; measures may be off: the \
         iteration_begin mark at /prog address 0x1030 began an iteration outside any parallel \
         loop (once); `addr2line -e IMAGE ADDRESS` names the source line of a mark"
    );
}

#[test]
fn the_nesting_warning_says_which_mark_how_often_and_where() {
    let files = Files::default().with(
        "/prog",
        &[(FunctionExit, None), (RegionBegin, Some("r")), (Sync, None)],
    );
    let events = [
        exec(0, 1, 0, 3),
        hit(0, 1, 5),
        hit(2, 1, 5),
        hit(0, 1, 5),
        hit(0, 1, 5),
        hit(1, 1, 5),
    ];
    let r = analyze(&files, &["/prog"], &events, false);
    assert_eq!(
        r.warnings,
        [
            "the marks did not nest as fork-join control should; measures may be off: the \
          function_exit mark at /prog address 0x1000 closed something never opened (3 times); \
          a region was still open when the run ended (once); `addr2line -e IMAGE ADDRESS` names \
          the source line of a mark"
        ]
    );
}

#[test]
fn progress_hears_the_hits_then_the_end() {
    #[derive(Default)]
    struct Heard(Vec<u64>, bool);
    impl crate::Progress for Heard {
        fn hits(&mut self, hits: u64) {
            self.0.push(hits);
        }
        fn finished(&mut self) {
            self.1 = true;
        }
    }
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let mut heard = Heard::default();
    let mut session = Session::new(BURDEN, &mut heard).with_marks_reader(|p| files.read(p));
    session.probes_for(Path::new("/prog")).unwrap();
    for e in [
        exec(0, 1, 0, 3),
        hit(0, 1, 1),
        hit(7, 1, 1),
        hit(1, 1, 1),
        hit(2, 1, 1),
    ] {
        session.event(e);
    }
    let _ = session.finish(info(), "./synthetic", false);
    // Every HITS_STEP hits (none here), then the total at the end.
    assert_eq!(heard.0, [3]);
    assert!(heard.1);
}
