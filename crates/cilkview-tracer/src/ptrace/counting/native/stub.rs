//! The machine code of the native backend, generated as bytes: one stub per mark (reached by the
//! `jmp rel32` patched over the mark's NOP), one shared slow path per stub page (the record
//! buffer is full: wait for the analyzer), and the `mov rax, r11; syscall; int3` gadget the tracer runs
//! injected system calls on. Encodings below were produced by GNU as (Intel syntax) and are
//! checked by executing them (`sys::native` tests and the start-up calibration).
//!
//! The thread's record slot is at `%gs` (the tracer sets each thread's `gs_base`):
//!
//! | offset | field | written by |
//! |---|---|---|
//! | 0 | `head`: records written (monotonic) | the stub |
//! | 8 | the address of the thread's `perf_event_mmap_page` (read by [`Reading::Rdpmc`] stubs) | the analyzer, at set-up |
//! | 64 | `limit`: `head` may grow up to it (the analyzer's tail + [`RING_RECORDS`]) | the analyzer |
//! | 128 | the analyzer's pid (the slow path checks it is alive) | the analyzer |
//! | 192 | `gone`: non-zero = stop waiting, drop records (the analyzer detached or died) | both |
//! | 256 | [`IDLE_PAGE`]: 64 zero bytes, a stand-in counter page whose `index` 0 reads 0 | nobody |
//! | 512 | [`ATTR`]: the `perf_event_attr` of an injected `perf_event_open` | the analyzer |
//!
//! Each written word has a cache line of its own: the analyzer writing `limit` must not take the
//! line of `head` away from the program's core.
//! | [`RING`] | [`RING_RECORDS`] records of [`RECORD`] bytes, record `n` at `n mod RING_RECORDS` | the stub |
//!
//! A record: `tsc` (u64, the clock at the mark: the `rdtsc`, or the thread's instructions for
//! [`Reading::Rdpmc`]), `operand` (u64), `probe` (u32), `wait` (u32: what the stub then waited
//! for room, in units of 2^[`Reading::wait_shift`] ticks or instructions, 0 on the fast path).
//!
//! The fast path moves `%rsp` 128 bytes down first (the red zone of a leaf function), saves
//! the five registers it uses, and uses no instruction that writes the flags (`lea`, `mov`,
//! `movzx`, `not`, push/pop, `rdtsc`, `jrcxz`, `jmp`): the program's flags are never touched.
//! The room check is `jrcxz` on `head - limit` computed as `lea rcx, [~limit + head + 1]`.

/// Offset of the ring in a slot.
pub(crate) const RING: u64 = 4096;
/// Records per ring (the ring index is the low 16 bits of `head`: `movzx ecx, bx`).
pub(crate) const RING_RECORDS: u64 = 65536;
/// Bytes per record (`lea rcx, [rcx + rcx*2]` then scale 8).
pub(crate) const RECORD: u64 = 24;
/// Bytes per thread slot.
pub(crate) const SLOT_BYTES: u64 = RING + RING_RECORDS * RECORD;
/// Slot header offsets.
pub(crate) const HEAD: u64 = 0;
pub(crate) const LIMIT: u64 = 64;
pub(crate) const TOOL_PID: u64 = 128;
pub(crate) const GONE: u64 = 192;
pub(crate) const COUNTER_PAGE: u64 = 8;
pub(crate) const IDLE_PAGE: u64 = 256;
pub(crate) const ATTR: u64 = 512;
// The slot header's words and areas do not overlap, nor reach the ring.
const _: () = assert!(COUNTER_PAGE + 8 <= LIMIT && IDLE_PAGE >= GONE + 8);
const _: () = assert!(
    ATTR >= IDLE_PAGE + 64
        && ATTR + std::mem::size_of::<perf_event_open_sys::bindings::perf_event_attr>() as u64
            <= RING
);

/// Bytes reserved per stub (the longest is 175).
pub(crate) const STUB_BYTES: u64 = 192;
/// Offset of the `syscall; int3` gadget in a stub page (after the slow path).
pub(crate) const GADGET: u64 = 0xe0;
/// Offset of [`READ_CODE`] in a stub page of [`Reading::Rdpmc`].
pub(crate) const READ: u64 = 0x100;
/// Offset of the first stub in a stub page.
pub(crate) const FIRST_STUB: u64 = 0x180;

