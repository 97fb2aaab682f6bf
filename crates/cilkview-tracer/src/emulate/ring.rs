//! The record ring shared with the plugin (its writer side: `plugin/stream.c`): the plugin
//! copies each chunk into a shared memory and publishes it; the analyzer reads it in place and
//! says when it is done with it. The out pipe carries no records: the plugin writes a byte to it
//! when the analyzer waits for records, and its end (every writer gone) ends the stream.
//!
//! Layout: a header page (`head` at byte 0: bytes written; `tail` at 64: bytes the analyzer is
//! done with; `reader_waiting` at 128, `writer_waiting` at 132), then [`RING_BYTES`] of data.
//! A chunk (header word `tid | words << 32`, with [`HITS_ONLY`] where every word is a hit without
//! an operand, then its words) never wraps: a chunk that does not fit before the end is preceded
//! by a [`WRAP`] word and starts at 0.
//!
//! Either side is woken once [`wire::RING_WAKE_BYTES`] are ready for it, not at each chunk: the
//! plugin asks for room and that much more (`writer_wake`, at 136), and rings the bell once that
//! much is unread or at a chunk that must be seen now. The reader also looks every
//! [`READER_NAP`] while it waits, for records that wait for nothing more to come.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::ops::Range;
use std::os::fd::AsFd;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::protocol::CHUNK_WORDS;
use crate::sys::SharedMap;

use cilkview_qemu_plugin::wire;

/// The header page.
pub const HDR_BYTES: usize = wire::RING_HDR_BYTES as usize;
/// The data: 2 MiB.
pub const RING_BYTES: usize = wire::RING_BYTES as usize;
const HEAD: usize = wire::RING_HEAD as usize;
const TAIL: usize = wire::RING_TAIL as usize;
const READER_WAITING: usize = wire::RING_READER_WAITING as usize;
const WRITER_WAITING: usize = wire::RING_WRITER_WAITING as usize;
const WRITER_WAKE: usize = wire::RING_WRITER_WAKE as usize;
/// How long the reader sleeps at most while it waits for records: the plugin rings the bell for
/// a thread's full buffer only once [`wire::RING_WAKE_BYTES`] are unread.
pub const READER_NAP: Duration = Duration::from_millis(20);
/// In place of a chunk header: the rest of the ring up to its end is unused.
const WRAP: u64 = wire::RING_WRAP;
/// A chunk header's flag: the chunk's words are all hits without an operand.
const HITS_ONLY: u64 = wire::CHUNK_HITS_ONLY;

/// A chunk returned by [`RingReader::next`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The thread whose records these are.
    pub tid: i32,
    /// Its words (see [`RingReader::words`]).
    pub range: Range<usize>,
    /// The plugin says every word is a hit without an operand ([`wire::CHUNK_HITS_ONLY`]).
    pub hits_only: bool,
}

/// A malformed stream, or the pipe failed.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Bad(String),
}

/// The reader's side of the ring.
pub struct RingReader {
    map: SharedMap,
    /// Where the next chunk starts (bytes since the start of the stream).
    tail: u64,
    /// What the plugin was told we are done with.
    published: u64,
    /// The bell pipe ended while QEMU was still running: the program closed the plugin's end
    /// (close_range, closefrom). The plugin then wakes us with a futex on `reader_waiting`.
    bell_lost: bool,
}

impl RingReader {
    /// The ring in `file` (the memfd passed to the plugin as `ring=FD`, sized by [`ring_file`]).
    pub fn new(file: &File) -> std::io::Result<RingReader> {
        Ok(RingReader {
            map: SharedMap::new(file, HDR_BYTES + RING_BYTES)?,
            tail: 0,
            published: 0,
            bell_lost: false,
        })
    }

    /// The words of a chunk returned by [`RingReader::next`] (valid until the next call).
    pub fn words(&self, range: Range<usize>) -> &[u64] {
        self.map.words(HDR_BYTES + 8 * range.start, range.len())
    }

