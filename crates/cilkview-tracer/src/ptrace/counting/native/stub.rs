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
//! | 64 | `limit`: `head` may grow up to it (the analyzer's tail + [`RING_RECORDS`]) | the analyzer |
//! | 128 | the analyzer's pid (the slow path checks it is alive) | the analyzer |
//! | 192 | `gone`: non-zero = stop waiting, drop records (the analyzer detached or died) | both |
//!
//! Each word has a cache line of its own: the analyzer writing `limit` must not take the line
//! of `head` away from the program's core.
//! | [`RING`] | [`RING_RECORDS`] records of [`RECORD`] bytes, record `n` at `n mod RING_RECORDS` | the stub |
//!
//! A record: `tsc` (u64, the `rdtsc` at the mark), `operand` (u64), `probe` (u32), `wait` (u32:
//! ticks / 64 the stub then waited for room, 0 on the fast path).
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

/// Bytes reserved per stub (the longest is 172).
pub(crate) const STUB_BYTES: u64 = 192;
/// Offset of the first stub in a stub page (after the slow path and the gadget).
pub(crate) const FIRST_STUB: u64 = 256;
/// Offset of the `syscall; int3` gadget in a stub page.
pub(crate) const GADGET: u64 = SLOW_PATH.len() as u64;

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

/// One stub at address `at`, for probe number `probe` whose mark is at `mark` (the stub jumps
/// back to `mark + 5`), with the page's slow path at `slow`. `None` if a target is out of
/// `rel32` reach.
pub(crate) fn stub(
    at: u64,
    mark: u64,
    slow: u64,
    probe: u32,
    operand: StubOperand,
) -> Option<Vec<u8>> {
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
    let body = code.len();
    code.extend_from_slice(&BODY);
    for p in BODY_PROBE {
        code[body + p..body + p + 4].copy_from_slice(&probe.to_le_bytes());
    }
    let rel = |from_end: u64, to: u64| i32::try_from(to.wrapping_sub(from_end) as i64).ok();
    let jmp_end = at + (body + BODY_JMP_BACK + 4) as u64;
    let back = rel(jmp_end, mark + 5)?;
    code[body + BODY_JMP_BACK..body + BODY_JMP_BACK + 4].copy_from_slice(&back.to_le_bytes());
    let call_end = at + (body + BODY_CALL_SLOW + 4) as u64;
    let call = rel(call_end, slow)?;
    code[body + BODY_CALL_SLOW..body + BODY_CALL_SLOW + 4].copy_from_slice(&call.to_le_bytes());
    debug_assert!(code.len() as u64 <= STUB_BYTES);
    Some(code)
}

/// The head of a stub page: the slow path at offset 0, the gadget at [`GADGET`], `int3` up to
/// [`FIRST_STUB`].
pub(crate) fn page_head() -> Vec<u8> {
    let mut v = SLOW_PATH.to_vec();
    v.extend_from_slice(&GADGET_CODE);
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
        assert!(FIRST_STUB as usize >= SLOW_PATH.len() + GADGET_CODE.len());
        assert_eq!(SLOT_BYTES % 4096, 0);
    }

    #[test]
    fn stubs_fit_and_link() {
        let page = 0x7000_0000_0000u64;
        let slow = page;
        for operand in [
            StubOperand::None,
            StubOperand::Register(0),
            StubOperand::Register(7),
            StubOperand::Register(15),
            StubOperand::Memory(7, 8),
        ] {
            let at = page + FIRST_STUB;
            let mark = page + 0x10_0000;
            let s = stub(at, mark, slow, 77, operand).unwrap();
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
        }
        // Out of reach.
        assert!(stub(page, page + (3 << 30), page, 0, StubOperand::None).is_none());
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
    }
}
