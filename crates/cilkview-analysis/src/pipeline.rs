//! The analysis on a thread of its own: the backend (its drain: reading the records, the clock's
//! arithmetic, packing) runs on the caller's thread and hands its events over in batches to a
//! second thread that feeds the sink (the session and its engines). The two halves of the tool's
//! work per mark hit then overlap on two cores.
//!
//! The events reach the sink in the order the backend gave them, the same calls with the same
//! arguments (runs of packed hits may be split or joined at batch edges, which `EventSink::hits`
//! allows): the report is the one a direct run gives. A fixed number of batches circulate
//! between the threads (sent full, given back empty), so memory stays flat and nothing is
//! allocated per event once they have grown to their size. `probes_for` is answered before the
//! backend goes on (the batches before it applied first).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow};

use cilkview_events::{
    CounterMode, EventSink, HitsTotal, PackedHit, Probe, ProbesError, TraceEvent,
};

/// Whether the analysis of a run counted by `kind` gets a thread of its own: for the counters that
/// deliver millions of hits a second from records in memory (`native`, `emulate`), on a machine
/// with a core beyond the program's first thread and the backend's (on 2 cores the two threads of
/// the tool share one, the program spinning on the other while it waits for room: nothing
/// gained). `CILKVIEW_ANALYSIS_THREAD=1` or `0` decides instead (docs/architecture.md).
pub(crate) fn wanted(kind: CounterMode) -> bool {
    if !matches!(kind, CounterMode::Native | CounterMode::Emulate) {
        return false;
    }
    match std::env::var_os(ANALYSIS_THREAD) {
        Some(v) => v != "0",
        None => std::thread::available_parallelism().is_ok_and(|n| n.get() >= 3),
    }
}

/// The environment variable that turns the analysis's own thread on (`1`) or off (`0`).
pub const ANALYSIS_THREAD: &str = "CILKVIEW_ANALYSIS_THREAD";

/// Batches in circulation: one being filled, the others queued or being applied.
const BATCHES: usize = 4;
/// A batch is sent when it holds this many words of packed hits (128 KiB)...
const BATCH_WORDS: usize = 16 * 1024;
/// ... or this many other events.
const BATCH_PIECES: usize = 1024;

/// One call of the sink, as queued.
enum Piece {
    /// `EventSink::hits` of the batch's words `from..to`, or with `ones` (their total)
    /// `EventSink::hits_counted`.
    Hits {
        tid: i32,
        from: usize,
        to: usize,
        ones: Option<HitsTotal>,
    },
    Event(TraceEvent),
    ImageBase(u64),
}

/// Calls of the sink, in order, with the words of their packed hits.
#[derive(Default)]
struct Batch {
    words: Vec<u64>,
    pieces: Vec<Piece>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    fn apply(&self, sink: &mut dyn EventSink) {
        for piece in &self.pieces {
            match *piece {
                Piece::Hits {
                    tid,
                    from,
                    to,
                    ones,
                } => {
                    let words = &self.words[from..to];
                    match ones {
                        Some(total) => sink.hits_counted(tid, words, total),
                        None => _ = sink.hits(tid, words),
                    }
                }
                Piece::Event(event) => sink.event(event),
                Piece::ImageBase(base) => sink.image_base(base),
            }
        }
    }

    fn clear(&mut self) {
        self.words.clear();
        self.pieces.clear();
    }
}

/// What the backend's thread sends the sink's.
enum Request {
    Apply(Batch),
    ProbesFor(PathBuf),
}

type Probes = Result<Vec<Probe>, ProbesError>;

