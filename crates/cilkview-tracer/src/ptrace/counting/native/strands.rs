//! A measured thread's clock: where its current strand started, what the tracer and the kernel
//! took off it, and what was reported.

use std::collections::VecDeque;

use super::clock::Clock;
use super::region::Record;
use super::stub::Reading;
use crate::sys::native::rdtsc;
use crate::sys::switches::SwitchLog;
use std::fs::File;

/// Something that happened to a thread, in order, not yet reported.
pub(super) enum Item {
    Hit(Record),
    /// Stopped by the tracer from `from` to `to` (ticks): charged to nobody.
    Pause {
        from: u64,
        to: u64,
    },
}

/// A measured thread's clock.
pub(super) struct Strands {
    pub(super) slot: Option<usize>,
    /// Number of the next record of its slot to read.
    pub(super) next: u64,
    /// Where the current strand last (re)started, in ticks.
    pub(super) last: u64,
    /// Ticks of the current strand before `last`.
    pub(super) strand: u64,
    /// Ticks charged so far, and the nanoseconds reported for them.
    pub(super) charged: u64,
    pub(super) reported: u64,
    pub(super) pending: Vec<Item>,
    /// When the tracer saw it stop.
    pub(super) stopped_at: Option<u64>,
    /// The kernel's record of its context switches, and the intervals it was off its CPU
    /// (ticks; `u64::MAX`: not back yet) not yet taken off a strand.
    pub(super) switches: Option<SwitchLog>,
    pub(super) off: VecDeque<(u64, u64)>,
    /// The tool's copy of its instructions counter ([`Reading::Rdpmc`]).
    pub(super) counter: Option<File>,
}

impl Strands {
    pub(super) fn new(now: u64) -> Strands {
        Strands {
            slot: None,
            next: 0,
            last: now,
            strand: 0,
            charged: 0,
            reported: 0,
            pending: Vec::new(),
            stopped_at: Some(now),
            switches: None,
            off: VecDeque::new(),
            counter: None,
        }
    }

    /// Read the thread's new context-switch records into `off`.
    pub(super) fn read_switches(&mut self, clock: &Clock) {
        let Some(log) = self.switches.as_mut() else {
            return;
        };
        let off = &mut self.off;
        log.read(|out, ns| {
            let t = clock.tsc_at(ns);
            if out {
                off.push_back((t, u64::MAX));
            } else if let Some(last) = off.back_mut().filter(|l| l.1 == u64::MAX) {
                last.1 = t.max(last.0);
            }
        });
    }

    /// A new thread's, stopped by the tracer now; reading instructions, they count from its
    /// counter's opening (0, at its slot's set-up), and no pause is taken off.
    pub(super) fn starting(reading: Reading) -> Strands {
        match reading {
            Reading::Tsc => Strands::new(rdtsc()),
            Reading::Rdpmc => Strands {
                stopped_at: None,
                ..Strands::new(0)
            },
        }
    }

    /// Its clock now (stopped by the tracer): the TSC when it stopped, or its instructions so
    /// far (where the counter cannot be read: where its strand last started, adding nothing).
    pub(super) fn now(&self, reading: Reading) -> u64 {
        match reading {
            Reading::Tsc => self.stopped_at.unwrap_or_else(rdtsc),
            Reading::Rdpmc => self
                .counter
                .as_ref()
                .and_then(super::instructions::read)
                .unwrap_or(self.last),
        }
    }

    /// Ticks of `from..to` the thread was off its CPU; forgets what ends before `to`.
    pub(super) fn off_between(&mut self, from: u64, to: u64) -> u64 {
        let mut ticks = 0;
        while let Some(&(a, b)) = self.off.front() {
            ticks += b.min(to).saturating_sub(a.max(from));
            if b <= to {
                self.off.pop_front();
            } else {
                break;
            }
        }
        ticks
    }

    /// The strand ends at `tsc` (not counted: `skip` ticks of it): its nanoseconds. Rounding
    /// is carried over, so a thread's costs add up to its charged ticks.
    pub(super) fn end(&mut self, tsc: u64, skip: u64, ns_per_tick: f64) -> u64 {
        let ticks = (self.strand + tsc.saturating_sub(self.last)).saturating_sub(skip);
        self.strand = 0;
        self.charged += ticks;
        let ns = (self.charged as f64 * ns_per_tick) as u64;
        let cost = ns.saturating_sub(self.reported);
        self.reported = self.reported.max(ns);
        cost
    }

    /// Stopped by the tracer from `from` to `to`: not a strand's time.
    pub(super) fn pause(&mut self, from: u64, to: u64) {
        let off = self.off_between(self.last, from);
        self.strand += from.saturating_sub(self.last).saturating_sub(off);
        self.off_between(from, to);
        self.last = self.last.max(to);
    }
}
