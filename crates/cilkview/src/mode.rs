//! Serial or parallel: how the fork-join functions run.

use std::sync::atomic::{AtomicU8, Ordering};

const UNKNOWN: u8 = 0;
const SERIAL: u8 = 1;
const PARALLEL: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Whether [`join`](crate::join), [`scope`](crate::scope) and the loops run everything on the
/// calling thread, in the serial elision's order, without entering rayon's thread pool: `true`
/// when the program started with `RAYON_NUM_THREADS=1` (which `cilkview-rs run` sets for a
/// program using this crate), `false` otherwise (they call rayon).
///
/// With one thread rayon would run the same closures in the same order, but on a pool thread
/// that the calling thread waits for, and with the pool's idle loop around them: instructions
/// that vary from run to run. Running them on the calling thread measures the program's own
/// code only, the same in every run.
///
/// Decided once, before `main` (so that reading the environment is no part of any measured
/// region, whose cost would depend on the environment's size), or at the first call.
///
/// ```
/// // This doctest does not set RAYON_NUM_THREADS=1:
/// # if std::env::var_os("RAYON_NUM_THREADS").is_none() {
/// assert!(!cilkview::is_serial());
/// # }
/// ```
#[inline]
pub fn is_serial() -> bool {
    match MODE.load(Ordering::Relaxed) {
        SERIAL => true,
        PARALLEL => false,
        _ => decide(),
    }
}

/// Runs [`decide`] before `main`, from the ELF `.init_array`.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static DECIDE_AT_START: extern "C" fn() = decide_at_start;

#[cfg(target_os = "linux")]
extern "C" fn decide_at_start() {
    decide();
}

#[cold]
#[inline(never)]
fn decide() -> bool {
    let serial = std::env::var_os("RAYON_NUM_THREADS")
        .and_then(|v| v.to_str()?.parse::<usize>().ok())
        == Some(1);
    MODE.store(if serial { SERIAL } else { PARALLEL }, Ordering::Relaxed);
    serial
}
