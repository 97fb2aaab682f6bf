//! The native backend's unsafe parts in the tool: the time-stamp counter, a page of generated
//! code run on a thread whose `%gs` points at a record slot (the start-up calibration of the
//! per-hit cost, and the tests that execute the stubs), and the event loop's sleep that a
//! tracee's stop ends (`ChildEvents`).

use std::io;

use nix::libc::{self};

use crate::ptrace::counting::native::stub::{
    self, Reading, StubOperand, COUNTER_PAGE, FIRST_STUB, LIMIT, RING, RING_RECORDS, SLOT_BYTES,
    STUB_BYTES,
};

/// The time-stamp counter (`rdtsc`).
pub fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no memory effects; x86-64 always has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// While held, the calling thread's SIGCHLD is blocked, so that [`ChildEvents::sleep`] can wait
/// for it: the kernel sends SIGCHLD to a tracer at each stop and exit of a tracee, and a tracer
/// that sleeps between looks at its tracees wakes at once instead of leaving a stopped thread
/// waiting out the sleep. The mask before is put back on drop (children spawned later get the
/// tool's mask: not while this is held). A SIGCHLD that another thread of the tool takes is
/// lost to the sleep, which then lasts its whole time, as without this.
pub struct ChildEvents {
    before: nix::sys::signal::SigSet,
}

impl ChildEvents {
    pub fn watch() -> io::Result<ChildEvents> {
        use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
        let mut before = SigSet::empty();
        let chld = SigSet::from(Signal::SIGCHLD);
        pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&chld), Some(&mut before))?;
        Ok(ChildEvents { before })
    }

    /// Sleeps for `d` or until a SIGCHLD (a tracee stopped or ended), whichever comes first.
    pub fn sleep(&self, d: std::time::Duration) {
        let chld = nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGCHLD);
        let timeout = libc::timespec {
            tv_sec: d.as_secs() as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        };
        // SAFETY: sigtimedwait(2) reads the set and the timeout (locals) and writes no info (a
        // null pointer). Its result (the signal, or -1: EAGAIN at the timeout, EINTR) is
        // not needed: the caller looks at its tracees after either.
        unsafe {
            libc::sigtimedwait(chld.as_ref(), std::ptr::null_mut(), &timeout);
        }
    }
}

impl Drop for ChildEvents {
    fn drop(&mut self) {
        use nix::sys::signal::{pthread_sigmask, SigmaskHow};
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&self.before), None);
    }
}

/// A private anonymous mapping holding generated machine code (read-write until
/// [`CodePage::seal`], then read-execute).
pub struct CodePage {
    ptr: *mut u8,
    len: usize,
    sealed: bool,
}

