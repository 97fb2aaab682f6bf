//! The options checked against the counter that will run, chosen before the run (`auto`
//! resolved as the run would resolve it): a cost (`--burden`, `--task-cost`) in another unit than
//! that counter counts in, `--repeat` where its costs do not vary between runs,
//! `--no-cpu-binding` where it binds nothing. Each refusal is one line naming the counter and
//! what to write instead: an option that does not apply to what will run is never dropped.
//! What applies is what the backend says of itself (`Backend::describe`, `unit`, `repeats`).

use anyhow::{bail, Result};
use cilkview_analysis::{backends, Chosen, Cost, CostUnit, CounterMode, Repeat};

/// Which subcommand will run the counter: which others the user could ask for instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    Run,
    Attach,
}

/// A cost option as given: its flag, its value, and an example in its usual range of each unit
/// (a number of instructions, a time).
#[derive(Clone, Copy, Debug)]
pub struct CostOption {
    pub flag: &'static str,
    pub cost: Option<Cost>,
    pub examples: (&'static str, &'static str),
}

/// `--burden`'s examples: Cilkview's 15000 instructions, 5 µs.
pub const BURDEN_EXAMPLES: (&str, &str) = ("15000", "5us");
/// `--task-cost`'s examples: 10000 instructions, 2.5 µs.
pub const TASK_COST_EXAMPLES: (&str, &str) = ("10000", "2.5us");

/// The counter that will run, as a message's subject: `--counter step`, or under `auto`
/// `--counter auto chose emulate, which`.
fn subject(requested: CounterMode, kind: CounterMode) -> String {
    if requested == CounterMode::Auto {
        format!("--counter auto chose {kind}, which")
    } else {
        format!("--counter {kind}")
    }
}

/// Each cost in the unit the chosen counter counts in, or an error saying what to write.
pub fn check_costs(
    options: &[CostOption],
    requested: CounterMode,
    chosen: &Chosen,
    usage: Use,
) -> Result<()> {
    let unit = chosen.info().unit;
    for option in options {
        let Some(cost) = option.cost.filter(|c| c.in_unit(unit).is_none()) else {
            continue;
        };
        // Under `auto`, the user may have meant another counter: the one counting in the cost's
        // unit here.
        let other = (requested == CounterMode::Auto)
            .then(|| counting_in(cost.unit, chosen, usage))
            .flatten();
        bail!(
            "{}",
            cost_error(option, cost, requested, chosen.info().kind, unit, other)
        );
    }
    Ok(())
}

/// The refusal of `option` (its value `cost`) by the counter `kind` (chosen for `requested`)
/// counting in `unit`; `other`: a counter counting in the cost's unit, to offer.
fn cost_error(
    option: &CostOption,
    cost: Cost,
    requested: CounterMode,
    kind: CounterMode,
    unit: CostUnit,
    other: Option<CounterMode>,
) -> String {
    let flag = option.flag;
    let here = match (kind, unit) {
        (CounterMode::Native, CostUnit::Nanoseconds) => " here (no user-space rdpmc)",
        (CounterMode::Native, _) => " here (rdpmc)",
        _ => "",
    };
    let (count, time) = option.examples;
    let (what, give) = match unit {
        CostUnit::Nanoseconds => (
            "a number of instructions",
            format!("give a time, e.g. {flag} {time}"),
        ),
        CostUnit::Instructions => (
            "a time",
            format!("give a number of instructions, e.g. {flag} {count}"),
        ),
    };
    let or = other
        .map(|other| format!(", or --counter {other}, which {}", verb(cost.unit)))
        .unwrap_or_default();
    format!(
        "{flag} {cost} is {what}, but {} {}{here}: {give}{or}",
        subject(requested, kind),
        verb(unit).trim_end_matches(" here")
    )
}

/// "counts instructions" or "measures time" (here).
fn verb(unit: CostUnit) -> &'static str {
    match unit {
        CostUnit::Instructions => "counts instructions",
        CostUnit::Nanoseconds => "measures time here",
    }
}