/// What the stubs read at a mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reading {
    /// The time-stamp counter (`rdtsc`): costs are times.
    Tsc,
    /// The thread's user-space instructions, read with `rdpmc` from the thread's own perf
    /// event (its `perf_event_mmap_page` at `gs:[COUNTER_PAGE]`): costs are instructions.
    Rdpmc,
}

impl Reading {
    /// A record's `wait` is what the slow path waited, shifted right by this (ticks fit 32
    /// bits in units of 64; instructions are kept exact).
    pub(crate) fn wait_shift(self) -> u32 {
        match self {
            Reading::Tsc => 6,
            Reading::Rdpmc => 0,
        }
    }
}

/// `lea rsp,[rsp-0x80]; push rax; push rcx; push rdx; push rbx; push rsi`
const PROLOGUE: [u8; 10] = [0x48, 0x8d, 0x64, 0x24, 0x80, 0x50, 0x51, 0x52, 0x53, 0x56];

/// After the operand (in `%rsi`). Offsets of the fields to fill are below.
const BODY: [u8; 0x81] = [
    0x0f, 0x31, // rdtsc
    0x65, 0x48, 0x8b, 0x1c, 0x25, 0x00, 0x00, 0x00, 0x00, // mov rbx, gs:[0]       (head)
    0x65, 0x48, 0x8b, 0x0c, 0x25, 0x40, 0x00, 0x00, 0x00, // mov rcx, gs:[64]      (limit)
    0x48, 0xf7, 0xd1, // not rcx
    0x48, 0x8d, 0x4c, 0x19, 0x01, // lea rcx, [rcx+rbx+1]   (head - limit)
    0xe3, 0x57, // jrcxz SLOW (+0x57)
    0x0f, 0xb7, 0xcb, // movzx ecx, bx
    0x48, 0x8d, 0x0c, 0x49, // lea rcx, [rcx+rcx*2]
    0x65, 0x89, 0x04, 0xcd, 0x00, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1000], eax
    0x65, 0x89, 0x14, 0xcd, 0x04, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1004], edx
    0x65, 0x48, 0x89, 0x34, 0xcd, 0x08, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1008], rsi
    0x65, 0xc7, 0x04, 0xcd, 0x10, 0x10, 0x00, 0x00, 0, 0, 0,
    0, // mov dword gs:[rcx*8+0x1010], PROBE
    0x65, 0xc7, 0x04, 0xcd, 0x14, 0x10, 0x00, 0x00, 0, 0, 0,
    0, // mov dword gs:[rcx*8+0x1014], 0
    0x48, 0x8d, 0x5b, 0x01, // lea rbx, [rbx+1]
    0x65, 0x48, 0x89, 0x1c, 0x25, 0x00, 0x00, 0x00, 0x00, // mov gs:[0], rbx
    // DONE:
    0x5e, 0x5b, 0x5a, 0x59, 0x58, // pop rsi; pop rbx; pop rdx; pop rcx; pop rax
    0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00, // lea rsp, [rsp+0x80]
    0xe9, 0, 0, 0, 0, // jmp BACK
    // SLOW:
    0xb9, 0, 0, 0, 0, // mov ecx, PROBE
    0xe8, 0, 0, 0, 0, // call slow_path
    0xeb, 0xe2, // jmp DONE
];
/// Offsets in [`BODY`] of the probe immediates, the `jmp BACK` and `call` displacements.
const BODY_PROBE: [usize; 2] = [0x3e + 8, 0x76];
const BODY_JMP_BACK: usize = 0x71;
const BODY_CALL_SLOW: usize = 0x7b;

