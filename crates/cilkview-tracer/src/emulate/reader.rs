//! Reading the plugin's chunks off the records pipe: large reads straight into a buffer of
//! words, each chunk handed out in place (no copy between the pipe and the decoder).

use std::io::{ErrorKind, Read};
use std::ops::Range;

use super::protocol::CHUNK_WORDS;

/// Words of the buffer: 1 MiB, the pipe's size; a chunk is at most [`CHUNK_WORDS`].
const BUF_WORDS: usize = 1 << 17;

/// A malformed stream: the reason.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Bad(String),
}

/// The chunks of a stream, in order.
pub struct ChunkReader {
    buf: Vec<u64>,
    /// The next chunk's header, in words.
    start: usize,
    /// Bytes read into `buf` (a read may end inside a word).
    filled: usize,
}

impl ChunkReader {
    pub fn new() -> ChunkReader {
        ChunkReader {
            buf: vec![0; BUF_WORDS],
            start: 0,
            filled: 0,
        }
    }

    /// The words of the chunk at `range`, as returned by [`ChunkReader::next`].
    pub fn words(&self, range: Range<usize>) -> &[u64] {
        &self.buf[range]
    }

    /// The next chunk: its thread and where its records are (see [`ChunkReader::words`]);
    /// `None` once every writer closed the pipe between two chunks.
    pub fn next(&mut self, r: &mut impl Read) -> Result<Option<(i32, Range<usize>)>, ReadError> {
        loop {
            let have = self.filled / 8 - self.start;
            if have > 0 {
                let head = u64::from_le(self.buf[self.start]);
                let n = (head >> 32) as usize;
                if n >= CHUNK_WORDS {
                    return Err(ReadError::Bad(format!("chunk of {n} words")));
                }
                if have > n {
                    let records = self.start + 1..self.start + 1 + n;
                    self.start += 1 + n;
                    return Ok(Some((head as u32 as i32, records)));
                }
            }
            if self.buf.len() - self.start < CHUNK_WORDS {
                // Too little room left for a whole chunk: move the part read to the front.
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buf);
                bytes.copy_within(self.start * 8..self.filled, 0);
                self.filled -= self.start * 8;
                self.start = 0;
            }
            let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.buf);
            match r.read(&mut bytes[self.filled..]) {
                Ok(0) if self.filled == self.start * 8 => return Ok(None),
                Ok(0) => return Err(ReadError::Bad("chunk cut short".into())),
                Ok(got) => self.filled += got,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns at most `step` bytes per read, to cut chunks and words anywhere.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn stream(chunks: &[(i32, Vec<u64>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (tid, words) in chunks {
            let head = (*tid as u32 as u64) | ((words.len() as u64) << 32);
            out.extend(head.to_le_bytes());
            for w in words {
                out.extend(w.to_le_bytes());
            }
        }
        out
    }

    fn read_all(data: &[u8], step: usize) -> Result<Vec<(i32, Vec<u64>)>, ReadError> {
        let mut input = Trickle { data, step };
        let mut reader = ChunkReader::new();
        let mut got = Vec::new();
        while let Some((tid, range)) = reader.next(&mut input)? {
            got.push((tid, reader.words(range).to_vec()));
        }
        Ok(got)
    }

    #[test]
    fn chunks_come_out_whole_however_the_reads_cut_them() {
        // Enough chunks to wrap the buffer several times, of every size up to the largest.
        let chunks: Vec<(i32, Vec<u64>)> = (0..600u64)
            .map(|k| {
                let n = [0, 1, 7, CHUNK_WORDS - 1, 4095][k as usize % 5];
                (k as i32 + 1, (0..n as u64).map(|w| w * 31 + k).collect())
            })
            .collect();
        let data = stream(&chunks);
        for step in [1, 3, 8, 4096, 65_537, usize::MAX] {
            let got = read_all(&data, step).unwrap_or_else(|e| panic!("step {step}: {e:?}"));
            assert!(got == chunks, "step {step}: chunks differ");
        }
    }

    #[test]
    fn a_stream_that_ends_inside_a_chunk_or_says_too_long_a_chunk_is_refused() {
        let data = stream(&[(5, vec![1, 2, 3])]);
        assert!(matches!(
            read_all(&data[..data.len() - 3], 4),
            Err(ReadError::Bad(m)) if m == "chunk cut short"
        ));
        let too_long = ((CHUNK_WORDS as u64) << 32 | 9).to_le_bytes();
        assert!(matches!(
            read_all(&too_long, 8),
            Err(ReadError::Bad(m)) if m == format!("chunk of {CHUNK_WORDS} words")
        ));
        assert!(read_all(&[], 8).unwrap().is_empty());
    }
}
