//! The native backend's clock: the invariant time-stamp counter, its frequency calibrated
//! against `CLOCK_MONOTONIC`, and the cost of one mark hit (the stub's time between two
//! consecutive `rdtsc` reads), measured once per process by running the stubs themselves.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::sys::native::{rdtsc, stub_hit_ticks as per_hit_ticks};
use crate::sys::switches::{monotonic_ns, SwitchLog};

/// The calibrated clock.
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    /// TSC ticks per second.
    pub(crate) hz: f64,
    /// Ticks one mark hit adds to a strand (taken off each strand that ends at a hit).
    pub(crate) per_hit: u64,
    /// A `CLOCK_MONOTONIC` time and the TSC then (to place the kernel's switch records).
    mono0: u64,
    tsc0: u64,
    /// Whether the kernel's context-switch records can be read here (else why not).
    pub(crate) switches: Result<(), String>,
}

impl Clock {
    /// Nanoseconds per tick.
    pub(crate) fn ns_per_tick(&self) -> f64 {
        1e9 / self.hz
    }

    /// Take a new pair of `CLOCK_MONOTONIC` and TSC readings: times near it are then placed
    /// within the frequency's error times their distance from it (~1e-4 of it), not of the
    /// distance from start-up.
    pub(crate) fn anchor(&mut self) {
        let before = rdtsc();
        self.mono0 = monotonic_ns();
        self.tsc0 = before / 2 + rdtsc() / 2;
    }

    /// The TSC at `CLOCK_MONOTONIC` time `ns` (best near the last [`Clock::anchor`]).
    pub(crate) fn tsc_at(&self, ns: u64) -> u64 {
        let d = (ns as i128 - self.mono0 as i128) as f64 * self.hz / 1e9;
        (self.tsc0 as i128 + d as i128).max(0) as u64
    }

    /// The counter's reason words: what was measured.
    pub(crate) fn describe(&self) -> String {
        format!(
            "time on the CPU: invariant TSC at {:.3} GHz (calibrated against CLOCK_MONOTONIC), \
             {:.1} ns per mark hit measured at start-up and taken off each strand; {}",
            self.hz / 1e9,
            self.per_hit as f64 * self.ns_per_tick(),
            match &self.switches {
                Ok(()) => "time off the CPU (preempted, sleeping, blocked) taken off through the \
                           kernel's context-switch records"
                    .to_string(),
                Err(why) =>
                    format!("time off the CPU is counted (no context-switch records: {why})"),
            }
        )
    }
}

/// The clock, calibrated once per process, or why the native backend cannot run here.
pub(crate) fn calibrated() -> Result<Clock, String> {
    static CLOCK: OnceLock<Result<Clock, String>> = OnceLock::new();
    CLOCK.get_or_init(calibrate).clone()
}

fn calibrate() -> Result<Clock, String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|e| format!("native: cannot read /proc/cpuinfo: {e}"))?;
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    if !has("constant_tsc") || !has("nonstop_tsc") {
        return Err(
            "native: the time-stamp counter is not invariant here (no constant_tsc and \
             nonstop_tsc in /proc/cpuinfo)"
                .into(),
        );
    }
    let hz = frequency();
    let per_hit = per_hit_ticks().map_err(|e| format!("native: calibrating the stubs: {e}"))?;
    let switches = SwitchLog::open(0)
        .map(drop)
        .map_err(|e| format!("perf_event_open: {e}"));
    let mut clock = Clock {
        hz,
        per_hit,
        mono0: 0,
        tsc0: 0,
        switches,
    };
    clock.anchor();
    Ok(clock)
}

/// TSC ticks per second over 10 ms of `CLOCK_MONOTONIC` (both read at the same two moments:
/// the error is the ~50 ns between two reads over 10 ms, ~1e-5).
fn frequency() -> f64 {
    let (t0, c0) = (Instant::now(), rdtsc());
    std::thread::sleep(Duration::from_millis(10));
    let (c1, t1) = (rdtsc(), Instant::now());
    (c1 - c0) as f64 / (t1 - t0).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_measures_a_plausible_hit_cost() {
        let Ok(clock) = calibrated() else {
            cilkview_fixtures::skip("no invariant TSC");
            return;
        };
        let ns = clock.per_hit as f64 * clock.ns_per_tick();
        assert!(clock.hz > 1e8 && clock.hz < 1e10, "{clock:?}");
        assert!(ns > 0.5 && ns < 200.0, "{ns} ns per hit");
    }
}