/// The shared slow path, called with the tsc in `edx:eax`, `head` in `rbx`, the probe in `ecx`,
/// the operand in `rsi`: saves the flags and what it uses; waits (`pause`, every 1024 rounds
/// `sched_yield` and `kill(analyzer, 0)`: if the analyzer is gone (`ESRCH`) it sets `gone`)
/// until `limit` moves or `gone` is set; then writes the record with the ticks waited, or drops
/// it if `gone`. Followed by the gadget `syscall; int3`.
const SLOW_PATH: [u8; 0xd7] = [
    0x9c, 0x57, 0x41, 0x53, 0x41, 0x50, 0x41, 0x51, 0x41,
    0x52, // pushf; push rdi, r11, r8, r9, r10
    0x41, 0x89, 0xc0, // mov r8d, eax
    0x41, 0x89, 0xd1, // mov r9d, edx
    0x49, 0xc1, 0xe1, 0x20, // shl r9, 32
    0x4d, 0x09, 0xc8, // or r8, r9           (r8 = tsc at the mark)
    0x41, 0x89, 0xc9, // mov r9d, ecx        (probe)
    0x45, 0x31, 0xd2, // xor r10d, r10d
    // LOOP (+0x1d):
    0x65, 0x48, 0x83, 0x3c, 0x25, 0xc0, 0x00, 0x00, 0x00, 0x00, // cmp qword gs:[192], 0
    0x0f, 0x85, 0x9f, 0x00, 0x00, 0x00, // jne OUT
    0x65, 0x48, 0x8b, 0x0c, 0x25, 0x40, 0x00, 0x00, 0x00, // mov rcx, gs:[64]
    0x48, 0x39, 0xd9, // cmp rcx, rbx
    0x75, 0x3e, // jne ROOM
    0xf3, 0x90, // pause
    0x41, 0xff, 0xc2, // inc r10d
    0x41, 0xf7, 0xc2, 0xff, 0x03, 0x00, 0x00, // test r10d, 1023
    0x75, 0xd4, // jne LOOP
    0xb8, 0x18, 0x00, 0x00, 0x00, 0x0f, 0x05, // mov eax, SYS_sched_yield; syscall
    0xb8, 0x3e, 0x00, 0x00, 0x00, // mov eax, SYS_kill
    0x65, 0x48, 0x8b, 0x3c, 0x25, 0x80, 0x00, 0x00, 0x00, // mov rdi, gs:[128]
    0x56, 0x31, 0xf6, 0x0f, 0x05, 0x5e, // push rsi; xor esi, esi; syscall; pop rsi
    0x48, 0x83, 0xf8, 0xfd, // cmp rax, -ESRCH
    0x75, 0xb3, // jne LOOP
    0x65, 0x48, 0xc7, 0x04, 0x25, 0xc0, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, // mov qword gs:[192], 1
    0xeb, 0x53, // jmp OUT
    // ROOM (+0x79):
    0x0f, 0x31, // rdtsc
    0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, // shl rdx, 32; or rax, rdx
    0x4c, 0x29, 0xc0, // sub rax, r8
    0x48, 0xc1, 0xe8, 0x06, // shr rax, 6
    0xba, 0xff, 0xff, 0xff, 0xff, // mov edx, 0xffffffff
    0x48, 0x39, 0xd0, 0x48, 0x0f, 0x47, 0xc2, // cmp rax, rdx; cmova rax, rdx
    0x0f, 0xb7, 0xcb, // movzx ecx, bx
    0x48, 0x8d, 0x0c, 0x49, // lea rcx, [rcx+rcx*2]
    0x65, 0x4c, 0x89, 0x04, 0xcd, 0x00, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1000], r8
    0x65, 0x48, 0x89, 0x34, 0xcd, 0x08, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1008], rsi
    0x65, 0x44, 0x89, 0x0c, 0xcd, 0x10, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1010], r9d
    0x65, 0x89, 0x04, 0xcd, 0x14, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1014], eax
    0x48, 0x8d, 0x5b, 0x01, // lea rbx, [rbx+1]
    0x65, 0x48, 0x89, 0x1c, 0x25, 0x00, 0x00, 0x00, 0x00, // mov gs:[0], rbx
    // OUT (+0xcc):
    0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x41, 0x5b, 0x5f, // pop r10, r9, r8, r11, rdi
    0x9d, 0xc3, // popf; ret
];

