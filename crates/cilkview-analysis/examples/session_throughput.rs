//! The analysis's cost per mark hit, without a backend: a fib-shaped stream of hits (function
//! entry, spawn, spawn return, sync, function exit: `fixtures/fib.c`'s five marks per call) fed
//! to a `Session` as a backend feeds it, events generated on the fly. Prints ns per hit, the time
//! of the session's calls alone (as the engine's `throughput` example times the engine alone; the
//! pass's whole time, the generator's included, is printed beside it); the difference from the
//! engine alone is the session's own work (probe lookup, per-thread engine, nesting checks,
//! progress). The hits go in runs of
//! 8,192 words of packed hits (two small hits to a word), as the emulation backend hands them
//! over (`EventSink::hits`); with `--ones`, one hit to a word, counted, as the native drain hands
//! them over (`EventSink::hits_counted`); with `--single`, one call per hit, as the ptrace backend
//! does (timed with the generator: a clock read per hit would cost more than the hit). With `--profile`, the session profiles call sites (`Session::with_profile`; the sites
//! are the marks' own, no symbols read). Best of three passes.
//!
//!     cargo run --release -p cilkview-analysis --example session_throughput -- 100000000 [--ones | --single] [--profile]

use std::path::Path;
use std::time::{Duration, Instant};

use cilkview_analysis::Session;
use cilkview_events::{EventSink, HitPacker, HitsTotal, PackedHit, TraceEvent};
use cilkview_marks::{Mark, MarkKind, MarkedImage};

const ENTER: usize = 0;
const SPAWN: usize = 1;
const SPAWN_RETURN: usize = 2;
const SYNC: usize = 3;
const EXIT: usize = 4;

/// How the hits are handed over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// Packed, two small hits to a word (`EventSink::hits`).
    Pairs,
    /// Packed one to a word, counted (`EventSink::hits_counted`).
    Ones,
    /// One call per hit (`EventSink::hit`).
    Single,
}

/// A session and the hits sent to it.
struct Feed<'a> {
    session: Session<'a>,
    sent: u64,
    form: Form,
    /// Packed hits not handed over yet.
    run: HitPacker,
    /// The same, one to a word.
    ones: Vec<u64>,
    /// Time spent in the session's calls of whole runs.
    session_time: Duration,
}

/// Words per run (the plugin's chunk).
const RUN: usize = 8192;

impl Feed<'_> {
    /// (Inlined into `fib`: the generator's cost per hit stays small beside the session's.)
    #[inline(always)]
    fn hit(&mut self, probe: usize, cost: u64) {
        self.sent += 1;
        match self.form {
            Form::Single => self.session.hit(probe, 1, cost),
            Form::Pairs => {
                self.run.push(probe, cost);
                if self.run.words().len() == RUN {
                    self.flush();
                }
            }
            Form::Ones => {
                self.ones.push(PackedHit::new(probe, cost).expect("fits").0);
                if self.ones.len() == RUN {
                    self.flush();
                }
            }
        }
    }

    /// Hands the packed hits over.
    #[inline(never)]
    fn flush(&mut self) {
        let start = Instant::now();
        if !self.run.words().is_empty() {
            self.session.hits(1, self.run.words());
            self.run.clear();
        }
        if !self.ones.is_empty() {
            let total = HitsTotal {
                hits: self.ones.len() as u64,
                cost: PackedHit::cost_of_ones(&self.ones),
            };
            self.session.hits_counted(1, &self.ones, total);
            self.ones.clear();
        }
        self.session_time += start.elapsed();
    }

    /// fib(n)'s hits; stops calling deeper once `limit` hits were sent.
    fn fib(&mut self, n: u32, limit: u64) {
        self.hit(ENTER, 3);
        if n >= 2 && self.sent < limit {
            self.hit(SPAWN, 2);
            self.fib(n - 1, limit);
            self.hit(SPAWN_RETURN, 1);
            self.fib(n - 2, limit);
            self.hit(SYNC, 2);
        }
        self.hit(EXIT, 2);
    }
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000_000);
    let form = if std::env::args().any(|a| a == "--single") {
        Form::Single
    } else if std::env::args().any(|a| a == "--ones") {
        Form::Ones
    } else {
        Form::Pairs
    };
    let passes: Vec<Pass> = (0..3).map(|_| pass(n, form)).collect();
    let best = |f: fn(&Pass) -> f64| passes.iter().map(f).fold(f64::INFINITY, f64::min);
    let (session, whole) = (best(|p| p.session), best(|p| p.whole));
    let how = match form {
        Form::Single => ", one call each",
        Form::Ones => " in runs, one to a word",
        Form::Pairs => " in runs",
    };
    if form == Form::Single {
        println!("{n} hits{how}: {whole:.1} ns per hit (best of 3; the generator's time included)");
    } else {
        println!(
            "{n} hits{how}: {session:.1} ns per hit (best of 3; with the generator's {whole:.1})"
        );
    }
}

/// One pass's ns per hit.
struct Pass {
    /// In the session's calls (runs only).
    session: f64,
    /// The whole pass, the generator and packing included.
    whole: f64,
}

/// One pass of `n` hits.
fn pass(n: u64, form: Form) -> Pass {
    let kinds = [
        MarkKind::FunctionEnter,
        MarkKind::Spawn,
        MarkKind::SpawnReturn,
        MarkKind::Sync,
        MarkKind::FunctionExit,
    ];
    let image = MarkedImage {
        marks: kinds
            .iter()
            .enumerate()
            .map(|(i, &kind)| Mark {
                kind,
                address: 0x1000 + 16 * i as u64,
                operand: None,
                label: None,
            })
            .collect(),
        base_vaddr: 0,
        position_independent: false,
    };
    let mut progress = ();
    let profile = std::env::args().any(|a| a == "--profile");
    let mut session = Session::new(15_000, &mut progress)
        .with_marks_reader(|_| Ok(image.clone()))
        .with_profiling(profile, None);
    session
        .probes_for(Path::new("/fib"))
        .expect("synthetic marks");
    session.event(TraceEvent::Exec {
        image: 0,
        tid: 1,
        cost: 0,
        probes: kinds.len(),
    });
    let mut feed = Feed {
        session,
        sent: 0,
        form,
        run: HitPacker::default(),
        ones: Vec::with_capacity(RUN),
        session_time: Duration::ZERO,
    };
    let t0 = Instant::now();
    while feed.sent < n {
        feed.fib(30, n);
    }
    feed.flush();
    let per_hit = |t: Duration| t.as_secs_f64() * 1e9 / feed.sent as f64;
    Pass {
        session: per_hit(feed.session_time),
        whole: per_hit(t0.elapsed()),
    }
}
