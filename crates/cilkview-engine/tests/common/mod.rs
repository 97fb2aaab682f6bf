//! Shared by the engine's tests: a stream of events built as a program runs, fib's work and span
//! by their recurrences, and the property tests' reference model ([`dag`]).
#![allow(dead_code)] // each test file uses a part

pub mod dag;

use cilkview_engine::{CallSite, Config, Engine, Event, EventKind, Report, WorkSpan};

/// Events with the cost of the strand each ends (`work` adds to the strand in progress).
#[derive(Default)]
pub struct Stream {
    pub events: Vec<Event>,
    pending: u64,
}

impl Stream {
    pub fn work(&mut self, c: u64) {
        self.pending += c;
    }

    pub fn ev(&mut self, kind: EventKind, s: Option<CallSite>) {
        let cost = std::mem::take(&mut self.pending);
        self.events.push(Event::at(cost, kind, s));
    }

    /// A call at `s` of a function whose body `body` emits.
    pub fn call(&mut self, s: Option<CallSite>, body: impl FnOnce(&mut Stream)) {
        self.ev(EventKind::FunctionEnter, s);
        body(self);
        self.ev(EventKind::FunctionExit, None);
    }

    /// The profiled engine's report of the stream (and its tail); a clean stream.
    pub fn run(&self) -> Report {
        let mut e = Engine::with_profile(Config::default());
        e.process_batch(&self.events);
        e.charge(self.pending);
        let r = e.finish();
        assert!(r.anomalies.is_clean());
        r
    }
}

pub fn ws(work: u64, span: u64) -> WorkSpan {
    WorkSpan { work, span }
}

/// Work and span of fib(n) by its recurrences: n < 2 costs n + 1; else 1, spawn fib(n - 1),
/// call fib(n - 2), sync, 1.
pub fn fib_ws(n: u64) -> WorkSpan {
    if n < 2 {
        return ws(n + 1, n + 1);
    }
    let (a, b) = (fib_ws(n - 1), fib_ws(n - 2));
    ws(2 + a.work + b.work, 2 + a.span.max(b.span))
}
