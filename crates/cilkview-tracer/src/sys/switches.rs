//! When a thread of the program is off its CPU: the kernel's context-switch records
//! (`perf_event_open` of a software dummy event with `context_switch`, no PMU needed), read from
//! their ring buffer. The native backend takes these intervals off the strands' times, so that a
//! strand is the time its thread ran (not the time it was preempted, slept or blocked).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU64, Ordering};

use nix::libc;
use perf_event_open_sys::bindings::{
    perf_event_attr, perf_event_header, perf_event_mmap_page, PERF_COUNT_SW_DUMMY,
    PERF_RECORD_MISC_SWITCH_OUT, PERF_RECORD_SWITCH, PERF_SAMPLE_TIME, PERF_TYPE_SOFTWARE,
};

use super::Tid;

/// Data pages of the ring (a power of two).
const DATA_PAGES: usize = 16;
const PAGE: usize = 4096;

/// The context-switch records of one thread.
pub struct SwitchLog {
    _fd: OwnedFd,
    map: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned; only this value reads it.
unsafe impl Send for SwitchLog {}

impl SwitchLog {
    /// Start recording the switches of thread `tid` (times in `CLOCK_MONOTONIC_RAW`
    /// nanoseconds: the clocksource scaled, no NTP slewing, so linear in the TSC).
    pub fn open(tid: Tid) -> io::Result<SwitchLog> {
        // SAFETY: a plain-old-data struct, all zeros is its documented default.
        let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
        attr.type_ = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_DUMMY as u64;
        attr.sample_type = PERF_SAMPLE_TIME as u64;
        attr.clockid = libc::CLOCK_MONOTONIC_RAW;
        attr.set_context_switch(1);
        attr.set_sample_id_all(1);
        attr.set_use_clockid(1);
        let fd = super::open_user_perf_event(attr, tid)?;
        let len = (1 + DATA_PAGES) * PAGE;
        // SAFETY: maps the event's ring buffer; unmapped in Drop.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SwitchLog {
            _fd: fd,
            map: map.cast(),
            len,
        })
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: `data_head` and `data_tail` of the metadata page: aligned, in bounds, shared
        // with the kernel, which accesses them atomically.
        unsafe { AtomicU64::from_ptr(self.map.add(offset).cast()) }
    }

    /// Calls `f(switched_out, time)` for each record since the last call, in order.
    pub fn read(&mut self, mut f: impl FnMut(bool, u64)) {
        let head_at = std::mem::offset_of!(perf_event_mmap_page, data_head);
        let tail_at = std::mem::offset_of!(perf_event_mmap_page, data_tail);
        let head = self.word(head_at).load(Ordering::Acquire);
        fence(Ordering::Acquire);
        let mut tail = self.word(tail_at).load(Ordering::Relaxed);
        let size = DATA_PAGES * PAGE;
        let byte = |at: u64| -> u8 {
            // SAFETY: inside the data pages; written by the kernel before `data_head`.
            unsafe { *self.map.add(PAGE + (at as usize % size)) }
        };
        let read = |at: u64, n: usize| -> u64 {
            (0..n).fold(0u64, |v, i| v | (byte(at + i as u64) as u64) << (8 * i))
        };
        while tail + std::mem::size_of::<perf_event_header>() as u64 <= head {
            let kind = read(tail, 4) as u32;
            let misc = read(tail + 4, 2) as u32;
            let len = read(tail + 6, 2);
            if len == 0 {
                break;
            }
            if kind == PERF_RECORD_SWITCH && len >= 16 {
                // sample_id_all with PERF_SAMPLE_TIME only: the time follows the header.
                let time = read(tail + 8, 8);
                f(misc & PERF_RECORD_MISC_SWITCH_OUT != 0, time);
            }
            tail += len;
        }
        self.word(tail_at).store(tail, Ordering::Release);
    }
}

impl Drop for SwitchLog {
    fn drop(&mut self) {
        // SAFETY: our own mapping; no reference outlives self.
        unsafe {
            libc::munmap(self.map.cast(), self.len);
        }
    }
}

/// `CLOCK_MONOTONIC_RAW` now, in nanoseconds (the clock of the switch records).
pub fn raw_clock_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes into a local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_thread_is_seen_switching_out_and_in() {
        let mut log = match SwitchLog::open(0) {
            Ok(l) => l,
            Err(e) => {
                cilkview_fixtures::skip(format!("perf_event_open of a software event: {e}"));
                return;
            }
        };
        let t0 = raw_clock_ns();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let mut seen = vec![];
        log.read(|out, t| seen.push((out, t)));
        assert!(seen.len() >= 2, "{seen:?}");
        let out = seen.iter().find(|s| s.0).expect("a switch out");
        let back = seen
            .iter()
            .find(|s| !s.0 && s.1 > out.1)
            .expect("a switch in");
        assert!(out.1 >= t0 && back.1 - out.1 >= 4_000_000, "{seen:?}");
    }
}
