//! Support of the emulation tests: run a program emulated and single-stepped, and compare.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cilkview_fixtures::skip;
use cilkview_tracer::{
    emulator_available, run, CounterMode, EmulationNotes, EventSink, Outcome, Probe, ProbesError,
    TraceError, TraceEvent, TraceOptions,
};

use super::assert_costs_add_up;

pub fn have_qemu() -> bool {
    match emulator_available() {
        Ok(_) => true,
        Err(why) => {
            skip(format!("emulation tests: {why}"));
            false
        }
    }
}

/// The closure pair of these tests as the backend's event sink.
pub struct Sink<P, F>(pub P, pub F);

impl<P, F> EventSink for Sink<P, F>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        (self.0)(image)
    }
    fn event(&mut self, event: TraceEvent) {
        (self.1)(event)
    }
}

pub fn run_emulated_with_notes<P, F>(
    o: &TraceOptions,
    probes_for: P,
    on_event: F,
) -> Result<(Outcome, EmulationNotes), TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    cilkview_tracer::run_emulated(o, &mut Sink(probes_for, on_event))
}

/// `exe` (no arguments) under the emulator with the probes at its symbols `syms` (none for the
/// other images): its outcome, notes and events, and every image the backend asked about.
pub fn emulate_with_probes(
    exe: &Path,
    syms: &[(&str, Option<u16>)],
) -> (Outcome, EmulationNotes, Vec<TraceEvent>, Vec<PathBuf>) {
    let probes = super::probes(exe, syms);
    let (mut ev, mut asked) = (vec![], vec![]);
    let (out, notes) = run_emulated_with_notes(
        &opts(exe, &[]),
        |img| {
            asked.push(img.to_path_buf());
            Ok(if img == exe { probes.clone() } else { vec![] })
        },
        |e| ev.push(e),
    )
    .unwrap();
    (out, notes, ev, asked)
}

pub fn run_emulated<P, F>(
    o: &TraceOptions,
    probes_for: P,
    on_event: F,
) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>,
    F: FnMut(TraceEvent),
{
    run_emulated_with_notes(o, probes_for, on_event).map(|(o, _)| o)
}

pub fn opts(exe: &Path, args: &[&str]) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: args.iter().map(Into::into).collect(),
        counter: CounterMode::Step,
        bind_cpu: true,
        env: Vec::new(),
    }
}

/// The probes of any image, from its `.cilkview_marks` (none for unmarked or unreadable files).
pub fn marks_of(img: &Path) -> Result<Vec<Probe>, ProbesError> {
    Ok(match cilkview_marks::read_marks(img) {
        Ok(m) => m
            .marks
            .iter()
            .map(|k| Probe::new(k.offset(&m), k.operand))
            .collect(),
        Err(_) => vec![],
    })
}

pub type Run = (Outcome, Vec<TraceEvent>, Vec<PathBuf>);

pub fn traced(emulated: bool, o: &TraceOptions) -> Run {
    let mut ev = vec![];
    let mut calls = vec![];
    let probes_for = |img: &Path| {
        calls.push(img.to_path_buf());
        marks_of(img)
    };
    let out = if emulated {
        run_emulated(o, probes_for, |e| ev.push(e))
    } else {
        run(o, probes_for, |e| ev.push(e))
    }
    .unwrap_or_else(|e| {
        panic!(
            "{} {}: {e}",
            if emulated { "emulate" } else { "step" },
            o.program.display()
        )
    });
    assert_costs_add_up(out.total_cost, &ev);
    (out, ev, calls)
}

/// Per thread (in order of first appearance): its events as (probe or
/// u64::MAX for the exit, cost, operand).
pub fn per_thread(ev: &[TraceEvent]) -> Vec<Vec<(u64, u64, Option<u64>)>> {
    let mut order: Vec<i32> = vec![];
    let mut by: HashMap<i32, Vec<(u64, u64, Option<u64>)>> = HashMap::new();
    for e in ev {
        let (tid, item) = match *e {
            TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand,
            } => (tid, (probe as u64, cost, operand)),
            TraceEvent::ThreadExit { tid, cost } => (tid, (u64::MAX, cost, None)),
            _ => continue,
        };
        if !by.contains_key(&tid) {
            order.push(tid);
        }
        by.entry(tid).or_default().push(item);
    }
    order.into_iter().map(|t| by.remove(&t).unwrap()).collect()
}

/// Step vs emulate on one program: same exit, same `probes_for` calls (the
/// same numbering), same hits in each thread with the same operands, and the
/// same cost for every strand that starts at a mark and ends at a mark. The
/// first strand of the initial thread (glibc start-up) and each thread's tail
/// (exit path) run CPU-dependent glibc code: they must agree within `slack`
/// percent. Returns the two runs' totals.
pub fn compare(exe: &Path, args: &[&str], slack: u64) -> (u64, u64) {
    compare_with(exe, args, slack, &[])
}

/// [`compare`], where the strands ending at the probes `libc_strands` also
/// run CPU-dependent glibc code (e.g. `dlopen`) and get the same slack.
pub fn compare_with(exe: &Path, args: &[&str], slack: u64, libc_strands: &[u64]) -> (u64, u64) {
    let o = opts(exe, args);
    let (so, se, sc) = traced(false, &o);
    let (eo, ee, ec) = traced(true, &o);
    assert_eq!(so.status, eo.status, "{}", exe.display());
    assert_eq!(so.hits, eo.hits, "{}", exe.display());
    assert_eq!(so.threads, eo.threads, "{}", exe.display());
    assert_eq!(sc, ec, "probes_for calls (numbering) of {}", exe.display());
    let (st, et) = (per_thread(&se), per_thread(&ee));
    assert_eq!(st.len(), et.len());
    let mut sorted_s = st.clone();
    let mut sorted_e = et.clone();
    // Threads may start in another order: match them by their probe sequences.
    let key = |v: &Vec<(u64, u64, Option<u64>)>| v.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>();
    sorted_s[1..].sort_by_key(key);
    sorted_e[1..].sort_by_key(key);
    for (t, (s, e)) in sorted_s.iter().zip(&sorted_e).enumerate() {
        assert_eq!(
            key(s),
            key(e),
            "thread {t}: probes and operands of {}",
            exe.display()
        );
        for (i, (a, b)) in s.iter().zip(e).enumerate() {
            let edge = (t == 0 && i == 0) || a.0 == u64::MAX || libc_strands.contains(&a.0);
            if edge {
                assert!(
                    a.1.abs_diff(b.1) * 100 <= slack * a.1.max(50),
                    "thread {t} event {i} of {}: step {} emulate {} (edge strand, slack {slack}%)",
                    exe.display(),
                    a.1,
                    b.1
                );
            } else {
                assert_eq!(
                    a.1,
                    b.1,
                    "thread {t} event {i} ({a:?}) of {}: step vs emulate",
                    exe.display()
                );
            }
        }
    }
    (so.total_cost, eo.total_cost)
}

/// glibc's start-up and exit paths differ between this host's CPU and the
/// emulated one (CPU feature and cache probing, string-function variants):
/// the edge strands may differ by this many percent.
pub const EDGE_SLACK: u64 = 10;