/// The slow path of [`Reading::Rdpmc`] stubs: [`SLOW_PATH`] with the second clock read `call
/// READ` (at [`READ`] in the page) and the wait kept in instructions (no `shr rax, 6`).
const SLOW_PATH_RDPMC: [u8; 0xcf] = [
    0x9c, 0x57, 0x41, 0x53, 0x41, 0x50, 0x41, 0x51, 0x41,
    0x52, // pushf; push rdi, r11, r8-r10
    0x41, 0x89, 0xc0, 0x41, 0x89, 0xd1, 0x49, 0xc1, 0xe1, 0x20, 0x4d, 0x09,
    0xc8, // r8 = edx:eax
    0x41, 0x89, 0xc9, // mov r9d, ecx        (probe)
    0x45, 0x31, 0xd2, // xor r10d, r10d
    // LOOP (+0x1d):
    0x65, 0x48, 0x83, 0x3c, 0x25, 0xc0, 0x00, 0x00, 0x00, 0x00, // cmp qword gs:[192], 0
    0x0f, 0x85, 0x97, 0x00, 0x00, 0x00, // jne OUT
    0x65, 0x48, 0x8b, 0x0c, 0x25, 0x40, 0x00, 0x00, 0x00, // mov rcx, gs:[64]
    0x48, 0x39, 0xd9, 0x75, 0x3e, // cmp rcx, rbx; jne ROOM
    0xf3, 0x90, 0x41, 0xff, 0xc2, // pause; inc r10d
    0x41, 0xf7, 0xc2, 0xff, 0x03, 0x00, 0x00, 0x75, 0xd4, // test r10d, 1023; jne LOOP
    0xb8, 0x18, 0x00, 0x00, 0x00, 0x0f, 0x05, // mov eax, SYS_sched_yield; syscall
    0xb8, 0x3e, 0x00, 0x00, 0x00, // mov eax, SYS_kill
    0x65, 0x48, 0x8b, 0x3c, 0x25, 0x80, 0x00, 0x00, 0x00, // mov rdi, gs:[128]
    0x56, 0x31, 0xf6, 0x0f, 0x05, 0x5e, // push rsi; xor esi, esi; syscall; pop rsi
    0x48, 0x83, 0xf8, 0xfd, 0x75, 0xb3, // cmp rax, -ESRCH; jne LOOP
    0x65, 0x48, 0xc7, 0x04, 0x25, 0xc0, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, // mov qword gs:[192], 1
    0xeb, 0x4b, // jmp OUT
    // ROOM (+0x79):
    0xe8, 0x82, 0x00, 0x00, 0x00, // call READ
    0x4c, 0x29, 0xc0, // sub rax, r8
    0xba, 0xff, 0xff, 0xff, 0xff, // mov edx, 0xffffffff
    0x48, 0x39, 0xd0, 0x48, 0x0f, 0x47, 0xc2, // cmp rax, rdx; cmova rax, rdx
    0x0f, 0xb7, 0xcb, // movzx ecx, bx
    0x48, 0x8d, 0x0c, 0x49, // lea rcx, [rcx+rcx*2]
    0x65, 0x4c, 0x89, 0x04, 0xcd, 0x00, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1000], r8
    0x65, 0x48, 0x89, 0x34, 0xcd, 0x08, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1008], rsi
    0x65, 0x44, 0x89, 0x0c, 0xcd, 0x10, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1010], r9d
    0x65, 0x89, 0x04, 0xcd, 0x14, 0x10, 0x00, 0x00, // mov gs:[rcx*8+0x1014], eax
    0x48, 0x8d, 0x5b, 0x01, // lea rbx, [rbx+1]
    0x65, 0x48, 0x89, 0x1c, 0x25, 0x00, 0x00, 0x00, 0x00, // mov gs:[0], rbx
    // OUT (+0xc4):
    0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, 0x41, 0x5b, 0x5f, // pop r10, r9, r8, r11, rdi
    0x9d, 0xc3, // popf; ret
];

