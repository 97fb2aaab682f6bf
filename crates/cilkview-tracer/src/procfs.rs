//! /proc helpers: executable path, load address, memory read/write.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::sys::Tid;

pub fn exe(pid: Tid) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
}

/// Thread-group id of a task.
pub fn tgid(tid: Tid) -> io::Result<Tid> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::other("no Tgid in /proc status"))
}

/// The memory of a stopped tracee; writes work on read-only text.
pub struct Mem(File);

impl Mem {
    pub fn open(pid: Tid) -> io::Result<Mem> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/mem"))
            .map(Mem)
    }

    pub fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        self.0.read_exact_at(buf, addr)
    }

    pub fn write(&self, addr: u64, buf: &[u8]) -> io::Result<()> {
        self.0.write_all_at(buf, addr)
    }

    /// The 8 bytes at `addr`, little-endian; `None` if unreadable.
    pub fn word(&self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b).ok().map(|()| u64::from_le_bytes(b))
    }
}

/// Thread ids listed in `/proc/PID/task`.
pub fn tasks(pid: Tid) -> io::Result<Vec<Tid>> {
    let mut v: Vec<Tid> = std::fs::read_dir(format!("/proc/{pid}/task"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    Ok(v)
}

/// Whether thread `tid` of process `pid` is gone or exiting (a zombie, or dead).
pub fn thread_exiting(pid: Tid, tid: Tid) -> bool {
    status_field(&format!("/proc/{pid}/task/{tid}/status"), "State")
        .is_none_or(|s| s.starts_with('Z') || s.starts_with('X'))
}

/// A field of `/proc/PID/status` (or `/proc/PID/task/TID/status`), trimmed.
pub fn status_field(path: &str, field: &str) -> Option<String> {
    let status = std::fs::read_to_string(path).ok()?;
    status.lines().find_map(|l| {
        l.strip_prefix(field)
            .and_then(|r| r.strip_prefix(':'))
            .map(|v| v.trim().to_string())
    })
}

fn hex_field(path: &str, field: &str) -> u64 {
    status_field(path, field)
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .unwrap_or(0)
}

/// Is `sig` pending for the thread itself (not the process) and not blocked?
pub fn thread_signal_pending(pid: Tid, tid: Tid, sig: i32) -> bool {
    let path = format!("/proc/{pid}/task/{tid}/status");
    let bit = 1u64 << (sig - 1);
    hex_field(&path, "SigPnd") & bit != 0 && hex_field(&path, "SigBlk") & bit == 0
}

/// Is the task in a ptrace-stop (`t` in `/proc/TID/stat`)?
pub fn in_trace_stop(tid: Tid) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| rest.starts_with('t')))
        .unwrap_or(false)
}

/// Does the task exist (also a zombie not yet reaped)?
pub fn exists(tid: Tid) -> bool {
    Path::new(&format!("/proc/{tid}")).exists()
}

/// Why `PTRACE_SEIZE` of `pid` failed with EPERM, and what to do.
pub fn attach_denied_reason(pid: Tid) -> String {
    let status = format!("/proc/{pid}/status");
    // A zombie cannot be traced: it has exited and only waits for its parent to reap it. A
    // zombie main thread with threads running on (it left with `pthread_exit`) cannot be
    // traced either, though the process runs.
    if status_field(&status, "State").is_some_and(|s| s.starts_with('Z')) {
        let others = tasks(pid).map_or(0, |t| t.len().saturating_sub(1));
        if others > 0 {
            return format!(
                "its main thread has exited (pthread_exit) while {others} other thread(s) run \
                 on, and an exited thread cannot be traced; nothing was changed in it"
            );
        }
        return "it has already exited (a zombie, waiting for its parent to collect its exit \
                status); there is nothing left to measure"
            .into();
    }
    if let Some(tracer) = status_field(&status, "TracerPid").and_then(|v| v.parse::<Tid>().ok()) {
        if tracer != 0 {
            let comm = std::fs::read_to_string(format!("/proc/{tracer}/comm"))
                .map(|c| format!(" ({})", c.trim()))
                .unwrap_or_default();
            return format!(
                "another tracer, pid {tracer}{comm}, is already attached; detach it \
                 (quit the debugger / strace) and retry"
            );
        }
    }
    let cap_sys_ptrace = hex_field("/proc/self/status", "CapEff") & (1 << 19) != 0;
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    if scope == Some(3) {
        return "kernel.yama.ptrace_scope is 3: ptrace attach is disabled until reboot".into();
    }
    let their_uid = status_field(&status, "Uid").and_then(|v| {
        v.split_whitespace()
            .next()
            .and_then(|u| u.parse::<u32>().ok())
    });
    let my_uid = crate::sys::geteuid();
    if !cap_sys_ptrace {
        if let Some(u) = their_uid.filter(|&u| u != my_uid) {
            return format!(
                "the process belongs to uid {u} and this tool runs as uid {my_uid} without \
                 CAP_SYS_PTRACE; run it as that user or as root"
            );
        }
        match scope {
            Some(1) => {
                return "kernel.yama.ptrace_scope is 1: only a process's ancestors may attach; \
                        run as root (CAP_SYS_PTRACE) or `sysctl kernel.yama.ptrace_scope=0`"
                    .into()
            }
            Some(2) => {
                return "kernel.yama.ptrace_scope is 2: only CAP_SYS_PTRACE may attach; run as root"
                    .into()
            }
            _ => {}
        }
    }
    "permission denied by the kernel (the process may be non-dumpable, e.g. setuid, \
     or a security module forbids ptrace); run as root with CAP_SYS_PTRACE"
        .into()
}

/// `kernel.perf_event_paranoid`, as a hint for a failed counter open.
pub fn perf_paranoid_hint() -> String {
    match std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid") {
        Ok(v) => format!(
            " (kernel.perf_event_paranoid is {}: counting another process needs <= 2 for its \
             owner, or CAP_PERFMON / root; or use the step counter)",
            v.trim()
        ),
        Err(_) => String::new(),
    }
}

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub readable: bool,
    /// Offset in the file of `start`.
    pub offset: u64,
    pub dev: String,
    pub inode: u64,
    /// File path as the kernel prints it (may end with " (deleted)"), or
    /// "[vdso]", "[heap]", … or "" for anonymous memory.
    pub path: String,
}

pub fn maps(pid: Tid) -> io::Result<Vec<Mapping>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let mut out = Vec::new();
    for line in text.lines() {
        // start-end perms offset dev inode pathname
        let mut f = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.next().map(str::trim_start).unwrap_or("").to_string();
        let mut r = range.split('-');
        let (Some(Ok(start)), Some(Ok(end))) = (
            r.next().map(|s| u64::from_str_radix(s, 16)),
            r.next().map(|s| u64::from_str_radix(s, 16)),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            exec: perms.as_bytes().get(2) == Some(&b'x'),
            readable: perms.as_bytes().first() == Some(&b'r'),
            offset: u64::from_str_radix(off, 16).unwrap_or(0),
            dev: dev.to_string(),
            inode: inode.parse().unwrap_or(0),
            path,
        });
    }
    Ok(out)
}

/// The value of auxiliary-vector entry `key` of process `pid` (e.g. 7 = `AT_BASE`).
pub fn auxv(pid: Tid, key: u64) -> io::Result<Option<u64>> {
    let data = std::fs::read(format!("/proc/{pid}/auxv"))?;
    for pair in data.chunks_exact(16) {
        let k = u64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
        let v = u64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
        if k == key {
            return Ok(Some(v));
        }
        if k == 0 {
            break;
        }
    }
    Ok(None)
}
