//! A hook for the tests only: in a debug build, `CILKVIEW_TEST_KILL_AT=PHASE` (or `PHASE@N`: the
//! `N`th time it is reached, 1 first) in the tool's environment makes it SIGKILL itself when it
//! reaches that phase of an attach, so that a test can check what every phase leaves the process
//! in when the tool dies there (the process must run on unharmed). A release build reads no such
//! variable; it is no option of the user's.

/// A phase of `attach` (named by `CILKVIEW_TEST_KILL_AT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The main thread is seized, not yet stopped.
    Seized,
    /// Every thread is stopped; nothing is changed yet.
    Stopped,
    /// A thread's registers are set to an injected system call, not yet run.
    Injecting,
    /// An injected system call's entry (its syscall-entry stop).
    InCall,
    /// An injected system call done (its syscall-exit stop), the registers not yet put back.
    CallDone,
    /// The first mark is patched, the others not yet.
    Patching,
    /// Measuring: every thread resumed with the marks patched.
    Measuring,
    /// The first mark is restored, the others not yet (every thread stopped).
    Restoring,
    /// Every mark restored, no thread detached yet.
    Detaching,
}

impl Phase {
    /// Its name in `CILKVIEW_TEST_KILL_AT` (read by debug builds only).
    #[cfg(debug_assertions)]
    fn name(self) -> &'static str {
        match self {
            Phase::Seized => "seized",
            Phase::Stopped => "stopped",
            Phase::Injecting => "injecting",
            Phase::InCall => "in-call",
            Phase::CallDone => "call-done",
            Phase::Patching => "patching",
            Phase::Measuring => "measuring",
            Phase::Restoring => "restoring",
            Phase::Detaching => "detaching",
        }
    }
}

/// The tool dies here (SIGKILL) if the tests asked for `phase`; nothing otherwise.
pub(crate) fn reached(phase: Phase) {
    #[cfg(debug_assertions)]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static ASKED: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
        static REACHED: AtomicU64 = AtomicU64::new(0);
        let asked = ASKED.get_or_init(|| {
            let v = std::env::var("CILKVIEW_TEST_KILL_AT").ok()?;
            let (name, nth) = v.split_once('@').unwrap_or((&v, "1"));
            Some((name.to_string(), nth.parse().ok()?)).filter(|(n, _)| !n.is_empty())
        });
        if let Some((name, nth)) = asked {
            if name == phase.name() && REACHED.fetch_add(1, Ordering::Relaxed) + 1 == *nth {
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = phase;
}