/// The self-monitoring read of the thread's instructions counter (called by [`Reading::Rdpmc`]
/// stubs in place of `rdtsc`, and by their slow path): the value in `rax`, its high half in
/// `edx` and its low half in `eax` (as `rdtsc` gives them); `rcx` is clobbered, everything else
/// (flags included) kept. The page `p` at `gs:[COUNTER_PAGE]`: retry while `p.lock` changed;
/// `p.index` 0: the event is not on a counter now, its count is `p.offset`; else `p.offset` +
/// `rdpmc(index − 1)` sign-extended from `p.pmc_width` bits (`include/uapi/linux/perf_event.h`).
const READ_CODE: [u8; 0x4e] = [
    0x9c, 0x56, 0x57, 0x41, 0x50, // pushf; push rsi; push rdi; push r8
    0x65, 0x48, 0x8b, 0x34, 0x25, 0x08, 0x00, 0x00, 0x00, // mov rsi, gs:[COUNTER_PAGE]
    // RETRY (+0x0e):
    0x8b, 0x7e, 0x08, // mov edi, [rsi+8]      (lock)
    0x8b, 0x4e, 0x0c, // mov ecx, [rsi+12]     (index)
    0x4c, 0x8b, 0x46, 0x10, // mov r8, [rsi+16]      (offset)
    0x85, 0xc9, 0x74, 0x1d, // test ecx, ecx; jz CHECK
    0xff, 0xc9, 0x0f, 0x33, // dec ecx; rdpmc
    0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0, // shl rdx, 32; or rax, rdx
    0x0f, 0xb7, 0x4e, 0x30, // movzx ecx, word [rsi+48]   (pmc_width)
    0xf7, 0xd9, 0x83, 0xc1, 0x40, // neg ecx; add ecx, 64
    0x48, 0xd3, 0xe0, 0x48, 0xd3, 0xf8, // shl rax, cl; sar rax, cl
    0x49, 0x01, 0xc0, // add r8, rax
    // CHECK (+0x39):
    0x3b, 0x7e, 0x08, 0x75, 0xd0, // cmp edi, [rsi+8]; jne RETRY
    0x4c, 0x89, 0xc0, 0x4c, 0x89, 0xc2, // mov rax, r8; mov rdx, r8
    0x48, 0xc1, 0xea, 0x20, // shr rdx, 32
    0x41, 0x58, 0x5f, 0x5e, 0x9d, 0xc3, // pop r8; pop rdi; pop rsi; popf; ret
];

/// Instructions a [`Reading::Rdpmc`] hit adds to the strand it ends, besides those loading the
/// operand ([`operand_instructions`]): from the `rdpmc` of the hit before (included) to that
/// of this one (excluded), fast paths: 19 after it in `READ`, 21 in the stub after the `call`,
/// and 18 of this hit's stub and `READ` before it (the mark's own `jmp` stands for its NOP).
/// Checked by decoding the generated code (`stub_decoding.rs`).
pub(crate) const RDPMC_HIT_INSTRUCTIONS: u64 = 58;

/// `mov rax, r11; syscall; int3`: an injected system call, its number in `%r11` (a thread
/// stopped inside a system call, e.g. at an exec, gets that call's result written to `%rax` as
/// it resumes: the number cannot be set there directly). The tracer steps over the first two.
pub(crate) const GADGET_CODE: [u8; 6] = [0x4c, 0x89, 0xd8, 0x0f, 0x05, 0xcc];
/// Bytes of [`GADGET_CODE`] before the `int3`.
pub(crate) const GADGET_STEPS_LEN: u64 = 5;

/// What a stub reports as the hit's operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StubOperand {
    None,
    /// DWARF x86-64 register number.
    Register(u16),
    /// The 8 bytes at `value of DWARF register + offset` (the return address: CFA - 8).
    Memory(u16, i32),
}

/// The x86 encoding number (rax 0, rcx 1, rdx 2, rbx 3, rsp 4, rbp 5, rsi 6, rdi 7, r8–r15) of a
/// DWARF x86-64 register number (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8–15).
fn x86_reg(dwarf: u16) -> u8 {
    match dwarf {
        0 => 0,
        1 => 2,
        2 => 1,
        3 => 3,
        4 => 6,
        5 => 7,
        6 => 5,
        7 => 4,
        r => (r & 15) as u8,
    }
}

/// Instructions a stub runs to put `operand` in `%rsi`.
pub(crate) fn operand_instructions(operand: StubOperand) -> u64 {
    let load = |dwarf| u64::from(x86_reg(dwarf) != 6);
    match operand {
        StubOperand::None => 0,
        StubOperand::Register(r) => load(r),
        StubOperand::Memory(r, _) => load(r) + 1,
    }
}

