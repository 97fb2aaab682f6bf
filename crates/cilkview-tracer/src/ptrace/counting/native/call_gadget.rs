//! The code injected system calls run on (`inject.rs`), and the data it returns with: a thread
//! let go in the middle of a call (the tool killed: ptrace detaches it as it is) finishes the
//! call and goes back to where it was stopped with its own registers, instead of running into
//! an `int3` with the call's registers (the program killed by SIGTRAP).
//!
//! ```text
//!   mov rax, r11               ; the call's number (see below)
//!   syscall
//!   mov rdi, [rip+D.rdi]       ; what the call and `syscall` changed, put back: the six
//!   ...                        ; argument registers, rax, and rcx and r11 (which `syscall`
//!   mov r11, [rip+D.r11]       ; overwrites)
//!   jmp [rip+D.rip]
//! D: rdi rsi rdx r10 r8 r9 rax rcx r11 rip   (u64 each, written by the tool before each call)
//! ```
//!
//! D follows the code in the region's page; for the first call (`spare_code.rs`) it may lie in
//! another mapping, within reach of the loads.
//!
//! Nothing else changes: `%rsp` stays the thread's (no stack is used: a signal handled meanwhile
//! finds the program's own stack), and no instruction after the `syscall` writes the flags (the
//! kernel gives them back as they were at the `syscall`, the thread's own). The number is in
//! `%r11` because a thread stopped inside a system call gets that call's result written to
//! `%rax` as it resumes. Encodings by GNU as, checked by decoding them (tests below).

use nix::libc::user_regs_struct;

/// Where a gadget is: its code ([`CODE_LEN`] bytes) and its data ([`DATA_LEN`] bytes), within
/// 2 GiB of each other (the loads are `%rip`-relative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Gadget {
    pub(super) code: u64,
    pub(super) data: u64,
}

/// Bytes of code.
pub(super) const CODE_LEN: u64 = 74;
/// Bytes of data.
pub(super) const DATA_LEN: u64 = 8 * DATA_WORDS as u64;
/// Offset of the `syscall`'s end (the thread's `%rip` at the call's syscall-exit stop).
pub(super) const AFTER_SYSCALL: u64 = 5;
const DATA_WORDS: usize = 10;
/// `mov reg, [rip+disp32]` for the registers put back, in the data's order (then the `rip`).
const LOADS: [[u8; 3]; DATA_WORDS - 1] = [
    [0x48, 0x8b, 0x3d], // rdi
    [0x48, 0x8b, 0x35], // rsi
    [0x48, 0x8b, 0x15], // rdx
    [0x4c, 0x8b, 0x15], // r10
    [0x4c, 0x8b, 0x05], // r8
    [0x4c, 0x8b, 0x0d], // r9
    [0x48, 0x8b, 0x05], // rax
    [0x48, 0x8b, 0x0d], // rcx
    [0x4c, 0x8b, 0x1d], // r11
];

impl Gadget {
    /// Its code, for its place (`None` if its data is out of a `%rip`-relative load's reach).
    pub(super) fn code(self) -> Option<Vec<u8>> {
        let mut v = vec![0x4c, 0x89, 0xd8, 0x0f, 0x05]; // mov rax, r11; syscall
        let disp = |v: &Vec<u8>, len: usize, word: usize| {
            let next = self.code + (v.len() + len) as u64;
            i32::try_from((self.data + 8 * word as u64).wrapping_sub(next) as i64).ok()
        };
        for (word, load) in LOADS.iter().enumerate() {
            let d = disp(&v, 7, word)?;
            v.extend_from_slice(load);
            v.extend_from_slice(&d.to_le_bytes());
        }
        let d = disp(&v, 6, DATA_WORDS - 1)?;
        v.extend_from_slice(&[0xff, 0x25]); // jmp qword ptr [rip+disp32]
        v.extend_from_slice(&d.to_le_bytes());
        debug_assert_eq!(v.len() as u64, CODE_LEN);
        Some(v)
    }
}

/// The gadget's data: the registers `back` the thread returns with if it is let go.
pub(super) fn data(back: &user_regs_struct) -> Vec<u8> {
    let b = back;
    let words = [
        b.rdi, b.rsi, b.rdx, b.r10, b.r8, b.r9, b.rax, b.rcx, b.r11, b.rip,
    ];
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter, Instruction};

    /// The code decodes to the sequence above, each load reading its own word of the data.
    #[test]
    fn the_gadget_puts_back_each_register_from_its_word_and_jumps_back() {
        const BASE: u64 = 0x10000;
        const DATA: u64 = 0x7000_0000; // out of reach of a rel8, within a rel32's
        let code = Gadget {
            code: BASE,
            data: BASE + DATA,
        }
        .code()
        .unwrap();
        let mut d = Decoder::with_ip(64, &code, BASE, DecoderOptions::NONE);
        let mut fmt = GasFormatter::new();
        fmt.options_mut().set_gas_show_mnemonic_size_suffix(false);
        let mut text = Vec::new();
        let mut insn = Instruction::default();
        while d.can_decode() {
            d.decode_out(&mut insn);
            let mut s = String::new();
            fmt.format(&insn, &mut s);
            if insn.is_ip_rel_memory_operand() {
                let word = (insn.ip_rel_memory_address() - BASE - DATA) / 8;
                let mnemonic = s.split(' ').next().unwrap().to_string();
                let dest = s.split(',').nth(1).map(|d| format!(" {d}"));
                s = format!("{mnemonic}{} <word {word}>", dest.unwrap_or_default());
            }
            text.push(s);
        }
        let regs = ["rdi", "rsi", "rdx", "r10", "r8", "r9", "rax", "rcx", "r11"];
        let mut expect = vec!["mov %r11,%rax".to_string(), "syscall".to_string()];
        expect.extend(
            regs.iter()
                .enumerate()
                .map(|(i, r)| format!("mov %{r} <word {i}>")),
        );
        let jmp = text.pop().unwrap();
        assert_eq!(
            jmp, "jmpq <word 9>",
            "an indirect 64-bit jmp through word 9"
        );
        assert_eq!(text, expect);
        assert_eq!(code.len() as u64, AFTER_SYSCALL + 63 + 6);
        let far = Gadget {
            code: BASE,
            data: BASE + (3 << 30),
        };
        assert_eq!(far.code(), None, "data out of reach");
    }
}
