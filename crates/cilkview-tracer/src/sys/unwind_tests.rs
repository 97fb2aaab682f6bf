//! Tests of `native::unwind` against the code executed: a child process runs one hit of a stub
//! (fast path, slow path waiting for room or dropping, `READ`), single-stepped by the test; at
//! every instruction inside the stub page the thread, taken out by `out_of_stubs`, must have
//! exactly the registers and flags it had at the mark (the record not committed) or has once
//! the hit is over (committed).

use nix::libc;

use super::native::{one_mark_reading, with_gs};
use super::{getregs, restart, wait_for, Restart, Wait};
use crate::procfs::Mem;
use crate::ptrace::counting::native::stub::{
    Reading, StubOperand, COUNTER_PAGE, GADGET, GONE, IDLE_PAGE, LIMIT, READ, RING, RING_RECORDS,
    SLOT_BYTES, TOOL_PID,
};
use crate::ptrace::counting::native::unwind::{out_of_stubs, piece_in_page, Out};

/// How the slot is when the hit starts.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// Room for the record: the fast path.
    Room,
    /// Full, the analyzer gone: the slow path drops the record.
    FullGone,
    /// Full, the analyzer (this test) makes room after the slow path ran this many instructions.
    FullThenRoom(usize),
}

/// The registers a thread taken out of a stub must have (all but those the kernel keeps for
/// itself). Flags without the trap flag, which the steps set (a stepped `pushf` saves it), and
/// the resume flag.
fn program_view(r: &libc::user_regs_struct) -> [u64; 18] {
    [
        r.rax,
        r.rbx,
        r.rcx,
        r.rdx,
        r.rsi,
        r.rdi,
        r.rbp,
        r.rsp,
        r.r8,
        r.r9,
        r.r10,
        r.r11,
        r.r12,
        r.r13,
        r.r14,
        r.r15,
        r.rip,
        r.eflags & !0x10100,
    ]
}

/// What stepping one hit showed: the registers at the mark and past it, and each position
/// inside the stub page with the registers `out_of_stubs` took the thread out with.
struct Stepped {
    at_mark: libc::user_regs_struct,
    past_mark: libc::user_regs_struct,
    taken_out: Vec<(u64, Out)>,
    /// The clock the stub read at the mark: the record's first word (where it was written).
    recorded: u64,
}

/// Runs one hit in a child, stepped; returns how many positions were taken back to the mark,
/// how many past it, and how many were found waiting for room (those run on: not checked).
fn check_every_instruction(
    reading: Reading,
    operand: StubOperand,
    slot: Slot,
) -> (usize, usize, usize) {
    let (page, entry) = one_mark_reading(reading, operand);
    let mut words = vec![0u64; (SLOT_BYTES / 8) as usize];
    let ptr = words.as_mut_ptr();
    let idle = ptr as u64 + IDLE_PAGE;
    words[(COUNTER_PAGE / 8) as usize] = idle; // index 0: READ takes its `offset`, no rdpmc
    words[(TOOL_PID / 8) as usize] = std::process::id() as u64;
    match slot {
        Slot::Room => words[(LIMIT / 8) as usize] = RING_RECORDS,
        Slot::FullGone => words[(GONE / 8) as usize] = 1,
        Slot::FullThenRoom(_) => {}
    }
    // SAFETY: the child only stops itself, runs the hit on the page (inherited) with %gs at its
    // copy of `words`, and exits without returning into the test harness.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork");
    if child == 0 {
        // SAFETY: as above; the stub records into the slot and returns to the `ret`.
        unsafe {
            libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0);
            libc::raise(libc::SIGSTOP);
            let ok = with_gs(ptr, || page.call_checked(entry, 0x8c3 | 0x202));
            libc::_exit(if ok { 0 } else { 1 });
        }
    }
    assert!(matches!(wait_for(child), Ok(Wait::Stopped { .. })));
    let stepped = step_through_hit(child, page.addr(), entry as u64, reading, slot, ptr as u64);
    tally(stepped, page.addr(), reading, operand, slot)
}