/// Runs `run` with an [`EventSink`] that feeds `sink` on a second thread, and returns what it
/// returned once `sink` has had every event. Without a second thread (the system refuses one),
/// `run` feeds `sink` directly. A panic of the sink's thread is resumed on the caller's.
pub fn pipelined<R>(
    sink: &mut (dyn EventSink + Send),
    run: impl FnOnce(&mut dyn EventSink) -> R,
) -> R {
    let (requests, requested) = sync_channel::<Request>(BATCHES);
    let (give_back, given_back) = sync_channel::<Batch>(BATCHES);
    let (answer, answers) = sync_channel::<Probes>(1);
    let refused = std::thread::scope(|scope| {
        // The analysis's thread takes no signal: each stays the backend's (a SIGCHLD it took
        // would be lost to the tracer's sleep, `ChildEvents`). It inherits the mask at its start.
        let mut mask = SigSet::empty();
        let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&SigSet::all()), Some(&mut mask));
        let analysis = std::thread::Builder::new()
            .name("cilkview-analysis".into())
            .spawn_scoped(scope, || serve(&mut *sink, requested, give_back, answer));
        if blocked.is_ok() {
            let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None);
        }
        let Ok(analysis) = analysis else {
            return Err(run);
        };
        let mut pipe = Pipe {
            batch: Batch::default(),
            made: 1,
            requests,
            given_back,
            answers,
        };
        let out = run(&mut pipe);
        pipe.send_batch();
        drop(pipe);
        match analysis.join() {
            Ok(()) => Ok(out),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    refused.unwrap_or_else(|run| run(sink))
}

/// The sink's thread: applies the batches in order, answers `probes_for`, until the backend's
/// side hangs up.
fn serve(
    sink: &mut dyn EventSink,
    requested: Receiver<Request>,
    give_back: SyncSender<Batch>,
    answer: SyncSender<Probes>,
) {
    while let Ok(request) = requested.recv() {
        match request {
            Request::Apply(mut batch) => {
                batch.apply(sink);
                batch.clear();
                // Room for every batch: never blocks; the other side gone, nothing to do.
                let _ = give_back.send(batch);
            }
            Request::ProbesFor(image) => {
                if answer.send(sink.probes_for(&image)).is_err() {
                    return;
                }
            }
        }
    }
}

/// The backend's side: the batch being filled.
struct Pipe {
    batch: Batch,
    /// Batches made so far (at most [`BATCHES`]).
    made: usize,
    requests: SyncSender<Request>,
    given_back: Receiver<Batch>,
    answers: Receiver<Probes>,
}

impl Pipe {
    /// Send the batch being filled (if it holds anything) and take an empty one: one given back,
    /// a new one while fewer than [`BATCHES`] exist, or else the next given back.
    fn send_batch(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let next = match self.given_back.try_recv() {
            Ok(batch) => batch,
            Err(_) if self.made < BATCHES => {
                self.made += 1;
                Batch::default()
            }
            // The sink's thread gone (a panic, resumed at the join): a fresh batch, dropped.
            Err(_) => self.given_back.recv().unwrap_or_default(),
        };
        let full = std::mem::replace(&mut self.batch, next);
        if self.requests.send(Request::Apply(full)).is_err() {
            self.batch.clear();
        }
    }

    fn push(&mut self, piece: Piece) {
        self.batch.pieces.push(piece);
        if self.batch.pieces.len() >= BATCH_PIECES {
            self.send_batch();
        }
    }
}

impl EventSink for Pipe {
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        self.send_batch();
        let gone = || ProbesError::from("the analysis thread ended");
        self.requests
            .send(Request::ProbesFor(image.to_path_buf()))
            .map_err(|_| gone())?;
        self.answers.recv().map_err(|_| gone())?
    }

    fn image_base(&mut self, base: u64) {
        self.push(Piece::ImageBase(base));
    }

    fn event(&mut self, event: TraceEvent) {
        self.push(Piece::Event(event));
    }

    fn hits(&mut self, tid: i32, hits: &[u64]) -> HitsTotal {
        let total = PackedHit::total_of(hits);
        self.push_hits(tid, hits, None);
        total
    }

    fn hits_counted(&mut self, tid: i32, hits: &[u64], total: HitsTotal) {
        self.push_hits(tid, hits, Some(total));
    }
}

