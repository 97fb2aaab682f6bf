//! The Cilkview paper's memory-bandwidth test (section 5): run P copies of the serial program
//! at once, each on its own CPU, and one copy alone. If the copies take significantly longer
//! than the lone run, they compete for something they share — memory bandwidth, usually (or
//! the shared cache) — and that, not the program's parallelism, limits its speedup.

use serde::{Deserialize, Serialize};

use crate::cores::{available_cpus, single_cpu};
use crate::{BenchError, BenchOptions, Launch, Progress, Summary};

/// Ratio (copies / alone) from which the verdict is [`BandwidthVerdict::Limited`]: the copies
/// lose a fifth of their speed or more (at P copies, P/1.25 = 0.8·P is then the best speedup
/// the parallel program can expect, whatever its parallelism).
pub const LIMITED: f64 = 1.25;
/// Ratio from which the verdict is [`BandwidthVerdict::Contention`]: more than run-to-run
/// noise on a quiet machine (a few percent), less than [`LIMITED`].
pub const CONTENTION: f64 = 1.10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BandwidthVerdict {
    /// ratio < [`CONTENTION`]: the copies do not slow each other down.
    Independent,
    /// [`CONTENTION`] ≤ ratio < [`LIMITED`]: some slowdown.
    Contention,
    /// ratio ≥ [`LIMITED`]: memory bandwidth limits the program.
    Limited,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BandwidthReport {
    /// How many copies ran at once.
    pub copies: u32,
    /// The lone run's time, seconds (median, min, max over trials).
    pub alone: Summary,
    /// The mean time of the copies in each trial, summarised over trials.
    pub together: Summary,
    /// `together.median / alone.median`.
    pub ratio: f64,
    pub verdict: BandwidthVerdict,
}

impl BandwidthReport {
    /// The verdict in words.
    pub fn explain(&self) -> String {
        let pct = (self.ratio - 1.0) * 100.0;
        match self.verdict {
            BandwidthVerdict::Limited => format!(
                "{} copies at once each ran {pct:.0}% slower than one alone (ratio {:.2} ≥ {LIMITED}): \
                 they compete for memory bandwidth, and that, not parallelism, limits this program's speedup \
                 (if the machine is otherwise quiet: other load slows the copies too)",
                self.copies, self.ratio
            ),
            BandwidthVerdict::Contention => format!(
                "{} copies at once each ran {pct:.0}% slower than one alone (ratio {:.2}): some contention \
                 for memory or shared caches, not enough to be the main limit (threshold {LIMITED})",
                self.copies, self.ratio
            ),
            BandwidthVerdict::Independent => format!(
                "{} copies at once ran as fast as one alone (ratio {:.2} < {CONTENTION}): memory bandwidth \
                 does not limit this program",
                self.copies, self.ratio
            ),
        }
    }
}

/// Trial `t`'s `copies` copies at once, copy `i` on CPU `cpu(i)`: each one's time. Each copy is
/// started and waited for by its own thread, so that one copy's end is timed when it happens,
/// not when the others let us look.
fn copies_at_once(
    launch: &Launch,
    copies: u32,
    t: u32,
    cpu: &dyn Fn(u32) -> usize,
) -> Result<Vec<f64>, BenchError> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..copies)
            .map(|i| {
                let set = single_cpu(cpu(i));
                s.spawn(move || -> Result<f64, BenchError> {
                    let label = format!("bandwidth test, trial {t}, copy {}", i + 1);
                    let done = launch.start(1, set?)?.wait()?.check(1, label)?;
                    Ok(done.elapsed.as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bandwidth-test thread panicked"))
            .collect::<Result<Vec<f64>, BenchError>>()
    })
}

/// Runs the test with `copies` copies (1 worker each), `opts.trials` times.
pub fn bandwidth(
    opts: &BenchOptions,
    copies: u32,
    progress: &mut dyn FnMut(Progress),
) -> Result<BandwidthReport, BenchError> {
    if copies < 2 {
        return Err(BenchError::BandwidthNeedsTwo);
    }
    if opts.trials == 0 {
        return Err(BenchError::NoTrials);
    }
    let available = available_cpus()?;
    if copies as usize > available.len() && !opts.oversubscribe {
        return Err(BenchError::TooManyCores {
            cores: copies,
            available: available.len(),
        });
    }
    let launch = opts.launch();
    let cpu = |i: u32| available[i as usize % available.len()];
    progress(Progress::Begin {
        what: "bandwidth test",
        runs: u64::from(opts.trials) * u64::from(copies + 1),
    });
    let mut alone = Vec::new();
    let mut together = Vec::new();
    for t in 1..=opts.trials {
        let label = format!("bandwidth test, trial {t}, alone");
        let one = launch
            .start(1, single_cpu(cpu(0))?)?
            .wait()?
            .check(1, label)?;
        alone.push(one.elapsed.as_secs_f64());
        progress(Progress::Ran {
            cores: 1,
            trial: Some(t),
            seconds: one.elapsed.as_secs_f64(),
        });
        let ends = copies_at_once(&launch, copies, t, &cpu)?;
        for &s in &ends {
            progress(Progress::Ran {
                cores: copies,
                trial: Some(t),
                seconds: s,
            });
        }
        together.push(ends.iter().sum::<f64>() / ends.len() as f64);
    }
    let alone = Summary::of(&alone);
    let together = Summary::of(&together);
    let ratio = together.median / alone.median;
    let verdict = if ratio >= LIMITED {
        BandwidthVerdict::Limited
    } else if ratio >= CONTENTION {
        BandwidthVerdict::Contention
    } else {
        BandwidthVerdict::Independent
    };
    Ok(BandwidthReport {
        copies,
        alone,
        together,
        ratio,
        verdict,
    })
}
