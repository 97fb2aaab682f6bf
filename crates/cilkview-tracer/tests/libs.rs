//! Marks in shared libraries: a marked `libwork.so` linked by an unmarked
//! program (`DT_NEEDED`), loaded by `dlopen`, present at attach time, and a
//! forked child of a program with patched library probes.
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cilkview_tracer::{
    attach, attach_breakpoints_only, run, run_breakpoints_only, AttachOptions, CounterMode, Ending,
    ExitStatus, Probe, StopFlag, TraceEvent, TraceOptions,
};
use common::*;

/// `work(n)`: a probe reading `n` (rdi), a 1000-iteration loop, a probe.
const LIBWORK: &str = r#"
void work(long n) {
    PROBE_RDI(lib_begin, n);
    __asm__ volatile("mov $1000,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(lib_end);
}"#;

struct Built {
    _dir: tempfile::TempDir,
    lib: PathBuf,
    exe: PathBuf,
    /// The probes of `libwork.so`: lib_begin (operand rdi), lib_end.
    lib_probes: Vec<Probe>,
}

/// Build `libwork.so` and the program `main_src`, linked against it
/// (`DT_NEEDED`, found through an rpath) if `link` is set.
fn build(main_src: &str, link: bool) -> Built {
    let dir = tempfile::tempdir().unwrap();
    let lib = compile_into(dir.path(), "libwork.so", LIBWORK, &["-shared", "-fPIC"]);
    let d = dir.path().to_str().unwrap();
    let rpath = format!("-Wl,-rpath,{d}");
    let mut args = vec!["-ldl"];
    if link {
        args = vec!["-L", d, "-lwork", &rpath, "-ldl"];
    }
    let exe = compile_into(dir.path(), "prog", main_src, &args);
    let lib_probes = probes(&lib, &[("lib_begin", Some(5)), ("lib_end", None)]);
    Built {
        _dir: dir,
        lib,
        exe,
        lib_probes,
    }
}

/// A `probes_for` callback and what it saw: the paths in call order, and for
/// each call the index its vector starts at (numbering of the current image).
#[derive(Default)]
struct Calls {
    paths: Vec<PathBuf>,
    starts: Vec<usize>,
    next: usize,
}

impl Calls {
    fn answer(&mut self, img: &Path, b: &Built, exe_probes: &[Probe]) -> Vec<Probe> {
        let v = if img == b.exe {
            self.next = 0; // a new image: the numbering restarts
            exe_probes.to_vec()
        } else if img == b.lib {
            b.lib_probes.clone()
        } else {
            vec![]
        };
        self.paths.push(img.to_path_buf());
        self.starts.push(self.next);
        self.next += v.len();
        v
    }

    /// Start indices of the calls for `path`.
    fn starts_of(&self, path: &Path) -> Vec<usize> {
        self.paths
            .iter()
            .zip(&self.starts)
            .filter(|(p, _)| *p == path)
            .map(|(_, &s)| s)
            .collect()
    }

    fn check_common(&self, b: &Built) {
        assert_eq!(self.paths[0], b.exe, "{:?}", self.paths);
        assert!(
            self.paths
                .iter()
                .any(|p| p.to_string_lossy().contains("ld-linux")),
            "the dynamic loader is passed too: {:?}",
            self.paths
        );
        assert!(
            self.paths
                .iter()
                .any(|p| p.to_string_lossy().contains("libc.so")),
            "{:?}",
            self.paths
        );
        assert!(
            !self
                .paths
                .iter()
                .any(|p| p.to_string_lossy().contains("vdso")),
            "{:?}",
            self.paths
        );
    }
}

fn hits(events: &[TraceEvent]) -> Vec<(usize, u64, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Hit {
                probe,
                cost,
                operand,
                ..
            } => Some((probe, cost, operand)),
            _ => None,
        })
        .collect()
}

fn opts(exe: &Path, args: &[&str], mode: CounterMode) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: args.iter().map(|a| a.into()).collect(),
        counter: mode,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    }
}