    /// The next chunk: its thread and its words (see [`RingReader::words`]); `None` once the
    /// plugin is gone (`bell` at its end and `alive` false: QEMU exited) and every chunk it
    /// published was read. The chunk returned before is released to the plugin.
    pub fn next(
        &mut self,
        bell: &mut (impl Read + AsFd),
        alive: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Chunk>, ReadError> {
        self.release();
        let mut gone = false;
        loop {
            let head = self.map.load64(HEAD);
            if head != self.tail {
                if head.wrapping_sub(self.tail) > RING_BYTES as u64 {
                    return Err(ReadError::Bad(format!(
                        "ring head {head} beyond its tail {}",
                        self.tail
                    )));
                }
                let off = (self.tail % RING_BYTES as u64) as usize;
                let word = self.map.words(HDR_BYTES + off, 1)[0];
                if word == WRAP {
                    self.tail += (RING_BYTES - off) as u64;
                    continue;
                }
                let n = ((word & !HITS_ONLY) >> 32) as usize;
                if n >= CHUNK_WORDS || off + 8 * (n + 1) > RING_BYTES {
                    return Err(ReadError::Bad(format!("chunk of {n} words")));
                }
                if head - self.tail < 8 * (n as u64 + 1) {
                    return Err(ReadError::Bad("chunk cut short".into()));
                }
                self.tail += 8 * (n as u64 + 1);
                let first = off / 8 + 1;
                return Ok(Some(Chunk {
                    tid: word as u32 as i32,
                    range: first..first + n,
                    hits_only: word & HITS_ONLY != 0,
                }));
            }
            if gone {
                return Ok(None);
            }
            // Nothing to read: say so, look once more (the plugin looks at the flag after it
            // publishes), then sleep until the plugin rings or is gone.
            self.map.store32(READER_WAITING, 1);
            self.map.fence();
            if self.map.load64(HEAD) == self.tail && self.bell_lost {
                self.map
                    .futex_wait(READER_WAITING, 1, std::time::Duration::from_millis(2));
                gone = !alive();
            } else if self.map.load64(HEAD) == self.tail && rung(bell) {
                let mut bytes = [0u8; 64];
                match bell.read(&mut bytes) {
                    Ok(0) if alive() => self.bell_lost = true,
                    Ok(0) => gone = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(ReadError::Io(e)),
                }
            }
            self.map.store32(READER_WAITING, 0);
        }
    }

    /// Tell the plugin we are done with everything before `tail`, and wake it if it waits for
    /// room and we reached the tail it asked for.
    fn release(&mut self) {
        if self.published != self.tail {
            self.published = self.tail;
            self.map.store64(TAIL, self.tail);
            self.map.fence();
            if self.map.load32(WRITER_WAITING) != 0
                && self.tail.wrapping_sub(self.map.load64(WRITER_WAKE)) as i64 >= 0
            {
                self.map.futex_wake(TAIL);
            }
        }
    }
}

/// Whether the bell has a byte or its end within [`READER_NAP`] (an error: read it to see).
fn rung(bell: &impl AsFd) -> bool {
    let mut fds = [PollFd::new(bell.as_fd(), PollFlags::POLLIN)];
    let nap = PollTimeout::try_from(READER_NAP).unwrap_or(PollTimeout::MAX);
    !matches!(poll(&mut fds, nap), Ok(0))
}

/// Size `file` (a fresh memfd) for the ring.
pub fn ring_file(file: &File) -> std::io::Result<()> {
    file.set_len((HDR_BYTES + RING_BYTES) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// The plugin's side, as stream.c does it (without the futex: the test writer polls).
    struct Writer {
        map: SharedMap,
        bell: File,
    }

    impl Writer {
        fn write(&mut self, tid: i32, words: &[u64]) {
            let n = 8 * (words.len() + 1);
            let mut head = self.map.load64(HEAD);
            let off = (head % RING_BYTES as u64) as usize;
            let skip = if off + n > RING_BYTES {
                RING_BYTES - off
            } else {
                0
            };
            while head + (skip + n) as u64 - self.map.load64(TAIL) > RING_BYTES as u64 {
                std::thread::yield_now();
            }
            if skip > 0 {
                self.map.store_words(HDR_BYTES + off, &[WRAP]);
                head += skip as u64;
            }
            let at = HDR_BYTES + (head % RING_BYTES as u64) as usize;
            // Even threads' chunks say they hold hits only (whatever their words).
            let flag = if tid % 2 == 0 { HITS_ONLY } else { 0 };
            let header = (tid as u32 as u64) | ((words.len() as u64) << 32) | flag;
            self.map.store_words(at, &[header]);
            self.map.store_words(at + 8, words);
            self.map.store64(HEAD, head + n as u64);
            self.map.fence();
            if self.map.load32(READER_WAITING) != 0 {
                let _ = self.bell.write(&[0]);
            }
        }
    }

    fn ring() -> (File, File, File) {
        let fd = nix::sys::memfd::memfd_create(
            &std::ffi::CString::new("cilkview-ring-test").unwrap(),
            nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC,
        )
        .unwrap();
        let file = File::from(fd);
        ring_file(&file).unwrap();
        let (r, w) = nix::unistd::pipe().unwrap();
        (file, File::from(r), File::from(w))
    }

    #[test]
    fn chunks_come_out_whole_and_in_order_through_many_wraps() {
        let (file, mut bell_r, bell_w) = ring();
        // Enough to go round the 2 MiB ring ~20 times, of every size up to the largest.
        let chunks: Vec<(i32, Vec<u64>)> = (0..5_000u64)
            .map(|k| {
                let n = [0, 1, 7, CHUNK_WORDS - 1, 4095, 333][k as usize % 6];
                (k as i32 + 1, (0..n as u64).map(|w| w * 31 + k).collect())
            })
            .collect();
        let sent = chunks.clone();
        let mut writer = Writer {
            map: SharedMap::new(&file, HDR_BYTES + RING_BYTES).unwrap(),
            bell: bell_w,
        };
        let t = std::thread::spawn(move || {
            for (tid, words) in &sent {
                writer.write(*tid, words);
            }
            // dropping the writer closes the bell: the end of the stream
        });
        let mut reader = RingReader::new(&file).unwrap();
        let mut got = Vec::new();
        while let Some(c) = reader.next(&mut bell_r, &mut || false).unwrap() {
            assert_eq!(c.hits_only, c.tid % 2 == 0, "the header's flag");
            got.push((c.tid, reader.words(c.range).to_vec()));
        }
        t.join().unwrap();
        assert_eq!(got.len(), chunks.len());
        assert!(got == chunks, "chunks differ");
    }

    #[test]
    fn a_chunk_header_past_the_published_end_is_refused() {
        let (file, mut bell_r, bell_w) = ring();
        let map = SharedMap::new(&file, HDR_BYTES + RING_BYTES).unwrap();
        // A header saying 10 words, but only the header published.
        map.store_words(HDR_BYTES, &[7 | (10u64 << 32)]);
        map.store64(HEAD, 8);
        drop(bell_w);
        let mut reader = RingReader::new(&file).unwrap();
        assert!(matches!(
            reader.next(&mut bell_r, &mut || false),
            Err(ReadError::Bad(m)) if m == "chunk cut short"
        ));
    }
}
