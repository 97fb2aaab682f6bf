//! The plugin's wire format, in one place: the records it writes, the thread slots and the record
//! ring it shares with the analyzer (docs/emulation.md, "Records" and "The ring").
//!
//! This file is the only definition. The crate's build script includes it and renders
//! [`DEFINES`] as the C header `cilkview_wire.h` that the plugin is compiled with (its
//! `struct vstate` and `struct ring_hdr` check their offsets against it with `_Static_assert`);
//! the tracer's emulation backend reads the same constants as `cilkview_qemu_plugin::wire`.

macro_rules! wire {
    ($($(#[doc = $doc:literal])+ $name:ident = $value:expr;)*) => {
        $($(#[doc = $doc])+ pub const $name: u64 = $value;)*
        /// Every constant above: its name, value and one-line description, for the C header.
        pub const DEFINES: &[(&str, u64, &str)] = &[$((stringify!($name), $value, concat!($($doc),+))),*];
    };
}

wire! {
    /// Record tag (bits 0..1): one hit, probe in bits 2..25, cost in bits 26..63.
    TAG_HIT = 0;
    /// Record tag: a hit as TAG_HIT, then one word: the operand.
    TAG_HIT_OP = 1;
    /// Record tag: one or two small hits, one in bits 2..31, bits 32..63 zero or a second alike.
    TAG_PAIR = 2;
    /// Record tag: a control record, kind in bits 2..9, argument in bits 10..63, then its words.
    TAG_CTRL = 3;

    /// Control kind: a hit too big for a word. Arg: has an operand; words: probe, cost[, operand].
    K_BIGHIT = 1;
    /// Control kind: a thread exited. Arg: tid; word: cost.
    K_THREAD_EXIT = 2;
    /// Control kind: the probes of a mapped file are asked for. Arg: path length; words: host base, path.
    K_REQUEST = 3;
    /// Control kind: the executable and its loader were announced.
    K_START = 4;
    /// Control kind: the program forked. Arg: child pid.
    K_FORK = 6;
    /// Control kind: the program execs. Arg: path length; words: path.
    K_EXEC = 7;
    /// Control kind: the exec announced by K_EXEC returned.
    K_EXEC_FAILED = 8;
    /// Control kind: a thread's count at an exec. Arg: tid; word: cost.
    K_SNAPSHOT = 9;
    /// Control kind: exit_group. Arg: status.
    K_EXIT = 10;
    /// Control kind: QEMU's exit path ran (normal exit or the guest's fatal signal).
    K_ATEXIT = 11;
    /// Control kind: a probe's operand cannot be read exactly. Arg: probe index.
    K_NO_OPERAND = 12;
    /// Control kind: a signal the program sends itself (kill, tkill, tgkill). Arg: signal.
    K_SELF_SIGNAL = 13;
    /// Control kind: a new instance, in the QEMU the last exec'd; it awaits a reply.
    K_IMAGE = 14;
    /// Control kind: a file mapped after the reply pipe was lost. Arg: path length; words: path.
    K_UNSEEN = 15;
    /// Control kind: the program closed the plugin's descriptors. Arg: which ones.
    K_FDS_LOST = 16;
    /// Control kind: the emulator changed the program's world. Arg: what << 16 | detail.
    K_WORLD = 17;

    /// K_WORLD's what: a real-time signal QEMU cannot deliver got a handler (detail: the signal).
    W_RT_HANDLER = 1;
    /// K_WORLD's what: the program sent itself such a signal (detail: the signal).
    W_RT_SELF = 2;
    /// K_WORLD's what: a system call returned ENOSYS (detail: its number).
    W_NOSYS = 3;
    /// K_WORLD's what: prctl(PR_SET_SECCOMP) was refused.
    W_SECCOMP = 4;

    /// Bits of a hit's probe index (TAG_HIT).
    HIT_PROBE_BITS = 24;
    /// Bits of a hit's cost (TAG_HIT).
    HIT_COST_BITS = 38;
    /// Bits of a small hit's probe index (TAG_PAIR).
    SMALL_PROBE_BITS = 14;
    /// Bits of a small hit's cost (TAG_PAIR).
    SMALL_COST_BITS = 16;

    /// Words of one chunk, its header (tid | words << 32 | CHUNK_HITS_ONLY or 0) included: 64 KiB.
    BUF_WORDS = 8192;
    /// Chunk header flag: every word after the header is a hit without an operand (TAG_HIT or
    /// TAG_PAIR), so the reader hands the words on without looking for other records.
    CHUNK_HITS_ONLY = 1 << 63;

    /// Thread slot offset of `count`: instructions since the thread's last event.
    SLOT_COUNT = 0;
    /// Thread slot offset of `len`: records buffered in buf[1..].
    SLOT_LEN = 8;
    /// Thread slot offset of `tid`.
    SLOT_TID = 12;
    /// Thread slot offset of `live`: the thread has not exited.
    SLOT_LIVE = 16;
    /// Thread slot offset of `buf`: buf[0] is room for a chunk header, records from buf[1].
    SLOT_BUF = 80;

    /// Ring header offset of `head`: bytes written.
    RING_HEAD = 0;
    /// Ring header offset of `tail`: bytes the analyzer is done with.
    RING_TAIL = 64;
    /// Ring header offset of `reader_waiting`.
    RING_READER_WAITING = 128;
    /// Ring header offset of `writer_waiting`.
    RING_WRITER_WAITING = 132;
    /// Ring header offset of `writer_wake`: the `tail` the waiting writer wants reached (room
    /// for its chunk and RING_WAKE_BYTES more) before it is woken.
    RING_WRITER_WAKE = 136;
    /// The ring's header page.
    RING_HDR_BYTES = 4096;
    /// The ring's data: 2 MiB.
    RING_BYTES = 2 << 20;
    /// A side that waits is woken once this much is ready for it, not at each chunk: room for
    /// the writer (see RING_WRITER_WAKE), records for the reader (or sooner, for a chunk that
    /// must be seen now: every chunk but a thread's full buffer). 512 KiB.
    RING_WAKE_BYTES = 512 << 10;
    /// In place of a chunk header: the rest of the ring up to its end is unused.
    RING_WRAP = u64::MAX;
}

/// The C header: one `#define` per constant, `UINT64_C` literals.
pub fn c_header() -> String {
    let mut h = String::from(
        "/* Generated by crates/cilkview-qemu-plugin/build.rs from src/wire.rs: do not edit. */\n\
         #ifndef CILKVIEW_WIRE_H\n#define CILKVIEW_WIRE_H\n#include <stdint.h>\n",
    );
    for (name, value, doc) in DEFINES {
        h += &format!("#define {name} UINT64_C({value}) /* {doc} */\n");
    }
    h + "#endif\n"
}
