//! The fork-join functions: rayon's, with marks, and run on the calling thread under
//! measurement ([`is_serial`](crate::is_serial)).

use std::marker::PhantomData;
use std::ops::Range;

use rayon::prelude::*;

use crate::{function, mark, mode::is_serial};

/// Marks the end of a spawned child when dropped: after the child returns, or while unwinding
/// from its panic (so the marks stay balanced).
struct ChildEnd;

impl ChildEnd {
    #[inline(always)]
    fn spawn() -> ChildEnd {
        mark::spawn();
        ChildEnd
    }
}

impl Drop for ChildEnd {
    #[inline(always)]
    fn drop(&mut self) {
        mark::spawn_return();
    }
}

/// Runs `a` and `b`, potentially in parallel, and returns both results: [`rayon::join`],
/// measured as Cilk's `cilk_spawn a(); b(); cilk_sync;` in a frame of its own.
///
/// `a` is the spawned child, `b` the continuation. Under measurement
/// ([`is_serial`](crate::is_serial)) `a` runs, then `b`, both on the calling thread. If `a`
/// panics there, `b` does not run and the panic propagates; under rayon, `b` may already run
/// elsewhere and the panic propagates once both are done.
///
/// ```
/// fn sum(v: &[u64]) -> u64 {
///     if v.len() <= 1024 {
///         return v.iter().sum();
///     }
///     let (left, right) = v.split_at(v.len() / 2);
///     let (a, b) = cilkview::join(|| sum(left), || sum(right));
///     a + b
/// }
/// let v: Vec<u64> = (1..=10_000).collect();
/// assert_eq!(sum(&v), 50_005_000);
/// ```
#[inline(always)]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    let _frame = function();
    let results = if is_serial() {
        let ra = {
            let _child = ChildEnd::spawn();
            a()
        };
        (ra, b())
    } else {
        // With one pool thread rayon runs `a`, then `b`: the marks are in the serial order.
        mark::spawn();
        rayon::join(
            move || {
                let _child = ChildEnd;
                a()
            },
            b,
        )
    };
    mark::sync();
    results
}

/// A scope in which tasks are spawned: [`rayon::Scope`], measured. Made by [`scope`].
///
/// `'scope` is the lifetime of what the tasks may borrow; `'a` the scope's own borrow.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a, 'scope> {
    /// `None` under measurement: tasks run at their spawn, on the calling thread.
    pool: Option<&'a rayon::Scope<'scope>>,
    /// Invariant in `'scope`, as rayon's scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
}

impl<'a, 'scope> Scope<'a, 'scope> {
    /// Spawns `body` as a task of this scope ([`rayon::Scope::spawn`]); the scope waits for it
    /// before [`scope`] returns. Under measurement it runs at once, on the calling thread (the
    /// serial elision), and is measured as a spawned child.
    ///
    /// `body` gets the scope, to spawn more tasks into it.
    #[inline(always)]
    pub fn spawn<BODY>(&self, body: BODY)
    where
        BODY: FnOnce(&Scope<'_, 'scope>) + Send + 'scope,
    {
        match self.pool {
            None => {
                let _child = ChildEnd::spawn();
                body(self);
            }
            Some(pool) => pool.spawn(move |pool| {
                // Marked where the task runs: with one pool thread, tasks run after the scope's
                // body, each a child between its spawn and spawn-return marks.
                let _child = ChildEnd::spawn();
                body(&Scope {
                    pool: Some(pool),
                    _scope: PhantomData,
                })
            }),
        }
    }
}

