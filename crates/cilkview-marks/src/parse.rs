//! Parsing the `.cilkview_marks` section of an ELF image: the section is found through the
//! section headers (`object`), its records are checked against the format
//! (`docs/marks-format.md`), and each record's NOP is located in a loadable segment.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{LittleEndian as LE, ReadRef};

use crate::{Mark, MarkKind, MarkedImage, MarksError, FORMAT_VERSION, PAGE_SIZE, SECTION_NAME};

fn malformed(offset: u64, reason: impl Into<String>) -> MarksError {
    MarksError::Malformed {
        offset,
        reason: reason.into(),
    }
}

fn truncated(what: impl Into<String>) -> MarksError {
    MarksError::Truncated { what: what.into() }
}

/// Checks that `count` entries of `entsize` bytes at `offset` lie inside a file of
/// `len` bytes.
fn check_table(
    len: u64,
    offset: u64,
    count: u64,
    entsize: u64,
    what: &str,
) -> Result<(), MarksError> {
    let end = count
        .checked_mul(entsize)
        .and_then(|size| size.checked_add(offset));
    match end {
        Some(end) if end <= len => Ok(()),
        Some(_) => Err(truncated(what)),
        None => Err(malformed(offset, format!("{what} size overflows"))),
    }
}

/// Parses the marks of an ELF image held in memory. Never panics, whatever `data` is.
///
/// An image without a `.cilkview_marks` section (or with an empty one) has no marks:
/// that is not an error.
pub fn parse_marks(data: &[u8]) -> Result<MarkedImage, MarksError> {
    parse_marks_in(data)
}

/// [`parse_marks`] of an image read where its parts are (a file behind an
/// [`object::ReadCache`]: only the headers and the marks section are read).
pub fn parse_marks_in<'data, R: ReadRef<'data>>(data: R) -> Result<MarkedImage, MarksError> {
    let len = data.len().map_err(|()| MarksError::NotElf)?;
    check_identification(data, len)?;
    let (header, position_independent) = file_header(data)?;
    let (base_vaddr, exec_ranges) = load_segments(header, data, len)?;
    let marks = marks_sections(header, data, len, &exec_ranges)?;
    Ok(MarkedImage {
        marks,
        base_vaddr,
        position_independent,
    })
}

/// Checks the ELF identification (magic, class, byte order) and that the file header is all
/// there, before `object` reads it.
fn check_identification<'data, R: ReadRef<'data>>(data: R, len: u64) -> Result<(), MarksError> {
    // The identification and the file header, as far as the file has them.
    let head = data
        .read_bytes_at(
            0,
            len.min(std::mem::size_of::<elf::FileHeader64<LE>>() as u64),
        )
        .map_err(|()| MarksError::NotElf)?;
    if head.len() < 4 || head[..4] != elf::ELFMAG {
        return Err(MarksError::NotElf);
    }
    if head.len() < 16 {
        return Err(truncated("the ELF identification"));
    }
    match head[4] {
        elf::ELFCLASS64 => {}
        elf::ELFCLASS32 => return Err(MarksError::NotElf64),
        other => return Err(malformed(4, format!("unknown ELF class {other}"))),
    }
    match head[5] {
        elf::ELFDATA2LSB => {}
        elf::ELFDATA2MSB => {
            // No big-endian x86-64 exists; report the machine it is for.
            let machine = head
                .get(18..20)
                .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
            return Err(MarksError::NotX86_64 { machine });
        }
        other => return Err(malformed(5, format!("unknown ELF data encoding {other}"))),
    }
    if head.len() < std::mem::size_of::<elf::FileHeader64<LE>>() {
        return Err(truncated("the ELF file header"));
    }
    Ok(())
}

/// The file header of a linked x86-64 image, and whether the image is position-independent
/// (`ET_DYN`) rather than at fixed addresses (`ET_EXEC`).
fn file_header<'data, R: ReadRef<'data>>(
    data: R,
) -> Result<(&'data elf::FileHeader64<LE>, bool), MarksError> {
    let header = elf::FileHeader64::<LE>::parse(data)
        .map_err(|e| malformed(0, format!("bad ELF file header: {e}")))?;
    let endian = LE;
    let machine = header.e_machine(endian);
    if machine != elf::EM_X86_64 {
        return Err(MarksError::NotX86_64 { machine });
    }
    let position_independent = match header.e_type(endian) {
        elf::ET_EXEC => false,
        elf::ET_DYN => true,
        elf::ET_REL => return Err(MarksError::NotLinked),
        other => {
            return Err(malformed(
                16,
                format!("ELF type {other} is neither an executable nor a shared library"),
            ))
        }
    };
    Ok((header, position_independent))
}

