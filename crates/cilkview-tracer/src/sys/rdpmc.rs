//! Whether user space may read an instructions counter with `rdpmc` here (what the native
//! counter needs to record instructions instead of time): a CPU PMU that perf exposes,
//! user-space `rdpmc` allowed by it, and a counting event whose mapped page says
//! `cap_user_rdpmc` with a counter index (and `pidfd_getfd`, which the native counter uses to
//! read a thread's count where no stub does).

use std::io;
use std::os::fd::AsRawFd;

use nix::libc;
use perf_event_open_sys::bindings::{
    perf_event_attr, perf_event_mmap_page, PERF_COUNT_HW_INSTRUCTIONS, PERF_TYPE_HARDWARE,
};

/// `cap_user_rdpmc`: bit 2 of the page's capabilities.
const CAP_USER_RDPMC: u64 = 1 << 2;

/// Why user space cannot read an instructions counter with `rdpmc` here.
#[derive(Debug, thiserror::Error)]
pub enum RdpmcUnavailable {
    #[error("no CPU PMU: /sys/bus/event_source/devices/cpu is absent")]
    NoPmu,
    #[error("{dir}/rdpmc: {source}")]
    Unreadable { dir: String, source: io::Error },
    #[error("user-space rdpmc is disabled ({dir}/rdpmc is 0)")]
    Disabled { dir: String },
    #[error("perf_event_open of an instructions counter: {0}")]
    Open(io::Error),
    #[error("mapping the counter's page: {0}")]
    Map(io::Error),
    #[error("the counter's page does not allow rdpmc (cap_user_rdpmc is 0)")]
    NoCapability,
    #[error("the counter has no index to read (not scheduled on a counter)")]
    NoIndex,
    #[error("the tool cannot take a copy of a process's counter (pidfd_getfd, Linux 5.6): {0}")]
    NoFdCopy(io::Error),
}

/// A counting event of the user-space instructions of one thread (the kernel and hypervisor
/// excluded, its size filled in): the event of the check, and the one each measured thread
/// opens for its stubs.
pub fn instructions() -> perf_event_attr {
    // SAFETY: a plain-old-data struct, all zeros is its documented default.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS as u64;
    super::user_only(attr)
}

/// A software event (the thread's task clock, user-space only) standing in for [`instructions`]
/// in the tests of the native counter's mechanics on machines without a PMU: its page is real
/// but has no counter index.
#[cfg(feature = "testing")]
pub fn software_stand_in() -> perf_event_attr {
    // SAFETY: a plain-old-data struct, all zeros is its documented default.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = perf_event_open_sys::bindings::PERF_TYPE_SOFTWARE;
    attr.config = perf_event_open_sys::bindings::PERF_COUNT_SW_TASK_CLOCK as u64;
    super::user_only(attr)
}

/// `attr` as the 64-bit words of its bytes, to write into the program's memory (its size is a
/// multiple of 8).
pub fn words(attr: &perf_event_attr) -> Vec<u64> {
    const N: usize = std::mem::size_of::<perf_event_attr>() / 8;
    const _: () = assert!(std::mem::size_of::<perf_event_attr>() % 8 == 0);
    // SAFETY: perf_event_attr is plain old data of N * 8 bytes (checked above), with no padding
    // bytes left uninitialized (zeroed, then fields set), read as u64s without alignment needs.
    let words: [u64; N] = unsafe { std::mem::transmute_copy(attr) };
    words.to_vec()
}

/// The arguments of `perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)`: the calling
/// thread's own event on any CPU, its attr at `attr_at` (an address in the program), closed on
/// exec.
pub fn open_args(attr_at: u64) -> [u64; 6] {
    [
        attr_at,
        0,
        -1i64 as u64,
        -1i64 as u64,
        perf_event_open_sys::bindings::PERF_FLAG_FD_CLOEXEC as u64,
        0,
    ]
}

/// A duplicate in the tool of file descriptor `fd` of process `pid` (`pidfd_open` and
/// `pidfd_getfd`, Linux 5.6; a tracer may take its tracee's).
pub fn fd_of(pid: super::Tid, fd: i32) -> io::Result<std::fs::File> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain syscall; the result is a fresh descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh, ours.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: plain syscall; the result is a fresh descriptor (close-on-exec) or -1.
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if dup < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh, ours.
    Ok(std::fs::File::from(unsafe {
        OwnedFd::from_raw_fd(dup as i32)
    }))
}