/// (a) An unmarked program linked against a marked library: the library's
/// probes are hit with the right indices and operands; in step mode the
/// strand around the loop is exact.
#[test]
#[ignore = "slow: traces compiled programs"]
fn linked_library_probes_are_hit() {
    let b = build(
        r#"
#include <stdio.h>
void work(long);
int main(int argc, char **argv) {
    work(7);
    work(argc + 7);
    printf("done\n");
    return 5;
}"#,
        true,
    );
    for step in [false, true] {
        let mut calls = Calls::default();
        let mut ev = vec![];
        let o = opts(&b.exe, &[], CounterMode::Step);
        let out = if step {
            run(&o, |img| Ok(calls.answer(img, &b, &[])), |e| ev.push(e))
        } else {
            run_breakpoints_only(&o, |img| Ok(calls.answer(img, &b, &[])), |e| ev.push(e))
        }
        .unwrap();
        eprintln!("step={step} calls={:?}", calls.paths);
        assert_eq!(out.status, ExitStatus::Exited(5));
        calls.check_common(&b);
        let s = calls.starts_of(&b.lib);
        assert_eq!(s.len(), 1, "libwork asked for once: {:?}", calls.paths);
        let s = s[0];
        let h = hits(&ev);
        assert_eq!(
            h.iter().map(|h| (h.0, h.2)).collect::<Vec<_>>(),
            vec![(s, Some(7)), (s + 1, None), (s, Some(8)), (s + 1, None)],
            "step={step}"
        );
        if step {
            assert_eq!(h[1].1, 2002, "nop + mov + 1000*(dec+jnz)");
            assert_eq!(h[3].1, 2002);
            assert_costs_add_up(out.total_cost, &ev);
        }
        // The Exec event follows the calls made at the exec (program, loader).
        assert!(matches!(ev[0], TraceEvent::Exec { image: 0, .. }));
    }
}

/// (b) The library loaded by `dlopen` (twice, with a `dlclose` between):
/// hits after each load, new indices for the second load.
#[test]
#[ignore = "slow: traces compiled programs"]
fn dlopened_library_probes_are_hit() {
    let b = build(
        r#"
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    PROBE(main_probe);
    for (int round = 0; round < 2; round++) {
        void *h = dlopen(argv[1], RTLD_NOW);
        if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
        void (*w)(long) = (void (*)(long))dlsym(h, "work");
        w(100 + round);
        PROBE(main_probe2);
        dlclose(h);
    }
    return 6;
}"#,
        false,
    );
    let exe_probes = probes(&b.exe, &[("main_probe", None), ("main_probe2", None)]);
    let lib = b.lib.to_str().unwrap().to_string();
    for step in [false, true] {
        let mut calls = Calls::default();
        let mut ev = vec![];
        let o = opts(&b.exe, &[&lib], CounterMode::Step);
        let out = if step {
            run(
                &o,
                |img| Ok(calls.answer(img, &b, &exe_probes)),
                |e| ev.push(e),
            )
        } else {
            run_breakpoints_only(
                &o,
                |img| Ok(calls.answer(img, &b, &exe_probes)),
                |e| ev.push(e),
            )
        }
        .unwrap();
        eprintln!("step={step} calls={:?}", calls.paths);
        assert_eq!(out.status, ExitStatus::Exited(6));
        calls.check_common(&b);
        let s = calls.starts_of(&b.lib);
        assert_eq!(s.len(), 2, "one call per load: {:?}", calls.paths);
        assert!(s[0] >= 2 && s[1] >= s[0] + 2, "indices never reused: {s:?}");
        let h = hits(&ev);
        assert_eq!(
            h.iter().map(|h| (h.0, h.2)).collect::<Vec<_>>(),
            vec![
                (0, None),
                (s[0], Some(100)),
                (s[0] + 1, None),
                (1, None),
                (s[1], Some(101)),
                (s[1] + 1, None),
                (1, None)
            ],
            "step={step}"
        );
        if step {
            assert_eq!(h[2].1, 2002);
            assert_eq!(h[5].1, 2002);
            assert_costs_add_up(out.total_cost, &ev);
        }
    }
}

