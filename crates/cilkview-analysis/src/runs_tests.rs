//! Runs of packed hits (`EventSink::hits`, as the emulation backend hands them over, and
//! `EventSink::hits_counted`, one hit to a word, as the native drain does) measure what the same
//! hits one by one do: the report, its warnings (each anomaly named at its mark) and the
//! progress heard, with and without call-site profiles.

use std::path::Path;

use cilkview_events::{HitPacker, HitsTotal, PackedHit};
use cilkview_marks::MarkKind::{self, *};
use cilkview_report::RunReport;

use crate::tests::{exec, info, Files, BURDEN, SPAWN_SYNC};
use crate::{EventSink, Session};

/// How the hits of a stream reach the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// `EventSink::hit`, one call each.
    Single,
    /// `EventSink::hits`, small hits two to a word.
    Pairs,
    /// `EventSink::hits_counted`, one hit to a word.
    Ones,
}

/// The report of `stream` (thread, probe, cost) in `form`, and the hit counts progress heard.
fn measure(
    files: &Files,
    stream: &[(i32, usize, u64)],
    form: Form,
    profiled: bool,
) -> (RunReport, Vec<u64>) {
    #[derive(Default)]
    struct Heard(Vec<u64>);
    impl crate::Progress for Heard {
        fn hits(&mut self, hits: u64) {
            self.0.push(hits);
        }
    }
    let mut heard = Heard::default();
    let mut session = Session::new(BURDEN, &mut heard).with_marks_reader(|p| files.read(p));
    if profiled {
        session = session.with_profile();
    }
    session.probes_for(Path::new("/prog")).unwrap();
    session.event(exec(0, 1, 5, 0));
    if form == Form::Single {
        for &(tid, probe, cost) in stream {
            session.hit(probe, tid, cost);
        }
        let report = session.finish(info(), "./synthetic", false);
        return (report, heard.0);
    }
    // Runs of one thread, cut at the thread changes and every 100 hits.
    for part in stream.chunk_by(|a, b| a.0 == b.0) {
        for piece in part.chunks(100) {
            let (tid, cost) = (piece[0].0, piece.iter().map(|h| h.2).sum());
            let total = HitsTotal {
                hits: piece.len() as u64,
                cost,
            };
            match form {
                Form::Single => unreachable!("one call each, above"),
                Form::Pairs => {
                    let mut hits = HitPacker::default();
                    for &(_, p, c) in piece {
                        hits.push(p, c);
                    }
                    assert_eq!(session.hits(tid, hits.words()), total);
                }
                Form::Ones => {
                    let words: Vec<u64> = piece
                        .iter()
                        .map(|&(_, p, c)| PackedHit::new(p, c).expect("fits").0)
                        .collect();
                    session.hits_counted(tid, &words, total);
                }
            }
        }
    }
    let report = session.finish(info(), "./synthetic", false);
    (report, heard.0)
}

/// The report of `stream` in every form, with and without profiles, checked equal to one by
/// one's; the unprofiled report and the progress heard.
fn every_form_alike(files: &Files, stream: &[(i32, usize, u64)]) -> (RunReport, Vec<u64>) {
    let (one_by_one, heard_one) = measure(files, stream, Form::Single, false);
    let (profiled_one, _) = measure(files, stream, Form::Single, true);
    assert!(profiled_one.call_sites.is_some() && one_by_one.call_sites.is_none());
    for form in [Form::Pairs, Form::Ones] {
        let (report, heard) = measure(files, stream, form, false);
        assert_eq!(report, one_by_one, "{form:?}");
        assert_eq!(heard.last(), heard_one.last(), "{form:?}");
        assert_eq!(heard.len(), heard_one.len(), "{form:?}");
        // The sink's other loop.
        let (profiled, _) = measure(files, stream, form, true);
        assert_eq!(profiled, profiled_one, "{form:?}, profiled");
    }
    (one_by_one, heard_one)
}

#[test]
fn runs_of_hits_measure_what_the_same_hits_one_by_one_do() {
    // Two threads, probe numbers that are not ours (7, and 20,000: too large for a small hit or
    // the one-hit words' table), closers without openers, costs too large for a small hit among
    // small ones (words of one hit between words of two): everything the batched paths must
    // treat as the single hits do.
    let files = Files::default().with("/prog", SPAWN_SYNC);
    let stream: Vec<(i32, usize, u64)> = (0..10_000u64)
        .map(|k| {
            let tid = if k % 1000 < 700 { 1 } else { 2 };
            let not_ours = [7, 20_000][(k / 8 % 2) as usize];
            let probe = [0, 1, 0, 1, 2, not_ours, 1, 2][(k % 8) as usize];
            let cost = if k % 37 == 0 { 70_000 + k } else { k % 13 + 1 };
            (tid, probe, cost)
        })
        .collect();
    let (report, heard) = every_form_alike(&files, &stream);
    assert!(report.measures.work > 0 && !report.warnings.is_empty());
    // 7 of every 8 hits are ours: 8,750, heard at each multiple of 4,096 passed, then the total.
    assert_eq!(heard, [4096, 8192, 8750]);
}

/// Every kind of mark, in the order of `HotKind` and beyond it (regions, dependence edges).
const EVERY_KIND: &[(MarkKind, Option<&str>)] = &[
    (FunctionEnter, None),
    (FunctionExit, None),
    (Spawn, None),
    (SpawnReturn, None),
    (Sync, None),
    (LoopBegin, None),
    (IterationBegin, None),
    (IterationEnd, None),
    (LoopEnd, None),
    (RegionBegin, Some("a")),
    (RegionEnd, Some("a")),
    (SpawnAfter, None),
    (WaitFor, None),
];

#[test]
fn runs_of_every_kind_of_mark_measure_what_single_hits_do() {
    // Well nested shapes (a loop of spawning iterations in a region, calls, dependence edges)
    // and, between them, a pseudo-random mix of every probe and one not ours (40): every kind
    // on the hot loops' arms and the general path, anomalies of each kind named at their marks.
    let files = Files::default().with("/prog", EVERY_KIND);
    let shape = [0, 9, 5, 6, 2, 3, 11, 2, 3, 12, 4, 7, 6, 0, 1, 7, 8, 10, 1];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut stream = Vec::new();
    for k in 0..6_000u64 {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let probe = if (k / 500) % 2 == 0 {
            shape[(k % shape.len() as u64) as usize]
        } else {
            [(state >> 33) as usize % 14, 40][usize::from(state >> 60 == 0)]
        };
        let tid = if k % 1500 < 1000 { 1 } else { 3 };
        let cost = if state % 29 == 0 { 80_000 } else { state >> 59 };
        stream.push((tid, probe, cost));
    }
    let (report, _) = every_form_alike(&files, &stream);
    assert!(report.measures.spawns > 0 && report.measures.span < report.measures.work);
    assert!(!report.regions.is_empty(), "the region was measured");
    // The anomalies of the hot loops' arms, named at their marks (the same for every form).
    for named in [
        "iteration_end mark at /prog address 0x1070",
        "function_exit mark at /prog address 0x1010",
        "iteration_begin mark at /prog address 0x1060",
        "spawn_return mark at /prog address 0x1030",
        "loop_end mark at /prog address 0x1080",
    ] {
        assert!(
            report.warnings[0].contains(named),
            "{named}: {:?}",
            report.warnings
        );
    }
}
