//! The shared record region of one image: a memfd created inside the program (by injected
//! system calls), mapped there and in the tool, cut into per-thread slots (layout: `stub.rs`).

use std::fs::OpenOptions;

use nix::libc;

use super::call_gadget::{self, Gadget};
use super::inject::{self, setup_err, PROT_RW};
use super::spare_code;
use super::stub::{
    self, Reading, ATTR, COUNTER_PAGE, GADGET, GADGET_STEPS_LEN, GONE, HEAD, IDLE_PAGE, LIMIT,
    RECORD, RING, RING_RECORDS, SLOT_BYTES, TOOL_PID,
};
use super::unwind::{self, Piece};
use crate::procfs::Mem;
use crate::sys::{SharedMap, Tid};
use crate::TraceError;

/// Record number `n`'s place in its ring: `n`'s low 16 bits (RING_RECORDS = 2^16, as the
/// stub's `movzx`).
#[inline(always)]
pub(super) fn ring_index(n: u64) -> usize {
    const _: () = assert!(RING_RECORDS == 1 << 16);
    (n as u16) as usize
}

/// Offset of the call gadget in the region's first page (after the head and the name).
const INJECTOR: u64 = 0x800;

/// Slots of the region: one per measured thread, the last one for [`Region::discard`].
const SLOT_COUNT: usize = 256;
/// Threads measured at once, at most.
pub(super) const SLOTS: usize = SLOT_COUNT - 1;

/// One record as the stub wrote it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Record {
    pub(super) tsc: u64,
    pub(super) operand: u64,
    pub(super) probe: u32,
    /// What the stub waited for room after the mark, as it wrote it: ticks or instructions
    /// shifted right by [`Reading::wait_shift`] (0: it did not wait, the common case, tested
    /// before any shift).
    pub(super) wait: u32,
}

impl Record {
    /// The record whose words in the ring are `w`.
    #[inline(always)]
    pub(super) fn read(w: &[u64; 3]) -> Record {
        Record {
            tsc: w[0],
            operand: w[1],
            probe: w[2] as u32,
            wait: (w[2] >> 32) as u32,
        }
    }
}

/// A slot's ring: a record's words (tsc, operand, then probe and wait in one).
pub(super) type Ring = [[u64; 3]; RING_RECORDS as usize];
const _: () = assert!(RECORD == 24);

pub(super) struct Region {
    map: SharedMap,
    /// Its address in the program.
    base: u64,
    /// The `int3` after the `syscall` of the page's head (`stub.rs`), run over to end stepping.
    pub(super) int3: u64,
    /// The gadget injected calls run on (`call_gadget.rs`), at [`INJECTOR`] in the first page.
    pub(super) injector: Gadget,
    free: Vec<usize>,
    /// Stub pages mapped in the program: (start, end).
    pub(super) pages: Vec<(u64, u64)>,
    /// What its stubs read.
    pub(super) reading: Reading,
    /// By slot: the counter page mapped for its last thread ([`Reading::Rdpmc`]).
    counter_pages: Vec<Option<u64>>,
}

