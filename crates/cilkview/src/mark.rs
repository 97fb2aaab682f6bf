//! The marks: each one a 5-byte NOP (`nopl 0x0(%rax,%rax,1)`) in the code and a record in the
//! non-allocated ELF section `.cilkview_marks`, exactly as `cilkview.h` emits them
//! (`docs/marks-format.md` of cilkview-rs). Every mark also appends one byte to the
//! non-allocated section `.cilkview_rayon`, which tells `cilkview-rs run` to set
//! `RAYON_NUM_THREADS=1` for the program.
//!
//! An `asm!` block without `nomem`/`pure` is, for the compiler, a volatile statement that may
//! read and write any memory: calls, loads and stores stay on the side of the mark where the
//! source put them, exactly as with the header's `volatile` asm and its `"memory"` clobber.
//! Each copy the compiler makes of a block (inlining, monomorphization, unrolling, a drop on an
//! unwinding path) carries its own record: one record per NOP.
//!
//! With the `marks` feature off (or `--cfg cilkview_disable`) every mark is an empty inline
//! function: the serial elision.

// Record kinds (`docs/marks-format.md`), spelled as literals in the asm templates: 1
// function-enter, 2 function-exit, 3 spawn, 4 spawn-return, 5 sync, 6 loop-begin, 7
// iteration-begin, 8 iteration-end, 9 loop-end, 10 region-begin, 11 region-end.

/// A plain mark of kind `$kind` (an integer literal), no operand.
#[cfg(all(feature = "marks", not(cilkview_disable)))]
macro_rules! plain_mark {
    ($kind:literal) => {
        // SAFETY: the code is one NOP, which reads and writes nothing; the rest goes to
        // non-allocated sections that are never loaded.
        unsafe {
            ::core::arch::asm!(
                "2: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
                ".pushsection .cilkview_marks,\"\",@progbits",
                ".balign 8",
                concat!(".byte 1, ", $kind, ", 0xff, 0"),
                ".long 16",
                ".quad 2b",
                ".popsection",
                ".pushsection .cilkview_rayon,\"\",@progbits",
                ".byte 1",
                ".popsection",
                options(att_syntax, nostack, preserves_flags)
            )
        }
    };
}

#[cfg(not(all(feature = "marks", not(cilkview_disable))))]
macro_rules! plain_mark {
    ($kind:literal) => {};
}

#[inline(always)]
pub(crate) fn function_enter() {
    plain_mark!(1);
}
#[inline(always)]
pub(crate) fn function_exit() {
    plain_mark!(2);
}
#[inline(always)]
pub(crate) fn spawn() {
    plain_mark!(3);
}
#[inline(always)]
pub(crate) fn spawn_return() {
    plain_mark!(4);
}
#[inline(always)]
pub(crate) fn sync() {
    plain_mark!(5);
}
#[inline(always)]
pub(crate) fn iteration_begin() {
    plain_mark!(7);
}
#[inline(always)]
pub(crate) fn iteration_end() {
    plain_mark!(8);
}
#[inline(always)]
pub(crate) fn loop_end() {
    plain_mark!(9);
}

/// Loop-begin: the grain is the operand, in `%rax` (DWARF register 0) at the NOP. The `jmp` to
/// the NOP makes it begin a basic block, so that an emulator can read `%rax` exactly there
/// (one more instruction per loop, as in `cilkview.h`).
#[inline(always)]
#[cfg(all(feature = "marks", not(cilkview_disable)))]
pub(crate) fn loop_begin(grain: usize) {
    // SAFETY: a jump to the next instruction and a NOP; %rax is only read.
    unsafe {
        ::core::arch::asm!(
            "jmp 3f",
            "3:",
            "2: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
            ".pushsection .cilkview_marks,\"\",@progbits",
            ".balign 8",
            ".byte 1, 6, 0, 0",
            ".long 16",
            ".quad 2b",
            ".popsection",
            ".pushsection .cilkview_rayon,\"\",@progbits",
            ".byte 1",
            ".popsection",
            in("rax") grain as u64,
            options(att_syntax, nostack, preserves_flags)
        )
    }
}

#[inline(always)]
#[cfg(not(all(feature = "marks", not(cilkview_disable))))]
pub(crate) fn loop_begin(grain: usize) {
    let _ = grain;
}

/// A region mark of kind `$kind` with the label `$label` (a string literal) in its record.
/// Used by [`region!`](crate::region) in the user's crate, hence exported (hidden).
#[doc(hidden)]
#[macro_export]
#[cfg(all(feature = "marks", not(cilkview_disable)))]
macro_rules! __cilkview_region_mark {
    ($kind:literal, $label:literal) => {
        // SAFETY: one NOP; the record goes to a non-allocated section.
        unsafe {
            ::core::arch::asm!(
                "2: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00",
                ".pushsection .cilkview_marks,\"\",@progbits",
                ".balign 8",
                concat!("4: .byte 1, ", $kind, ", 0xff, 0"),
                ".long 5f - 4b",
                ".quad 2b",
                concat!(".asciz \"", $label, "\""),
                ".balign 8, 0",
                "5:",
                ".popsection",
                ".pushsection .cilkview_rayon,\"\",@progbits",
                ".byte 1",
                ".popsection",
                options(att_syntax, nostack, preserves_flags)
            )
        }
    };
}

#[doc(hidden)]
#[macro_export]
#[cfg(not(all(feature = "marks", not(cilkview_disable))))]
macro_rules! __cilkview_region_mark {
    ($kind:literal, $label:literal) => {{
        let _: &str = $label;
    }};
}

/// Whether this build emits marks (the `marks` feature on and no `--cfg cilkview_disable`).
pub const ENABLED: bool = cfg!(all(feature = "marks", not(cilkview_disable)));
