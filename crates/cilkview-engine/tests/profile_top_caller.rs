//! Top-caller measurements (Cilkprof §6) whose numbers are known by construction, on the streams
//! the tool produces from `cilkview.h` marks: a `cv_spawn(fib(n - 1))` is a spawn (site in fib)
//! whose strand calls fib (a second site in fib, the call's return address), and every function
//! with `cv_function()` is a `FunctionEnter` frame, i.e. a function instance.

mod common;

use cilkview_engine::{CallSite, EventKind::*, Profile, SiteKind, SiteProfile, WorkSpan};
use common::{fib_ws, ws, Stream};

const MAIN: u64 = 1;
const FIB: u64 = 2;
const MM: u64 = 3;

fn site(key: u64, function: u64) -> Option<CallSite> {
    Some(CallSite::new(key)?.in_function(function))
}

fn find(p: &Profile, key: u64, kind: SiteKind) -> SiteProfile {
    *p.sites
        .iter()
        .find(|s| s.site.key() == key && s.kind == kind)
        .unwrap_or_else(|| panic!("no site {key}"))
}

// ---------------------------------------------------------------- fib (paper Figures 5–7)

const LINE4: u64 = 4; // the spawn, and the call of fib inside it
const LINE5: u64 = 5;
const LINE13: u64 = 13; // main's call

/// The body of fib(n): n < 2 costs n + 1; else 1, `cv_spawn(fib(n - 1))`, `fib(n - 2)`, sync, 1.
fn fib(s: &mut Stream, n: u64) {
    if n < 2 {
        s.work(n + 1);
        return;
    }
    s.work(1);
    s.ev(Spawn, site(LINE4, FIB));
    s.call(site(LINE4, FIB), |s| fib(s, n - 1));
    s.ev(SpawnReturn, None);
    s.call(site(LINE5, FIB), |s| fib(s, n - 2));
    s.ev(Sync, None);
    s.work(1);
}

#[test]
fn fib_top_callers_are_main_and_the_outermost_fib() {
    let n = 20;
    let mut s = Stream::default();
    s.call(site(LINE13, MAIN), |s| fib(s, n));
    let r = s.run();
    assert_eq!(
        (r.total.work, r.total.span),
        (fib_ws(n).work, fib_ws(n).span)
    );
    let p = r.profile.as_ref().unwrap();
    // main → fib(n), and fib(n) → fib(n - 1) (the spawn and the call in it), fib(n) → fib(n - 2).
    assert_eq!(find(p, LINE13, SiteKind::Call).top_caller, fib_ws(n));
    let spawn4 = find(p, LINE4, SiteKind::Spawn);
    let call4 = find(p, LINE4, SiteKind::Call);
    let call5 = find(p, LINE5, SiteKind::Call);
    assert_eq!(spawn4.top_caller, fib_ws(n - 1));
    assert_eq!(call4.top_caller, fib_ws(n - 1));
    assert_eq!(call5.top_caller, fib_ws(n - 2));
    // Top-call-site sums count every nested fib(k) not under another invocation of the same
    // line: much more than the top-caller ones (paper Figure 7).
    assert!(call5.on_work.work > 2 * call5.top_caller.work);
    // The paper's observation: top-caller work of lines 4 and 5 is in the golden ratio.
    let ratio = call4.top_caller.work as f64 / call5.top_caller.work as f64;
    let phi = (1.0 + 5f64.sqrt()) / 2.0;
    assert!((ratio - phi).abs() < 1e-3 * phi, "ratio {ratio}");
}

// ---------------------------------------------------------------- mm (paper Figures 8–10)

const BASE_CALL: u64 = 4;
const Q1: u64 = 7;
const Q4: u64 = 13;
const MAIN_CALL: u64 = 24;
const COARSENING: u64 = 4;

