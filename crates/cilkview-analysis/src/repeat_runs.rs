//! `run --repeat N` and `--repeat auto`: the program run several times, its runs folded into the
//! first ([`crate::repeat`]) and replayed into the session; `auto` runs until the span settles.

use std::time::{Duration, Instant};

use cilkview_events::{CounterInfo, ExitStatus, Outcome};
use cilkview_report::RunInfo;
use cilkview_tracer::{Backend, TraceError, TraceOptions};

use crate::repeat::{Estimate, Folder, RecordedRun, Recorder};
use crate::{RunRequest, Session};

/// How many times `run` runs the program (a counter of time: `native`; once otherwise).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Repeat {
    /// This many runs.
    Runs(u32),
    /// At least 3 runs, then until a run changes the span by at most `tolerance` (a fraction),
    /// within `budget` of running time and `most` runs.
    Auto {
        tolerance: f64,
        budget: Duration,
        most: u32,
    },
}

impl Repeat {
    /// `--repeat auto`: the span within 5%, within 60 s and 100 runs.
    pub const AUTO: Repeat = Repeat::Auto {
        tolerance: 0.05,
        budget: Duration::from_secs(60),
        most: 100,
    };

    /// Whether the program runs more than once.
    pub fn repeats(&self) -> bool {
        !matches!(self, Repeat::Runs(0 | 1))
    }

    fn most(&self) -> u32 {
        match *self {
            Repeat::Runs(n) => n.max(1),
            Repeat::Auto { most, .. } => most,
        }
    }
}

impl std::fmt::Display for Repeat {
    /// As `--repeat` takes it: `N` or `auto`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Repeat::Runs(n) => write!(f, "{n}"),
            Repeat::Auto { .. } => f.write_str("auto"),
        }
    }
}

impl std::str::FromStr for Repeat {
    type Err = String;

    /// `auto`, or a number of runs from 1 to 1000.
    fn from_str(s: &str) -> Result<Repeat, String> {
        if s == "auto" {
            return Ok(Repeat::AUTO);
        }
        match s.parse::<u32>() {
            Ok(n @ 1..=1000) => Ok(Repeat::Runs(n)),
            _ => Err(format!(
                "'{s}' is not a number of runs from 1 to 1000, nor 'auto' (until the span settles)"
            )),
        }
    }
}

/// What repeated runs add to the report: how many were folded in, what departed, and the runs'
/// strands (for the noise bound).
pub(crate) struct Repeated {
    pub runs: u32,
    pub warnings: Vec<String>,
    pub recorded: RecordedRun,
    /// The run (its number, from 1) whose work the strands were scaled to, whose counter notes
    /// the report gives (3 runs or more).
    pub median_run: Option<u32>,
}

/// The span of `recorded` replayed with each strand's cost by `estimate`.
pub(crate) fn replayed_span(
    recorded: &RecordedRun,
    estimate: Estimate,
    burden: u64,
    info: RunInfo,
) -> Option<u64> {
    let mut unused = ();
    let mut session = Session::new(burden, &mut unused);
    recorded.replay(&mut session, estimate).ok()?;
    Some(session.finish(info, "", false).measures.span)
}

/// Whether `--repeat auto` goes on: the span after each run, the time the runs took.
struct Settling {
    tolerance: f64,
    budget: Duration,
    spans: Vec<u64>,
}

impl Settling {
    /// For `--repeat auto`; `None` for a number of runs.
    fn of(repeat: Repeat) -> Option<Settling> {
        match repeat {
            Repeat::Auto {
                tolerance, budget, ..
            } => Some(Settling {
                tolerance,
                budget,
                spans: Vec::new(),
            }),
            Repeat::Runs(_) => None,
        }
    }

    /// The last run's change of the span, as a fraction.
    fn change(&self) -> Option<f64> {
        let [.., before, last] = self.spans[..] else {
            return None;
        };
        Some((last as f64 - before as f64).abs() / (last.max(1) as f64))
    }