impl Region {
    /// Map a code page (slow path, gadgets) and the region into process `pid`, stopped in
    /// thread `tid`. The first call (the page's `mmap`) runs on a gadget written for the moment
    /// in spare bytes of the program's mappings (`spare_code.rs`), its code put back after.
    pub(super) fn create(
        pid: Tid,
        tid: Tid,
        reading: Reading,
        deferred: &mut Vec<i32>,
    ) -> Result<Region, TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        let (page, gadget) = Region::first_page(pid, tid, reading, deferred)?;
        let len = SLOT_COUNT as u64 * SLOT_BYTES;
        let (file, base) =
            Region::shared_records(pid, tid, gadget, page + stub::FIRST_STUB, len, deferred)?;
        let map = SharedMap::new(&file, len as usize).map_err(proc_err)?;
        // The discard slot: `head` = `limit` = 0 sends every hit to the slow path, which finds
        // `gone` set and drops it.
        let discard = SLOTS * SLOT_BYTES as usize;
        map.store64(discard + GONE as usize, 1);
        map.store64(
            discard + COUNTER_PAGE as usize,
            base as u64 + (discard as u64) + IDLE_PAGE,
        );
        Ok(Region {
            map,
            base: base as u64,
            int3: page + GADGET + GADGET_STEPS_LEN,
            injector: gadget,
            free: (0..SLOTS).rev().collect(),
            pages: vec![(page, page + 4096)],
            reading,
            counter_pages: vec![None; SLOTS],
        })
    }

    /// The program's first page of the tool's: mapped by a first call run from spare bytes of
    /// its mappings (put back after), its head (the stubs' page head, a name, the injector
    /// gadget) written. The page and its gadget.
    fn first_page(
        pid: Tid,
        tid: Tid,
        reading: Reading,
        deferred: &mut Vec<i32>,
    ) -> Result<(u64, Gadget), TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        let mem = Mem::open(pid).map_err(proc_err)?;
        let spare = spare_code::gadget(pid).ok_or_else(|| {
            setup_err(
                pid,
                "no spare bytes in the program's mappings to start from".into(),
            )
        })?;
        let mut was = vec![0; call_gadget::CODE_LEN as usize];
        let mut was_data = vec![0; call_gadget::DATA_LEN as usize];
        mem.read(spare.code, &mut was).map_err(proc_err)?;
        mem.read(spare.data, &mut was_data).map_err(proc_err)?;
        let code = spare.code().expect("placed in reach");
        mem.write(spare.code, &code).map_err(proc_err)?;
        let page = inject::map_code(tid, spare, 0, 4096, deferred);
        mem.write(spare.code, &was).map_err(proc_err)?;
        mem.write(spare.data, &was_data).map_err(proc_err)?;
        let page = page?;
        let gadget = Gadget {
            code: page + INJECTOR,
            data: page + INJECTOR + call_gadget::CODE_LEN.next_multiple_of(8),
        };
        let mut head = stub::page_head(reading);
        head.extend_from_slice(b"cilkview-records\0");
        head.resize(INJECTOR as usize, 0xcc);
        head.extend_from_slice(&gadget.code().expect("in one page"));
        mem.write(page, &head).map_err(proc_err)?;
        Ok((page, gadget))
    }

    /// The records' memory, `len` bytes shared by the tool and the program: a memfd created in
    /// the program (named by the string at `name`), sized and opened by the tool, mapped in the
    /// program and closed there. The tool's file and the program's address of the mapping.
    fn shared_records(
        pid: Tid,
        tid: Tid,
        gadget: Gadget,
        name: u64,
        len: u64,
        deferred: &mut Vec<i32>,
    ) -> Result<(std::fs::File, i64), TraceError> {
        let proc_err = |source| TraceError::Proc { pid, source };
        let fd = inject::syscall(
            tid,
            gadget,
            libc::SYS_memfd_create,
            [name, libc::MFD_CLOEXEC as u64, 0, 0, 0, 0],
            deferred,
        )?;
        if fd < 0 {
            return Err(setup_err(
                pid,
                format!(
                    "memfd_create in the program: {}",
                    std::io::Error::from_raw_os_error(-fd as i32)
                ),
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))
            .and_then(|f| f.set_len(len).map(|()| f))
            .map_err(proc_err);
        let base = match &file {
            Ok(_) => inject::syscall(
                tid,
                gadget,
                libc::SYS_mmap,
                [0, len, PROT_RW, libc::MAP_SHARED as u64, fd as u64, 0],
                deferred,
            ),
            Err(_) => Ok(-1),
        };
        inject::syscall(
            tid,
            gadget,
            libc::SYS_close,
            [fd as u64, 0, 0, 0, 0, 0],
            deferred,
        )?;
        let file = file?;
        let base = base?;
        if base < 0 {
            return Err(setup_err(
                pid,
                format!(
                    "mapping the records in the program: {}",
                    std::io::Error::from_raw_os_error(-base as i32)
                ),
            ));
        }
        Ok((file, base))
    }

    /// A free slot, its header set for a new thread; its address in the program (the thread's
    /// `gs_base`).
    pub(super) fn assign(&mut self, tool_pid: u64) -> Option<(usize, u64)> {
        let slot = self.free.pop()?;
        let at = slot as u64 * SLOT_BYTES;
        let at = at as usize;
        self.map.store64(at + HEAD as usize, 0);
        self.map.store64(at + LIMIT as usize, RING_RECORDS);
        self.map.store64(at + TOOL_PID as usize, tool_pid);
        self.map.store64(at + GONE as usize, 0);
        // Until the thread's own counter page is mapped: the idle page (count 0).
        let idle = self.base + (at as u64) + IDLE_PAGE;
        self.map.store64(at + COUNTER_PAGE as usize, idle);
        if self.reading == Reading::Rdpmc {
            let attr = super::instructions::attr_words();
            for (i, w) in attr.into_iter().enumerate() {
                self.map.store64(at + ATTR as usize + 8 * i, w);
            }
        }
        Some((slot, self.base + slot as u64 * SLOT_BYTES))
    }

    /// The address in the program of `slot`'s `perf_event_attr` (written by [`Region::assign`]).
    pub(super) fn attr_at(&self, slot: usize) -> u64 {
        self.base + slot as u64 * SLOT_BYTES + ATTR
    }

    /// `slot`'s thread reads its counter from the page at `page` in the program (a page of one
    /// page's length, unmapped when the slot's next thread maps its own).
    pub(super) fn set_counter_page(&mut self, slot: usize, page: u64) {
        self.counter_pages[slot] = Some(page);
        self.map
            .store64(slot * SLOT_BYTES as usize + COUNTER_PAGE as usize, page);
    }

    /// The counter page mapped for `slot`'s former thread, if any (to unmap).
    pub(super) fn take_counter_page(&mut self, slot: usize) -> Option<u64> {
        self.counter_pages[slot].take()
    }

    /// The address in the program of the slot where hits are dropped (for a task that runs the
    /// program's patched code unmeasured: a `vfork` child).
    pub(super) fn discard(&self) -> u64 {
        self.base + SLOTS as u64 * SLOT_BYTES
    }

    /// The slot's thread is gone or no longer measured: a stub still running in it stops
    /// waiting and drops its record.
    pub(super) fn release(&mut self, slot: usize) {
        self.map
            .store64(slot * SLOT_BYTES as usize + GONE as usize, 1);
        self.free.push(slot);
    }

    /// Number of records written to `slot` so far.
    pub(super) fn head(&self, slot: usize) -> u64 {
        self.map.load64(slot * SLOT_BYTES as usize + HEAD as usize)
    }

    /// The records of `slot` from number `from` (counting from the slot's start) up to number
    /// `head` (from [`Region::head`]): calls `f` for each, then lets the stub reuse their room.
    /// Returns the next number to read.
    #[inline(always)]
    pub(super) fn drain(
        &self,
        slot: usize,
        from: u64,
        head: u64,
        mut f: impl FnMut(&[u64; 3]),
    ) -> u64 {
        let ring = self.ring(slot);
        for n in from..head {
            f(&ring[ring_index(n)]);
        }
        self.drained(slot, from, head)
    }

    /// `slot`'s ring (the records' room: read the numbers below [`Region::head`] not yet
    /// [`Region::drained`]).
    #[inline(always)]
    pub(super) fn ring(&self, slot: usize) -> &Ring {
        let at = slot * SLOT_BYTES as usize + RING as usize;
        let records = self.map.records::<3>(at, RING_RECORDS as usize);
        // As an array: an index below is in bounds by its type, no check per record.
        records.try_into().expect("the ring's records")
    }

    /// The records of `slot` from number `from` up to number `head` were read: the stub may
    /// reuse their room. Returns the next number to read.
    #[inline(always)]
    pub(super) fn drained(&self, slot: usize, from: u64, head: u64) -> u64 {
        if head > from {
            let at = slot * SLOT_BYTES as usize + LIMIT as usize;
            self.map.store64(at, head + RING_RECORDS);
        }
        from.max(head)
    }

    /// Whether `rip` is in code of ours (a stub page).
    pub(super) fn in_stubs(&self, rip: u64) -> bool {
        self.pages.iter().any(|&(s, e)| (s..e).contains(&rip))
    }

    /// The piece of generated code at `rip` (a stub, a page's slow path or `READ`) as the
    /// program's memory `mem` holds it; `None` elsewhere (the gadgets, the first page, which
    /// has no stubs, outside the stub pages).
    pub(super) fn piece_at(&self, rip: u64, mem: &Mem) -> Option<Piece> {
        let &(page, _) = self.pages[1..]
            .iter()
            .find(|&&(s, e)| (s..e).contains(&rip))?;
        unwind::piece_in_page(page, self.reading, rip, |at, buf| mem.read(at, buf).is_ok())
    }
}
