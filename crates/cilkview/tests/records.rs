//! The records the crate's marks leave in real binaries (the Rust fixtures, built with cargo),
//! read by cilkview-rs's own reader: each one points at a 5-byte NOP, loop-begin has its grain in
//! `%rax` after a `jmp` to the NOP, region labels are in the records; the marks tell
//! `cilkview-rs run` to set RAYON_NUM_THREADS=1; the serial elision has no marks at all.

use std::collections::BTreeMap;
use std::path::Path;

use cilkview_fixtures::build_rust;
use cilkview_marks::{has_marks_section, has_rayon_marks, read_marks, MarkKind, MARK_NOP};
use object::{Object, ObjectSegment};

/// The file bytes at link-time virtual address `address` (`len` of them).
fn code_at(data: &[u8], address: u64, len: usize) -> Vec<u8> {
    let file = object::File::parse(data).unwrap();
    let segment = file
        .segments()
        .find(|s| s.address() <= address && address + len as u64 <= s.address() + s.size())
        .unwrap_or_else(|| panic!("{address:#x} is in no segment"));
    let (offset, _) = segment.file_range();
    let at = (offset + address - segment.address()) as usize;
    data[at..at + len].to_vec()
}

fn kinds(exe: &Path) -> BTreeMap<MarkKind, usize> {
    let image = read_marks(exe).unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    let data = std::fs::read(exe).unwrap();
    let mut counts = BTreeMap::new();
    for mark in &image.marks {
        assert_eq!(
            code_at(&data, mark.address, 5),
            MARK_NOP,
            "{}: {mark:?}",
            exe.display()
        );
        if mark.kind == MarkKind::LoopBegin {
            assert_eq!(mark.operand, Some(0), "the grain is in %rax");
            // `jmp` to the next instruction (eb 00): the NOP begins a basic block.
            assert_eq!(code_at(&data, mark.address - 2, 2), [0xeb, 0x00]);
        } else {
            assert_eq!(mark.operand, None, "{mark:?}");
        }
        *counts.entry(mark.kind).or_insert(0) += 1;
    }
    counts
}

#[test]
#[ignore = "slow: builds the Rust fixtures with cargo"]
fn every_record_points_at_its_nop_in_every_fixture() {
    use MarkKind::*;
    for (name, label, expected) in [
        (
            "rs_fib",
            "fib",
            &[FunctionEnter, FunctionExit, Spawn, SpawnReturn, Sync][..],
        ),
        (
            "rs_quicksort",
            "sort",
            &[FunctionEnter, FunctionExit, Spawn, SpawnReturn, Sync],
        ),
        (
            "rs_matmul",
            "matmul",
            &[FunctionEnter, Spawn, SpawnReturn, Sync],
        ),
        (
            "rs_loop",
            "loop",
            &[LoopBegin, IterationBegin, IterationEnd, LoopEnd],
        ),
        // No region; for_each_mut and for_range.
        (
            "rs_scale",
            "",
            &[LoopBegin, IterationBegin, IterationEnd, LoopEnd],
        ),
    ] {
        let exe = build_rust(name, true);
        let counts = kinds(&exe);
        for kind in expected {
            assert!(
                counts.get(kind).is_some_and(|&n| n >= 1),
                "{name}: {kind} in {counts:?}"
            );
        }
        let image = read_marks(&exe).unwrap();
        for kind in [RegionBegin, RegionEnd] {
            let labels: Vec<_> = image
                .marks
                .iter()
                .filter(|m| m.kind == kind)
                .map(|m| m.label.as_deref().unwrap())
                .collect();
            assert!(
                labels.is_empty() == label.is_empty() && labels.iter().all(|l| *l == label),
                "{name}: {labels:?}"
            );
        }
        assert!(has_rayon_marks(&exe), "{name}: a .cilkview_rayon section");
    }
}

#[test]
#[ignore = "slow: compiles a C fixture and builds the Rust fixtures with cargo"]
fn a_c_program_has_marks_but_no_rayon_section() {
    let exe = cilkview_fixtures::build(
        "twin_fib",
        &cilkview_fixtures::BuildOptions::default().opt(2),
    );
    assert!(has_marks_section(&exe));
    assert!(!has_rayon_marks(&exe));
}

#[test]
#[ignore = "slow: builds the Rust fixtures with cargo"]
fn the_elision_has_no_marks_and_no_rayon_section() {
    for name in ["rs_fib", "rs_loop"] {
        let exe = build_rust(name, false);
        assert!(!has_marks_section(&exe), "{name}");
        assert!(!has_rayon_marks(&exe), "{name}");
        assert!(read_marks(&exe).unwrap().marks.is_empty());
    }
}