impl Pipe {
    /// Queues a run of packed hits (`ones`: words of one hit each, with their total).
    fn push_hits(&mut self, tid: i32, hits: &[u64], ones: Option<HitsTotal>) {
        let words = &mut self.batch.words;
        let from = words.len();
        words.extend_from_slice(hits);
        let to = words.len();
        match self.batch.pieces.last_mut() {
            // The same thread's run goes on, in words of the same form: one call of the sink
            // for both.
            Some(Piece::Hits {
                tid: t,
                to: end,
                ones: before,
                ..
            }) if *t == tid && *end == from && before.is_some() == ones.is_some() => {
                *end = to;
                if let (Some(sum), Some(more)) = (before, ones) {
                    sum.hits += more.hits;
                    sum.cost = sum.cost.wrapping_add(more.cost);
                }
            }
            _ => self.batch.pieces.push(Piece::Hits {
                tid,
                from,
                to,
                ones,
            }),
        }
        if to >= BATCH_WORDS || self.batch.pieces.len() >= BATCH_PIECES {
            self.send_batch();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call it gets, as text, with the thread that made it, and the totals of the runs of
    /// words of one hit each it was given.
    #[derive(Default)]
    struct Log {
        calls: Vec<String>,
        threads: std::collections::HashSet<std::thread::ThreadId>,
        counted: HitsTotal,
    }

    impl EventSink for Log {
        fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
            self.calls.push(format!("probes {}", image.display()));
            self.threads.insert(std::thread::current().id());
            Ok(vec![])
        }
        fn image_base(&mut self, base: u64) {
            self.calls.push(format!("base {base}"));
        }
        fn event(&mut self, event: TraceEvent) {
            self.calls.push(format!("{event:?}"));
        }
        fn hit(&mut self, probe: usize, tid: i32, cost: u64) {
            self.calls.push(format!("hit {probe} {tid} {cost}"));
            self.threads.insert(std::thread::current().id());
        }
        fn hits_counted(&mut self, tid: i32, hits: &[u64], total: HitsTotal) {
            PackedHit::for_each_one_in(hits, |probe, cost| {
                self.calls
                    .push(format!("hit of one word {probe} {tid} {cost}"));
            });
            self.counted.hits += total.hits;
            self.counted.cost += total.cost;
        }
    }

    /// A backend's calls: probes, then runs of hits of two threads, more than a batch holds,
    /// with events between them; every third run in words of one hit each, counted (runs of
    /// both forms, one after the other, of one thread).
    fn feed(sink: &mut dyn EventSink) -> u64 {
        sink.probes_for(Path::new("a")).unwrap();
        sink.image_base(4096);
        let mut total = 0;
        for round in 0..40u64 {
            let words: Vec<u64> = (0..1000)
                .map(|i| {
                    PackedHit::new((i % 7) as usize, round * 1000 + i)
                        .unwrap()
                        .0
                })
                .collect();
            let tid = (round % 2) as i32;
            if round % 3 == 0 {
                let counted = PackedHit::total_of(&words);
                sink.hits_counted(tid, &words, counted);
                total += counted.cost;
                sink.hits(tid, &words[..10]);
            } else {
                total += sink.hits(tid, &words).cost;
            }
            sink.event(TraceEvent::ThreadExit {
                tid: 5,
                cost: round,
            });
            if round == 20 {
                sink.probes_for(Path::new("b")).unwrap();
            }
        }
        total
    }

    #[test]
    fn the_sink_gets_the_same_calls_in_order_on_another_thread() {
        let mut direct = Log::default();
        let direct_total = feed(&mut direct);
        let mut piped = Log::default();
        let piped_total = pipelined(&mut piped, feed);
        assert_eq!(piped_total, direct_total);
        assert_eq!(piped.calls.len(), direct.calls.len());
        assert!(piped.calls == direct.calls, "the calls differ");
        assert_eq!(piped.counted, direct.counted);
        assert_eq!(direct.counted.hits, 14 * 1000);
        assert!(!piped.threads.contains(&std::thread::current().id()));
    }

    #[test]
    fn a_panic_of_the_sink_is_resumed_on_the_caller() {
        struct Panics;
        impl EventSink for Panics {
            fn probes_for(&mut self, _: &Path) -> Result<Vec<Probe>, ProbesError> {
                Ok(vec![])
            }
            fn event(&mut self, _: TraceEvent) {
                panic!("bad event");
            }
        }
        let r = std::panic::catch_unwind(|| {
            pipelined(&mut Panics, |sink| {
                for _ in 0..10 * BATCH_PIECES {
                    sink.event(TraceEvent::ThreadStart { tid: 1 });
                }
            })
        });
        let message = r.expect_err("the panic comes back");
        assert_eq!(message.downcast_ref::<&str>(), Some(&"bad event"));
    }
}