/// From the program headers: the image's base address (its lowest `PT_LOAD`, page-aligned) and
/// the address ranges of its executable `PT_LOAD` segments.
fn load_segments<'data, R: ReadRef<'data>>(
    header: &elf::FileHeader64<LE>,
    data: R,
    len: u64,
) -> Result<(u64, Vec<(u64, u64)>), MarksError> {
    let endian = LE;
    let phoff = header.e_phoff(endian);
    let phentsize = u64::from(header.e_phentsize(endian));
    if header.e_phnum(endian) != 0
        && phentsize != std::mem::size_of::<elf::ProgramHeader64<LE>>() as u64
    {
        return Err(malformed(54, format!("program header size {phentsize}")));
    }
    check_table(
        len,
        phoff,
        u64::from(header.e_phnum(endian)),
        phentsize,
        "the program header table",
    )?;
    let phdrs = header
        .program_headers(endian, data)
        .map_err(|e| malformed(phoff, format!("bad program header table: {e}")))?;
    let loads: Vec<_> = phdrs
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .collect();
    let Some(lowest) = loads.iter().map(|ph| ph.p_vaddr(endian)).min() else {
        return Err(malformed(
            phoff,
            "no PT_LOAD segment: this is not a loadable program",
        ));
    };
    let base_vaddr = lowest & !(PAGE_SIZE - 1);
    let exec_ranges: Vec<(u64, u64)> = loads
        .iter()
        .filter(|ph| ph.p_flags(endian) & elf::PF_X != 0)
        .map(|ph| {
            let start = ph.p_vaddr(endian);
            (start, start.saturating_add(ph.p_memsz(endian)))
        })
        .collect();
    Ok((base_vaddr, exec_ranges))
}

/// The marks of every `.cilkview_marks` section (found through the section headers), each
/// record's NOP located in `exec_ranges`.
fn marks_sections<'data, R: ReadRef<'data>>(
    header: &elf::FileHeader64<LE>,
    data: R,
    len: u64,
    exec_ranges: &[(u64, u64)],
) -> Result<Vec<Mark>, MarksError> {
    let endian = LE;
    let shoff = header.e_shoff(endian);
    let shnum = header
        .shnum(endian, data)
        .map_err(|e| malformed(shoff, format!("bad section header table: {e}")))?;
    let shentsize = u64::from(header.e_shentsize(endian));
    if shnum != 0 && shentsize != std::mem::size_of::<elf::SectionHeader64<LE>>() as u64 {
        return Err(malformed(58, format!("section header size {shentsize}")));
    }
    check_table(
        len,
        shoff,
        shnum as u64,
        shentsize,
        "the section header table",
    )?;
    let sections = header
        .sections(endian, data)
        .map_err(|e| malformed(shoff, format!("bad section header table: {e}")))?;

    let mut marks = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        let Ok(name) = sections.section_name(endian, section) else {
            return Err(malformed(
                shoff + index as u64 * shentsize,
                format!("section {index} has a bad name offset"),
            ));
        };
        if name != SECTION_NAME.as_bytes() {
            continue;
        }
        let bytes = marks_section_bytes(section, data, len)?;
        parse_records(bytes, section.sh_offset(endian), exec_ranges, &mut marks)?;
    }
    Ok(marks)
}

