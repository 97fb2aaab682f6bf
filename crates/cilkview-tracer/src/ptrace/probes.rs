//! The address space and its probes: which files are mapped executable, the probes asked for
//! each of them (numbered across files), and the bytes patched into the program's text.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::Core;
use crate::probe_check::check_probes;
use crate::procfs::{self, Mapping, Mem};
use crate::sys::Tid;
use crate::{Probe, TraceError};
use cilkview_events::ReturnAddress;
use cilkview_marks::MARK_NOP;
use nix::libc;

/// The armed mark: `int3` then the 4-byte `nopl 0x0(%rax)`; after the trap the
/// thread resumes at addr+1 on a valid instruction.
pub const ARMED: [u8; 5] = [0xcc, 0x0f, 0x1f, 0x40, 0x00];

/// Bytes of the tracee's text replaced by the tracer; each patch starts with an `int3` at `addr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patch {
    pub(crate) addr: u64,
    pub(crate) orig: [u8; 5],
    pub(crate) len: usize,
}

/// A placed probe: its index and what to report at a hit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ProbeAt {
    pub(crate) index: usize,
    /// The operand register.
    pub(crate) operand: Option<u16>,
    /// The return-address rule and the load address of the probe's file.
    pub(crate) return_address: Option<(ReturnAddress, u64)>,
}

impl ProbeAt {
    /// The hit's operand, from the thread's registers at the probe: the register's value, or the
    /// return address read at `[CFA - 8]`, relative to the file's load address (`None` if that
    /// memory cannot be read).
    pub(crate) fn operand(&self, tid: Tid, regs: &libc::user_regs_struct) -> Option<u64> {
        if let Some((rule, load)) = self.return_address {
            let slot = rule.slot(super::reg(regs, rule.cfa_register));
            return crate::sys::peek(tid, slot)
                .ok()
                .map(|ra| ra.wrapping_sub(load));
        }
        self.operand.map(|r| super::reg(regs, r))
    }
}

/// A mapped file, by identity: (dev, inode, path, lowest mapping start).
pub(crate) type FileKey = (String, u64, String, u64);

/// The probes of the current executable image and of the files mapped in it.
/// Reset at each exec.
#[derive(Default)]
pub(crate) struct Armed {
    /// address -> the probe there
    addrs: HashMap<u64, ProbeAt>,
    /// Patched spots (probes with `ARMED`, the loader hook with `int3`), in breakpoints mode.
    pub(crate) patched: Vec<Patch>,
    /// Index of the first probe of the next `probes_for` vector: indices
    /// number the concatenation of all vectors since the exec.
    pub(crate) next: usize,
    /// Files `probes_for` was called for, still mapped -> their probe addresses.
    files: HashMap<FileKey, Vec<u64>>,
}

/// A file with an executable mapping, as seen in `/proc/PID/maps`.
pub(crate) struct MappedFile {
    pub(crate) key: FileKey,
    /// Start of its lowest mapping (any permissions): the load address.
    pub(crate) base: u64,
    /// `/proc/PID/map_files/...` name of its lowest mapping (opens the
    /// mapped file even if it was deleted or replaced on disk).
    pub(crate) map_file: String,
}

/// The regular files (path starting with '/') having at least one
/// executable mapping, in order of load address.
pub(crate) fn exec_files(pid: Tid, maps: &[Mapping]) -> Vec<MappedFile> {
    let mut by_file: HashMap<(&str, u64, &str), (u64, u64, bool)> = HashMap::new();
    for m in maps.iter().filter(|m| m.path.starts_with('/')) {
        let e = by_file
            .entry((m.dev.as_str(), m.inode, m.path.as_str()))
            .or_insert((m.start, m.end, false));
        if m.start < e.0 {
            (e.0, e.1) = (m.start, m.end);
        }
        e.2 |= m.exec;
    }
    let mut v: Vec<MappedFile> = by_file
        .into_iter()
        .filter(|(_, (_, _, exec))| *exec)
        .map(|((dev, inode, path), (start, end, _))| MappedFile {
            key: (dev.to_string(), inode, path.to_string(), start),
            base: start,
            map_file: format!("/proc/{pid}/map_files/{start:x}-{end:x}"),
        })
        .collect();
    v.sort_by_key(|f| f.base);
    v
}

