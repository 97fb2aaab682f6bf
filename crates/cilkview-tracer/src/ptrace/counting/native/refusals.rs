//! What the native counter refuses before it changes anything in a process: it sets itself up by
//! running system calls inside the program (`inject.rs`), which a stopped process or a seccomp
//! filter of the program's own would not survive as it was.

use crate::procfs;
use crate::sys::Tid;

/// Why the native counter will not set itself up in process `pid` now (its threads all stopped
/// by the tracer; `group_stopped`: one is stopped by a signal), or `None`.
pub(super) fn refusal(pid: Tid, group_stopped: bool) -> Option<String> {
    if group_stopped {
        return Some(
            "it is stopped (SIGSTOP, a terminal's job control or a debugger), and the native \
             counter sets itself up by running system calls in it, which would take it out of \
             its stop"
                .into(),
        );
    }
    seccomp_refusal(pid)
}

/// A thread of `pid` under seccomp filters beyond the ones this tool runs under (those of its
/// container or service manager, inherited by both: they let the tool's own `mmap` and
/// `memfd_create` through): a filter of the program's own may fail or punish (`SECCOMP_RET_KILL`)
/// the calls the native counter injects — executable mappings, `memfd_create`, `madvise`.
fn seccomp_refusal(pid: Tid) -> Option<String> {
    let ours = filters("/proc/self/status");
    let tasks = procfs::tasks(pid).ok()?;
    tasks.into_iter().find_map(|tid| {
        let path = format!("/proc/{pid}/task/{tid}/status");
        let mode = procfs::status_field(&path, "Seccomp")?;
        let theirs = filters(&path);
        let why = match mode.as_str() {
            "1" => "in seccomp's strict mode (only read, write, exit and sigreturn)".to_string(),
            "2" if theirs > ours => format!(
                "under {} seccomp filter{} of its own",
                theirs - ours,
                if theirs - ours == 1 { "" } else { "s" }
            ),
            _ => return None,
        };
        Some(format!(
            "its thread {tid} runs {why}, and the native counter sets itself up by running \
             system calls in it (executable mappings, memfd_create), which a filter may refuse \
             or answer by killing the process"
        ))
    })
}

/// `Seccomp_filters` of a status file (0 where the kernel does not say).
fn filters(status: &str) -> u64 {
    procfs::status_field(status, "Seccomp_filters")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
