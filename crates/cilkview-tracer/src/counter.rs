//! Hardware instruction counter (perf_event) and its start-up self-test.

use std::io;
use std::sync::OnceLock;

use perf_event::events::Hardware;
use perf_event::{Builder, Counter};

use crate::sys::{self, Tid, Wait};

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

/// Run the self-test: returns the per-hit bias (instructions the counter
/// sees per int3 stop beyond the native program), or why the hardware
/// counter cannot be used.
fn run_self_test() -> Result<u64, String> {
    // Quick check before forking.
    if let Err(e) = open(0, false) {
        return Err(format!(
            "hardware counter unavailable: perf_event_open: {e}{}",
            errno_hint(&e)
        ));
    }
    let mut child = sys::spawn_fn(calibration_body).map_err(|e| format!("self-test: fork: {e}"))?;
    let pid = child.pid;
    let result = (|| {
        sys::seize(pid, nix::libc::PTRACE_O_EXITKILL)
            .map_err(|e| format!("self-test: ptrace(SEIZE): {e}"))?;
        let mut ctr = open(pid, false).map_err(|e| {
            format!(
                "hardware counter unavailable: perf_event_open: {e}{}",
                errno_hint(&e)
            )
        })?;
        child.release().map_err(|e| format!("self-test: {e}"))?;
        let mut reads = Vec::new();
        loop {
            match sys::wait_for(pid).map_err(|e| format!("self-test: waitpid: {e}"))? {
                Wait::Exited(_, 0) => break,
                Wait::Exited(_, c) => return Err(format!("self-test child exited with {c}")),
                Wait::Signaled(_, s) => {
                    return Err(format!("self-test child killed by signal {s}"))
                }
                Wait::Stopped { sig, event, .. } => {
                    let mut inject = 0;
                    if sig == nix::libc::SIGTRAP && event == 0 {
                        reads.push(
                            ctr.read()
                                .map_err(|e| format!("hardware counter read: {e}"))?,
                        );
                    } else if event == 0 {
                        inject = sig;
                    }
                    sys::cont(pid, inject).map_err(|e| format!("self-test: ptrace(CONT): {e}"))?;
                }
            }
        }
        if reads.len() != 3 {
            return Err(format!("self-test: expected 3 traps, saw {}", reads.len()));
        }
        let d1 = reads[1] - reads[0];
        let d2 = reads[2] - reads[1];
        let (e1, e2) = (1 + 2 * N1, 1 + 2 * N2);
        if d1 < e1 || d2 < e2 || d1 - e1 != d2 - e2 || d1 - e1 > 3 {
            return Err(format!(
                "hardware counter failed the self-test: counted {d1} and {d2} instructions, \
                 expected {e1} and {e2} plus one equal per-stop bias"
            ));
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
pub fn self_test_cached() -> &'static Result<u64, String> {
    static RESULT: OnceLock<Result<u64, String>> = OnceLock::new();
    RESULT.get_or_init(run_self_test)
}
