//! /proc helpers: executable path, load address, memory read/write.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::sys::Tid;

pub fn exe(pid: Tid) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/exe"))
}

/// Start of the lowest mapping of `image` in the address space of `pid`.
pub fn load_address(pid: Tid, image: &Path) -> io::Result<Option<u64>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    let want = image.as_os_str().to_string_lossy();
    let mut lowest: Option<u64> = None;
    for line in maps.lines() {
        // start-end perms offset dev inode pathname
        let mut fields = line.splitn(6, ' ');
        let range = fields.next().unwrap_or("");
        let path = fields.nth(4).map(str::trim_start).unwrap_or("");
        if path != want {
            continue;
        }
        if let Some(start) = range
            .split('-')
            .next()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
        {
            lowest = Some(lowest.map_or(start, |l| l.min(start)));
        }
    }
    Ok(lowest)
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
}
