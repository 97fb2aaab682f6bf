//! Taking a thread out of the stub pages without running it.
//!
//! A signal must not be delivered to a thread inside a stub: a handler hitting a mark would
//! take the same record (the stub holds `head` in `%rbx` until it commits it). The tracer
//! puts the thread where it would be had the stub not begun (before the commit: the mark runs
//! again after the handler, as if the signal had come just before it) or had it ended (after
//! the commit: the thread goes on past the mark), with the program's registers and flags from
//! the slots the stub, its slow path and `READ` saved them in.
//!
//! Nothing is executed: no single-step and no trap. (A step's trap and a SIGTRAP the program
//! sends itself at that moment are one pending signal: the kernel keeps one SIGTRAP of each
//! kind pending, and the program's was lost.)
//!
//! The generated code is read back with a decoder: at an instruction, the registers pushed
//! since the code's entry (in order), whether `%rsp` is past the red zone, and whether the
//! record is committed (`mov gs:[HEAD], …` done) are those of the instructions before it in
//! the code's layout. That holds for the slow path and `READ` (their branches keep the stack
//! as it is), and for a stub up to its jump back; after that jump lie the stub's call of the
//! slow path (state: as just before the commit) and the jump to its epilogue after the call
//! (committed: the slow path wrote or dropped the record). `stub_decoding.rs` and the
//! `sys::native` tests check it against the code executed step by step.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind, Register};
use nix::libc::user_regs_struct;

use super::stub::{Reading, FIRST_STUB, GADGET, HEAD, READ, STUB_BYTES};

/// The code a stub page holds at an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// A mark's stub: it ends by jumping back to the program.
    Stub,
    /// The page's slow path (called by its stubs, it waits for room and returns).
    SlowPath,
    /// `READ` (called by a stub or the slow path, it returns).
    Read,
}

/// Where a thread inside the stub pages is taken out to.
#[derive(Debug)]
pub(crate) enum Out {
    /// These registers: at the mark or after the hit.
    Regs(Box<user_regs_struct>),
    /// It is in the slow path (waiting for room, or dropping the record), the record not
    /// committed: the registers of the mark, and the clock the stub read at the mark where the
    /// thread is the slow path's own (not in `READ`): from then on it only waited.
    Waiting {
        at_mark: Box<user_regs_struct>,
        clock: Option<u64>,
    },
}

/// A piece of generated code as the thread's memory holds it: what it is, its address, bytes.
pub(crate) struct Piece {
    pub(crate) code: Code,
    pub(crate) start: u64,
    pub(crate) bytes: Vec<u8>,
}

/// The piece of generated code at `rip` in the stub page at `page` (a stub, the slow path or
/// `READ`), read with `read(address, buffer)`; `None` at the gadgets or if unreadable.
pub(crate) fn piece_in_page(
    page: u64,
    reading: Reading,
    rip: u64,
    read: impl Fn(u64, &mut [u8]) -> bool,
) -> Option<Piece> {
    let (code, start, len) = match rip.checked_sub(page)? {
        off if off >= FIRST_STUB => {
            let stub = page + FIRST_STUB + (off - FIRST_STUB) / STUB_BYTES * STUB_BYTES;
            (Code::Stub, stub, STUB_BYTES)
        }
        off if off < GADGET => (Code::SlowPath, page, GADGET),
        off if reading == Reading::Rdpmc && off >= READ => {
            (Code::Read, page + READ, FIRST_STUB - READ)
        }
        _ => return None,
    };
    let mut bytes = vec![0; len as usize];
    read(start, &mut bytes).then_some(Piece { code, start, bytes })
}

/// What the code has put on the stack and done when it reaches an instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct State {
    /// Registers pushed since the entry, in push order (the last at `%rsp`); `None`: the flags.
    pushed: Vec<Option<Register>>,
    /// `%rsp` is 128 bytes below the program's red zone.
    below_red_zone: bool,
    /// The record is committed (or, after the slow path, dropped).
    committed: bool,
    /// The clock read at the mark is in `%r8` (the slow path moved it there from
    /// `%edx:%eax`).
    clock_in_r8: bool,
}