impl Core<'_> {
    /// The probe at `addr`, if any.
    pub(crate) fn probe_at(&self, addr: u64) -> Option<ProbeAt> {
        self.armed.addrs.get(&addr).copied()
    }

    /// A new executable image (exec, or attach): ask for the probes of the executable, then of
    /// every other file mapped executable (the dynamic loader at exec; all libraries at
    /// attach), and place them. Returns the addresses of all probes placed.
    pub(crate) fn arm(&mut self, pid: Tid) -> Result<Vec<u64>, TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        self.armed = Armed::default();
        let exe = procfs::exe(pid).map_err(proc_err)?;
        // A deleted or replaced executable (e.g. rebuilt while running): read
        // the marks through /proc/PID/exe, which still is the running file.
        let probe_path = if exe.exists() {
            exe.clone()
        } else {
            PathBuf::from(format!("/proc/{pid}/exe"))
        };
        let probes = self
            .sink
            .probes_for(&probe_path)
            .map_err(|message| TraceError::Probes {
                image: exe.clone(),
                message,
            })?;
        let maps = procfs::maps(pid).map_err(proc_err)?;
        let files = exec_files(pid, &maps);
        let exe_name = exe.as_os_str().to_string_lossy();
        let exe_file = files.iter().find(|f| f.key.2 == exe_name);
        let mut addrs = Vec::new();
        if !probes.is_empty() {
            let base = exe_file
                .map(|f| f.base)
                .ok_or_else(|| TraceError::ImageNotMapped {
                    image: exe.clone(),
                    pid,
                })?;
            addrs = self.place(pid, &exe, base, &probes)?;
        }
        if let Some(f) = exe_file {
            self.sink.image_base(f.base);
            self.armed.files.insert(f.key.clone(), addrs.clone());
        }
        addrs.extend(self.scan_files(pid, files)?);
        Ok(addrs)
    }

    /// Check the probes of one file loaded at `base` (each must be a mark's NOP) and record
    /// them with the next indices. Returns their addresses.
    fn place(
        &mut self,
        pid: Tid,
        image: &Path,
        base: u64,
        probes: &[Probe],
    ) -> Result<Vec<u64>, TraceError> {
        let mem = Mem::open(pid).map_err(|source| TraceError::Proc { pid, source })?;
        let first = self.armed.next;
        let mut addrs = Vec::with_capacity(probes.len());
        check_probes(&mem, image, base, probes)?;
        for (i, p) in probes.iter().enumerate() {
            let addr = base.wrapping_add(p.offset);
            if self
                .armed
                .addrs
                .insert(
                    addr,
                    ProbeAt {
                        index: first + i,
                        operand: p.operand,
                        return_address: p.return_address.map(|ra| (ra, base)),
                    },
                )
                .is_some()
            {
                return Err(TraceError::DuplicateProbe {
                    image: image.to_path_buf(),
                    offset: p.offset,
                });
            }
            addrs.push(addr);
        }
        self.armed.next += probes.len();
        Ok(addrs)
    }

    /// Breakpoints mode: replace the probes at `addrs` by `int3` (restored at detach, scrubbed
    /// from forked children).
    pub(crate) fn patch_probes(&mut self, pid: Tid, addrs: &[u64]) -> Result<(), TraceError> {
        if addrs.is_empty() {
            return Ok(());
        }
        let proc_err = |source| TraceError::Proc { pid, source };
        let mem = Mem::open(pid).map_err(proc_err)?;
        for &addr in addrs {
            mem.write(addr, &ARMED).map_err(proc_err)?;
            self.add_patch(Patch {
                addr,
                orig: MARK_NOP,
                len: 5,
            });
        }
        Ok(())
    }

    pub(crate) fn add_patch(&mut self, patch: Patch) {
        self.armed.patched.push(patch);
    }

    /// The mapped files may have changed (a loader notification, an `mmap`/`munmap` syscall):
    /// forget the files no longer mapped and ask for the probes of the newly mapped ones.
    /// Returns the addresses of the probes placed.
    pub(crate) fn rescan(&mut self) -> Result<Vec<u64>, TraceError> {
        let pid = self.pid;
        let maps = match procfs::maps(pid) {
            Ok(m) => m,
            Err(_) if !procfs::exists(pid) => return Ok(Vec::new()), // dying
            Err(source) => return Err(TraceError::Proc { pid, source }),
        };
        let files = exec_files(pid, &maps);
        self.scan_files(pid, files)
    }

    fn scan_files(&mut self, pid: Tid, files: Vec<MappedFile>) -> Result<Vec<u64>, TraceError> {
        let current: HashSet<&FileKey> = files.iter().map(|f| &f.key).collect();
        let gone: Vec<FileKey> = self
            .armed
            .files
            .keys()
            .filter(|k| !current.contains(k))
            .cloned()
            .collect();
        for key in gone {
            let addrs = self.armed.files.remove(&key).unwrap_or_default();
            self.forget(pid, &addrs);
        }
        let mut placed = Vec::new();
        for f in files {
            if self.armed.files.contains_key(&f.key) {
                continue;
            }
            let path = PathBuf::from(&f.key.2);
            // A deleted or replaced file: read it through /proc/PID/map_files.
            let probe_path = if path.exists() {
                path.clone()
            } else {
                PathBuf::from(&f.map_file)
            };
            self.armed.files.insert(f.key.clone(), Vec::new());
            let probes =
                self.sink
                    .probes_for(&probe_path)
                    .map_err(|message| TraceError::Probes {
                        image: path.clone(),
                        message,
                    })?;
            self.sink.image_base(f.base);
            if !probes.is_empty() {
                let addrs = self.place(pid, &path, f.base, &probes)?;
                placed.extend_from_slice(&addrs);
                self.armed.files.insert(f.key, addrs);
            }
        }
        Ok(placed)
    }

    /// A file was unmapped: its probes stop being hit (their indices are not
    /// reused). Patched bytes still present (the mapping lost only its
    /// execute permission) are restored, best effort.
    fn forget(&mut self, pid: Tid, addrs: &[u64]) {
        if addrs.is_empty() {
            return;
        }
        let mem = Mem::open(pid).ok();
        for addr in addrs {
            self.armed.addrs.remove(addr);
            if let Some(i) = self.armed.patched.iter().position(|p| p.addr == *addr) {
                let p = self.armed.patched.swap_remove(i);
                let mut now = [0u8; 5];
                if let Some(mem) = &mem {
                    if mem.read(p.addr, &mut now).is_ok() && now == ARMED {
                        let _ = mem.write(p.addr, &p.orig[..p.len]);
                    }
                }
            }
        }
    }
}