impl CodePage {
    pub fn new(len: usize) -> io::Result<CodePage> {
        // SAFETY: a fresh anonymous mapping; unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(CodePage {
            ptr: ptr.cast(),
            len,
            sealed: false,
        })
    }

    /// Its address.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Copy `code` to offset `at` (before sealing).
    pub fn write(&mut self, at: usize, code: &[u8]) {
        assert!(!self.sealed && at + code.len() <= self.len);
        // SAFETY: in bounds of our writable mapping.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), self.ptr.add(at), code.len()) }
    }

    /// Make it executable (and no longer writable).
    pub fn seal(&mut self) -> io::Result<()> {
        // SAFETY: changes the protection of our own mapping.
        if unsafe { libc::mprotect(self.ptr.cast(), self.len, libc::PROT_READ | libc::PROT_EXEC) }
            != 0
        {
            return Err(io::Error::last_os_error());
        }
        self.sealed = true;
        Ok(())
    }

    /// Call the code at offset `entry` as `extern "C" fn()` with the calling thread's `gs_base`
    /// set to `slot` (put back to 0 after): run it on a thread of its own.
    ///
    /// # Safety
    /// The code at `entry` must be a function of the C ABI that only touches the stack below
    /// its return address and `slot`'s [`slot_len`] bytes (through `%gs`), and returns. The
    /// calling thread must not use `%gs` itself (Rust and glibc on x86-64 Linux do not).
    pub unsafe fn call_with_gs(
        &self,
        entry: usize,
        slot: *mut u64,
        slot_len: usize,
    ) -> io::Result<()> {
        assert!(self.sealed && entry < self.len && slot_len >= 8);
        set_gs(slot as u64)?;
        // SAFETY: the caller's contract; the page is sealed, so the pointer is valid code.
        let f: extern "C" fn() = std::mem::transmute(self.ptr.add(entry));
        f();
        set_gs(0)
    }

    /// Test aid: call the code at `entry` with known values in every general register but
    /// `%rbx`, `%rbp` and `%rsp`, a pattern in the 128 bytes below the callee's `%rsp` and the
    /// flags set to `flags`; returns whether the registers, the pattern and the flags came back
    /// unchanged.
    ///
    /// # Safety
    /// As for [`CodePage::call_with_gs`]; `gs_base` must already be set.
    #[cfg(test)]
    pub unsafe fn call_checked(&self, entry: usize, flags: u64) -> bool {
        let f = self.ptr.add(entry);
        let ok: u64;
        std::arch::asm!(
            "push {flags}",
            "push {f}",
            // The pattern: [rsp-136, rsp-8) is the callee's red zone (the call pushes at rsp-8).
            "mov r11, 0x5a5a5a5a5a5a5a5a",
            "mov rax, -136",
            "2:",
            "mov [rsp+rax], r11",
            "add rax, 8",
            "cmp rax, -8",
            "jne 2b",
            "mov rax, 0x1111", "mov rcx, 0x2222", "mov rdx, 0x3333", "mov rsi, 0x4444",
            "mov rdi, 0x5555", "mov r8, 0x6666", "mov r9, 0x7777", "mov r10, 0x8888",
            "mov r11, 0x9999", "mov r12, 0xaaaa", "mov r13, 0xbbbb", "mov r14, 0xcccc",
            "push qword ptr [rsp+8]", "popfq",
            "call qword ptr [rsp]",
            "pushfq", "pop r15",
            "cmp r15, [rsp+8]", "jne 3f",
            "cmp rax, 0x1111", "jne 3f", "cmp rcx, 0x2222", "jne 3f", "cmp rdx, 0x3333", "jne 3f",
            "cmp rsi, 0x4444", "jne 3f", "cmp rdi, 0x5555", "jne 3f", "cmp r8, 0x6666", "jne 3f",
            "cmp r9, 0x7777", "jne 3f", "cmp r10, 0x8888", "jne 3f", "cmp r11, 0x9999", "jne 3f",
            "cmp r12, 0xaaaa", "jne 3f", "cmp r13, 0xbbbb", "jne 3f", "cmp r14, 0xcccc", "jne 3f",
            "mov r11, 0x5a5a5a5a5a5a5a5a",
            "mov rax, -136",
            "4:",
            "cmp [rsp+rax], r11",
            "jne 3f",
            "add rax, 8",
            "cmp rax, -8",
            "jne 4b",
            "mov r15, 1",
            "jmp 5f",
            "3:",
            "mov r15, 0",
            "5:",
            "add rsp, 16",
            f = in(reg) f,
            flags = in(reg) flags,
            lateout("r15") ok,
            lateout("rax") _, lateout("rcx") _, lateout("rdx") _, lateout("rsi") _, lateout("rdi") _,
            lateout("r8") _, lateout("r9") _, lateout("r10") _, lateout("r11") _, lateout("r12") _,
            lateout("r13") _, lateout("r14") _,
        );
        ok == 1
    }
}

// SAFETY: the mapping is owned; it is written only through &mut and executed after sealing.
unsafe impl Send for CodePage {}
unsafe impl Sync for CodePage {}

