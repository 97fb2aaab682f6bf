//! The emulation backend against single-stepping: the same probes hit in the
//! same order, with the same cost for every strand between two marks, on the
//! same binaries. The strands that run glibc's CPU-dependent code (start-up
//! before the first mark, the exit path after the last) are compared as far
//! as the CPUs agree: see `compare`.
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, skip, BuildOptions};
use cilkview_tracer::{
    emulator_available, run, CounterMode, EmulationNotes, EventSink, ExitStatus, Outcome, Probe,
    TraceError, TraceEvent, TraceOptions,
};
use common::*;

fn have_qemu() -> bool {
    match emulator_available() {
        Ok(_) => true,
        Err(why) => {
            skip(format!("emulation tests: {why}"));
            false
        }
    }
}

/// The closure pair of these tests as the backend's event sink.
struct Sink<P, F>(P, F);

impl<P, F> EventSink for Sink<P, F>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, String> {
        (self.0)(image)
    }
    fn event(&mut self, event: TraceEvent) {
        (self.1)(event)
    }
}

fn run_emulated_with_notes<P, F>(
    o: &TraceOptions,
    probes_for: P,
    on_event: F,
) -> Result<(Outcome, EmulationNotes), TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    cilkview_tracer::run_emulated(o, &mut Sink(probes_for, on_event))
}

fn run_emulated<P, F>(o: &TraceOptions, probes_for: P, on_event: F) -> Result<Outcome, TraceError>
where
    P: FnMut(&Path) -> Result<Vec<Probe>, String>,
    F: FnMut(TraceEvent),
{
    run_emulated_with_notes(o, probes_for, on_event).map(|(o, _)| o)
}

fn opts(exe: &Path, args: &[&str]) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: args.iter().map(Into::into).collect(),
        counter: CounterMode::Step,
        bind_cpu: true,
    }
}

/// The probes of any image, from its `.cilkview_marks` (none for unmarked or unreadable files).
fn marks_of(img: &Path) -> Result<Vec<Probe>, String> {
    Ok(match cilkview_marks::read_marks(img) {
        Ok(m) => m
            .marks
            .iter()
            .map(|k| Probe::new(k.offset(&m), k.operand))
            .collect(),
        Err(_) => vec![],
    })
}

type Run = (Outcome, Vec<TraceEvent>, Vec<PathBuf>);

fn traced(emulated: bool, o: &TraceOptions) -> Run {
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
    assert_costs_add_up(out.total_instructions, &ev);
    (out, ev, calls)
}