/// Steps the stopped `child` through its hit at `base + entry`, taking it out of the stub at
/// every instruction inside the page; makes room in its slot (at `slot_at`) when `slot` says;
/// kills it once past the mark.
fn step_through_hit(
    child: libc::pid_t,
    base: u64,
    entry: u64,
    reading: Reading,
    slot: Slot,
    slot_at: u64,
) -> Stepped {
    let mark = base + entry;
    let mem = Mem::open(child).unwrap();
    let read = |at: u64, buf: &mut [u8]| mem.read(at, buf).is_ok();
    let word = |at| mem.word(at);
    let (mut at_mark, mut past_mark) = (None, None);
    let mut taken_out = Vec::new();
    let mut in_slow_path = 0;
    for _ in 0..100_000 {
        restart(child, Restart::Step(0)).unwrap();
        assert!(matches!(wait_for(child), Ok(Wait::Stopped { .. })));
        let regs = getregs(child).unwrap();
        if (base..base + 4096).contains(&regs.rip) {
            at_mark.get_or_insert(libc::user_regs_struct { rip: mark, ..regs });
            let piece = |rip| piece_in_page(base, reading, rip, read);
            let out = out_of_stubs(&regs, piece, word);
            taken_out.push((regs.rip, out.expect("every instruction of a hit is read")));
            if regs.rip < base + GADGET {
                in_slow_path += 1;
                if matches!(slot, Slot::FullThenRoom(n) if n == in_slow_path) {
                    mem.write(slot_at + LIMIT, &RING_RECORDS.to_le_bytes())
                        .unwrap();
                }
            }
        } else if regs.rip == mark + 5 {
            past_mark = Some(regs);
            break;
        }
    }
    // Its flags may now hold the steps' trap flag (pushed by the slow path's `pushf`): the
    // child's own check would see it. It has done its part.
    let recorded = mem.word(slot_at + RING).unwrap();
    // SAFETY: our own child.
    unsafe { libc::kill(child, libc::SIGKILL) };
    assert!(matches!(wait_for(child), Ok(Wait::Signaled(..))));
    Stepped {
        at_mark: at_mark.expect("the stub ran"),
        past_mark: past_mark.expect("it ended"),
        taken_out,
        recorded,
    }
}

/// Checks each position's registers against the mark's (not committed) or past it
/// (committed); counts (back to the mark, past it, waiting for room).
fn tally(
    stepped: Stepped,
    base: u64,
    reading: Reading,
    operand: StubOperand,
    slot: Slot,
) -> (usize, usize, usize) {
    let mut counts = (0, 0, 0);
    for (rip, out) in stepped.taken_out {
        let out = match out {
            Out::Regs(out) => *out,
            Out::Waiting {
                at_mark: out,
                clock,
            } => {
                assert!(!matches!(slot, Slot::Room), "waiting at {rip:#x}");
                // The clock at the mark is read back, but inside `READ` (the slow path's second
                // read); the record holds it where the slow path wrote one.
                assert_eq!(clock.is_none(), rip >= base + READ, "at {:#x}", rip - base);
                if let (Some(c), Slot::FullThenRoom(_)) = (clock, slot) {
                    assert_eq!(
                        c,
                        stepped.recorded,
                        "{reading:?}: the clock at {:#x}",
                        rip - base
                    );
                }
                counts.2 += 1;
                *out
            }
        };
        let (expected, n) = if out.rip == stepped.at_mark.rip {
            // Taken back to the mark (counted as waiting above where it waited).
            (&stepped.at_mark, &mut counts.0)
        } else {
            (&stepped.past_mark, &mut counts.1)
        };
        assert_eq!(
            program_view(&out),
            program_view(expected),
            "{reading:?} {operand:?} {slot:?}: taken out at {:#x}",
            rip - base
        );
        *n += 1;
    }
    counts
}

#[test]
fn a_thread_taken_out_of_a_stub_has_the_registers_of_the_mark_or_of_after_the_hit() {
    for reading in [Reading::Tsc, Reading::Rdpmc] {
        for operand in [StubOperand::None, StubOperand::Register(13)] {
            for slot in [Slot::Room, Slot::FullGone, Slot::FullThenRoom(40)] {
                let (back, past, waiting) = check_every_instruction(reading, operand, slot);
                // Before the commit and after it: both kinds of position were met; waiting
                // only in the slow path (the slot full).
                assert!(
                    back > 10 && past >= 5,
                    "{reading:?} {slot:?}: {back} {past}"
                );
                assert_eq!(
                    waiting > 0,
                    !matches!(slot, Slot::Room),
                    "{reading:?} {slot:?}: {waiting}"
                );
            }
        }
    }
}