/// (c) int3 path: a forked child passes over the library's probes and the
/// loader hook (it `dlopen`s) and must run unharmed.
#[test]
#[ignore = "slow: traces compiled programs"]
fn forked_child_of_patched_library_runs_unharmed() {
    let b = build(
        r#"
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
void work(long);
int main(void) {
    work(1);
    pid_t c = fork();
    if (c == 0) {
        work(2);
        void *h = dlopen("libm.so.6", RTLD_NOW);
        _exit(h ? 9 : 8);
    }
    int st = 0;
    waitpid(c, &st, 0);
    work(3);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}"#,
        true,
    );
    let mut calls = Calls::default();
    let mut ev = vec![];
    let out = run_breakpoints_only(
        &opts(&b.exe, &[], CounterMode::Hardware),
        |img| Ok(calls.answer(img, &b, &[])),
        |e| ev.push(e),
    )
    .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(9), "child unharmed: {ev:?}");
    let s = calls.starts_of(&b.lib)[0];
    let ops: Vec<_> = hits(&ev).iter().filter(|h| h.0 == s).map(|h| h.2).collect();
    assert_eq!(ops, vec![Some(1), Some(3)], "only the parent is traced");
}

const TICKER: &str = r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
void work(long);
int main(int argc, char **argv) {
    int ticks = atoi(argv[1]);
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 0; i < ticks; i++) {
        work(i);
        printf("tick %d\n", i);
        usleep(100000);
    }
    /* After the detach: the loader hook must be gone. */
    void *h = dlopen("libm.so.6", RTLD_NOW);
    double (*c)(double) = (double (*)(double))dlsym(h, "cos");
    printf("cos %.3f\n", c(0.0));
    return 7;
}"#;

/// (d) Attach to a process that already has the library loaded: hits are
/// reported with the library's indices; after the detach the program
/// (which then `dlopen`s) finishes exactly as an unattached run.
#[test]
#[ignore = "slow: traces compiled programs"]
fn attach_finds_loaded_library_and_detach_restores_it() {
    let b = build(TICKER, true);
    let reference = cilkview_fixtures::command(&b.exe)
        .arg("16")
        .output()
        .unwrap();
    let reference = format!(
        "{}status={}\n",
        String::from_utf8_lossy(&reference.stdout),
        reference.status.code().unwrap()
    );
    for step in [false, true] {
        let (child, pid, _d) = start(&b.exe, &["16"]);
        std::thread::sleep(Duration::from_millis(150)); // past the start-up
        let stop = StopFlag::new();
        let o = AttachOptions {
            pid,
            counter: CounterMode::Step,
            // Two ticks' worth and more even when single-stepping on a loaded host (450 ms
            // once saw one and a half), well before the program's 1.6 s end.
            duration: Some(Duration::from_millis(900)),
            stop: stop.clone(),
        };
        let mut calls = Calls::default();
        let mut ev = vec![];
        let out = if step {
            attach(&o, |img| Ok(calls.answer(img, &b, &[])), |e| ev.push(e))
        } else {
            attach_breakpoints_only(&o, |img| Ok(calls.answer(img, &b, &[])), |e| ev.push(e))
        }
        .unwrap();
        assert_eq!(out.ending, Ending::TimeUp);
        calls.check_common(&b);
        let s = calls.starts_of(&b.lib);
        assert_eq!(s.len(), 1, "{:?}", calls.paths);
        let h = hits(&ev);
        assert!(h.len() >= 4, "{h:?}");
        for w in h.windows(2) {
            if w[0].0 == s[0] {
                assert_eq!(w[1].0, s[0] + 1, "{h:?}");
                if step {
                    assert_eq!(w[1].1, 2002);
                }
            }
        }
        assert!(h.iter().all(|x| x.0 == s[0] || x.0 == s[0] + 1));
        // lib_begin reads the tick number: consecutive ticks.
        let ticks: Vec<u64> = h.iter().filter_map(|x| x.2).collect();
        assert!(ticks.windows(2).all(|w| w[1] == w[0] + 1), "{ticks:?}");
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            reference,
            "step={step}"
        );
    }
}
