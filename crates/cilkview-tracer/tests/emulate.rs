//! The emulation backend against single-stepping: the same probes hit in the
//! same order, with the same cost for every strand between two marks, on the
//! same binaries, glibc's dispatch pinned to the emulated CPU's. The strands
//! that run glibc's CPU identification (start-up before the first mark, the
//! exit path after the last) differ by this host's constant: see `compare`.
mod common;

use std::path::Path;

use cilkview_fixtures::{build, skip, BuildOptions};
use cilkview_tracer::{ExitStatus, TraceEvent};
use common::emulated::*;
use common::*;

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
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
                let (s, e) = compare(&exe, &[]);
                println!("{fixture} {compiler} -O{opt}: step {s} emulate {e}");
            }
        }
    }
}

/// A wrapper script that execs the program (as pyenv's shims, libtool's wrappers, `env`):
/// the emulator runs the script's interpreter and follows its exec, as single-stepping does.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn wrapper_script_and_exec_chain_equal_step() {
    if !have_qemu() {
        return;
    }
    let exe = build("known_spawn", &BuildOptions::default().static_link());
    let dir = tempfile::tempdir().unwrap();
    let wrapper = dir.path().join("wrapper.sh");
    // The shell execs env, which execs the program: two execs followed.
    write_executable(
        &wrapper,
        format!(
            "#!/bin/sh\nexec /usr/bin/env CILKVIEW_WRAPPED=1 {}\n",
            exe.display()
        ),
    );
    // The first strand starts at the program's exec (sh's and env's runs are the execs' costs).
    let (s, e) = compare_with(&wrapper, &[], edges_of(&exe), &[]);
    println!("wrapper of known_spawn: step {s} emulate {e}");
}

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
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
                let (s, e) = compare(&exe, &["7"]);
                println!("fib 7 {compiler} {name} -O{opt}: step {s} emulate {e}");
            }
        }
    }
}

#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
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
            compare(&exe, &["5"]);
        }
    }
}

/// The register is read where the mark is, even when the block after it rewrites it.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
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
#[ignore = "slow: traces compiled programs under QEMU"]
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
    assert_costs_add_up(out.total_cost, &ev);
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
#[ignore = "slow: traces compiled programs under QEMU"]
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
        assert_costs_add_up(out.total_cost, &ev);
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
        // From a thread's start to its first mark every new thread runs the same code
        // (glibc's start_thread, then work): the same count, whether it was created while
        // the program had one thread (the plugin then leaves its inline counting, see
        // counting.c) or later.
        let firsts: Vec<u64> = ev
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::ThreadStart { tid } => ev.iter().find_map(|h| match *h {
                    TraceEvent::Hit {
                        tid: t,
                        probe: 0,
                        cost,
                        ..
                    } if t == tid => Some(cost),
                    _ => None,
                }),
                _ => None,
            })
            .collect();
        assert_eq!(firsts.len(), 3);
        assert!(firsts[0] > 0, "{firsts:?}");
        assert!(firsts.iter().all(|&c| c == firsts[0]), "{firsts:?}");
    }
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
#[ignore = "slow: traces compiled programs under QEMU"]
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
    let (s, e) = compare(&linked, &[]);
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
    let (s, e) = compare_with(
        &opened,
        &[lib.to_str().unwrap()],
        edges_of(&opened),
        &[begin],
    );
    println!("dlopen: step {s} emulate {e}");
}

fn callgrind_instructions(exe: &Path, args: &[&str]) -> Option<u64> {
    let out = cilkview_fixtures::command("valgrind")
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
#[ignore = "slow: traces compiled programs under QEMU"]
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
        let got = out.total_cost;
        println!("fib 27 {name}: emulate {got}, callgrind {expected}");
        assert!(expected >= 1_000_000, "a run of at least 10^6 instructions");
        assert!(
            got.abs_diff(expected) * 100 <= expected,
            "{name}: emulate {got} vs callgrind {expected}"
        );
    }
}

/// Strands that call glibc's CPU-dispatched string functions, at sizes where glibc 2.36's
/// choices part: 3,000 and 6,000 bytes (copied by `rep movsb` above 2,112 bytes on a CPU with
/// FSRM, by the vector loop up to 8,192 on the emulated Haswell), 700,000 (above an AMD L2's
/// size, where AMD stops using `rep movsb`), misaligned by argc.
const LIBC_STRANDS_SRC: &str = r#"#include <string.h>
#include "cilkview.h"
static char src[1 << 20], dst[1 << 20];
int main(int argc, char **argv) {
    static const unsigned long sizes[] = {100, 3000, 6000, 65536, 700000};
    unsigned long sum = 0;
    memset(src, 'a', sizeof src - 1);
    for (int i = 0; i < 5; i++) {
        volatile unsigned long n = sizes[i];
        cv_region_begin("strings");
        memcpy(dst + argc, src, n);
        memset(dst, i, n);
        sum += strlen(src + sizeof src - 1 - n);
        sum += (unsigned long)memchr(src + argc, 'b', n);
        sum += memcmp(dst + 1, dst, n) != 0;
        cv_region_end("strings");
    }
    return sum == 0;
}"#;