/// `Ok` if this thread's instructions could be read with `rdpmc`; else why not.
pub fn user_instructions_counter() -> Result<(), RdpmcUnavailable> {
    let dir = ["cpu", "cpu_core"]
        .iter()
        .map(|d| format!("/sys/bus/event_source/devices/{d}"))
        .find(|d| std::path::Path::new(d).exists())
        .ok_or(RdpmcUnavailable::NoPmu)?;
    let allowed = std::fs::read_to_string(format!("{dir}/rdpmc")).map_err(|source| {
        RdpmcUnavailable::Unreadable {
            dir: dir.clone(),
            source,
        }
    })?;
    if allowed.trim() == "0" {
        return Err(RdpmcUnavailable::Disabled { dir });
    }
    let fd = super::open_user_perf_event(instructions(), 0).map_err(RdpmcUnavailable::Open)?;
    let page = CounterPage::map(&fd).map_err(RdpmcUnavailable::Map)?;
    let caps = page.word(std::mem::offset_of!(perf_event_mmap_page, __bindgen_anon_1));
    let index = page.word(std::mem::offset_of!(perf_event_mmap_page, index)) as u32;
    drop(page);
    if caps & CAP_USER_RDPMC == 0 {
        return Err(RdpmcUnavailable::NoCapability);
    }
    if index == 0 {
        return Err(RdpmcUnavailable::NoIndex);
    }
    // The tool reads each thread's count at its exit from a copy of the program's descriptor.
    fd_of(std::process::id() as i32, fd.as_raw_fd()).map_err(RdpmcUnavailable::NoFdCopy)?;
    Ok(())
}

/// A perf event's first page (`perf_event_mmap_page`) mapped read-only, unmapped on drop.
pub(crate) struct CounterPage(*mut libc::c_void);

impl CounterPage {
    pub(crate) fn map(fd: &std::os::fd::OwnedFd) -> io::Result<CounterPage> {
        // SAFETY: maps the event's first page read-only; unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(CounterPage(p))
    }

    /// The 8 bytes at byte `at` of the page, as the kernel last wrote them.
    pub(crate) fn word(&self, at: usize) -> u64 {
        assert!(at + 8 <= 4096 && at % 8 == 0);
        // SAFETY: inside the mapped page, aligned; the kernel updates it (a volatile read).
        unsafe { std::ptr::read_volatile(self.0.cast::<u8>().add(at).cast::<u64>()) }
    }

    /// Where it is mapped.
    pub(crate) fn addr(&self) -> u64 {
        self.0 as u64
    }
}

impl Drop for CounterPage {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the stubs reading it have returned.
        unsafe { libc::munmap(self.0, 4096) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_event_counts_user_space_instructions_of_the_opening_thread() {
        let attr = instructions();
        assert_eq!(attr.type_, PERF_TYPE_HARDWARE);
        assert_eq!(attr.config, PERF_COUNT_HW_INSTRUCTIONS as u64);
        assert_eq!(attr.size as usize, std::mem::size_of::<perf_event_attr>());
        assert_eq!((attr.exclude_kernel(), attr.exclude_hv()), (1, 1));
        assert_eq!((attr.disabled(), attr.inherit(), attr.pinned()), (0, 0, 0));
        // The words written into the program are the struct's bytes.
        let words = words(&attr);
        assert_eq!(words.len() * 8, std::mem::size_of::<perf_event_attr>());
        assert_eq!(words[0], attr.type_ as u64 | (attr.size as u64) << 32);
        assert_eq!(words[1], attr.config);
        // pid 0 (the calling thread: the call is injected into each measured thread), any CPU,
        // no group, close-on-exec.
        assert_eq!(
            open_args(0x1234),
            [0x1234, 0, u64::MAX, u64::MAX, 8, 0],
            "perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)"
        );
    }

    #[test]
    fn the_tool_takes_a_copy_of_a_processs_descriptor() {
        use std::io::{Read, Seek, Write};
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"counted").unwrap();
        file.rewind().unwrap();
        let mut copy = fd_of(std::process::id() as i32, file.as_raw_fd()).unwrap();
        let mut read = String::new();
        copy.read_to_string(&mut read).unwrap();
        assert_eq!(read, "counted", "the same open file");
        assert!(
            fd_of(std::process::id() as i32, 1 << 20).is_err(),
            "no such descriptor"
        );
    }

    #[test]
    fn the_fields_read_are_where_the_kernel_puts_them() {
        // include/uapi/linux/perf_event.h: lock at 8, index at 12, capabilities at 40.
        assert_eq!(std::mem::offset_of!(perf_event_mmap_page, index), 12);
        assert_eq!(
            std::mem::offset_of!(perf_event_mmap_page, __bindgen_anon_1),
            40
        );
    }
}