/// Per thread (in order of first appearance): its events as (probe or
/// u64::MAX for the exit, cost, operand).
fn per_thread(ev: &[TraceEvent]) -> Vec<Vec<(u64, u64, Option<u64>)>> {
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
fn compare(exe: &Path, args: &[&str], slack: u64) -> (u64, u64) {
    compare_with(exe, args, slack, &[])
}

/// [`compare`], where the strands ending at the probes `libc_strands` also
/// run CPU-dependent glibc code (e.g. `dlopen`) and get the same slack.
fn compare_with(exe: &Path, args: &[&str], slack: u64, libc_strands: &[u64]) -> (u64, u64) {
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
    (so.total_instructions, eo.total_instructions)
}

/// glibc's start-up and exit paths differ between this host's CPU and the
/// emulated one (CPU feature and cache probing, string-function variants):
/// the edge strands may differ by this many percent.
const EDGE_SLACK: u64 = 10;

#[test]
fn known_fixtures_equal_step() {
    if !have_qemu() {
        return;
    }
    for fixture in ["known_spawn", "known_regions", "known_scope", "known_loop"] {
        for compiler in cilkview_fixtures::test_compilers() {
            for opt in [0, 2] {
                let exe = build(
                    fixture,
                    &BuildOptions::default()
                        .compiler(compiler)
                        .opt(opt)
                        .static_link(),
                );
                let (s, e) = compare(&exe, &[], EDGE_SLACK);
                println!("{fixture} {compiler} -O{opt}: step {s} emulate {e}");
            }
        }
    }
}

#[test]
fn fib_link_kinds_equal_step() {
    if !have_qemu() {
        return;
    }
    let kinds: [(&str, BuildOptions); 4] = [
        ("static", BuildOptions::default().static_link()),
        (
            "static-pie",
            BuildOptions::default().static_link().pie(true),
        ),
        ("pie", BuildOptions::default()),
        ("dynamic", BuildOptions::default().no_pie()),
    ];
    for compiler in cilkview_fixtures::test_compilers() {
        for (name, kind) in &kinds {
            for opt in [0, 2] {
                let exe = build("fib", &kind.clone().compiler(compiler).opt(opt));
                let (s, e) = compare(&exe, &["7"], EDGE_SLACK);
                println!("fib 7 {compiler} {name} -O{opt}: step {s} emulate {e}");
            }
        }
    }
}

#[test]
fn loop_grain_operand_is_exact() {
    if !have_qemu() {
        return;
    }
    for compiler in cilkview_fixtures::test_compilers() {
        for opt in [0, 2] {
            let exe = build(
                "known_loop",
                &BuildOptions::default()
                    .compiler(compiler)
                    .opt(opt)
                    .static_link(),
            );
            for grain in ["1", "3", "8", "123456789"] {
                let (_, ev, _) = traced(true, &opts(&exe, &[grain]));
                let ops: Vec<u64> = ev
                    .iter()
                    .filter_map(|e| match *e {
                        TraceEvent::Hit {
                            operand: Some(v), ..
                        } => Some(v),
                        _ => None,
                    })
                    .collect();
                assert_eq!(
                    ops,
                    vec![grain.parse::<u64>().unwrap()],
                    "{compiler} -O{opt}"
                );
            }
            compare(&exe, &["5"], EDGE_SLACK);
        }
    }
}

/// The register is read where the mark is, even when the block after it rewrites it.
#[test]
fn operand_is_the_value_at_the_mark() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include "cilkview.h"
int main(int argc, char **argv) {
    unsigned long g = 1000 + argc;
    for (int k = 0; k < 50; k++) {
        cv_for_grain(g + k, int i = 0; i < 2; i++) { __asm__ volatile("" ::: "memory"); }
        __asm__ volatile("mov $77, %%rax\n\tmov $88, %%rax" ::: "rax");
    }
    return 0;
}"#,
        &[
            &format!("-I{}", cilkview_fixtures::include_dir().display()),
            "-O2",
        ],
    );
    let (_, ev, _) = traced(true, &opts(&p.exe, &[]));
    let ops: Vec<u64> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Hit {
                operand: Some(v), ..
            } => Some(v),
            _ => None,
        })
        .collect();
    assert_eq!(ops, (0..50).map(|k| 1001 + k).collect::<Vec<u64>>());
}

#[test]
fn loop_cost_and_rep_string_are_exact() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
char buf[4096];
int main(void) {
    PROBE(probe_a);
    __asm__ volatile("mov $1000,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(probe_b);
    __asm__ volatile("lea buf(%%rip),%%rdi\nmov $1000,%%rcx\nxor %%eax,%%eax\nrep stosb" ::: "rdi", "rcx", "rax", "memory", "cc");
    PROBE(probe_c);
    __asm__ volatile("lea buf(%%rip),%%rdi\nxor %%ecx,%%ecx\nrep stosb\nrep stosb" ::: "rdi", "rcx", "rax", "memory", "cc");
    PROBE(probe_d);
    return 3;
}"#,
        &[],
    );
    let probes = probes(
        &p.exe,
        &[
            ("probe_a", None),
            ("probe_b", None),
            ("probe_c", None),
            ("probe_d", None),
        ],
    );
    let mut ev = vec![];
    let out = run_emulated(
        &opts(&p.exe, &[]),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(3));
    let costs: Vec<u64> = ev
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Hit { cost, .. } => Some(cost),
            _ => None,
        })
        .skip(1)
        .collect();
    assert_eq!(
        costs,
        vec![2002, 5, 5],
        "loop; lea+mov+xor+rep stosb once; lea+xor+2 empty reps"
    );
    assert_costs_add_up(out.total_instructions, &ev);
}

