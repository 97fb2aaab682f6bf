//! Each measured thread's own instructions counter, for stubs that read instructions
//! ([`Reading::Rdpmc`](super::stub::Reading)): a user-space instructions event opened *by the
//! thread itself* (an injected `perf_event_open(attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)`: pid 0
//! is the calling thread), its `perf_event_mmap_page` mapped in the program (an injected `mmap`)
//! with its address in the thread's slot, a copy of the event taken by the tool
//! (`pidfd_getfd`: the tool reads the count where no stub does, at the thread's exit or exec),
//! and the program's descriptor closed: the program's files are untouched, the mapping keeps
//! the event alive.

use std::fs::File;
use std::io::Read;

use nix::libc;

use super::inject::{self, setup_err};
use super::region::Region;
use crate::procfs;
use crate::sys::{rdpmc, Tid};
use crate::TraceError;

/// Open thread `tid`'s (stopped; slot `slot` just assigned to it) counter and point its slot at
/// the counter's page; returns the tool's copy of the event. The counter counts from 0 here.
pub(super) fn open(
    tid: Tid,
    region: &mut Region,
    slot: usize,
    deferred: &mut Vec<i32>,
) -> Result<File, TraceError> {
    let gadget = region.injector;
    let call = |nr, args, deferred: &mut Vec<i32>| inject::syscall(tid, gadget, nr, args, deferred);
    let failed = |what: &str, r: i64| {
        setup_err(
            tid,
            format!(
                "{what} in the program: {}",
                std::io::Error::from_raw_os_error(-r as i32)
            ),
        )
    };
    if let Some(old) = region.take_counter_page(slot) {
        call(libc::SYS_munmap, [old, 4096, 0, 0, 0, 0], deferred)?;
    }
    let args = rdpmc::open_args(region.attr_at(slot));
    let fd = call(libc::SYS_perf_event_open, args, deferred)?;
    if fd < 0 {
        return Err(failed(
            "perf_event_open of the thread's instructions counter",
            fd,
        ));
    }
    let map = [
        0,
        4096,
        libc::PROT_READ as u64,
        libc::MAP_SHARED as u64,
        fd as u64,
        0,
    ];
    let page = call(libc::SYS_mmap, map, deferred);
    let copy = procfs::tgid(tid)
        .map_err(|source| TraceError::Proc { pid: tid, source })
        .and_then(|pid| {
            rdpmc::fd_of(pid, fd as i32).map_err(|e| {
                setup_err(
                    tid,
                    format!("taking the thread's counter (pidfd_getfd): {e}"),
                )
            })
        });
    call(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0], deferred)?;
    let page = page?;
    if page < 0 {
        return Err(failed("mapping the thread's counter page", page));
    }
    region.set_counter_page(slot, page as u64);
    copy
}

/// The words of the event each thread opens: its user-space instructions, or under the testing
/// stand-in ([`super::clock::software_stand_in`]) its task clock.
pub(super) fn attr_words() -> Vec<u64> {
    #[cfg(feature = "testing")]
    if super::clock::software_stand_in() {
        return rdpmc::words(&rdpmc::software_stand_in());
    }
    rdpmc::words(&rdpmc::instructions())
}

/// The count of the event `counter` (the thread's user-space instructions so far), if readable.
pub(super) fn read(mut counter: &File) -> Option<u64> {
    let mut b = [0u8; 8];
    counter.read_exact(&mut b).ok()?;
    Some(u64::from_ne_bytes(b))
}
