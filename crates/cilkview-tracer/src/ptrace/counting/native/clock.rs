//! The native backend's clock: the invariant time-stamp counter, its frequency calibrated
//! against `CLOCK_MONOTONIC_RAW`, and the cost of one mark hit (the stub's time between two
//! consecutive `rdtsc` reads), measured once per process by running the stubs themselves (the
//! start-up value; each thread then measures it again in the program where it can, `strands.rs`).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cilkview_events::CostUnit;

use super::strands::HitCost;
use super::stub::{Reading, RDPMC_HIT_INSTRUCTIONS};
use crate::sys::native::{rdtsc, stub_hit_gaps};
use crate::sys::rdpmc::RdpmcUnavailable;
use crate::sys::switches::{raw_clock_ns, SwitchLog};

/// Why the native counter cannot run here: its clock cannot be calibrated.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ClockUnavailable {
    #[error("native: cannot read /proc/cpuinfo: {0}")]
    CpuInfo(Arc<io::Error>),
    #[error(
        "native: the time-stamp counter is not invariant here (no constant_tsc and \
         nonstop_tsc in /proc/cpuinfo)"
    )]
    NotInvariant,
    #[error("native: calibrating the stubs: {0}")]
    Stubs(Arc<io::Error>),
}

/// The calibrated clock.
#[derive(Clone, Debug)]
pub(crate) struct Clock {
    /// TSC ticks per second.
    pub(crate) hz: f64,
    /// What one mark hit adds to a strand, measured at start-up (taken off each strand that
    /// ends at a hit until the thread has measured it in the program).
    pub(crate) per_hit: HitCost,
    /// Ticks of 1 µs: a gap between two marks longer than this, where the program ran none of
    /// its own code, was an interruption (a tick, a fault), not the stub.
    pub(crate) interruption: u64,
    /// A `CLOCK_MONOTONIC_RAW` time and the TSC then (to place the kernel's switch records).
    mono0: u64,
    tsc0: u64,
    /// Whether the kernel's context-switch records can be read here (else why not).
    pub(crate) switches: Result<(), Arc<io::Error>>,
    /// Whether user space could read an instructions counter with `rdpmc` here (else why not).
    pub(crate) rdpmc: Result<(), Arc<RdpmcUnavailable>>,
    /// What the stubs read: instructions where `rdpmc` is readable, else the TSC.
    pub(crate) reading: Reading,
}

/// What the stubs read, given the `rdpmc` check: instructions (exact) wherever user space can
/// read the counter, else time.
pub(crate) fn reading_for<E>(rdpmc: &Result<(), E>) -> Reading {
    match rdpmc {
        Ok(()) => Reading::Rdpmc,
        Err(_) => Reading::Tsc,
    }
}

impl Clock {
    /// Report units per clock unit: nanoseconds per tick, or 1 for instructions.
    pub(crate) fn ns_per_tick(&self) -> f64 {
        match self.reading {
            Reading::Tsc => 1e9 / self.hz,
            Reading::Rdpmc => 1.0,
        }
    }

    /// The unit of the costs.
    pub(crate) fn unit(&self) -> CostUnit {
        match self.reading {
            Reading::Tsc => CostUnit::Nanoseconds,
            Reading::Rdpmc => CostUnit::Instructions,
        }
    }

    /// Take a new pair of `CLOCK_MONOTONIC_RAW` and TSC readings ([`pair`]): times near it are
    /// then placed within the frequency's error times their distance from it.
    pub(crate) fn anchor(&mut self) {
        (self.mono0, self.tsc0) = pair();
    }

    /// The TSC at `CLOCK_MONOTONIC_RAW` time `ns` (best near the last [`Clock::anchor`]).
    pub(crate) fn tsc_at(&self, ns: u64) -> u64 {
        let d = (ns as i128 - self.mono0 as i128) as f64 * self.hz / 1e9;
        (self.tsc0 as i128 + d as i128).max(0) as u64
    }

    /// The counter's reason words: what was measured.
    pub(crate) fn describe(&self) -> String {
        if software_stand_in() {
            return "testing: the stubs read counter pages as with rdpmc, a software event (task \
                    clock) standing in for each thread's instructions counter"
                .into();
        }
        if self.reading == Reading::Rdpmc {
            return format!(
                "instructions by rdpmc: each thread's own user-space instructions event, read by \
                 the stubs (perf_event_mmap_page, rdpmc); {} instructions per mark hit (and up to 2 \
                 loading its operand) taken off each strand",
                RDPMC_HIT_INSTRUCTIONS
            );
        }
        format!(
            "time on the CPU: invariant TSC at {:.3} GHz (calibrated against CLOCK_MONOTONIC_RAW), \
             {:.1} ns per mark hit measured at start-up (the mean over back-to-back marks) and \
             taken off each strand, measured again in the program where its marks lie back to \
             back; {}; {}",
            self.hz / 1e9,
            self.per_hit.ticks() * self.ns_per_tick(),
            match &self.switches {
                Ok(()) => "time off the CPU (preempted, sleeping, blocked) taken off through the \
                           kernel's context-switch records"
                    .to_string(),
                Err(why) => format!(
                    "time off the CPU is counted (no context-switch records: perf_event_open: \
                     {why})"
                ),
            },
            match &self.rdpmc {
                Ok(()) => "instructions by rdpmc: not used".to_string(),
                Err(why) => format!("instructions by rdpmc: unavailable ({why})"),
            }
        )
    }
}