/// Instructions a hit of a stub with `operand` adds to the strand it ends, for
/// [`Reading::Rdpmc`] (taken off it).
pub(crate) fn rdpmc_hit_instructions(operand: StubOperand) -> u64 {
    RDPMC_HIT_INSTRUCTIONS + operand_instructions(operand)
}

/// Code putting DWARF register `dwarf`'s value at the mark into `%rsi` (after the prologue: the
/// registers are unchanged, `%rsp` is 128 + 40 bytes lower).
fn load_register(dwarf: u16, out: &mut Vec<u8>) {
    match x86_reg(dwarf) {
        4 => out.extend_from_slice(&[0x48, 0x8d, 0xb4, 0x24, 0xa8, 0, 0, 0]), // lea rsi,[rsp+168]
        6 => {}                                                               // already in rsi
        r => {
            // mov rsi, r  (REX.W [+ REX.R], 89 /r)
            out.extend_from_slice(&[0x48 | ((r >> 3) << 2), 0x89, 0xc6 | ((r & 7) << 3)]);
        }
    }
}

/// One stub at address `at` reading `reading`, for probe number `probe` whose mark is at `mark`
/// (the stub jumps back to `mark + 5`), in the stub page at `page` (its slow path, and `READ`).
/// `None` if a target is out of `rel32` reach.
pub(crate) fn stub(
    reading: Reading,
    at: u64,
    mark: u64,
    page: u64,
    probe: u32,
    operand: StubOperand,
) -> Option<Vec<u8>> {
    let rel = |from_end: u64, to: u64| i32::try_from(to.wrapping_sub(from_end) as i64).ok();
    let mut code = PROLOGUE.to_vec();
    match operand {
        StubOperand::None => {}
        StubOperand::Register(r) => load_register(r, &mut code),
        StubOperand::Memory(r, off) => {
            load_register(r, &mut code);
            code.extend_from_slice(&[0x48, 0x8b, 0xb6]); // mov rsi, [rsi + disp32]
            code.extend_from_slice(&off.to_le_bytes());
        }
    }
    // `body`: where BODY would start; Rdpmc puts `call READ` (5 bytes) for its `rdtsc` (2).
    let body = match reading {
        Reading::Tsc => {
            let body = code.len();
            code.extend_from_slice(&BODY);
            body
        }
        Reading::Rdpmc => {
            let call = rel(at + code.len() as u64 + 5, page + READ)?;
            code.push(0xe8);
            code.extend_from_slice(&call.to_le_bytes());
            let body = code.len() - 2;
            code.extend_from_slice(&BODY[2..]);
            body
        }
    };
    let slow = page;
    for p in BODY_PROBE {
        code[body + p..body + p + 4].copy_from_slice(&probe.to_le_bytes());
    }
    let jmp_end = at + (body + BODY_JMP_BACK + 4) as u64;
    let back = rel(jmp_end, mark + 5)?;
    code[body + BODY_JMP_BACK..body + BODY_JMP_BACK + 4].copy_from_slice(&back.to_le_bytes());
    let call_end = at + (body + BODY_CALL_SLOW + 4) as u64;
    let call = rel(call_end, slow)?;
    code[body + BODY_CALL_SLOW..body + BODY_CALL_SLOW + 4].copy_from_slice(&call.to_le_bytes());
    debug_assert!(code.len() as u64 <= STUB_BYTES);
    Some(code)
}

/// The head of a stub page for `reading`: the slow path at offset 0, the gadget at [`GADGET`],
/// for [`Reading::Rdpmc`] `READ` at [`READ`], `int3` between them and up to [`FIRST_STUB`].
pub(crate) fn page_head(reading: Reading) -> Vec<u8> {
    let mut v = match reading {
        Reading::Tsc => SLOW_PATH.to_vec(),
        Reading::Rdpmc => SLOW_PATH_RDPMC.to_vec(),
    };
    v.resize(GADGET as usize, 0xcc);
    v.extend_from_slice(&GADGET_CODE);
    if reading == Reading::Rdpmc {
        v.resize(READ as usize, 0xcc);
        v.extend_from_slice(&READ_CODE);
    }
    v.resize(FIRST_STUB as usize, 0xcc);
    v
}

