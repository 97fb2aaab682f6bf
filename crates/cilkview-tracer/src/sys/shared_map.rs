//! A file mapped shared with another process (the emulation backend's record ring): atomic
//! access to its header words, reads of the data the other process published.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use nix::libc;

/// A shared memory mapping of a file (the emulation backend's record ring), mapped read-write
/// and shared with another process: atomic access to its header words, plain reads of its data.
pub struct SharedMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned and only accessed through atomics or shared reads.
unsafe impl Send for SharedMap {}

impl SharedMap {
    /// Map the first `len` bytes of `file` (already at least that long).
    pub fn new(file: &std::fs::File, len: usize) -> io::Result<SharedMap> {
        // SAFETY: a fresh mapping of a file we hold; unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SharedMap {
            ptr: ptr.cast(),
            len,
        })
    }

    fn atomic64(&self, at: usize) -> &AtomicU64 {
        assert!(at % 8 == 0 && at + 8 <= self.len);
        // SAFETY: in bounds and aligned (mappings are page-aligned); the other process accesses
        // this word atomically too.
        unsafe { AtomicU64::from_ptr(self.ptr.add(at).cast()) }
    }

    fn atomic32(&self, at: usize) -> &AtomicU32 {
        assert!(at % 4 == 0 && at + 4 <= self.len);
        // SAFETY: as for atomic64.
        unsafe { AtomicU32::from_ptr(self.ptr.add(at).cast()) }
    }

    /// The 64-bit word at byte `at`, loaded with acquire order.
    pub fn load64(&self, at: usize) -> u64 {
        self.atomic64(at).load(Ordering::Acquire)
    }

    /// Store `v` at byte `at` with release order.
    pub fn store64(&self, at: usize, v: u64) {
        self.atomic64(at).store(v, Ordering::Release)
    }

    /// The 32-bit word at byte `at` (sequentially consistent).
    pub fn load32(&self, at: usize) -> u32 {
        self.atomic32(at).load(Ordering::SeqCst)
    }

    /// Store `v` at byte `at` (sequentially consistent).
    pub fn store32(&self, at: usize, v: u32) {
        self.atomic32(at).store(v, Ordering::SeqCst)
    }

    /// A full fence (orders a store before a later load, against the other process).
    pub fn fence(&self) {
        fence(Ordering::SeqCst)
    }

    /// Wake the other process's waiters on the futex word at byte `at`.
    pub fn futex_wake(&self, at: usize) {
        let word = self.atomic32(at).as_ptr();
        // SAFETY: a futex wake on a word of our mapping; no memory is accessed by it.
        unsafe {
            libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE, i32::MAX, 0, 0, 0);
        }
    }

    /// Wait (at most `timeout`) while the futex word at byte `at` holds `value`, or until the
    /// other process wakes it.
    pub fn futex_wait(&self, at: usize, value: u32, timeout: std::time::Duration) {
        let word = self.atomic32(at).as_ptr();
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: a futex wait on a word of our mapping with a timeout we own; the kernel only
        // reads the word and the timespec.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word,
                libc::FUTEX_WAIT,
                value,
                &ts as *const _,
                0,
                0,
            );
        }
    }

    /// The words of bytes `from..from + 8 * n`: written by the other process before it
    /// published them (release) and not written again until we say we are done with them.
    pub fn words(&self, from: usize, n: usize) -> &[u64] {
        assert!(from % 8 == 0 && from + 8 * n <= self.len);
        // SAFETY: in bounds and aligned; the protocol guarantees the range is not written while
        // the slice lives (the writer waits for the reader's tail).
        unsafe { std::slice::from_raw_parts(self.ptr.add(from).cast(), n) }
    }

    /// [`SharedMap::words`] as `n` records of `N` words each, from byte `from`.
    pub fn records<const N: usize>(&self, from: usize, n: usize) -> &[[u64; N]] {
        let words = self.words(from, n * N);
        // SAFETY: `[u64; N]` has `u64`'s alignment and the size of N of them, without padding:
        // the `n * N` words are exactly `n` records, borrowed from `self` as `words` is.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), n) }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no references outlive self.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

#[cfg(test)]
impl SharedMap {
    /// Write `words` at byte `from` (the tests' stand-in for the other process).
    pub fn store_words(&self, from: usize, words: &[u64]) {
        assert!(from % 8 == 0 && from + 8 * words.len() <= self.len);
        // SAFETY: in bounds and aligned; tests write only what the reader does not read yet.
        unsafe {
            std::ptr::copy_nonoverlapping(words.as_ptr(), self.ptr.add(from).cast(), words.len())
        }
    }
}
