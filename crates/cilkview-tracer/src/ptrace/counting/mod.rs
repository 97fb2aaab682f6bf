//! The counting seam of the ptrace backend: how a strand's cost is measured and how a stopped
//! thread resumes. Four implementations:
//!
//! - [`Stepping`]: single-step every instruction and count them (exact everywhere, slow); marks
//!   are found by stepping onto them;
//! - [`Breakpoints`] with the hardware counter (`perf_event::Counter`): marks are patched with
//!   `int3`, threads run freely between them, costs are counter deltas;
//! - [`Breakpoints`] with [`NullCounter`]: the same patching with no counter (every cost 0), a
//!   testing aid for machines without a PMU (the `testing` feature);
//! - [`Native`]: marks patched into jumps to stubs that record the time-stamp counter in memory
//!   shared with the tool; threads run at native speed, costs are nanoseconds.
//!
//! The event loop (`super`) never asks which one it has: it calls these methods at the points
//! where counting matters (a thread appears, execs, stops on SIGTRAP, resumes, ends).

mod breakpoints;
pub(crate) mod native;
mod sigtrap_guard;
mod stepping;

pub(crate) use breakpoints::Breakpoints;
#[cfg(feature = "testing")]
pub(crate) use breakpoints::NullCounter;
#[cfg(feature = "testing")]
pub(crate) use native::use_software_stand_in;
pub use native::ClockUnavailable;
pub(crate) use native::{calibrated as native_clock, Native};
pub(crate) use stepping::Stepping;

use nix::libc;

use super::loader_hook::{self, LoaderHook};
use super::{regs_unless_gone, unless_gone, Core};
use crate::sys::{self, Tid, Wait};
use crate::TraceError;

pub(crate) trait Counting {
    /// The program `pid` was launched and has not exec'd yet. Returns a note for the
    /// counter's notes (e.g. a CPU binding), if any.
    fn launched(&mut self, _pid: Tid) -> Option<String> {
        None
    }
    /// Thread `tid` is measured from now on (`at_exec`: the launched process, measured from its
    /// exec on).
    fn add_thread(&mut self, tid: Tid, at_exec: bool) -> Result<(), TraceError>;
    /// Forget thread `tid` (it is gone or detached).
    fn remove_thread(&mut self, tid: Tid);
    /// The instructions thread `tid` ran since its last event, which then restarts from 0: its
    /// tail at exit or detach.
    fn take_tail(&mut self, tid: Tid) -> u64;
    /// Resume stopped thread `tid`, delivering `sig` (0: none).
    fn resume(&mut self, tid: Tid, sig: i32) -> Result<(), TraceError>;
    /// Thread `former` exec'd and is now `tid` (the same unless a non-leader thread exec'd): the
    /// instructions it ran until then.
    fn exec(&mut self, former: Tid, tid: Tid) -> Result<u64, TraceError>;
    /// Probes were placed at `addrs` in process `pid` (`new_image`: the whole image was just
    /// armed, at an exec or an attach).
    fn armed(
        &mut self,
        core: &mut Core<'_>,
        pid: Tid,
        addrs: &[u64],
        new_image: bool,
    ) -> Result<(), TraceError>;
    /// Thread `tid` is stopped where it will resume (it started, exec'd, or was attached): a mark
    /// right there is reached.
    fn at_boundary(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<(), TraceError>;
    /// A SIGTRAP signal-delivery-stop of a measured thread: account it (hits go to `core`).
    /// `Some(signal to resume with)`, or `None` if the thread is gone.
    fn sigtrap(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<Option<i32>, TraceError>;
    /// A child process sharing the program's memory (`vfork`, `CLONE_VM`), stopped, about to be
    /// detached: it runs the patched code but is not measured.
    fn unmeasured_sharer(&mut self, _tid: Tid) -> Result<(), TraceError> {
        Ok(())
    }
    /// Why this counting would not set itself up in process `pid` as it is now (every thread
    /// stopped by the tracer, nothing changed in it yet; `group_stopped`: some thread is in a
    /// group-stop, as `kill -STOP` leaves it): `Some(reason)` refuses before anything is touched.
    fn refuses(&self, _pid: Tid, _group_stopped: bool) -> Option<String> {
        None
    }
    /// Whether `stop_all` may deliver a program's signal at once with [`Counting::resume`]
    /// (then hold the thread at the interrupt after it) instead of holding the thread at its
    /// signal-delivery stop: a counter whose resume runs the thread on as it is (not a step).
    fn delivers_while_stopping(&self) -> bool {
        false
    }
    /// A stop (interrupt, signal) came before the last resume took effect: nothing ran.
    fn interrupted(&mut self, _tid: Tid) {}
    /// Thread `tid` reported a stop; called before anything else looks at it.
    fn stopped(&mut self, _tid: Tid) {}
    /// Report what thread `tid` did that is not reported yet (before its exit, exec or
    /// detach is).
    fn flush(&mut self, _core: &mut Core<'_>, _tid: Tid) -> Result<(), TraceError> {
        Ok(())
    }
    /// Notes for the counter's notes at the end of the run (e.g. how long the program waited
    /// for the tool), each with its id; `hits`: the mark hits the run reported.
    fn summary(&self, _hits: u64) -> Vec<cilkview_events::Note> {
        Vec::new()
    }
    /// The next event of any tracee (a counting that records in the program's memory reports
    /// its records while it waits).
    fn wait(&mut self, _core: &mut Core<'_>) -> Result<Wait, TraceError> {
        sys::wait_any().map_err(TraceError::Wait)
    }
}

/// What a SIGTRAP signal-delivery-stop is to a counting that patches its marks and the dynamic
/// loader's hook with `int3` (breakpoints, native): read once by [`patched_sigtrap`].
pub(crate) enum PatchedTrap {
    /// The thread is gone.
    Gone,
    /// The loader's hook: its `ret` is emulated already; `rescanned` holds the addresses of the
    /// probes to patch in what was mapped since, when the link map was consistent.
    LoaderHook {
        hook: LoaderHook,
        rescanned: Option<Vec<u64>>,
    },
    /// Another `int3` of the kernel's (`SI_KERNEL`) at `at`; `regs` as it stopped after it.
    Int3 {
        at: u64,
        regs: libc::user_regs_struct,
    },
    /// The program's own SIGTRAP (sent by `kill`, `raise`): to deliver.
    Program,
}

/// The SIGTRAP stop of `tid` for a counting that planted `hook` (if any): the loader-hook half,
/// common to the patching countings, done here.
pub(crate) fn patched_sigtrap(
    core: &mut Core<'_>,
    tid: Tid,
    hook: Option<LoaderHook>,
) -> Result<PatchedTrap, TraceError> {
    let Some(code) = unless_gone("GETSIGINFO", tid, sys::siginfo_code(tid))? else {
        return Ok(PatchedTrap::Gone);
    };
    if code != sys::SI_KERNEL {
        return Ok(PatchedTrap::Program);
    }
    let Some(regs) = regs_unless_gone(tid)? else {
        return Ok(PatchedTrap::Gone);
    };
    let at = regs.rip.wrapping_sub(1);
    match hook.filter(|h| h.addr == at) {
        Some(hook) => {
            loader_hook::emulate_ret(tid, &regs)?;
            let rescanned = if hook.consistent(tid) {
                Some(core.rescan()?)
            } else {
                None
            };
            Ok(PatchedTrap::LoaderHook { hook, rescanned })
        }
        None => Ok(PatchedTrap::Int3 { at, regs }),
    }
}