const THREADS_SRC: &str = r#"
#include <pthread.h>
static void *work(void *arg) {
    long n = (long)arg;
    PROBE(probe_t);
    __asm__ volatile("mov %0,%%rcx\n1: dec %%rcx\njnz 1b" :: "r"(n) : "rcx", "cc");
    PROBE(probe_t_end);
    __asm__ volatile("mov $300,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    return arg;
}
int main(void) {
    pthread_t t[3];
    for (long i = 0; i < 3; i++) pthread_create(&t[i], 0, work, (void *)(100 * (i + 1)));
    work((void *)50);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    return 0;
}"#;

#[test]
fn threads_count_each_thread_exactly() {
    if !have_qemu() {
        return;
    }
    let p = compile(THREADS_SRC, &["-pthread"]);
    let probes = probes(&p.exe, &[("probe_t", None), ("probe_t_end", None)]);
    for _ in 0..5 {
        let mut ev = vec![];
        let out = run_emulated(
            &opts(&p.exe, &[]),
            |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
            |e| ev.push(e),
        )
        .unwrap();
        assert_eq!(out.threads, 4);
        assert_costs_add_up(out.total_instructions, &ev);
        let mut strands: Vec<u64> = ev
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::Hit { probe: 1, cost, .. } => Some(cost),
                _ => None,
            })
            .collect();
        strands.sort();
        assert_eq!(
            strands,
            vec![102, 202, 402, 602],
            "nop + mov + n*(dec+jnz) per thread"
        );
        let starts = ev
            .iter()
            .filter(|e| matches!(e, TraceEvent::ThreadStart { .. }))
            .count();
        let exits = ev
            .iter()
            .filter(|e| matches!(e, TraceEvent::ThreadExit { .. }))
            .count();
        assert_eq!((starts, exits), (3, 4));
    }
}

#[test]
fn forked_child_runs_unharmed() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    pid_t c = fork();
    PROBE(probe_c);
    if (c == 0) _exit(9);
    int st = 0;
    waitpid(c, &st, 0);
    PROBE(probe_d);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_c", None), ("probe_d", None)]);
    let mut ev = vec![];
    let (out, notes) = run_emulated_with_notes(
        &opts(&p.exe, &[]),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(
        out.status,
        ExitStatus::Exited(9),
        "the child ran and exited 9"
    );
    assert_eq!(out.hits, 2, "only the parent is counted: {ev:?}");
    assert_eq!(notes.forked_children.len(), 1);
    assert!(
        out.counter.reason.contains("forked"),
        "{}",
        out.counter.reason
    );
}

#[test]
fn exec_is_reported_not_miscounted() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <unistd.h>
int main(void) {
    PROBE(probe_a);
    execl("/bin/sh", "sh", "-c", "exit 4", (char *)0);
    return 1;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_a", None)]);
    let mut ev = vec![];
    let (out, notes) = run_emulated_with_notes(
        &opts(&p.exe, &[]),
        |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(4));
    assert_eq!(notes.native_exec.as_deref(), Some(Path::new("/bin/sh")));
    assert!(
        out.counter.reason.contains("natively"),
        "{}",
        out.counter.reason
    );
    assert_costs_add_up(out.total_instructions, &ev);
}

#[test]
fn signals_and_exit_status_pass_through() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"
#include <signal.h>
#include <unistd.h>
static volatile int got;
static void on_usr1(int s) { PROBE(probe_handler); got = s; }
int main(int argc, char **argv) {
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    PROBE(probe_after);
    if (argc > 1) kill(getpid(), SIGTERM);
    return got == SIGUSR1 ? 5 : 1;
}"#,
        &[],
    );
    let probes = probes(&p.exe, &[("probe_handler", None), ("probe_after", None)]);
    for (args, status) in [
        (vec![], ExitStatus::Exited(5)),
        (vec!["x"], ExitStatus::Signaled(15)),
    ] {
        let mut ev = vec![];
        let out = run_emulated(
            &opts(&p.exe, &args),
            |img| Ok(if img == p.exe { probes.clone() } else { vec![] }),
            |e| ev.push(e),
        )
        .unwrap();
        assert_eq!(out.status, status);
        let hits: Vec<usize> = ev
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::Hit { probe, .. } => Some(probe),
                _ => None,
            })
            .collect();
        assert_eq!(hits, vec![0, 1]);
    }
}

