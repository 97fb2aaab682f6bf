//! What the marks cost a program that is not being analyzed, on the worst case for them:
//! fully marked fib (five marks around ~10 instructions of work per call), -O2, against
//! its serial elision (-DCILKVIEW_DISABLE). Instructions counted by callgrind (exact;
//! the timings are in scripts/bench-marks.sh and docs/benchmarks.md).
//!
//! * gcc: at most 5% more instructions than the elision. (Measured: 1.8% fewer at
//!   fib(27): gcc inlines the marked recursion into itself, as it does the elision's.)
//! * clang: 1.87x the elision, and that is not the header's doing: the sync and exit
//!   marks after fib's last call keep it a call, where clang turns the elision's
//!   `return x + fib(n - 2)` into a loop (tail recursion with an accumulator), halving the
//!   calls; and the NOPs (5 per inner call, 2 per leaf) are +35% on their own. Any mark
//!   after a function's last call must do that. Exactly that: the marked build executes
//!   the elision's instructions with `fib(n - 2)` kept a call (an empty compiler barrier
//!   after it) plus one NOP per mark hit, not one instruction more.
//!   (docs/benchmarks.md, scripts/bench-marks-anatomy.sh.)

use cilkview_fixtures::{
    build, compile_source, fixture_source, has_compiler, has_tool, skip, BuildOptions,
};
use common::callgrind_count;

mod common;

/// Calls to fib: 2 * fib(26) - 1 = 242,785; with -static, start-up is ~1% of the count.
const N: &str = "25";

/// (marked, elision) instructions of fib(N) built `cc -O2 -static`.
fn fib_counts(cc: &str) -> (u64, u64) {
    let opts = BuildOptions::default().compiler(cc).opt(2).static_link();
    let marked = build("fib", &opts);
    let plain = build("fib", &opts.disabled());
    let (m, p) = (
        callgrind_count(&marked, &[N]),
        callgrind_count(&plain, &[N]),
    );
    println!(
        "{cc} -O2 fib({N}): marked {m}, elision {p}, ratio {:.3}",
        m as f64 / p as f64
    );
    (m, p)
}

/// Whether valgrind and clang are both installed (if not, says which is missing).
fn valgrind_and_clang() -> bool {
    if !has_tool("valgrind") {
        skip("valgrind not installed");
        return false;
    }
    if !has_compiler("clang") {
        skip("clang not installed");
        return false;
    }
    true
}

/// `fib_counts("clang")`, measured once for the tests that need it (two callgrind runs).
fn clang_fib_counts() -> (u64, u64) {
    static COUNTS: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *COUNTS.get_or_init(|| fib_counts("clang"))
}

#[test]
#[ignore = "slow: compiles fixtures, counts them with valgrind"]
fn gcc_fully_marked_fib_costs_at_most_5_percent_more_instructions() {
    if !has_tool("valgrind") {
        skip("valgrind not installed");
        return;
    }
    let (m, p) = fib_counts("gcc");
    assert!(
        m * 100 <= p * 105,
        "gcc -O2 fib: marked {m} > 1.05 x elision {p}"
    );
}

#[test]
#[ignore = "slow: compiles fixtures, counts them with valgrind"]
fn clang_fully_marked_fib_costs_no_more_than_its_tail_calls_and_nops() {
    if !valgrind_and_clang() {
        return;
    }
    let (m, p) = clang_fib_counts();
    assert!(
        m * 100 <= p * 190,
        "clang -O2 fib: marked {m} > 1.90 x elision {p} (1.87x when written)"
    );
}

/// fib(k), fib(0) = 0.
fn fibonacci(k: u64) -> u64 {
    (0..k).fold((0, 1), |(a, b), _| (b, a + b)).0
}

#[test]
#[ignore = "slow: compiles fixtures, counts them with valgrind"]
fn clang_marked_fib_is_its_elision_with_the_last_call_kept_plus_one_nop_per_mark() {
    if !valgrind_and_clang() {
        return;
    }
    let (marked, _) = clang_fib_counts();
    // The elision with an empty barrier after the sync that follows fib(n - 2): no
    // instruction, but clang may no longer turn that call into a loop.
    let (path, lang) = fixture_source("fib").expect("fixtures/fib.c");
    let source = std::fs::read_to_string(path).unwrap();
    let sync = "    cv_sync();\n";
    assert_eq!(
        source.matches(sync).count(),
        1,
        "fib.c has one cv_sync() line"
    );
    let kept = source.replace(
        sync,
        "    cv_sync();\n    __asm__ __volatile__(\"\" ::: \"memory\");\n",
    );
    let opts = BuildOptions::default()
        .compiler("clang")
        .opt(2)
        .static_link()
        .disabled();
    // Named "fib" too: the same path length as the marked build's, so the start-up code
    // (which reads the program's name) runs the same instructions in both.
    let exe = compile_source("fib", &kept, lang, &opts).unwrap_or_else(|e| panic!("{e}"));
    let kept = callgrind_count(&exe, &[N]);
    // Known by construction: fib(n) makes fib(n + 1) - 1 calls with n >= 2 (enter, spawn,
    // spawn-return, sync, exit: 5 NOPs) and fib(n + 1) leaves (enter, exit: 2 NOPs).
    let n: u64 = N.parse().unwrap();
    let nops = 5 * (fibonacci(n + 1) - 1) + 2 * fibonacci(n + 1);
    println!("clang -O2 fib({N}): marked {marked}, elision with fib(n - 2) kept a call {kept}, NOPs {nops}");
    assert_eq!(
        marked - kept,
        nops,
        "clang -O2 fib({N}): marked {marked} - {kept} != {nops} NOPs"
    );
}