/// Whether glibc 2.36 picks other string-function paths on this CPU than on the emulated one,
/// and why (`/proc/cpuinfo`: FSRM, AVX-512 VL, or an AMD CPU).
fn host_dispatch_differs() -> Option<&'static str> {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    if has("avx512vl") {
        Some("AVX-512 VL: the evex variants")
    } else if has("fsrm") {
        Some("FSRM: rep movsb from 2,112 bytes")
    } else if info.contains("AuthenticAMD") {
        Some("an AMD CPU: rep movsb stops at the L2's size")
    } else {
        None
    }
}

/// With the dispatch pinned, every strand that calls `memcpy`, `memset`, `strlen`, `memchr`
/// and `memcmp` counts the same under ptrace on this CPU as emulated; with `--host-dispatch`
/// (this CPU's own choices) they differ where this CPU makes other choices than the emulated
/// one (here: FSRM and an AMD CPU; on an AVX-512 host: the evex variants).
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn pinned_dispatch_makes_libc_strands_equal() {
    if !have_qemu() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let inc = include_flags();
    for (name, link) in [("static", &["-static"][..]), ("dynamic", &[][..])] {
        let mut flags: Vec<&str> = vec!["-O2"];
        flags.extend(link);
        flags.extend(inc.iter().map(String::as_str));
        let exe = compile_into(dir.path(), name, LIBC_STRANDS_SRC, &flags);
        // Pinned: the strands between marks equal, the edges this host's.
        let (s, e) = compare(&exe, &[]);
        println!("{name}, pinned: step {s} emulate {e}");
        let Some(why) = host_dispatch_differs() else {
            skip("--host-dispatch's difference: glibc picks the emulated CPU's paths here");
            continue;
        };
        let mut o = opts(&exe, &[]);
        o.host_dispatch = true;
        let inner = |emulated| {
            let (_, ev, _) = traced(emulated, &o);
            let t = per_thread(&ev).remove(0);
            t[1..t.len() - 1].iter().map(|x| x.1).collect::<Vec<u64>>()
        };
        let (s, e) = (inner(false), inner(true));
        println!("{name}, --host-dispatch ({why}): step {s:?} emulate {e:?}");
        assert_eq!(s.len(), e.len());
        assert_ne!(
            s, e,
            "{name}: this CPU ({why}) takes other paths than the emulated one"
        );
    }
}

/// The program's environment: the same pinned GLIBC_TUNABLES under ptrace and under the
/// emulator (a value with commas, which QEMU's -E cannot pass), merged with the user's own;
/// the user's alone with `host_dispatch`; the counter's reason says which.
#[test]
#[ignore = "slow: traces compiled programs under QEMU"]
fn the_program_sees_one_pinned_environment() {
    if !have_qemu() {
        return;
    }
    let p = compile(
        r#"#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "w");
    fputs(getenv("GLIBC_TUNABLES") ? getenv("GLIBC_TUNABLES") : "(unset)", f);
    return fclose(f);
}"#,
        &[],
    );
    let out = p.dir.path().join("seen");
    let seen = |emulated: bool, host_dispatch: bool| {
        let mut o = opts(&p.exe, &[out.to_str().unwrap()]);
        o.host_dispatch = host_dispatch;
        o.env = vec![("GLIBC_TUNABLES".into(), "glibc.malloc.arena_max=2".into())];
        let (outcome, _, _) = traced(emulated, &o);
        assert_eq!(outcome.status, ExitStatus::Exited(0));
        (
            std::fs::read_to_string(&out).unwrap(),
            outcome.counter.says(),
        )
    };
    let (step, step_reason) = seen(false, false);
    let (emulated, emulated_reason) = seen(true, false);
    assert_eq!(step, emulated);
    assert!(step.starts_with("glibc.cpu.hwcaps=-AVX512F,"), "{step}");
    assert!(step.ends_with(":glibc.malloc.arena_max=2"), "{step}");
    for reason in [step_reason, emulated_reason] {
        assert!(reason.contains("glibc dispatch pinned"), "{reason}");
    }
    for emulated in [false, true] {
        let (value, reason) = seen(emulated, true);
        assert_eq!(value, "glibc.malloc.arena_max=2");
        assert!(reason.contains("not pinned (--host-dispatch)"), "{reason}");
    }
}
