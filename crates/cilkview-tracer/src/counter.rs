//! Hardware instruction counter (perf_event) and its start-up self-test.

use std::io;
use std::sync::OnceLock;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter};

use crate::sys::{self, Restart, Stop, Tid, Wait};

/// Loop counts of the calibration child; the two must give the same bias.
const N1: u64 = 1000;
const N2: u64 = 100_000;

/// Open a user-space-only instruction counter on one thread.
/// `on_exec`: stay disabled until the thread's next `execve`, else start now.
pub fn open(tid: Tid, on_exec: bool) -> io::Result<Counter> {
    let mut b = Builder::new().kind(Hardware::INSTRUCTIONS).observe_pid(tid);
    b.exclude_kernel(true)
        .exclude_hv(true)
        .inherit(false)
        .enable_on_exec(on_exec);
    let mut c = b.build()?;
    if !on_exec {
        c.enable()?;
    }
    Ok(c)
}

/// Code run by the calibration child: three int3 with known work between.
fn calibration_body() {
    // SAFETY: int3 traps to the tracer (the parent), which resumes after it;
    // the loops only touch rcx, declared clobbered.
    unsafe {
        core::arch::asm!(
            "int3",
            "mov rcx, {n1}",
            "2:",
            "dec rcx",
            "jnz 2b",
            "int3",
            "mov rcx, {n2}",
            "3:",
            "dec rcx",
            "jnz 3b",
            "int3",
            n1 = in(reg) N1,
            n2 = in(reg) N2,
            out("rcx") _,
        );
    }
}

fn errno_hint(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(nix::libc::ENOENT) | Some(nix::libc::EOPNOTSUPP) | Some(nix::libc::ENODEV) => {
            " (no PMU: virtual machine or unsupported CPU)"
        }
        Some(nix::libc::EACCES) | Some(nix::libc::EPERM) => {
            " (restricted: kernel.perf_event_paranoid or missing CAP_PERFMON)"
        }
        _ => "",
    }
}

/// Why the hardware counter cannot be used: it cannot be opened, or the self-test failed.
#[derive(Debug, thiserror::Error)]
pub enum SelfTestError {
    #[error("hardware counter unavailable: perf_event_open: {error}{}", errno_hint(.error))]
    Open { error: io::Error },
    /// A step of running the calibration child (`what`: "fork: ", "waitpid: ", ...).
    #[error("self-test: {what}{error}")]
    Child {
        what: &'static str,
        error: io::Error,
    },
    /// A ptrace request on the calibration child.
    #[error("self-test: ptrace({request}): {errno}")]
    Ptrace {
        request: &'static str,
        errno: nix::errno::Errno,
    },
    #[error("self-test child exited with {0}")]
    ChildExited(i32),
    #[error("self-test child killed by signal {0}")]
    ChildKilled(i32),
    #[error("hardware counter read: {0}")]
    Read(io::Error),
    #[error("self-test: expected 3 traps, saw {0}")]
    Traps(usize),
    /// The two calibration loops counted `counted` instructions, not `expected` plus one equal
    /// bias.
    #[error(
        "hardware counter failed the self-test: counted {} and {} instructions, expected {} \
         and {} plus one equal per-stop bias",
        .counted[0], .counted[1], .expected[0], .expected[1]
    )]
    Failed {
        counted: [u64; 2],
        expected: [u64; 2],
    },
}

/// Run the self-test: returns the per-hit bias (instructions the counter
/// sees per int3 stop beyond the native program), or why the hardware
/// counter cannot be used.
fn run_self_test() -> Result<u64, SelfTestError> {
    // Quick check before forking.
    if let Err(error) = open(0, false) {
        return Err(SelfTestError::Open { error });
    }
    let child_err = |what| move |error| SelfTestError::Child { what, error };
    // SAFETY: the calibration body is inline assembly only: no allocation, no locks.
    let mut child = unsafe { sys::spawn_fn(calibration_body) }.map_err(child_err("fork: "))?;
    let pid = child.pid;
    let result = (|| {
        let ptrace_err = |request| move |errno| SelfTestError::Ptrace { request, errno };
        sys::seize(pid, nix::libc::PTRACE_O_EXITKILL).map_err(ptrace_err("SEIZE"))?;
        let mut ctr = open(pid, false).map_err(|error| SelfTestError::Open { error })?;
        child.release().map_err(child_err(""))?;
        let mut reads = Vec::new();
        loop {
            match sys::wait_for(pid).map_err(child_err("waitpid: "))? {
                Wait::Exited(_, 0) => break,
                Wait::Exited(_, c) => return Err(SelfTestError::ChildExited(c)),
                Wait::Signaled(_, s) => return Err(SelfTestError::ChildKilled(s)),
                Wait::Stopped { stop, .. } => {
                    let mut inject = 0;
                    match stop {
                        Stop::Signal(nix::libc::SIGTRAP) => {
                            reads.push(ctr.read().map_err(SelfTestError::Read)?)
                        }
                        Stop::Signal(sig) => inject = sig,
                        _ => {}
                    }
                    sys::restart(pid, Restart::Continue(inject)).map_err(ptrace_err("CONT"))?;
                }
            }
        }
        if reads.len() != 3 {
            return Err(SelfTestError::Traps(reads.len()));
        }
        let d1 = reads[1] - reads[0];
        let d2 = reads[2] - reads[1];
        let (e1, e2) = (1 + 2 * N1, 1 + 2 * N2);
        if d1 < e1 || d2 < e2 || d1 - e1 != d2 - e2 || d1 - e1 > 3 {
            return Err(SelfTestError::Failed {
                counted: [d1, d2],
                expected: [e1, e2],
            });
        }
        Ok(d1 - e1)
    })();
    if result.is_err() {
        sys::kill(pid, nix::libc::SIGKILL);
        while let Ok(w) = sys::wait_for(pid) {
            if matches!(w, Wait::Exited(..) | Wait::Signaled(..)) {
                break;
            }
        }
    }
    result
}

/// The self-test result, computed once per process.
pub fn self_test_cached() -> &'static Result<u64, SelfTestError> {
    static RESULT: OnceLock<Result<u64, SelfTestError>> = OnceLock::new();
    RESULT.get_or_init(run_self_test)
}
