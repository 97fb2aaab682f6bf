//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use cilkview_marks::{read_marks, MarkKind, MarkedImage, MARK_NOP};
use object::read::elf::{FileHeader, ProgramHeader};

/// Per-kind counts of an image's marks.
pub fn counts(image: &MarkedImage) -> BTreeMap<MarkKind, usize> {
    let mut map = BTreeMap::new();
    for mark in &image.marks {
        *map.entry(mark.kind).or_insert(0) += 1;
    }
    map
}

pub fn count(image: &MarkedImage, kind: MarkKind) -> usize {
    image.marks.iter().filter(|m| m.kind == kind).count()
}

/// Reads the marks of `exe` and checks that each one points at the 5-byte NOP in the
/// file (through the PT_LOAD segment holding it) and that offsets are consistent.
pub fn read_checked(exe: &Path) -> MarkedImage {
    let image = read_marks(exe).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let data = std::fs::read(exe).unwrap();
    let header = object::elf::FileHeader64::<object::LittleEndian>::parse(&*data).unwrap();
    let phdrs = header
        .program_headers(object::LittleEndian, &*data)
        .unwrap();
    for mark in &image.marks {
        let seg = phdrs
            .iter()
            .filter(|p| p.p_type(object::LittleEndian) == object::elf::PT_LOAD)
            .find(|p| {
                let v = p.p_vaddr(object::LittleEndian);
                mark.address >= v && mark.address + 5 <= v + p.p_filesz(object::LittleEndian)
            })
            .unwrap_or_else(|| panic!("{}: {mark:?} is in no PT_LOAD", exe.display()));
        let off = (seg.p_offset(object::LittleEndian) + mark.address
            - seg.p_vaddr(object::LittleEndian)) as usize;
        assert_eq!(
            data[off..off + 5],
            MARK_NOP,
            "{}: no NOP at {mark:?}",
            exe.display()
        );
        assert_eq!(mark.offset(&image), mark.address - image.base_vaddr);
        if mark.kind == MarkKind::LoopBegin {
            assert_eq!(mark.operand, Some(0), "grain is in %rax");
        } else {
            assert_eq!(mark.operand, None);
        }
        assert_eq!(mark.label.is_some(), mark.kind.has_label());
    }
    image
}

/// Instructions `exe args` executes, counted by `valgrind --tool=callgrind` (exact and
/// repeatable). The caller checks that valgrind is installed.
pub fn callgrind_count(exe: &Path, args: &[&str]) -> u64 {
    let out = cilkview_fixtures::command("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .args(args)
        .output()
        .expect("run valgrind");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "valgrind {}: {err}", exe.display());
    err.lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no 'Collected :' line in valgrind output:\n{err}"))
}