/// mm(n): base(n) = n³ below the coarsening, else 1 + 3 spawned quarters + a called one + sync.
fn mm(s: &mut Stream, n: u64) {
    s.work(1);
    if n <= COARSENING {
        s.call(site(BASE_CALL, MM), |s| s.work(n * n * n));
        return;
    }
    for q in 0..3 {
        s.ev(Spawn, site(Q1 + 2 * q, MM));
        s.call(site(Q1 + 2 * q, MM), |s| mm(s, n / 2));
        s.ev(SpawnReturn, None);
    }
    s.call(site(Q4, MM), |s| mm(s, n / 2));
    s.ev(Sync, None);
}

fn mm_ws(n: u64) -> WorkSpan {
    if n <= COARSENING {
        return ws(1 + n * n * n, 1 + n * n * n);
    }
    let q = mm_ws(n / 2);
    ws(1 + 4 * q.work, 1 + q.span)
}

#[test]
fn mm_base_is_never_called_by_the_top_caller() {
    let n = 32;
    let mut s = Stream::default();
    s.call(site(MAIN_CALL, MAIN), |s| mm(s, n));
    let r = s.run();
    assert_eq!(r.total.work, mm_ws(n).work);
    let p = r.profile.as_ref().unwrap();
    let base = find(p, BASE_CALL, SiteKind::Call);
    // 4 quarters per level, 3 levels: 64 base cases of 4³ each, most of the work; top-caller 0
    // (paper Figure 10, line 4).
    assert_eq!(base.invocations, 64);
    assert_eq!(base.on_work, ws(64 * 64, 64 * 64));
    assert_eq!(base.top_caller, ws(0, 0));
    for q in [Q1, Q1 + 2, Q1 + 4] {
        assert_eq!(find(p, q, SiteKind::Spawn).top_caller, mm_ws(n / 2));
        assert_eq!(find(p, q, SiteKind::Call).top_caller, mm_ws(n / 2));
    }
    assert_eq!(find(p, Q4, SiteKind::Call).top_caller, mm_ws(n / 2));
    assert_eq!(find(p, MAIN_CALL, SiteKind::Call).top_caller, mm_ws(n));
}

// ---------------------------------------------------------------- other cases

#[test]
fn a_site_without_a_function_is_alone_in_its_function() {
    // down(3) → down(2) → … at one site whose function is unknown: top-caller = top-call-site.
    let mut s = Stream::default();
    fn down(s: &mut Stream, k: u64) {
        s.work(10);
        if k > 0 {
            s.call(CallSite::new(9), |s| down(s, k - 1));
        }
    }
    s.call(CallSite::new(9), |s| down(s, 3));
    let r = s.run();
    let d = find(r.profile.as_ref().unwrap(), 9, SiteKind::Call);
    assert_eq!(
        (d.invocations, d.on_work, d.top_caller),
        (4, ws(40, 40), ws(40, 40))
    );
}

#[test]
fn calls_of_two_functions_and_threads_side_by_side() {
    // main calls g (site 1) then h (site 2); g calls h (site 3, in g); h calls leaf (site 4, in h).
    // The call of leaf under g's h is a top-caller invocation too: one instance of h at a time.
    let (g, h) = (10, 11);
    let leaf = |s: &mut Stream| s.call(site(4, h), |s| s.work(7));
    let mut s = Stream::default();
    s.call(site(1, MAIN), |s| {
        s.work(1);
        s.call(site(3, g), |s| leaf(s));
    });
    s.call(site(2, MAIN), |s| {
        // h recursing into itself: its inner call of leaf is not top-caller.
        s.call(site(5, h), |s| leaf(s));
        leaf(s);
    });
    let r = s.run();
    let p = r.profile.clone().unwrap();
    assert_eq!(find(&p, 4, SiteKind::Call).invocations, 3);
    assert_eq!(find(&p, 4, SiteKind::Call).top_caller, ws(14, 14));
    assert_eq!(find(&p, 5, SiteKind::Call).top_caller, ws(7, 7));
    assert_eq!(find(&p, 3, SiteKind::Call).top_caller, ws(7, 7));
    // Two threads: top-caller sums add up.
    let both = r.clone().beside(r).profile.unwrap();
    assert_eq!(find(&both, 4, SiteKind::Call).top_caller, ws(28, 28));
}
