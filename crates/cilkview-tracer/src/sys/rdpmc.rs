//! Whether user space may read an instructions counter with `rdpmc` here (what the native
//! counter would need to record instructions instead of time): a CPU PMU that perf exposes,
//! user-space `rdpmc` allowed by it, and a counting event whose mapped page says
//! `cap_user_rdpmc` with a counter index.

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
    // SAFETY: a plain-old-data struct, all zeros is its documented default.
    let mut attr: perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = PERF_TYPE_HARDWARE;
    attr.config = PERF_COUNT_HW_INSTRUCTIONS as u64;
    let fd = super::open_user_perf_event(attr, 0).map_err(RdpmcUnavailable::Open)?;
    // SAFETY: maps the event's first page read-only; unmapped below.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return Err(RdpmcUnavailable::Map(io::Error::last_os_error()));
    }
    let word = |at: usize| -> u64 {
        // SAFETY: inside the mapped page, aligned; the kernel updates it (a volatile read).
        unsafe { std::ptr::read_volatile(page.cast::<u8>().add(at).cast::<u64>()) }
    };
    let caps = word(std::mem::offset_of!(perf_event_mmap_page, __bindgen_anon_1));
    let index = word(std::mem::offset_of!(perf_event_mmap_page, index)) as u32;
    // SAFETY: our own mapping, no reference to it outlives this call.
    unsafe { libc::munmap(page, 4096) };
    if caps & CAP_USER_RDPMC == 0 {
        return Err(RdpmcUnavailable::NoCapability);
    }
    if index == 0 {
        return Err(RdpmcUnavailable::NoIndex);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
