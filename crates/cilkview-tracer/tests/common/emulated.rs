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
        host_dispatch: false,
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
/// first strand of the initial thread (glibc start-up) and its tail (exit path)
/// run glibc's CPU identification, which no tunable pins: their difference must be
/// this host's (see [`Edges`]) within [`EDGE_TOLERANCE`]. Returns the two runs' totals.
pub fn compare(exe: &Path, args: &[&str]) -> (u64, u64) {
    compare_with(exe, args, edges_of(exe), &[])
}

/// [`compare`], with the edges' expected differences given (the other threads' tails: 0,
/// within [`EDGE_TOLERANCE`]), and where the strands ending at the probes `libc_strands` run
/// the loader's CPU-dependent code (`dlopen`): they agree within [`LIBC_SLACK`] percent.
pub fn compare_with(exe: &Path, args: &[&str], edges: Edges, libc_strands: &[u64]) -> (u64, u64) {
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
            let expected = match (t, i) {
                (0, 0) => Some(edges.start),
                (0, _) if i + 1 == s.len() => Some(edges.exit),
                _ if a.0 == u64::MAX => Some(0),
                _ => None,
            };
            if libc_strands.contains(&a.0) {
                assert!(
                    a.1.abs_diff(b.1) * 100 <= LIBC_SLACK * a.1.max(50),
                    "thread {t} event {i} of {}: step {} emulate {} (libc strand, slack \
                     {LIBC_SLACK}%)",
                    exe.display(),
                    a.1,
                    b.1
                );
            } else if let Some(expected) = expected {
                let diff = a.1 as i64 - b.1 as i64;
                eprintln!(
                    "edge strand: thread {t} event {i} of {}: step {} emulate {} ({diff:+}, \
                     this host's {expected:+})",
                    exe.display(),
                    a.1,
                    b.1,
                );
                assert!(
                    diff.abs_diff(expected) <= EDGE_TOLERANCE,
                    "thread {t} event {i} of {}: step {} emulate {}: {diff:+}, where this host's \
                     glibc start-up and exit differ by {expected:+} (+-{EDGE_TOLERANCE})",
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

/// How much more glibc's start-up strand and exit strand cost single-stepped on this CPU than
/// emulated, with the dispatch pinned: glibc's CPU identification (`init_cpu_features`, the
/// cache geometry from CPUID, the loader's platform name) runs other code on another CPU and no
/// tunable pins it. A constant per host and link kind, measured once per test process on
/// [`BARE_SRC`] (docs/emulation.md, "One glibc path on every host").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Edges {
    pub start: i64,
    pub exit: i64,
}

/// How far a fixture's edge strands may be from this host's [`Edges`]. The start-up's string
/// functions walk argv, the environment and paths at addresses that ASLR moves under ptrace
/// (not under QEMU), and their alignment changes their count: repeated runs of one program
/// spread by up to 56 instructions (PIE) and 11 (static) on the development host. The dynamic
/// loader's CPU-dependent work also depends on the program: PIE `fib` differs by +698 to +723
/// built by gcc, +522 by clang, the two-mark program +720. Twice the largest spread, ~200.
pub const EDGE_TOLERANCE: u64 = 400;

/// How a program is linked: the flags that build [`BARE_SRC`] so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum LinkKind {
    Static,
    StaticPie,
    Pie,
    Dynamic,
}

impl LinkKind {
    /// Read from the ELF header's type (`ET_EXEC` or `ET_DYN`) and whether the file names its
    /// loader (`PT_INTERP`).
    fn of(image: &Path) -> LinkKind {
        let bytes = std::fs::read(image).unwrap();
        let interp = b"/lib64/ld-linux-x86-64.so.2\0";
        let dynamic = bytes.windows(interp.len()).any(|w| w == interp);
        match (bytes[16] == 3, dynamic) {
            (false, false) => LinkKind::Static,
            (true, false) => LinkKind::StaticPie,
            (true, true) => LinkKind::Pie,
            (false, true) => LinkKind::Dynamic,
        }
    }

    fn flags(self) -> &'static [&'static str] {
        match self {
            LinkKind::Static => &["-static"],
            LinkKind::StaticPie => &["-static-pie", "-fPIE"],
            LinkKind::Pie => &["-fPIE", "-pie"],
            LinkKind::Dynamic => &["-no-pie"],
        }
    }
}

/// How far (percent) a strand that runs `dlopen` may be from single-stepping's: the loader
/// runs CPU-dependent code there too (+232 of 10,744 instructions, 2.2%, on the development
/// host), not calibrated.
pub const LIBC_SLACK: u64 = 10;

/// [`Edges`] of a program linked as `kind` on this host (measured once per kind).
fn host_edges(kind: LinkKind) -> Edges {
    static EDGES: std::sync::Mutex<Vec<(LinkKind, Edges)>> = std::sync::Mutex::new(Vec::new());
    let mut known = EDGES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, edges)) = known.iter().find(|(k, _)| *k == kind) {
        return edges;
    }
    let dir = tempfile::tempdir().unwrap();
    let [(s0, e0), (s1, e1)] = edge_strands(&bare(dir.path(), kind.flags()), false);
    let edges = Edges {
        start: s0 as i64 - e0 as i64,
        exit: s1 as i64 - e1 as i64,
    };
    eprintln!("this host's edges, {kind:?}: {edges:?}");
    known.push((kind, edges));
    edges
}

/// The edges of a run whose first mark is in `image`: the strand before it starts at the exec
/// of `image` (what ran before, a wrapper script's shell, is in the `Exec` event's cost).
pub fn edges_of(image: &Path) -> Edges {
    host_edges(LinkKind::of(image))
}

/// A program with two marks and nothing else: its first strand is glibc's start-up, its last
/// its exit path.
pub const BARE_SRC: &str = r#"#include "cilkview.h"
int main(void) {
    cv_region_begin("bare");
    cv_region_end("bare");
    return 0;
}"#;

/// [`BARE_SRC`] built with `flags` (a link kind) into `dir`.
pub fn bare(dir: &Path, flags: &[&str]) -> PathBuf {
    let include = format!("-I{}", cilkview_fixtures::include_dir().display());
    let flags: Vec<&str> = [&["-O2", include.as_str()], flags].concat();
    cilkview_fixtures::compile_into(dir, "bare", BARE_SRC, &flags)
}

/// The start-up and exit strands of `exe` single-stepped and emulated: (step, emulate) each.
pub fn edge_strands(exe: &Path, host_dispatch: bool) -> [(u64, u64); 2] {
    let mut o = opts(exe, &[]);
    o.host_dispatch = host_dispatch;
    let (_, se, _) = traced(false, &o);
    let (_, ee, _) = traced(true, &o);
    let (s, e) = (per_thread(&se), per_thread(&ee));
    let last = |t: &Vec<Vec<(u64, u64, Option<u64>)>>| t[0].last().unwrap().1;
    [(s[0][0].1, e[0][0].1), (last(&s), last(&e))]
}