/// The contents of a `.cilkview_marks` section, refused if it has none in the file (a separate
/// debug-info file), is compressed, or runs past the file's end.
fn marks_section_bytes<'data, R: ReadRef<'data>>(
    section: &elf::SectionHeader64<LE>,
    data: R,
    len: u64,
) -> Result<&'data [u8], MarksError> {
    let endian = LE;
    let sh_offset = section.sh_offset(endian);
    if section.sh_type(endian) == elf::SHT_NOBITS {
        return Err(malformed(
            sh_offset,
            "the .cilkview_marks section has no contents (SHT_NOBITS): is this a separate \
             debug-info file? Give cilkview-rs the program itself",
        ));
    }
    if section.sh_flags(endian) & u64::from(elf::SHF_COMPRESSED) != 0 {
        return Err(malformed(
            sh_offset,
            "the .cilkview_marks section is compressed (SHF_COMPRESSED), which cilkview-rs \
             does not support",
        ));
    }
    check_table(
        len,
        sh_offset,
        1,
        section.sh_size(endian),
        "the .cilkview_marks section",
    )?;
    section
        .data(endian, data)
        .map_err(|e| malformed(sh_offset, format!("bad .cilkview_marks section: {e}")))
}

fn read_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(b)
}

fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Parses the records of one `.cilkview_marks` section whose contents start at file
/// offset `base`. Records whose address lies in no executable `PT_LOAD` segment (e.g.
/// the 0 a linker writes for code it discarded) are dropped.
fn parse_records(
    bytes: &[u8],
    base: u64,
    exec_ranges: &[(u64, u64)],
    marks: &mut Vec<Mark>,
) -> Result<(), MarksError> {
    let mut pos = 0usize;
    while pos < bytes.len() {
        // Zero bytes between records are padding (version 0 is never valid).
        if bytes[pos] == 0 {
            pos += 1;
            continue;
        }
        let (len, mark) = parse_record(&bytes[pos..], base + pos as u64)?;
        pos += len;
        let live = exec_ranges
            .iter()
            .any(|&(start, end)| mark.address >= start && mark.address.saturating_add(5) <= end);
        if live {
            marks.push(mark);
        }
    }
    Ok(())
}

/// The record at the start of `rest` (at file offset `offset`): its length and its mark.
fn parse_record(rest: &[u8], offset: u64) -> Result<(usize, Mark), MarksError> {
    let version = rest[0];
    if version != FORMAT_VERSION {
        return Err(malformed(
            offset,
            format!(
                "record version {version}, but this cilkview-rs reads version \
                 {FORMAT_VERSION} only (a newer cilkview.h? then update cilkview-rs)"
            ),
        ));
    }
    let len = record_length(rest, offset)?;
    let code = rest[1];
    let Some(kind) = MarkKind::from_code(code) else {
        return Err(malformed(
            offset,
            format!(
                "unknown mark kind {code} (known: 1..={})",
                MarkKind::ALL.len()
            ),
        ));
    };
    let operand = match rest[2] {
        0xff => None,
        reg => Some(u16::from(reg)),
    };
    let flags = rest[3];
    if flags != 0 {
        return Err(malformed(
            offset,
            format!("record flags {flags:#x}: version 1 defines no flags"),
        ));
    }
    let mark = Mark {
        kind,
        address: read_u64(rest, 8),
        operand,
        label: record_label(kind, &rest[16..len], offset)?,
    };
    Ok((len, mark))
}

/// The length of the record at the start of `rest`, checked: a multiple of 8, at least its
/// 16-byte header, within the section.
fn record_length(rest: &[u8], offset: u64) -> Result<usize, MarksError> {
    if rest.len() < 16 {
        return Err(malformed(
            offset,
            format!(
                "record header cut short: {} bytes left in the section, a record needs 16",
                rest.len()
            ),
        ));
    }
    let len = read_u32(rest, 4) as usize;
    if len < 16 || len % 8 != 0 {
        return Err(malformed(
            offset,
            format!("record length {len} (must be a multiple of 8, at least 16)"),
        ));
    }
    if len > rest.len() {
        return Err(malformed(
            offset,
            format!(
                "record length {len} runs past the end of the section ({} bytes left)",
                rest.len()
            ),
        ));
    }
    Ok(len)
}

