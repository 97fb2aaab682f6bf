//! The plugin's records (written by crates/cilkview-qemu-plugin/plugin/; their constants are
//! `cilkview_qemu_plugin::wire`, the one definition the plugin is compiled with too; described in
//! docs/emulation.md).
//!
//! The plugin writes chunks of little-endian 64-bit words, each at most 64 KiB
//! (copied whole into the record ring under the plugin's lock, `ring.rs`): a header
//! `tid | words << 32` (bit 63: the records are all hits of tags 0 and 2), then records.
//! A record's low two bits are its tag: 0 a hit (probe index in bits 2..25,
//! cost in bits 26..63), 1 the same followed by the operand word, 2 one or two
//! small hits (probe index < 2^14 in bits 2..15, cost < 2^16 in bits 16..31;
//! bits 32..63 zero or a second small hit laid out alike), 3 a control record
//! (kind in bits 2..9, argument in bits 10..63, then kind-specific words).
//! Hits of tags 0 and 2 are `cilkview_events::PackedHit` words, handed to the
//! sink as they are.

use cilkview_events::PackedHit;

#[cfg(test)]
use cilkview_qemu_plugin::wire::TAG_HIT;
use cilkview_qemu_plugin::wire::{
    BUF_WORDS, K_ATEXIT, K_BIGHIT, K_EXEC, K_EXEC_FAILED, K_EXIT, K_FDS_LOST, K_FORK, K_IMAGE,
    K_NO_OPERAND, K_REQUEST, K_SELF_SIGNAL, K_SNAPSHOT, K_START, K_THREAD_EXIT, K_UNSEEN, K_WORLD,
    SLOT_BUF, SLOT_COUNT, SLOT_LEN, SLOT_LIVE, SLOT_TID, TAG_CTRL, TAG_HIT_OP,
};

/// Largest chunk, header included, in words.
pub const CHUNK_WORDS: usize = BUF_WORDS as usize;

/// The shared memory of the threads' states (the plugin's `struct vstate`, one slot per vCPU):
/// read after QEMU died without running the plugin's exit path. Offsets in a slot:
pub mod slot {
    use super::*;
    /// `count`: instructions since the thread's last event.
    pub const COUNT: usize = SLOT_COUNT as usize;
    /// `len`: records buffered in `buf[1..]`.
    pub const LEN: usize = SLOT_LEN as usize;
    /// `tid`.
    pub const TID: usize = SLOT_TID as usize;
    /// `live`: the thread has not exited.
    pub const LIVE: usize = SLOT_LIVE as usize;
    /// `buf`: `buf[0]` is room for a chunk header, records from `buf[1]`.
    pub const BUF: usize = SLOT_BUF as usize;
    /// A slot's size: the state rounded to 64 bytes, then to pages.
    pub const BYTES: usize = (((BUF + 8 * super::CHUNK_WORDS) + 63) & !63).div_ceil(4096) * 4096;
}

/// One decoded record; `tid` comes from its chunk's header where it applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Hit {
        probe: u64,
        cost: u64,
        operand: Option<u64>,
    },
    ThreadExit {
        tid: i32,
        cost: u64,
    },
    /// The plugin waits for the probes of the file mapped at host address `base`.
    Request {
        base: u64,
        path: Vec<u8>,
    },
    /// The executable and its loader were requested: the program starts.
    Start,
    Fork {
        pid: i32,
    },
    Exec {
        path: Vec<u8>,
    },
    ExecFailed,
    Snapshot {
        tid: i32,
        cost: u64,
    },
    Exit {
        status: u64,
    },
    AtExit,
    NoOperand {
        probe: u64,
    },
    /// The program sent itself this signal (the snapshots before it hold the
    /// threads' counts, in case it is fatal).
    SelfSignal {
        sig: i32,
    },
    /// A new instance of the plugin, in the QEMU the previous one exec'd at the program's exec
    /// (the records before it are the old image's): it waits for [`image_ack`] before anything
    /// else, then announces the new image's files.
    Image,
    /// A file mapped for execution after the program closed the reply pipe: not instrumented.
    Unseen {
        path: Vec<u8>,
    },
    /// The program closed (close_range, closefrom, dup2 onto them) descriptors of the plugin
    /// that could not be moved out of its way: a bit each, bell pipe (1), reply pipe (2),
    /// threads' memfd (4), plugin's memfd (8), ring's memfd (16).
    FdsLost {
        mask: u64,
    },
    /// The emulator changed the program's world: what (1 a handler for a real-time signal
    /// QEMU cannot deliver, 2 the program sent itself one, 3 a system call returned ENOSYS,
    /// 4 a seccomp filter was refused) and its detail (the signal, the syscall number).
    World {
        what: u8,
        detail: u32,
    },
}

/// A malformed chunk: the stream cannot be trusted any more.
#[derive(Debug)]
pub struct BadRecord(pub String);

