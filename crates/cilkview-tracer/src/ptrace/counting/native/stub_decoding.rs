//! The generated code read back by a real x86 decoder (iced-x86): a mark's hit walked from the
//! mark's `jmp` to the byte after it along the fast path (no conditional branch taken, calls
//! followed), and the properties the stubs promise checked on what the CPU would execute.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, Register};
use perf_event_open_sys::bindings::perf_event_mmap_page;

use super::*;

/// Where the test puts the stub page, and the mark (in the same buffer).
const BASE: u64 = 0x7000_0000_0000;
const MARK: u64 = BASE + 0x2000;

/// A stub page with one stub for the mark at [`MARK`], the mark's jump, and a `ret` after it.
fn page(reading: Reading, operand: StubOperand) -> Vec<u8> {
    let mut buf = page_head(reading);
    let at = BASE + FIRST_STUB;
    buf.extend_from_slice(&stub(reading, at, MARK, BASE, 7, operand).unwrap());
    buf.resize((MARK - BASE) as usize, 0xcc);
    buf.extend_from_slice(&jump(MARK, at).unwrap());
    buf.push(0xc3);
    buf
}

fn decode_at(buf: &[u8], ip: u64) -> Instruction {
    let off = (ip - BASE) as usize;
    Decoder::with_ip(64, &buf[off..], ip, DecoderOptions::NONE).decode()
}

/// The instructions of one hit on the fast path, from the stub's first (the mark's `jmp` left
/// out: it stands for the program's NOP) to the jump back to `MARK + 5` (included). Checks on
/// the way that `%rsp` is moved past the red zone before anything is pushed, that every
/// instruction writing the flags runs while they are saved (`pushfq` .. `popfq`), and that the
/// stack is balanced at the end.
fn walk(buf: &[u8]) -> Vec<Instruction> {
    let mark = decode_at(buf, MARK);
    assert_eq!(mark.mnemonic(), Mnemonic::Jmp);
    let (mut ip, mut rsp, mut saved_flags) = (mark.near_branch_target(), 0i64, 0);
    let mut returns = Vec::new();
    let mut hit = Vec::new();
    loop {
        let i = decode_at(buf, ip);
        assert!(!i.is_invalid(), "invalid code at {ip:#x}");
        hit.push(i);
        assert!(hit.len() < 500, "no way back");
        let m = i.mnemonic();
        if i.rflags_modified() != 0 && m != Mnemonic::Popfq {
            assert!(
                saved_flags > 0,
                "{m:?} at {ip:#x} writes the program's flags"
            );
        }
        if matches!(m, Mnemonic::Push | Mnemonic::Pushfq | Mnemonic::Call) {
            assert!(
                rsp <= -128,
                "{m:?} at {ip:#x} writes into the red zone (rsp {rsp})"
            );
        }
        match m {
            Mnemonic::Lea if i.op0_register() == Register::RSP => {
                assert_eq!(i.memory_base(), Register::RSP);
                rsp += i.memory_displacement64() as i64;
            }
            Mnemonic::Push | Mnemonic::Call => rsp -= 8,
            Mnemonic::Pop | Mnemonic::Ret => rsp += 8,
            Mnemonic::Pushfq => (rsp, saved_flags) = (rsp - 8, saved_flags + 1),
            Mnemonic::Popfq => (rsp, saved_flags) = (rsp + 8, saved_flags - 1),
            _ => assert!(
                i.op0_register() != Register::RSP && i.op0_register() != Register::ESP,
                "{m:?} at {ip:#x} changes rsp"
            ),
        }
        ip = match i.flow_control() {
            FlowControl::Next | FlowControl::ConditionalBranch => i.next_ip(),
            FlowControl::UnconditionalBranch => {
                if i.near_branch_target() == MARK + 5 {
                    break;
                }
                i.near_branch_target()
            }
            FlowControl::Call => {
                returns.push(i.next_ip());
                i.near_branch_target()
            }
            FlowControl::Return => returns.pop().expect("a ret without a call"),
            f => panic!("{f:?} at {ip:#x}"),
        };
    }
    assert_eq!(rsp, 0, "the stack is back where the mark had it");
    assert_eq!(saved_flags, 0);
    hit
}

const OPERANDS: [StubOperand; 6] = [
    StubOperand::None,
    StubOperand::Register(0),  // rax
    StubOperand::Register(4),  // rsi: already there
    StubOperand::Register(15), // r15
    StubOperand::Memory(7, 8), // [rsp + 8]
    StubOperand::Memory(4, 8), // [rsi + 8]
];

#[test]
fn a_tsc_hit_reads_the_tsc_once_and_writes_no_flags() {
    for operand in OPERANDS {
        let hit = walk(&page(Reading::Tsc, operand));
        let m: Vec<Mnemonic> = hit.iter().map(|i| i.mnemonic()).collect();
        assert_eq!(m[0], Mnemonic::Lea, "the red zone skipped first");
        assert_eq!(m.iter().filter(|&&m| m == Mnemonic::Rdtsc).count(), 1);
        assert!(!m.contains(&Mnemonic::Pushfq) && !m.contains(&Mnemonic::Call));
        assert!(!m.contains(&Mnemonic::Rdpmc));
    }
}