/// The `jmp rel32` written over the mark at `mark` to reach the stub at `stub`.
pub(crate) fn jump(mark: u64, stub: u64) -> Option<[u8; 5]> {
    let rel = i32::try_from(stub.wrapping_sub(mark + 5) as i64).ok()?;
    let r = rel.to_le_bytes();
    Some([0xe9, r[0], r[1], r[2], r[3]])
}

#[cfg(test)]
#[path = "stub_decoding.rs"]
mod decoding;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_the_encodings_put_them() {
        // The probe immediates follow their instructions' opcode bytes.
        assert_eq!(
            &BODY[BODY_PROBE[0] - 8..BODY_PROBE[0] - 4],
            &[0x65, 0xc7, 0x04, 0xcd]
        );
        assert_eq!(BODY[BODY_PROBE[1] - 1], 0xb9);
        assert_eq!(BODY[BODY_JMP_BACK - 1], 0xe9);
        assert_eq!(BODY[BODY_CALL_SLOW - 1], 0xe8);
        // jrcxz (at 0x1c) lands on SLOW, the last jmp (at 0x7f) on DONE (pop rsi at 0x63).
        assert_eq!(&BODY[0x1c..0x1e], &[0xe3, 0x57]);
        assert_eq!(0x1c + 2 + 0x57, BODY_PROBE[1] - 1);
        assert_eq!(&BODY[0x7f..0x81], &[0xeb, 0xe2]);
        assert_eq!(0x7f + 2 - 0x1e, 0x63);
        assert_eq!(BODY[0x63], 0x5e);
        // The slow path's jumps: to OUT and the retry loop.
        assert_eq!(SLOW_PATH[0xcc], 0x41);
        assert_eq!(*SLOW_PATH.last().unwrap(), 0xc3);
        assert!(GADGET as usize >= SLOW_PATH.len().max(SLOW_PATH_RDPMC.len()));
        assert!(READ >= GADGET + GADGET_CODE.len() as u64);
        assert!(FIRST_STUB >= READ + READ_CODE.len() as u64);
        // The rdpmc slow path's `call READ` (at 0x79) lands on READ.
        assert_eq!(SLOW_PATH_RDPMC[0x79], 0xe8);
        let call = i32::from_le_bytes(SLOW_PATH_RDPMC[0x7a..0x7e].try_into().unwrap());
        assert_eq!(0x7e + call as u64, READ);
        assert_eq!(SLOT_BYTES % 4096, 0);
    }

    #[test]
    fn stubs_fit_and_link() {
        let page = 0x7000_0000_0000u64;
        let slow = page;
        for (reading, operand) in [Reading::Tsc, Reading::Rdpmc].into_iter().flat_map(|r| {
            [
                StubOperand::None,
                StubOperand::Register(0),
                StubOperand::Register(7),
                StubOperand::Register(15),
                StubOperand::Memory(7, 8),
            ]
            .map(|o| (r, o))
        }) {
            let at = page + FIRST_STUB;
            let mark = page + 0x10_0000;
            let s = stub(reading, at, mark, page, 77, operand).unwrap();
            assert!(s.len() as u64 <= STUB_BYTES, "{operand:?}: {}", s.len());
            // The jump back lands after the mark.
            let j = s.len() - 17;
            assert_eq!(s[j], 0xe9);
            let rel = i32::from_le_bytes(s[j + 1..j + 5].try_into().unwrap());
            assert_eq!(
                (at + j as u64 + 5).wrapping_add_signed(rel as i64),
                mark + 5
            );
            let c = s.len() - 7;
            assert_eq!(s[c], 0xe8);
            let rel = i32::from_le_bytes(s[c + 1..c + 5].try_into().unwrap());
            assert_eq!((at + c as u64 + 5).wrapping_add_signed(rel as i64), slow);
            // Rdpmc calls READ where Tsc reads the TSC, after the prologue and the operand.
            let r = PROLOGUE.len() + s.len()
                - stub(reading, at, mark, page, 77, StubOperand::None)
                    .unwrap()
                    .len();
            match reading {
                Reading::Tsc => assert_eq!(&s[r..r + 2], &[0x0f, 0x31]),
                Reading::Rdpmc => {
                    assert_eq!(s[r], 0xe8);
                    let rel = i32::from_le_bytes(s[r + 1..r + 5].try_into().unwrap());
                    assert_eq!(
                        (at + r as u64 + 5).wrapping_add_signed(rel as i64),
                        page + READ
                    );
                }
            }
        }
        // Out of reach.
        for reading in [Reading::Tsc, Reading::Rdpmc] {
            assert!(stub(reading, page, page + (3 << 30), page, 0, StubOperand::None).is_none());
        }
        assert_eq!(jump(0x1000, 0x1005), Some([0xe9, 0, 0, 0, 0]));
        assert_eq!(jump(0x2000, 0x1000), Some([0xe9, 0xfb, 0xef, 0xff, 0xff]));
    }

    #[test]
    fn register_moves_encode_as_the_assembler_does() {
        let enc = |d| {
            let mut v = Vec::new();
            load_register(d, &mut v);
            v
        };
        assert_eq!(enc(0), [0x48, 0x89, 0xc6]); // mov rsi, rax
        assert_eq!(enc(5), [0x48, 0x89, 0xfe]); // mov rsi, rdi
        assert_eq!(enc(6), [0x48, 0x89, 0xee]); // mov rsi, rbp
        assert_eq!(enc(8), [0x4c, 0x89, 0xc6]); // mov rsi, r8
        assert_eq!(enc(15), [0x4c, 0x89, 0xfe]); // mov rsi, r15
        assert!(enc(4).is_empty()); // rsi
    }
}