/// The label after a record's header (`tail`), for the kinds that have one.
fn record_label(kind: MarkKind, tail: &[u8], offset: u64) -> Result<Option<String>, MarksError> {
    if !kind.has_label() {
        return Ok(None);
    }
    let Some(nul) = tail.iter().position(|&b| b == 0) else {
        return Err(malformed(
            offset,
            format!("{kind} record has no NUL-terminated label"),
        ));
    };
    match std::str::from_utf8(&tail[..nul]) {
        Ok(s) => Ok(Some(s.to_owned())),
        Err(e) => Err(malformed(offset, format!("{kind} label is not UTF-8: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HEADER;

    #[test]
    fn kind_codes_round_trip() {
        for (i, kind) in MarkKind::ALL.iter().enumerate() {
            assert_eq!(kind.code() as usize, i + 1);
            assert_eq!(MarkKind::from_code(kind.code()), Some(*kind));
        }
        assert_eq!(MarkKind::from_code(0), None);
        assert_eq!(MarkKind::from_code(14), None);
    }

    #[test]
    fn header_is_embedded() {
        assert!(HEADER.contains("cv_function_must_be_called_first_in_this_function"));
        assert!(HEADER.contains(".cilkview_marks"));
    }

    fn record(kind: u8, reg: u8, addr: u64, label: Option<&str>) -> Vec<u8> {
        let mut r = vec![1, kind, reg, 0, 0, 0, 0, 0];
        r.extend_from_slice(&addr.to_le_bytes());
        if let Some(l) = label {
            r.extend_from_slice(l.as_bytes());
            r.push(0);
        }
        while r.len() % 8 != 0 {
            r.push(0);
        }
        let len = r.len() as u32;
        r[4..8].copy_from_slice(&len.to_le_bytes());
        r
    }

    #[test]
    fn records_parse_with_padding_and_filtering() {
        let mut sec = vec![0u8; 8];
        sec.extend(record(6, 0, 0x1000, None));
        sec.extend(record(10, 0xff, 0x1005, Some("région 50%")));
        sec.extend([0u8; 3]);
        sec.extend(record(3, 0xff, 0, None)); // discarded by the linker
        let mut marks = Vec::new();
        parse_records(&sec, 0, &[(0x1000, 0x2000)], &mut marks).unwrap();
        assert_eq!(marks.len(), 2);
        assert_eq!(marks[0].kind, MarkKind::LoopBegin);
        assert_eq!(marks[0].operand, Some(0));
        assert_eq!(marks[1].label.as_deref(), Some("région 50%"));
        assert_eq!(marks[1].operand, None);
    }

    #[test]
    fn bad_records_are_errors() {
        let ranges = [(0u64, u64::MAX)];
        let mut good = record(3, 0xff, 0x1000, None);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut r = good.clone();
                    r[0] = 2;
                    r
                },
                "version 2",
            ),
            (
                {
                    let mut r = good.clone();
                    r[1] = 99;
                    r
                },
                "unknown mark kind 99",
            ),
            (
                {
                    let mut r = good.clone();
                    r[3] = 1;
                    r
                },
                "flags",
            ),
            (
                {
                    let mut r = good.clone();
                    r[4] = 12;
                    r
                },
                "record length 12",
            ),
            (
                {
                    let mut r = good.clone();
                    r[4] = 24;
                    r
                },
                "runs past the end",
            ),
            (good[..10].to_vec(), "cut short"),
            (
                {
                    let mut r = record(10, 0xff, 1, Some("abcdefg"));
                    r[23] = b'h';
                    r
                },
                "NUL",
            ),
            (
                {
                    let mut r = record(10, 0xff, 1, Some("ab"));
                    r[16] = 0xc3;
                    r
                },
                "UTF-8",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse_records(&bytes, 0x100, &ranges, &mut Vec::new()).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(want), "{msg:?} should contain {want:?}");
            assert!(msg.contains("0x100"), "{msg:?} should give the offset");
        }
        good.truncate(16);
        let mut marks = Vec::new();
        parse_records(&good, 0, &ranges, &mut marks).unwrap();
        assert_eq!(marks.len(), 1);
    }

    #[test]
    fn non_elf_inputs() {
        assert!(matches!(parse_marks(b""), Err(MarksError::NotElf)));
        assert!(matches!(
            parse_marks(b"#!/bin/sh\n"),
            Err(MarksError::NotElf)
        ));
        assert!(matches!(
            parse_marks(b"\x7fELF\x02\x01"),
            Err(MarksError::Truncated { .. })
        ));
        let mut ident = b"\x7fELF\x01\x01\x01".to_vec();
        ident.resize(64, 0);
        assert!(matches!(parse_marks(&ident), Err(MarksError::NotElf64)));
    }
}
