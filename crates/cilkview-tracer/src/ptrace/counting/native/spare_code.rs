//! Spare bytes of a process's mappings to run the first injected system call from (the one that
//! maps the page the others run from): the tail of the last page of a segment of a mapped ELF
//! file, past the segment's end (an executable one for the gadget's code). The file's next bytes land there, but no code of the
//! program is there and nothing reaches them through this mapping (a private one: writing gives
//! the process its own copy of that page). Code written at the thread's `%rip` instead was the
//! program's own, and ran as such if the tool died before putting it back.

use object::elf::{FileHeader64, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::Endianness;

use super::call_gadget::{Gadget, CODE_LEN, DATA_LEN};
use crate::procfs;
use crate::sys::Tid;

/// A call gadget in spare bytes of process `pid`'s file mappings: its code in an executable
/// one, its data after it or, where there is no room for both, in another one (readable) within
/// reach; `None` if there is no room for it.
pub(super) fn gadget(pid: Tid) -> Option<Gadget> {
    let tails = tails(pid);
    tails.iter().filter(|t| t.exec).find_map(|code| {
        let after = code.start + CODE_LEN;
        if after + DATA_LEN <= code.end {
            return Some(Gadget {
                code: code.start,
                data: after,
            });
        }
        (code.start + CODE_LEN <= code.end).then_some(())?;
        tails
            .iter()
            .filter(|t| t.start != code.start && t.start + DATA_LEN <= t.end)
            .map(|t| Gadget {
                code: code.start,
                data: t.start,
            })
            .find(|g| g.code().is_some())
    })
}

/// A spare tail of a mapping: `start..end`.
struct Tail {
    start: u64,
    end: u64,
    exec: bool,
}

/// The spare tails of process `pid`'s readable file mappings of ELF segments.
fn tails(pid: Tid) -> Vec<Tail> {
    let Ok(maps) = procfs::maps(pid) else {
        return Vec::new();
    };
    maps.iter()
        .filter(|m| m.readable && m.path.starts_with('/'))
        .filter_map(|m| {
            let file = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
            let end = segment_end(&headers(&file).or_else(|| headers(&m.path))?, m.offset)?;
            let start = m.start + end.checked_sub(m.offset)?;
            (start < m.end).then_some(Tail {
                start,
                end: m.end,
                exec: m.exec,
            })
        })
        .collect()
}

/// The first bytes of an ELF file (its program headers are there).
fn headers(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut data)
        .ok()?;
    Some(data)
}

/// The file offset where the segment holding file offset `offset` ends.
fn segment_end(data: &[u8], offset: u64) -> Option<u64> {
    let header = FileHeader64::<Endianness>::parse(data).ok()?;
    let endian = header.endian().ok()?;
    header
        .program_headers(endian, data)
        .ok()?
        .iter()
        .filter(|ph| ph.p_type(endian) == PT_LOAD)
        .map(|ph| (ph.p_offset(endian), ph.p_filesz(endian)))
        .find(|&(start, size)| (start..start + size).contains(&offset))
        .map(|(start, size)| start + size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In the test binary itself: the gadget found lies past the ends of segments, its code in
    /// an executable mapping, its data in a readable one.
    #[test]
    fn a_gadget_is_placed_past_the_ends_of_segments() {
        let pid = std::process::id() as Tid;
        let g = gadget(pid).expect("room for a gadget in the test's own mappings");
        let maps = procfs::maps(pid).unwrap();
        for (at, len, exec) in [(g.code, CODE_LEN, true), (g.data, DATA_LEN, false)] {
            let m = maps.iter().find(|m| m.start <= at && at < m.end).unwrap();
            assert!(
                m.readable && (m.exec || !exec) && at + len <= m.end,
                "{at:#x}"
            );
            let data = headers(&m.path).unwrap();
            let end = segment_end(&data, m.offset).unwrap();
            assert!(
                at >= m.start + end - m.offset,
                "{at:#x}: past the segment's end"
            );
        }
    }
}