/// Set (testing only, before the clock's first use in the process): the stubs read counter
/// pages as where `rdpmc` works, a software event standing in for the instructions counter.
static STAND_IN: AtomicBool = AtomicBool::new(false);

/// Whether the testing stand-in is on.
pub(crate) fn software_stand_in() -> bool {
    cfg!(feature = "testing") && STAND_IN.load(Ordering::Relaxed)
}

/// Turn the testing stand-in on (see [`crate::testing::native_software_stand_in`]).
#[cfg(feature = "testing")]
pub(crate) fn use_software_stand_in() {
    STAND_IN.store(true, Ordering::Relaxed);
}

/// The clock, calibrated once per process, or why the native backend cannot run here.
pub(crate) fn calibrated() -> Result<Clock, ClockUnavailable> {
    static CLOCK: OnceLock<Result<Clock, ClockUnavailable>> = OnceLock::new();
    CLOCK.get_or_init(calibrate).clone()
}

fn calibrate() -> Result<Clock, ClockUnavailable> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo")
        .map_err(|e| ClockUnavailable::CpuInfo(Arc::new(e)))?;
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    if !has("constant_tsc") || !has("nonstop_tsc") {
        return Err(ClockUnavailable::NotInvariant);
    }
    let hz = frequency();
    let interruption = (hz / 1e6) as u64;
    let gaps = stub_hit_gaps().map_err(|e| ClockUnavailable::Stubs(Arc::new(e)))?;
    let per_hit = HitCost::mean_below(&gaps, interruption);
    let switches = SwitchLog::open(0).map(drop).map_err(Arc::new);
    let rdpmc = crate::sys::rdpmc::user_instructions_counter().map_err(Arc::new);
    let mut clock = Clock {
        hz,
        per_hit,
        interruption,
        mono0: 0,
        tsc0: 0,
        switches,
        reading: if software_stand_in() {
            Reading::Rdpmc
        } else {
            reading_for(&rdpmc)
        },
        rdpmc,
    };
    clock.anchor();
    Ok(clock)
}

/// TSC ticks per second over 10 ms of `CLOCK_MONOTONIC_RAW`, from a [`pair`] at each end (a
/// reading cut by a preemption of the tool, on a busy machine, would be off by the preemption).
fn frequency() -> f64 {
    let (m0, c0) = pair();
    std::thread::sleep(Duration::from_millis(10));
    let (m1, c1) = pair();
    (c1 - c0) as f64 / (m1 - m0) as f64 * 1e9
}

/// A `CLOCK_MONOTONIC_RAW` time and the TSC at it: the clock read between two TSC reads, the
/// closest of five tries (an interrupt or a preemption between the reads widens a try).
fn pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let before = rdtsc();
        let ns = raw_clock_ns();
        let after = rdtsc();
        if after - before < best.0 {
            best = (after - before, ns, before / 2 + after / 2);
        }
    }
    (best.1, best.2)
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
        let ns = clock.per_hit.ticks() * clock.ns_per_tick();
        assert!(clock.hz > 1e8 && clock.hz < 1e10, "{clock:?}");
        assert!(ns > 0.5 && ns < 200.0, "{ns} ns per hit");
    }

    #[test]
    fn the_stubs_read_instructions_exactly_where_rdpmc_is_readable() {
        assert_eq!(reading_for::<()>(&Ok(())), Reading::Rdpmc);
        assert_eq!(reading_for(&Err("no CPU PMU")), Reading::Tsc);
        let Ok(clock) = calibrated() else {
            cilkview_fixtures::skip("no invariant TSC");
            return;
        };
        let mut rdpmc = clock.clone();
        rdpmc.rdpmc = Ok(());
        rdpmc.reading = Reading::Rdpmc;
        assert_eq!(
            (rdpmc.unit(), rdpmc.ns_per_tick()),
            (CostUnit::Instructions, 1.0)
        );
        assert!(rdpmc
            .describe()
            .starts_with("instructions by rdpmc: each thread's own"));
        let mut time = clock;
        time.rdpmc = Err(Arc::new(RdpmcUnavailable::NoPmu));
        time.reading = Reading::Tsc;
        assert_eq!(time.unit(), CostUnit::Nanoseconds);
        assert!(time.ns_per_tick() < 10.0, "{time:?}");
        assert!(time.describe().starts_with("time on the CPU"));
        assert!(time.describe().ends_with("instructions by rdpmc: unavailable (no CPU PMU: /sys/bus/event_source/devices/cpu is absent)"));
    }
}