/// How many words at the start of `words` are hits without operands (plain and small hits:
/// [`PackedHit`] words, handed to the sink as they are, the hot path of the emulation backend).
#[inline]
pub fn hit_run(words: &[u64]) -> usize {
    // Eight words at a time, their bits 0 or'ed (a loop the compiler vectorizes: a chunk of the
    // plugin's is nearly all hits), then the first block with a record that is not a hit
    // word by word.
    const BLOCK: usize = 8;
    let clean = words
        .chunks_exact(BLOCK)
        .position(|block| !PackedHit::is_packed(block.iter().fold(0, |a, &w| a | w)))
        .unwrap_or(words.len() / BLOCK)
        * BLOCK;
    clean
        + words[clean..]
            .iter()
            .position(|&w| !PackedHit::is_packed(w))
            .unwrap_or(words.len() - clean)
}

/// Decode the records of one chunk's words.
#[cfg(test)]
pub fn decode(words: &[u64], out: &mut Vec<Record>) -> Result<(), BadRecord> {
    let mut i = 0;
    while i < words.len() {
        let run = hit_run(&words[i..]);
        PackedHit::for_each_in(&words[i..i + run], |probe, cost| {
            out.push(Record::Hit {
                probe: probe as u64,
                cost,
                operand: None,
            })
        });
        i += run;
        if run == 0 {
            out.push(decode_one(words, &mut i)?);
        }
    }
    Ok(())
}

/// Decode the record at `words[*i]`, advancing `*i` past it (a hit with an operand, a large
/// hit, a control record; plain and small hits: [`hit_run`]).
pub fn decode_one(words: &[u64], i: &mut usize) -> Result<Record, BadRecord> {
    let next = |i: &mut usize| -> Result<u64, BadRecord> {
        let w = words
            .get(*i)
            .copied()
            .ok_or_else(|| BadRecord(format!("record cut short at word {i}")))?;
        *i += 1;
        Ok(w)
    };
    let w = next(i)?;
    Ok(match w & 3 {
        TAG_HIT_OP => Record::Hit {
            probe: (w >> 2) & 0xff_ffff,
            cost: w >> 26,
            operand: Some(next(i)?),
        },
        TAG_CTRL => {
            let arg = w >> 10;
            match (w >> 2) & 0xff {
                K_BIGHIT => {
                    let probe = next(i)?;
                    let cost = next(i)?;
                    let operand = if arg & 1 != 0 { Some(next(i)?) } else { None };
                    Record::Hit {
                        probe,
                        cost,
                        operand,
                    }
                }
                K_THREAD_EXIT => Record::ThreadExit {
                    tid: arg as u32 as i32,
                    cost: next(i)?,
                },
                K_REQUEST => {
                    let base = next(i)?;
                    let path = string(words, i, arg)?;
                    Record::Request { base, path }
                }
                K_START => Record::Start,
                K_FORK => Record::Fork {
                    pid: arg as u32 as i32,
                },
                K_EXEC => Record::Exec {
                    path: string(words, i, arg)?,
                },
                K_EXEC_FAILED => Record::ExecFailed,
                K_SNAPSHOT => Record::Snapshot {
                    tid: arg as u32 as i32,
                    cost: next(i)?,
                },
                K_EXIT => Record::Exit { status: arg },
                K_ATEXIT => Record::AtExit,
                K_NO_OPERAND => Record::NoOperand { probe: arg },
                K_SELF_SIGNAL => Record::SelfSignal { sig: arg as i32 },
                K_IMAGE => Record::Image,
                K_UNSEEN => Record::Unseen {
                    path: string(words, i, arg)?,
                },
                K_FDS_LOST => Record::FdsLost { mask: arg },
                K_WORLD => Record::World {
                    what: (arg >> 16) as u8,
                    detail: (arg & 0xffff) as u32,
                },
                k => return Err(BadRecord(format!("unknown control record kind {k}"))),
            }
        }
        _ => return Err(BadRecord(format!("hit {w:#x} outside a run of hits"))),
    })
}

/// `len` bytes packed in the following words.
fn string(words: &[u64], i: &mut usize, len: u64) -> Result<Vec<u8>, BadRecord> {
    let n = (len as usize).div_ceil(8);
    let ws = words
        .get(*i..*i + n)
        .ok_or_else(|| BadRecord("string cut short".into()))?;
    *i += n;
    let mut bytes: Vec<u8> = ws.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.truncate(len as usize);
    Ok(bytes)
}