#[test]
fn programs_the_emulator_cannot_run_are_one_clear_error() {
    if !have_qemu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = run_emulated(&opts(&script, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(e.to_string().contains("--counter step"), "{e}");
    if cilkview_fixtures::has_tool("gcc") {
        let c = dir.path().join("m32.c");
        std::fs::write(&c, "int main(void){return 0;}").unwrap();
        let exe = dir.path().join("m32");
        let ok = std::process::Command::new("gcc")
            .args(["-m32", "-o"])
            .arg(&exe)
            .arg(&c)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if ok {
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit") && e.to_string().contains("--counter step"),
                "{e}"
            );
        } else {
            // No 32-bit libc here: an x86-64 program whose ELF header says ELFCLASS32.
            let src = build("serial", &BuildOptions::default());
            let mut bytes = std::fs::read(&src).unwrap();
            bytes[4] = 1;
            std::fs::write(&exe, bytes).unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            let e = run_emulated(&opts(&exe, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
            assert!(
                e.to_string().contains("32-bit") && e.to_string().contains("--counter step"),
                "{e}"
            );
        }
    }
    let missing = dir.path().join("nope");
    let e = run_emulated(&opts(&missing, &[]), |_| Ok(vec![]), |_| {}).unwrap_err();
    assert!(matches!(e, cilkview_tracer::TraceError::Exec { .. }), "{e}");
}

/// `work(n)`: a loop of 3 iterations with grain `n` (the operand), each of 2002 instructions.
const LIBWORK: &str = r#"
#include "cilkview.h"
#include "work.h"
void work(long n) {
    cv_for_grain(n, int i = 0; i < 3; i++) { CV_WORK(1000); }
}"#;

fn include_flags() -> Vec<String> {
    vec![
        format!("-I{}", cilkview_fixtures::include_dir().display()),
        format!("-I{}", cilkview_fixtures::fixtures_dir().display()),
    ]
}

/// Marks in a `DT_NEEDED` library and in a library loaded (twice) by `dlopen`:
/// the same `probes_for` calls in the same order (hence the same numbering),
/// the same hits, operands and strand costs as single-stepping.
#[test]
fn library_marks_equal_step() {
    if !have_qemu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inc = include_flags();
    let mut lib_flags: Vec<&str> = vec!["-shared", "-fPIC"];
    lib_flags.extend(inc.iter().map(String::as_str));
    compile_into(dir.path(), "libwork.so", LIBWORK, &lib_flags);
    let d = dir.path().to_str().unwrap();
    let rpath = format!("-Wl,-rpath,{d}");
    let linked = compile_into(
        dir.path(),
        "linked",
        r#"
#include <stdio.h>
void work(long);
int main(int argc, char **argv) {
    work(7);
    work(argc + 7);
    printf("done\n");
    return 5;
}"#,
        &["-L", d, "-lwork", &rpath],
    );
    let (s, e) = compare(&linked, &[], EDGE_SLACK);
    println!("DT_NEEDED: step {s} emulate {e}");
    let mut main_flags: Vec<&str> = vec!["-ldl"];
    main_flags.extend(inc.iter().map(String::as_str));
    let opened = compile_into(
        dir.path(),
        "opened",
        r#"
#include <dlfcn.h>
#include <stdio.h>
#include "cilkview.h"
int main(int argc, char **argv) {
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
        void (*w)(long) = (void (*)(long))dlsym(h, "work");
        cv_region_begin("call");
        w(100 + round);
        cv_region_end("call");
        dlclose(h);
    }
    return 6;
}"#,
        &main_flags,
    );
    let lib = dir.path().join("libwork.so");
    // The strands that end at the region's begin run dlclose and dlopen.
    let marks = cilkview_marks::read_marks(&opened).unwrap().marks;
    let begin = marks
        .iter()
        .position(|m| m.kind == cilkview_marks::MarkKind::RegionBegin)
        .unwrap() as u64;
    let (s, e) = compare_with(&opened, &[lib.to_str().unwrap()], EDGE_SLACK, &[begin]);
    println!("dlopen: step {s} emulate {e}");
}

fn callgrind_instructions(exe: &Path, args: &[&str]) -> Option<u64> {
    let out = std::process::Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .args(args)
        .output()
        .ok()?;
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| l.contains("Collected :"))?;
    line.rsplit(':').next()?.trim().parse().ok()
}

/// The whole run's work against callgrind's count of the same program.
#[test]
fn total_within_one_percent_of_callgrind() {
    if !have_qemu() {
        return;
    }
    for (name, kind) in [
        ("static", BuildOptions::default().opt(2).static_link()),
        ("dynamic", BuildOptions::default().opt(2)),
    ] {
        let exe = build("fib", &kind);
        // fib 27: ~6 * 10^6 instructions, so that the start-up paths that differ (callgrind
        // preloads its own libraries: ~17,000 instructions) stay well under 1%.
        let Some(expected) = callgrind_instructions(&exe, &["27"]) else {
            skip("the callgrind comparison: valgrind not available");
            return;
        };
        let (out, _, _) = traced(true, &opts(&exe, &["27"]));
        let got = out.total_instructions;
        println!("fib 27 {name}: emulate {got}, callgrind {expected}");
        assert!(expected >= 1_000_000, "a run of at least 10^6 instructions");
        assert!(
            got.abs_diff(expected) * 100 <= expected,
            "{name}: emulate {got} vs callgrind {expected}"
        );
    }
}
