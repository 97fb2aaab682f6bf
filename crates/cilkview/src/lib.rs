//! Cilkview-style marks for Rust fork-join programs: measure the work, span and parallelism of
//! rayon code with [`cilkview-rs`](https://example.invalid/cilkview-rs).
//!
//! Write the parallel structure with this crate's [`join`], [`scope`], [`for_range`] and
//! [`for_each_mut`] instead of rayon's: they call rayon, so the program runs in parallel as
//! before, and each also leaves *marks* in the binary — a 5-byte NOP at the marked point plus a
//! record in the non-allocated ELF section `.cilkview_marks`, the same marks and records as the
//! C header `cilkview.h`. `cilkview-rs run ./program` runs the program once, serially, counts the
//! instructions between the marks and reports work, span, parallelism and the speedup to expect
//! on P cores; with `--profile`, per call site (Rust functions named demangled, with
//! `file:line`).
//!
//! ```
//! fn fib(n: u64) -> u64 {
//!     if n < 2 {
//!         return n;
//!     }
//!     // fib(n - 1) is spawned, fib(n - 2) is the continuation, then they are joined.
//!     let (x, y) = cilkview::join(|| fib(n - 1), || fib(n - 2));
//!     x + y
//! }
//! assert_eq!(fib(20), 6765);
//! ```
//!
//! # Under measurement
//!
//! `cilkview-rs run` measures one serial run. It sees the `.cilkview_rayon` section this crate's
//! marks leave and starts the program with `RAYON_NUM_THREADS=1`; then [`is_serial`] is true and
//! every function of this crate runs its closures on the calling thread, in the serial elision's
//! order (for `join(a, b)`: `a`, then `b`; a spawned task at its spawn). Rayon calls made
//! directly, not through this crate, run in rayon's one-thread pool and count as serial work.
//!
//! # What is measured
//!
//! | this crate | Cilk | marks |
//! |---|---|---|
//! | [`join(a, b)`](join) | `cilk_spawn a(); b(); cilk_sync;` in a function of its own | function-enter, spawn, spawn-return, sync, function-exit |
//! | [`scope`] / [`Scope::spawn`] | a function whose spawns are synced at its end | enter; spawn, spawn-return per task; sync, exit |
//! | [`for_range`], [`for_each_mut`] | `cilk_for` with a grain | loop-begin (the grain in `%rax`), iteration-begin/-end, loop-end |
//! | [`function`] | `cv_function()`: a function instance, exits sync | function-enter, function-exit (also when unwinding) |
//! | [`region!`] | a labeled region, measured on its own | region-begin, region-end |
//!
//! A task's own spawns are measured as joined when the task ends (Cilk's rule); rayon joins them
//! at the end of the scope, which can only be more parallel.
//!
//! # The serial elision
//!
//! Without the default feature `marks` (`cilkview = { version = "0.1", default-features = false }`),
//! or with `RUSTFLAGS="--cfg cilkview_disable"` for the whole build, every mark is compiled out:
//! no NOP, no section, [`ENABLED`] is `false`; the functions call rayon (or, with
//! `RAYON_NUM_THREADS=1`, run serially as above). What the marks cost against that build is in
//! the README.
//!
//! Marks are emitted on x86-64 Linux only (the format's NOP, registers and ELF sections); on
//! other targets this crate compiles without them.

#![cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    allow(unused_macros, dead_code)
)]
#![warn(missing_docs)]

#[cfg_attr(all(target_arch = "x86_64", target_os = "linux"), path = "mark.rs")]
#[cfg_attr(
    not(all(target_arch = "x86_64", target_os = "linux")),
    path = "mark_none.rs"
)]
mod mark;
mod mode;
mod parallel;

pub use mark::ENABLED;
pub use mode::is_serial;
pub use parallel::{for_each_mut, for_range, join, scope, Scope};

/// A marked function instance: [`function`] marks its entry, dropping it marks its exit.
///
/// Keep it alive for the function's body (`let _frame = cilkview::function();`): the exit mark
/// then runs on every return path and when unwinding. An exit syncs the children spawned in the
/// frame, as a Cilk function's return does. Not `Send`: a frame ends on the thread it began on.
#[must_use = "the frame ends (its exit mark runs) when this guard is dropped: bind it with `let _frame = ...`"]
#[derive(Debug)]
pub struct FunctionGuard {
    _not_send: std::marker::PhantomData<*const ()>,
}

/// Marks the entry of a function instance (Cilk's `cv_function()`); the returned guard marks its
/// exit when dropped.
///
/// [`join`] and [`scope`] make a frame of their own, so most programs never call this. It makes
/// a call a unit of its own in call-site profiles, and keeps the spawns of a function from being
/// synced by its caller's syncs.
///
/// ```
/// fn step(data: &mut [u64]) {
///     let _frame = cilkview::function();
///     for x in data.iter_mut() {
///         *x += 1;
///     }
/// } // exit mark here (and on any early return or panic)
/// let mut v = vec![1, 2, 3];
/// step(&mut v);
/// assert_eq!(v, [2, 3, 4]);
/// ```
#[inline(always)]
pub fn function() -> FunctionGuard {
    mark::function_enter();
    FunctionGuard {
        _not_send: std::marker::PhantomData,
    }
}

impl Drop for FunctionGuard {
    #[inline(always)]
    fn drop(&mut self) {
        mark::function_exit();
    }
}

/// A labeled region, measured on its own (work, span, parallelism of the code between its
/// begin and end marks, summed over every time it runs); Cilkview's start/stop.
///
/// `region!("label")` marks the region's beginning and returns a guard that marks its end when
/// dropped (also on early returns and panics). The label must be a string literal without `"`,
/// `\`, `{` or `}`; keep it short. Usable in crates that `#![forbid(unsafe_code)]`.
///
/// ```
/// #![forbid(unsafe_code)]
/// fn solve(n: u64) -> u64 {
///     let (a, b) = cilkview::join(|| n * 2, || n + 1);
///     a + b
/// }
/// let answer = {
///     let _region = cilkview::region!("solve");
///     solve(20)
/// }; // region end
/// assert_eq!(answer, 61);
/// ```
#[macro_export]
macro_rules! region {
    ($label:literal) => {{
        const _: () = ::core::assert!(
            $crate::__valid_label($label),
            "cilkview::region! labels must not contain \", \\, {{, }}, or NUL"
        );
        #[must_use = "the region ends when this guard is dropped: bind it with `let _region = ...`"]
        struct RegionEnd;
        impl ::core::ops::Drop for RegionEnd {
            #[inline(always)]
            fn drop(&mut self) {
                $crate::__cilkview_region_mark!("11", $label);
            }
        }
        $crate::__cilkview_region_mark!("10", $label);
        RegionEnd
    }};
}

/// Whether a region label can go into the assembler's `.asciz "label"` and an `asm!` template.
#[doc(hidden)]
pub const fn __valid_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'"' | b'\\' | b'{' | b'}' | 0) {
            return false;
        }
        i += 1;
    }
    true
}