/// The reply to a [`Record::Request`]: status (0 ok), the first index, the
/// count, then (offset, operand register or all ones, function entry or all
/// ones) per probe. A probe with a function entry reports, as its operand, the
/// return address read at `[rsp]` when its thread last entered that function
/// (file-relative, like the offsets).
pub fn reply(first: usize, probes: &[crate::Probe]) -> Vec<u8> {
    let mut w: Vec<u64> = vec![0, first as u64, probes.len() as u64];
    for p in probes {
        w.push(p.offset);
        w.push(p.operand.map_or(u64::MAX, u64::from));
        w.push(p.return_address.map_or(u64::MAX, |r| r.function_entry));
    }
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The reply to [`Record::Image`]: the new instance skips any reply before it (one to a request
/// of a thread of the old image that the exec ended before it read it).
pub fn image_ack() -> Vec<u8> {
    [2u64, 0, 0].iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The reply refusing a request (the run is being stopped).
pub fn refusal() -> Vec<u8> {
    [1u64, 0, 0].iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cilkview_events::PackedHit;
    use cilkview_qemu_plugin::wire::{
        HIT_COST_BITS, HIT_PROBE_BITS, SMALL_COST_BITS, SMALL_PROBE_BITS, TAG_PAIR,
    };

    /// The analysis takes hit words as they are (`PackedHit`, in cilkview-events, which does not
    /// depend on the plugin): its layout is the wire format's.
    #[test]
    fn packed_hits_are_the_wires_hit_records() {
        assert_eq!(PackedHit::MAX_PROBE as u64, (1 << HIT_PROBE_BITS) - 1);
        assert_eq!(PackedHit::MAX_COST, (1 << HIT_COST_BITS) - 1);
        assert_eq!(
            PackedHit::MAX_SMALL_PROBE as u64,
            (1 << SMALL_PROBE_BITS) - 1
        );
        assert_eq!(PackedHit::MAX_SMALL_COST, (1 << SMALL_COST_BITS) - 1);
        let max = PackedHit::new(PackedHit::MAX_PROBE, PackedHit::MAX_COST)
            .unwrap()
            .0;
        assert_eq!(max & 3, TAG_HIT);
        assert_eq!(max >> (2 + HIT_PROBE_BITS), PackedHit::MAX_COST);
        let small = PackedHit::small(PackedHit::MAX_SMALL_PROBE, PackedHit::MAX_SMALL_COST)
            .unwrap()
            .0;
        assert_eq!(small & 3, TAG_PAIR);
        assert_eq!(small >> (2 + SMALL_PROBE_BITS), PackedHit::MAX_SMALL_COST);
        assert_eq!(2 + SMALL_PROBE_BITS + SMALL_COST_BITS, 32);
        assert_eq!(2 + HIT_PROBE_BITS + HIT_COST_BITS, 64);
    }

    #[test]
    fn decodes_each_kind() {
        let hit = (7u64 << 26) | (5 << 2) | TAG_HIT;
        // Plain and small hit records are what EventSink::hits takes: handed over as they are.
        assert_eq!(PackedHit::new(5, 7).unwrap().0, hit);
        let small = |probe: u64, cost: u64| (cost << 16) | (probe << 2) | 2;
        let pair = small(8, 30) | (small(9, 4) << 32);
        let hit_op = (9u64 << 26) | (6 << 2) | TAG_HIT_OP;
        let ctrl = |k: u64, a: u64| (a << 10) | (k << 2) | TAG_CTRL;
        let words = [
            hit,
            pair,
            small(10, 0),
            hit_op,
            42,
            ctrl(K_BIGHIT, 1),
            1 << 30,
            1 << 40,
            3,
            ctrl(K_THREAD_EXIT, 77),
            11,
            ctrl(K_REQUEST, 9),
            0x1000,
            u64::from_le_bytes(*b"/lib/lib"),
            u64::from_le_bytes(*b"c\0\0\0\0\0\0\0"),
            ctrl(K_START, 0),
            ctrl(K_IMAGE, 0),
            ctrl(K_EXIT, 3),
        ];
        let mut out = vec![];
        decode(&words, &mut out).unwrap();
        assert_eq!(
            out,
            vec![
                Record::Hit {
                    probe: 5,
                    cost: 7,
                    operand: None
                },
                Record::Hit {
                    probe: 8,
                    cost: 30,
                    operand: None
                },
                Record::Hit {
                    probe: 9,
                    cost: 4,
                    operand: None
                },
                Record::Hit {
                    probe: 10,
                    cost: 0,
                    operand: None
                },
                Record::Hit {
                    probe: 6,
                    cost: 9,
                    operand: Some(42)
                },
                Record::Hit {
                    probe: 1 << 30,
                    cost: 1 << 40,
                    operand: Some(3)
                },
                Record::ThreadExit { tid: 77, cost: 11 },
                Record::Request {
                    base: 0x1000,
                    path: b"/lib/libc".to_vec()
                },
                Record::Start,
                Record::Image,
                Record::Exit { status: 3 },
            ]
        );
        assert!(decode(&[ctrl(K_THREAD_EXIT, 1)], &mut out).is_err());
        assert_eq!(hit_run(&words), 3);
        // A record that is not a hit at every place of a run longer than the blocks scanned.
        let mut long = vec![hit; 37];
        assert_eq!(hit_run(&long), 37);
        for at in 0..long.len() {
            long[at] = hit_op;
            assert_eq!(hit_run(&long), at);
            assert_eq!(hit_run(&long[at + 1..]), 36 - at);
            long[at] = hit;
        }
        assert_eq!(hit_run(&[]), 0);
    }
}