    /// The warning after the most runs allowed, the span not settled.
    fn unsettled(runs: u32) -> String {
        format!(
            "--repeat auto: stopped at {runs} runs before the span settled: its noise bound says \
             how far to trust it"
        )
    }

    /// Why to stop after `runs` runs that took `elapsed` (the last one `last`), if so.
    fn stop(&self, runs: u32, elapsed: Duration, last: Duration) -> Option<String> {
        let change = self.change()?;
        let tol = 100.0 * self.tolerance;
        if runs >= 3 && change <= self.tolerance {
            return Some(format!(
                "--repeat auto: {runs} runs, the span settled (run {runs} changed it by {:.1}%, \
                 tolerance {tol:.0}%)",
                100.0 * change
            ));
        }
        (elapsed + last > self.budget).then(|| {
            format!(
                "--repeat auto: stopped after {runs} runs at the time budget ({} s) before the \
                 span settled (run {runs} changed it by {:.1}%, tolerance {tol:.0}%): its noise \
                 bound says how far to trust it",
                self.budget.as_secs(),
                100.0 * change
            )
        })
    }
}

/// `--repeat`: runs the program as `request.repeat` says, each strand's cost its typical one
/// (`repeat.rs`), replayed into `session`. A run is used up to where its marks depart from the
/// first's (if they do); one that ends otherwise than the first (a signal, another exit status)
/// is the last.
pub(crate) fn run_repeatedly(
    request: &RunRequest,
    options: &TraceOptions,
    backend: &dyn Backend,
    counter: CounterInfo,
    info: &RunInfo,
    session: &mut Session,
) -> Result<(Outcome, Repeated), TraceError> {
    // The probes of each image are asked of a session of the same settings, so that `session`
    // numbers them at the replay, in the stream's order.
    let mut unused = ();
    let mut answerer = Session::new(0, &mut unused)
        .with_profiling(request.profile, request.profile_region.as_deref());
    let mut recorder = Recorder::new(&mut answerer);
    let began = Instant::now();
    let mut outcome = backend.run(options, counter.clone(), &mut recorder)?;
    let mut recorded = recorder.finish();
    // The runs whose strands all matched the first's (as `recorded.run_work()`): their numbers
    // and counter notes, so that the report's are those of the run its work is.
    let mut matched = vec![(1, std::mem::take(&mut outcome.counter.notes))];
    let mut settling = Settling::of(request.repeat);
    let runs = request.repeat.most();
    let mut done = 1;
    let mut warnings = Vec::new();
    for run in 2..=runs {
        let started = Instant::now();
        let mut folder = Folder::new(&mut recorded);
        let later = backend.run(options, counter.clone(), &mut folder)?;
        let divergence = folder.finish();
        done = run;
        if divergence.is_none() {
            matched.push((run, later.counter.notes));
        }
        if later.status != outcome.status {
            let planned = if settling.is_some() { run } else { runs };
            warnings.push(ended_otherwise(run, planned, later.status, outcome.status));
            break;
        }
        if let Some(divergence) = divergence {
            warnings.push(format!(
                "--repeat: run {run} did not hit the marks of run 1 in the same order ({divergence}): \
                 its strands from there on were not used; a program whose marks vary between runs \
                 is measured by one run"
            ));
        }
        if let Some(settling) = settling.as_mut() {
            let span = replayed_span(&recorded, Estimate::Typical, info.burden, info.clone());
            settling.spans.push(span.unwrap_or(0));
            if let Some(why) = settling.stop(run, began.elapsed(), started.elapsed()) {
                warnings.push(why);
                break;
            }
            if run == runs {
                warnings.push(Settling::unsettled(runs));
            }
        }
    }
    recorded
        .replay(session, Estimate::Typical)
        .map_err(|(image, message)| TraceError::Probes { image, message })?;
    outcome.total_cost = recorded.total();
    let median = recorded.median_run();
    let (number, notes) = matched.swap_remove(median.unwrap_or(0));
    outcome.counter.notes = notes;
    let median_run = median.map(|_| number);
    if done > 1 {
        outcome.counter.notes.push(cilkview_events::Note::new(
            "repeat",
            estimate_note(done, median_run),
        ));
    }
    Ok((
        outcome,
        Repeated {
            runs: done,
            warnings,
            recorded,
            median_run,
        },
    ))
}