/// The fastest other counter that `usage` can ask for and that counts in `unit` here.
fn counting_in(unit: CostUnit, chosen: &Chosen, usage: Use) -> Option<CounterMode> {
    backends(|b| {
        b.mode() != chosen.info().kind
            && (usage == Use::Run || b.describe().attaches)
            && b.unit() == Some(unit)
    })
    .into_iter()
    .find(|b| b.check().is_ok_and(|info| info.unit == unit))
    .map(|b| b.mode())
}

/// `--repeat N` (N > 1, or `auto`) only where the chosen counter's costs vary between runs
/// (time).
pub fn check_repeat(repeat: Repeat, chosen: &Chosen) -> Result<()> {
    if !repeat.repeats() || chosen.backend().repeats() {
        return Ok(());
    }
    if chosen.info().kind != CounterMode::Native {
        bail!(
            "--repeat {repeat} estimates each strand's time over runs: it needs --counter \
             native (the exact counters count the same every run)"
        );
    }
    bail!(
        "--repeat {repeat} estimates each strand's time over runs, but --counter native \
         counts instructions here (rdpmc): the same every run"
    );
}

/// `--host-dispatch` only where the chosen counter pins glibc's dispatch (it counts
/// instructions); a time runs the program as it is.
pub fn check_host_dispatch(host_dispatch: bool, chosen: &Chosen) -> Result<()> {
    if host_dispatch && chosen.info().unit != CostUnit::Instructions {
        bail!(
            "--host-dispatch does not apply: --counter {} measures time here and runs the \
             program as it is (only the instruction counters pin glibc's dispatch)",
            chosen.info().kind
        );
    }
    Ok(())
}

/// `--no-cpu-binding` only where the chosen counter binds the program to a CPU.
pub fn check_binding(no_cpu_binding: bool, requested: CounterMode, chosen: &Chosen) -> Result<()> {
    if !no_cpu_binding || chosen.backend().describe().binds_cpu {
        return Ok(());
    }
    let binding: Vec<String> = backends(|b| b.describe().binds_cpu)
        .iter()
        .map(|b| format!("--counter {}", b.mode()))
        .collect();
    bail!(
        "--no-cpu-binding applies to {} (which binds the program to one CPU), but {} does not \
         bind it: leave --no-cpu-binding out",
        binding.join(", "),
        subject(requested, chosen.info().kind)
    );
}

/// `--burden cost`, as the tests give it.
#[cfg(test)]
pub(crate) fn burden(cost: Cost) -> CostOption {
    CostOption {
        flag: "--burden",
        cost: Some(cost),
        examples: BURDEN_EXAMPLES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_in_the_wrong_unit_names_the_counter_and_what_to_write() {
        use CounterMode::*;
        let (n, t) = (Cost::instructions(15000), Cost::nanoseconds(5000));
        let e = cost_error(&burden(n), n, Native, Native, CostUnit::Nanoseconds, None);
        assert_eq!(
            e,
            "--burden 15000 is a number of instructions, but --counter native measures time \
             here (no user-space rdpmc): give a time, e.g. --burden 5us"
        );
        let e = cost_error(&burden(t), t, Native, Native, CostUnit::Instructions, None);
        assert_eq!(
            e,
            "--burden 5000ns is a time, but --counter native counts instructions here (rdpmc): \
             give a number of instructions, e.g. --burden 15000"
        );
        let e = cost_error(&burden(t), t, Step, Step, CostUnit::Instructions, None);
        assert!(
            e.contains("--counter step counts instructions: give"),
            "{e}"
        );
        // Under auto: the counter chosen, and the one that counts in the cost's unit here.
        let e = cost_error(
            &burden(t),
            t,
            Auto,
            Emulate,
            CostUnit::Instructions,
            Some(Native),
        );
        assert_eq!(
            e,
            "--burden 5000ns is a time, but --counter auto chose emulate, which counts \
             instructions: give a number of instructions, e.g. --burden 15000, or --counter \
             native, which measures time here"
        );
        let task = CostOption {
            flag: "--task-cost",
            cost: Some(n),
            examples: TASK_COST_EXAMPLES,
        };
        let e = cost_error(&task, n, Auto, Native, CostUnit::Nanoseconds, Some(Step));
        assert_eq!(
            e,
            "--task-cost 15000 is a number of instructions, but --counter auto chose native, \
             which measures time here (no user-space rdpmc): give a time, e.g. --task-cost \
             2.5us, or --counter step, which counts instructions"
        );
    }
}