#[cfg(test)]
mod assembler {
    use super::*;

    /// What GNU as 2.40 gave for the same source (placeholders 0x11223344 for the probe and
    /// 0x55667788-relative displacements, zeroed here).
    const BODY_AS: &str = "0f3165488b1c250000000065488b0c254000000048f7d1488d4c1901e3570fb7cb488d0c49658904cd00100000658914cd0410000065488934cd0810000065c704cd101000004433221165c704cd1410000000000000488d5b016548891c25000000005e5b5a5958488da42480000000e983776655b944332211e883776655ebe2";
    const SLOW_AS: &str = "9c5741534150415141524189c04189d149c1e1204d09c84189c94531d26548833c25c0000000000f859f00000065488b0c25400000004839d9753ef39041ffc241f7c2ff03000075d4b8180000000f05b83e00000065488b3c25800000005631f60f055e4883f8fd75b36548c70425c000000001000000eb530f3148c1e2204809d04c29c048c1e806baffffffff4839d0480f47c20fb7cb488d0c49654c8904cd0010000065488934cd081000006544890ccd10100000658904cd14100000488d5b016548891c2500000000415a41594158415b5f9dc3";

    /// The same for `READ` and the rdpmc slow path (`call slow+0x100` for `call READ`).
    const READ_AS: &str = "9c5657415065488b3425080000008b7e088b4e0c4c8b461085c9741dffc90f3348c1e2204809d00fb74e30f7d983c14048d3e048d3f84901c03b7e0875d04c89c04c89c248c1ea2041585f5e9dc3";
    const SLOW_RDPMC_AS: &str = "9c5741534150415141524189c04189d149c1e1204d09c84189c94531d26548833c25c0000000000f859700000065488b0c25400000004839d9753ef39041ffc241f7c2ff03000075d4b8180000000f05b83e00000065488b3c25800000005631f60f055e4883f8fd75b36548c70425c000000001000000eb4be8820000004c29c0baffffffff4839d0480f47c20fb7cb488d0c49654c8904cd0010000065488934cd081000006544890ccd10100000658904cd14100000488d5b016548891c2500000000415a41594158415b5f9dc3";

    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn templates_equal_the_assembler_output() {
        let mut body = bytes(BODY_AS);
        for p in BODY_PROBE {
            body[p..p + 4].copy_from_slice(&[0; 4]);
        }
        body[BODY_JMP_BACK..BODY_JMP_BACK + 4].copy_from_slice(&[0; 4]);
        body[BODY_CALL_SLOW..BODY_CALL_SLOW + 4].copy_from_slice(&[0; 4]);
        assert_eq!(body, BODY);
        assert_eq!(bytes(SLOW_AS), SLOW_PATH);
        assert_eq!(bytes(SLOW_RDPMC_AS), SLOW_PATH_RDPMC);
        assert_eq!(bytes(READ_AS), READ_CODE);
    }
}