impl Drop for CodePage {
    fn drop(&mut self) {
        // SAFETY: our own mapping; no code runs in it any more.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Set the calling thread's `gs_base` (`arch_prctl(ARCH_SET_GS)`).
fn set_gs(base: u64) -> io::Result<()> {
    const ARCH_SET_GS: i64 = 0x1001;
    // SAFETY: only the calling thread's gs_base changes; nothing of the process uses %gs.
    if unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_SET_GS, base) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Test aid: run `f` with the calling thread's `gs_base` at `slot`.
///
/// # Safety
/// As for [`CodePage::call_with_gs`].
#[cfg(test)]
pub unsafe fn with_gs<R>(slot: *mut u64, f: impl FnOnce() -> R) -> R {
    set_gs(slot as u64).unwrap();
    let r = f();
    set_gs(0).unwrap();
    r
}

/// Marks per calibration call, and calls.
const MARKS: usize = 256;
const CALLS: usize = 64;

/// The gaps (ticks, sorted) between consecutive records of back-to-back marks, measured by
/// running the stubs (`MARKS` marks patched into jumps to their stubs, then `ret`) on a thread
/// of the tool whose `%gs` points at a slot: what one mark hit costs, as often as measured (the
/// native backend takes their mean: on a guest whose TSC moves in steps of ~10 ns, a hit of
/// ~13 ns reads one step or two, and the median is one of the steps, not the cost).
pub fn stub_hit_gaps() -> io::Result<Vec<u64>> {
    hit_gaps(Reading::Tsc)
}

/// The instructions one hit of an `rdpmc` stub adds to a strand, measured as
/// [`stub_hit_gaps`] measures time, the calling thread's instructions counted by its own event
/// (where user space can read it): the median gap between back-to-back marks, less the mark's
/// own `jmp` (the NOP it stands for is the program's).
#[cfg(test)]
pub fn stub_hit_instructions() -> io::Result<u64> {
    let gaps = hit_gaps(Reading::Rdpmc)?;
    Ok(gaps[gaps.len() / 2] - 1)
}

/// The gaps between the clock values recorded by back-to-back marks' stubs of `reading`,
/// sorted.
fn hit_gaps(reading: Reading) -> io::Result<Vec<u64>> {
    let marks_at = FIRST_STUB as usize + MARKS * STUB_BYTES as usize;
    let len = (marks_at + MARKS * 5 + 1).next_multiple_of(4096);
    let mut page = CodePage::new(len)?;
    let base = page.addr();
    page.write(0, &stub::page_head(reading));
    for i in 0..MARKS {
        let at = base + FIRST_STUB + (i as u64) * STUB_BYTES;
        let mark = base + (marks_at + 5 * i) as u64;
        let code = stub::stub(reading, at, mark, base, i as u32, StubOperand::None)
            .ok_or_else(|| io::Error::other("stub out of reach"))?;
        page.write((at - base) as usize, &code);
        page.write(
            (mark - base) as usize,
            &stub::jump(mark, at).expect("in reach"),
        );
    }
    page.write(marks_at + 5 * MARKS, &[0xc3]); // ret
    page.seal()?;
    let mut slot = vec![0u64; (SLOT_BYTES / 8) as usize];
    slot[(LIMIT / 8) as usize] = u64::MAX; // never full
    debug_assert!((MARKS * CALLS) as u64 <= RING_RECORDS);
    let ptr = slot.as_mut_ptr() as usize;
    let slot_len = slot.len() * 8;
    std::thread::scope(|s| {
        s.spawn(|| {
            // The thread's own instructions counter, its page where the stubs look for it.
            let counter = match reading {
                Reading::Tsc => None,
                Reading::Rdpmc => {
                    let fd = super::open_user_perf_event(super::rdpmc::instructions(), 0)?;
                    let page = super::rdpmc::CounterPage::map(&fd)?;
                    // SAFETY: `slot` is not read or written by anyone else before the join.
                    unsafe { *(ptr as *mut u64).add((COUNTER_PAGE / 8) as usize) = page.addr() };
                    Some((fd, page))
                }
            };
            for _ in 0..CALLS {
                // SAFETY: the page holds MARKS jumps to stubs that record into `slot` through
                // %gs (at most MARKS * CALLS < RING_RECORDS records, never waiting) and come
                // back, then `ret`; the stubs touch only the stack below the return address.
                unsafe { page.call_with_gs(marks_at, ptr as *mut u64, slot_len) }?;
            }
            drop(counter);
            Ok::<(), io::Error>(())
        })
        .join()
        .map_err(|_| io::Error::other("calibration thread panicked"))?
    })?;
    if slot[0] != (MARKS * CALLS) as u64 {
        return Err(io::Error::other(format!(
            "expected {} records, found {}",
            MARKS * CALLS,
            slot[0]
        )));
    }
    let record = |n: usize| slot[(RING / 8) as usize + 3 * n];
    let mut deltas: Vec<u64> = (0..CALLS)
        .flat_map(|c| (1..MARKS).map(move |i| c * MARKS + i))
        .map(|n| record(n).wrapping_sub(record(n - 1)))
        .collect();
    deltas.sort_unstable();
    Ok(deltas)
}

/// Test aid: a page with one stub reading `reading` for probe 42, whose mark is at the entry
/// of a function `mark; ret` in the page's second half; returns the page and the entry's
/// offset.
#[cfg(test)]
pub(crate) fn one_mark_reading(reading: Reading, operand: StubOperand) -> (CodePage, usize) {
    let mut page = CodePage::new(8192).unwrap();
    let base = page.addr();
    page.write(0, &stub::page_head(reading));
    let at = base + FIRST_STUB;
    let entry = 4096usize;
    let mark = base + entry as u64;
    page.write(
        FIRST_STUB as usize,
        &stub::stub(reading, at, mark, base, 42, operand).unwrap(),
    );
    page.write(entry, &stub::jump(mark, at).unwrap());
    page.write(entry + 5, &[0xc3]);
    page.seal().unwrap();
    (page, entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page with one stub for a mark at the entry of a function `mark; ret`; returns the page
    /// and the entry's offset.
    fn one_mark(operand: StubOperand) -> (CodePage, usize) {
        one_mark_reading(Reading::Tsc, operand)
    }

    #[test]
    fn stubs_keep_registers_flags_and_the_red_zone_and_record_the_hit() {
        for (operand, expect) in [
            (StubOperand::None, None),
            (StubOperand::Register(0), Some(0x1111)),  // rax
            (StubOperand::Register(13), Some(0xbbbb)), // r13
            (StubOperand::Register(4), Some(0x4444)),  // rsi
        ] {
            let (page, entry) = one_mark(operand);
            let mut slot = vec![0u64; (SLOT_BYTES / 8) as usize];
            slot[(LIMIT / 8) as usize] = RING_RECORDS;
            let ptr = slot.as_mut_ptr();
            // Flags: CF, ZF, SF and OF set, then clear (bit 1 and IF are always set).
            for flags in [0x8c3u64 | 0x202, 0x202] {
                // SAFETY: the stub records into `slot` through %gs and returns to the `ret`.
                let ok = unsafe { with_gs(ptr, || page.call_checked(entry, flags)) };
                assert!(
                    ok,
                    "{operand:?}: a register, the flags or the red zone changed"
                );
            }
            assert_eq!(slot[0], 2, "two records");
            let rec = &slot[(RING / 8) as usize..(RING / 8) as usize + 3];
            assert_eq!(rec[2], 42, "probe 42, no wait");
            assert!(rec[0] > 0 && rec[0] <= rdtsc());
            if let Some(v) = expect {
                assert_eq!(rec[1], v, "{operand:?}");
            }
        }
    }

    /// The rdpmc stubs run here up to the `rdpmc` itself: with a counter page whose `index` is 0
    /// (the event not on a counter: its count is `offset`) they record `offset`, keeping the
    /// registers, the flags and the red zone, on the fast path and, the slot full, the slow path.
    #[test]
    fn rdpmc_stubs_record_a_page_without_an_index_as_its_offset() {
        for operand in [StubOperand::None, StubOperand::Register(0)] {
            let (page, entry) = one_mark_reading(Reading::Rdpmc, operand);
            let mut slot = vec![0u64; (SLOT_BYTES / 8) as usize];
            slot[(LIMIT / 8) as usize] = RING_RECORDS;
            // A stand-in counter page in the slot's own idle area: lock 2, index 0, offset.
            let fake = (stub::IDLE_PAGE / 8) as usize;
            slot[fake + 1] = 2; // lock 2 (at 8), index 0 (at 12)
            slot[fake + 2] = 0x1234_5678_9abc; // offset (at 16)
            let ptr = slot.as_mut_ptr();
            slot[(COUNTER_PAGE / 8) as usize] = ptr as u64 + stub::IDLE_PAGE;
            for flags in [0x8c3u64 | 0x202, 0x202] {
                // SAFETY: the stub records into `slot` through %gs, reads the stand-in page
                // (index 0: no rdpmc) and returns to the `ret`.
                let ok = unsafe { with_gs(ptr, || page.call_checked(entry, flags)) };
                assert!(
                    ok,
                    "{operand:?}: a register, the flags or the red zone changed"
                );
            }
            assert_eq!(slot[0], 2, "two records");
            let rec = &slot[(RING / 8) as usize..(RING / 8) as usize + 3];
            assert_eq!(
                (rec[0], rec[2]),
                (0x1234_5678_9abc, 42),
                "the offset, probe 42"
            );
            // The slow path: the slot full, the analyzer gone: dropped, nothing changed.
            slot[(LIMIT / 8) as usize] = 2;
            slot[(stub::GONE / 8) as usize] = 1;
            // SAFETY: as above.
            let ok = unsafe { with_gs(ptr, || page.call_checked(entry, 0x202)) };
            assert!(ok);
            assert_eq!(slot[0], 2, "dropped");
        }
    }

    /// The rdpmc slow path: the slot full, the stub waits; meanwhile the count moves on by 1000
    /// (the stand-in page's `offset`, under its lock) and then the analyzer makes room: the
    /// record holds the count at the mark and the exact 1000 it waited (no ÷ 64).
    #[test]
    fn an_rdpmc_stub_that_waited_records_the_instructions_it_waited_exactly() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let (page, entry) = one_mark_reading(Reading::Rdpmc, StubOperand::None);
        let mut slot = vec![0u64; (SLOT_BYTES / 8) as usize];
        let fake = (stub::IDLE_PAGE / 8) as usize;
        slot[fake + 2] = 5000; // offset
        slot[(stub::TOOL_PID / 8) as usize] = std::process::id() as u64;
        let ptr = slot.as_mut_ptr();
        slot[(COUNTER_PAGE / 8) as usize] = ptr as u64 + stub::IDLE_PAGE;
        // head 0 = limit 0: full.
        let at = ptr as usize;
        let analyzer = std::thread::spawn(move || {
            // SAFETY: `slot` outlives the join below; these words are shared with the stub,
            // which only reads them, through atomics on both sides of the seqlock.
            let word = |i: usize| unsafe { AtomicU64::from_ptr((at as *mut u64).add(i)) };
            std::thread::sleep(std::time::Duration::from_millis(20));
            word(fake + 1).store(1, Ordering::SeqCst); // lock 1: being written
            word(fake + 2).store(6000, Ordering::SeqCst);
            word(fake + 1).store(2, Ordering::SeqCst);
            word((LIMIT / 8) as usize).store(RING_RECORDS, Ordering::SeqCst);
        });
        // SAFETY: the stub records into `slot` through %gs, reads the stand-in page, waits in
        // its slow path until `limit` moves, and returns to the `ret`.
        let ok = unsafe { with_gs(ptr, || page.call_checked(entry, 0x8c3 | 0x202)) };
        analyzer.join().unwrap();
        assert!(ok, "a register, the flags or the red zone changed");
        assert_eq!(slot[0], 1, "one record");
        let rec = &slot[(RING / 8) as usize..(RING / 8) as usize + 3];
        assert_eq!(rec[0], 5000, "the count at the mark");
        assert_eq!(
            (rec[2] as u32, rec[2] >> 32),
            (42, 1000),
            "probe 42, waited 1000"
        );
    }

    /// Where user space can read the instructions counter: a hit adds exactly the instructions
    /// the decoder counts (`stub_decoding.rs`).
    #[test]
    fn an_rdpmc_hit_adds_the_instructions_counted_by_construction() {
        if let Err(why) = crate::sys::rdpmc::user_instructions_counter() {
            cilkview_fixtures::skip(format!("rdpmc: {why}"));
            return;
        }
        assert_eq!(
            stub_hit_instructions().unwrap(),
            stub::RDPMC_HIT_INSTRUCTIONS
        );
    }

    #[test]
    fn a_full_slot_waits_and_a_gone_analyzer_drops() {
        let (page, entry) = one_mark(StubOperand::None);
        let mut slot = vec![0u64; (SLOT_BYTES / 8) as usize];
        // Full (limit == head) and the analyzer says it is gone: the stub drops the record.
        slot[(stub::GONE / 8) as usize] = 1;
        let ptr = slot.as_mut_ptr();
        // SAFETY: as above.
        let ok = unsafe { with_gs(ptr, || page.call_checked(entry, 0x202)) };
        assert!(ok);
        assert_eq!(slot[0], 0, "dropped");
        // Full and the analyzer's pid does not exist: after 1024 rounds the stub finds out,
        // sets `gone` and drops.
        slot[(stub::GONE / 8) as usize] = 0;
        slot[(stub::TOOL_PID / 8) as usize] = i32::MAX as u64; // no such process
                                                               // SAFETY: as above.
        let ok = unsafe { with_gs(ptr, || page.call_checked(entry, 0x8c3 | 0x202)) };
        assert!(ok);
        assert_eq!(slot[0], 0, "dropped");
        assert_eq!(slot[(stub::GONE / 8) as usize], 1, "gone set by the stub");
    }
}