/// The state at `ip` in `piece`, and a stub's jump back (the mark's address + 5). `None` if
/// `ip` is not at an instruction of the piece, or the code is not what this module reads.
fn state_at(piece: &Piece, ip: u64) -> Option<(State, Option<u64>)> {
    let end = piece.start + piece.bytes.len() as u64;
    let mut decoder = Decoder::with_ip(64, &piece.bytes, piece.start, DecoderOptions::NONE);
    let (mut state, mut before_commit) = (State::default(), State::default());
    let (mut at_ip, mut back) = (None, None);
    let mut i = Instruction::default();
    while decoder.can_decode() && (at_ip.is_none() || (piece.code == Code::Stub && back.is_none()))
    {
        decoder.decode_out(&mut i);
        if i.is_invalid() {
            return None;
        }
        if i.ip() == ip {
            at_ip = Some(state.clone());
        }
        match i.mnemonic() {
            Mnemonic::Push if i.op0_kind() == OpKind::Register => {
                state.pushed.push(Some(i.op0_register()))
            }
            Mnemonic::Pushfq => state.pushed.push(None),
            Mnemonic::Pop | Mnemonic::Popfq => {
                state.pushed.pop()?;
            }
            Mnemonic::Lea if i.op0_register() == Register::RSP => {
                match i.memory_displacement64() as i64 {
                    -128 => state.below_red_zone = true,
                    128 => state.below_red_zone = false,
                    _ => return None,
                }
            }
            Mnemonic::Mov
                if i.op0_kind() == OpKind::Memory
                    && i.segment_prefix() == Register::GS
                    && i.memory_base() == Register::None
                    && i.memory_index() == Register::None
                    && i.memory_displacement64() == HEAD =>
            {
                before_commit = state.clone();
                state.committed = true;
            }
            Mnemonic::Call if back.is_some() => state.committed = true, // the slow path returned
            Mnemonic::Or if i.op0_register() == Register::R8 => state.clock_in_r8 = true,
            Mnemonic::Push => return None,
            Mnemonic::Ret | Mnemonic::Call => {}
            _ if i.flow_control() == FlowControl::UnconditionalBranch
                && !(piece.start..end).contains(&i.near_branch_target()) =>
            {
                back = Some(i.near_branch_target());
                state = before_commit.clone(); // the call of the slow path follows
            }
            _ => {}
        }
    }
    Some((at_ip?, back))
}

/// The registers of a thread stopped at `regs` inside the stub pages, taken out of them: the
/// program's registers and flags, `%rsp` above the red zone, `%rip` at the mark (the record
/// not committed: the hit is made again) or after it; or that it waits for room. `piece` gives
/// the code at an address (`None` outside the stubs, slow path and `READ`: a gadget), `word`
/// the 8 bytes at an address of the thread's stack. `None` where the thread is not in a stub's
/// hit (it is left as it is).
pub(crate) fn out_of_stubs(
    regs: &user_regs_struct,
    piece: impl Fn(u64) -> Option<Piece>,
    word: impl Fn(u64) -> Option<u64>,
) -> Option<Out> {
    // Innermost first: the state of each piece of code the thread is in, and its `%rsp`.
    let mut frames: Vec<(State, u64)> = Vec::new();
    // The slow path's state when it waits (the record not committed), and whether the thread
    // is in it (not in `READ`).
    let mut waiting: Option<(State, bool)> = None;
    let (mut rip, mut rsp) = (regs.rip, regs.rsp);
    let (back, program_rsp) = loop {
        let p = piece(rip)?;
        let (state, back) = state_at(&p, rip)?;
        let above = rsp + 8 * state.pushed.len() as u64;
        let below_red_zone = state.below_red_zone;
        let innermost_committed = frames.first().map_or(state.committed, |f| f.0.committed);
        if p.code == Code::SlowPath && !innermost_committed {
            waiting = Some((state.clone(), frames.is_empty()));
        }
        frames.push((state, rsp));
        match p.code {
            Code::Stub => break (back?, above + if below_red_zone { 128 } else { 0 }),
            // The slow path calls `READ`; nothing calls deeper.
            _ if frames.len() < 3 => (rip, rsp) = (word(above)?, above + 8),
            _ => return None,
        }
    };
    let mut out = *regs;
    // The outermost slot of a register holds the program's value (an inner one, what the
    // code had put there).
    let mut restored: Vec<Option<Register>> = Vec::new();
    for (state, rsp) in frames.iter().rev() {
        let n = state.pushed.len() as u64;
        for (k, &reg) in state.pushed.iter().enumerate() {
            if !restored.contains(&reg) {
                set(&mut out, reg, word(rsp + 8 * (n - 1 - k as u64))?)?;
                restored.push(reg);
            }
        }
    }
    out.rsp = program_rsp;
    out.rip = if frames[0].0.committed {
        back
    } else {
        back - 5
    };
    // Not in a system call (the program was not): no restart at the signal's delivery.
    out.orig_rax = u64::MAX;
    Some(match waiting {
        None => Out::Regs(Box::new(out)),
        Some((slow, innermost)) => Out::Waiting {
            at_mark: Box::new(out),
            clock: innermost.then_some(if slow.clock_in_r8 {
                regs.r8
            } else {
                (regs.rdx << 32) | (regs.rax & 0xffff_ffff)
            }),
        },
    })
}

/// Register `reg` (`None`: the flags) of `regs` set to `value`.
fn set(regs: &mut user_regs_struct, reg: Option<Register>, value: u64) -> Option<()> {
    let field = match reg {
        None => &mut regs.eflags,
        Some(Register::RAX) => &mut regs.rax,
        Some(Register::RCX) => &mut regs.rcx,
        Some(Register::RDX) => &mut regs.rdx,
        Some(Register::RBX) => &mut regs.rbx,
        Some(Register::RSI) => &mut regs.rsi,
        Some(Register::RDI) => &mut regs.rdi,
        Some(Register::R8) => &mut regs.r8,
        Some(Register::R9) => &mut regs.r9,
        Some(Register::R10) => &mut regs.r10,
        Some(Register::R11) => &mut regs.r11,
        Some(_) => return None,
    };
    *field = value;
    Some(())
}