/// The warning of run `run` of `planned` ending with `status` where run 1 ended with `first`:
/// its strands were used where they matched, and the runs after it are not made.
fn ended_otherwise(run: u32, planned: u32, status: ExitStatus, first: ExitStatus) -> String {
    let rest = match planned - run {
        0 => String::new(),
        1 => format!("; run {planned} was not made"),
        _ => format!("; runs {} to {planned} were not made", run + 1),
    };
    format!(
        "--repeat: run {run} ended with {} where run 1 ended with {}: its strands were used \
         where its marks matched run 1's{rest}",
        status_words(status),
        status_words(first)
    )
}

fn status_words(status: ExitStatus) -> String {
    match status {
        ExitStatus::Exited(code) => format!("status {code}"),
        ExitStatus::Signaled(signal) => format!("signal {signal}"),
    }
}

/// How each strand's time was estimated from `runs` runs (two or more), for the report's note;
/// `median_run`, the run the strands were scaled to.
fn estimate_note(runs: u32, median_run: Option<u32>) -> String {
    use crate::repeat::{AGREEMENT_FLOOR_NS, AGREEMENT_FRACTION, SAMPLED_RUNS};
    match runs {
        2 => format!(
            "each strand the mean of its 2 runs where they agree (within 1/{AGREEMENT_FRACTION} \
             of the shorter or {AGREEMENT_FLOOR_NS} ns), else the shorter (--repeat)"
        ),
        _ if runs as usize > SAMPLED_RUNS => format!(
            "each strand the median of its first {SAMPLED_RUNS} of {runs} runs, all scaled to \
             those runs' median work{} (--repeat)",
            whose(median_run)
        ),
        _ => format!(
            "each strand the median of its {runs} runs, all scaled to the median run's work{} \
             (--repeat)",
            whose(median_run)
        ),
    }
}

/// Which run the notes are of, for the estimate's note.
fn whose(median_run: Option<u32>) -> String {
    median_run
        .map(|run| format!(": run {run}'s, whose notes these are"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settling(spans: &[u64]) -> Settling {
        Settling {
            tolerance: 0.05,
            budget: Duration::from_secs(60),
            spans: spans.to_vec(),
        }
    }

    #[test]
    fn auto_stops_when_a_run_changes_the_span_within_the_tolerance() {
        let second = Duration::from_secs(1);
        // Two runs: never settled yet, whatever the change.
        assert_eq!(settling(&[1000]).stop(2, second, second), None);
        // Run 3 changed it by 10%: go on; by 4%: settled.
        assert_eq!(settling(&[1000, 1100]).stop(3, second, second), None);
        assert_eq!(
            settling(&[1000, 1040]).stop(3, second, second).unwrap(),
            "--repeat auto: 3 runs, the span settled (run 3 changed it by 3.8%, tolerance 5%)"
        );
        // Out of time: a run would end past the budget.
        let late = settling(&[1000, 1200]).stop(9, Duration::from_secs(55), 6 * second);
        assert!(late.unwrap().starts_with(
            "--repeat auto: stopped after 9 runs at the time budget (60 s) before the span settled \
             (run 9 changed it by 16.7%"
        ));
    }

    #[test]
    fn how_many_runs_each_repeat_makes() {
        assert!(!Repeat::Runs(1).repeats());
        assert!(Repeat::Runs(2).repeats() && Repeat::AUTO.repeats());
        assert_eq!((Repeat::Runs(5).most(), Repeat::AUTO.most()), (5, 100));
        assert_eq!("auto".parse(), Ok(Repeat::AUTO));
        assert_eq!("7".parse(), Ok(Repeat::Runs(7)));
        assert!("0".parse::<Repeat>().is_err() && "1001".parse::<Repeat>().is_err());
        assert_eq!(
            (Repeat::AUTO.to_string(), Repeat::Runs(3).to_string()),
            ("auto".into(), "3".into())
        );
    }
}