#[test]
fn an_rdpmc_hit_reads_the_counter_page_under_its_lock_and_keeps_the_flags() {
    let field = |f: usize| f as u64;
    let lock = field(std::mem::offset_of!(perf_event_mmap_page, lock));
    let index = field(std::mem::offset_of!(perf_event_mmap_page, index));
    let offset = field(std::mem::offset_of!(perf_event_mmap_page, offset));
    let width = field(std::mem::offset_of!(perf_event_mmap_page, pmc_width));
    for operand in OPERANDS {
        let hit = walk(&page(Reading::Rdpmc, operand));
        let m: Vec<Mnemonic> = hit.iter().map(|i| i.mnemonic()).collect();
        assert_eq!(m[0], Mnemonic::Lea, "the red zone skipped first");
        assert_eq!(m.iter().filter(|&&m| m == Mnemonic::Rdpmc).count(), 1);
        assert!(!m.contains(&Mnemonic::Rdtsc));
        // READ: the page's address from the slot, then lock, index, offset; index 0 skips the
        // rdpmc; the width read; the lock read again, a changed lock retries from its first read.
        let at = |mn: Mnemonic| m.iter().position(|&x| x == mn).unwrap();
        let counter_page = hit
            .iter()
            .position(|i| i.memory_segment() == Register::GS && i.op0_register() == Register::RSI)
            .expect("the counter page loaded from the slot");
        assert_eq!(hit[counter_page].memory_displacement64(), COUNTER_PAGE);
        let reads_page = |i: &Instruction, field: u64| {
            i.memory_base() == Register::RSI
                && i.memory_segment() == Register::DS
                && i.memory_displacement64() == field
        };
        let first_lock = counter_page + 1;
        assert!(reads_page(&hit[first_lock], lock));
        let rdpmc = at(Mnemonic::Rdpmc);
        assert!(reads_page(&hit[first_lock + 1], index));
        assert!(reads_page(&hit[first_lock + 2], offset));
        assert_eq!(
            (m[first_lock + 3], m[first_lock + 4]),
            (Mnemonic::Test, Mnemonic::Je)
        );
        assert_eq!(hit[first_lock + 4].near_branch_target(), {
            let check = hit[rdpmc..]
                .iter()
                .position(|i| reads_page(i, lock))
                .unwrap();
            hit[rdpmc + check].ip()
        });
        assert_eq!(m[rdpmc - 1], Mnemonic::Dec, "rdpmc(index - 1)");
        assert!(hit[rdpmc..].iter().any(|i| reads_page(i, width)));
        // Sign extension from the width: shl then sar by cl, then the offset added.
        let shl = rdpmc + m[rdpmc..].iter().position(|&x| x == Mnemonic::Sar).unwrap() - 1;
        assert_eq!(m[shl], Mnemonic::Shl);
        assert_eq!(m[shl + 2], Mnemonic::Add);
        let check = rdpmc
            + hit[rdpmc..]
                .iter()
                .position(|i| reads_page(i, lock))
                .unwrap();
        assert_eq!(m[check], Mnemonic::Cmp);
        assert_eq!(m[check + 1], Mnemonic::Jne);
        assert_eq!(hit[check + 1].near_branch_target(), hit[first_lock].ip());
        // What a hit adds to the strand it ends: from the rdpmc of the hit before (included)
        // to the jump back (the same for every stub), then this stub's first instructions up to
        // its rdpmc (excluded): together, one walk's length.
        assert_eq!(
            hit.len() as u64,
            rdpmc_hit_instructions(operand),
            "{operand:?}"
        );
        // The time path's instructions plus the call and READ's: the same record writes.
        let tsc = walk(&page(Reading::Tsc, operand));
        let tail = |h: &[Instruction]| {
            h.iter()
                .rev()
                .take(21)
                .map(|i| i.mnemonic())
                .collect::<Vec<_>>()
        };
        assert_eq!(tail(&hit), tail(&tsc));
    }
}

#[test]
fn the_rdpmc_slow_path_saves_the_flags_and_reads_the_counter_through_read() {
    let head = page_head(Reading::Rdpmc);
    let mut d = Decoder::with_ip(64, &head[..GADGET as usize], BASE, DecoderOptions::NONE);
    let code: Vec<Instruction> = d
        .iter()
        .take_while(|i| i.mnemonic() != Mnemonic::Int3)
        .collect();
    assert_eq!(code[0].mnemonic(), Mnemonic::Pushfq);
    let n = code.len();
    assert_eq!(
        (code[n - 2].mnemonic(), code[n - 1].mnemonic()),
        (Mnemonic::Popfq, Mnemonic::Ret)
    );
    let calls: Vec<u64> = code
        .iter()
        .filter(|i| i.mnemonic() == Mnemonic::Call)
        .map(|i| i.near_branch_target())
        .collect();
    assert_eq!(calls, [BASE + READ]);
    assert!(!code.iter().any(|i| i.mnemonic() == Mnemonic::Rdtsc));
    // No shift of the wait: instructions are kept exact.
    assert!(!code.iter().any(|i| i.mnemonic() == Mnemonic::Shr));
    let read = decode_at(&head, BASE + READ);
    assert_eq!(read.mnemonic(), Mnemonic::Pushfq);
    let gadget = decode_at(&head, BASE + GADGET);
    assert_eq!(gadget.mnemonic(), Mnemonic::Mov);
}