/// Runs `op` with a [`Scope`] in which it spawns tasks, and returns once they have all finished:
/// [`rayon::scope`], measured as a function whose spawns are synced at its end.
///
/// ```
/// let mut halves = [0u64; 2];
/// let (lo, hi) = halves.split_at_mut(1);
/// cilkview::scope(|s| {
///     s.spawn(|_| lo[0] = (1..=100).sum());
///     s.spawn(|_| hi[0] = (101..=200).sum());
/// });
/// assert_eq!(halves[0] + halves[1], 20_100);
/// ```
#[inline(always)]
pub fn scope<'scope, OP, R>(op: OP) -> R
where
    OP: FnOnce(&Scope<'_, 'scope>) -> R + Send,
    R: Send,
{
    let _frame = function();
    let result = if is_serial() {
        op(&Scope {
            pool: None,
            _scope: PhantomData,
        })
    } else {
        rayon::scope(|pool| {
            op(&Scope {
                pool: Some(pool),
                _scope: PhantomData,
            })
        })
    };
    mark::sync();
    result
}

/// Marks the end of an iteration (when dropped: also when unwinding).
struct IterationEnd;

impl IterationEnd {
    #[inline(always)]
    fn begin() -> IterationEnd {
        mark::iteration_begin();
        IterationEnd
    }
}

impl Drop for IterationEnd {
    #[inline(always)]
    fn drop(&mut self) {
        mark::iteration_end();
    }
}

/// Marks the end of a loop (when dropped: also when unwinding).
struct LoopEnd;

impl LoopEnd {
    #[inline(always)]
    fn begin(grain: usize) -> LoopEnd {
        mark::loop_begin(grain);
        LoopEnd
    }
}

impl Drop for LoopEnd {
    #[inline(always)]
    fn drop(&mut self) {
        mark::loop_end();
    }
}

/// A parallel loop over `range` (Cilk's `cilk_for` with a grain): calls `body(i)` for every `i`,
/// potentially in parallel, in chunks of at least `grain` consecutive iterations
/// ([`IndexedParallelIterator::with_min_len`]); `grain` may be a run-time value (0 means 1).
///
/// Measured as `cilkview.h`'s `cv_for_grain`: ⌈n/grain⌉ chunks under a divide-and-conquer
/// tree. Under measurement the iterations run in order on the calling thread, each between an
/// iteration-begin and an iteration-end mark; on rayon's pool (not measured) the iterations
/// have no marks, so the body compiles as in the serial elision.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// let total = AtomicU64::new(0);
/// cilkview::for_range(0..1000, 64, |i| {
///     total.fetch_add(i as u64, Ordering::Relaxed);
/// });
/// assert_eq!(total.into_inner(), 499_500);
/// ```
#[inline(always)]
pub fn for_range<F>(range: Range<usize>, grain: usize, body: F)
where
    F: Fn(usize) + Sync + Send,
{
    let _loop = LoopEnd::begin(grain);
    if is_serial() {
        for i in range {
            let _iteration = IterationEnd::begin();
            body(i);
        }
    } else {
        // No iteration marks on the pool: a parallel run is not measured, and marks in the
        // body would keep the compiler from merging iterations (unrolling, vectorizing).
        range
            .into_par_iter()
            .with_min_len(grain.max(1))
            .for_each(body);
    }
}

/// A parallel loop over the elements of a slice: calls `body(item)` for every element,
/// potentially in parallel, in chunks of at least `grain` consecutive elements. Measured like
/// [`for_range`].
///
/// ```
/// let mut rows = vec![vec![1u32; 8]; 16];
/// cilkview::for_each_mut(&mut rows, 4, |row| {
///     for x in row.iter_mut() {
///         *x *= 3;
///     }
/// });
/// assert!(rows.iter().flatten().all(|&x| x == 3));
/// ```
#[inline(always)]
pub fn for_each_mut<T, F>(items: &mut [T], grain: usize, body: F)
where
    T: Send,
    F: Fn(&mut T) + Sync + Send,
{
    let _loop = LoopEnd::begin(grain);
    if is_serial() {
        for item in items {
            let _iteration = IterationEnd::begin();
            body(item);
        }
    } else {
        // No iteration marks on the pool (see `for_range`).
        items
            .par_iter_mut()
            .with_min_len(grain.max(1))
            .for_each(body);
    }
}
