//! Bad inputs give clear errors, never panics.

use std::path::Path;

use cilkview_fixtures::{build, has_compiler, BuildOptions};
use cilkview_marks::{parse_marks, read_marks, MarksError};
use object::read::elf::{FileHeader, SectionHeader};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

fn fib() -> Vec<u8> {
    std::fs::read(build(
        "fib",
        &BuildOptions::default().compiler("gcc").opt(0),
    ))
    .unwrap()
}

/// File offset and size of `.cilkview_marks`.
fn marks_section(data: &[u8]) -> (usize, usize) {
    let header = object::elf::FileHeader64::<object::LittleEndian>::parse(data).unwrap();
    let e = object::LittleEndian;
    let sections = header.sections(e, data).unwrap();
    let (_, sec) = sections.section_by_name(e, b".cilkview_marks").unwrap();
    (sec.sh_offset(e) as usize, sec.sh_size(e) as usize)
}

#[test]
fn missing_file_is_io_error_naming_the_path() {
    let err = read_marks(Path::new("/nonexistent/cilkview-prog")).unwrap_err();
    assert!(matches!(err, MarksError::Io { .. }));
    assert!(
        err.to_string().contains("/nonexistent/cilkview-prog"),
        "{err}"
    );
}

#[test]
fn not_elf() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let err = read_marks(&manifest).unwrap_err();
    assert!(matches!(err, MarksError::NotElf), "{err:?}");
    assert!(err.to_string().contains("not an ELF file"), "{err}");
    assert!(matches!(parse_marks(&[]), Err(MarksError::NotElf)));
}

#[test]
#[ignore = "slow: runs cc -m32"]
fn elf32_is_rejected() {
    // `cc -m32` needs a multilib install; with -c it often works without one.
    let dir = std::env::temp_dir();
    let src = dir.join(format!("cv-m32-{}.c", std::process::id()));
    let obj = src.with_extension("o");
    std::fs::write(&src, "int main(void) { return 0; }\n").unwrap();
    let made = cilkview_fixtures::command("cc")
        .args(["-m32", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .is_ok_and(|o| o.status.success());
    let data = if made {
        std::fs::read(&obj).unwrap()
    } else {
        println!("note: cc -m32 failed; using a hand-made ELF32 header");
        let mut h = b"\x7fELF\x01\x01\x01".to_vec();
        h.resize(52, 0);
        h[18] = 3; // EM_386
        h
    };
    let _ = std::fs::remove_file(&src);
    let _ = std::fs::remove_file(&obj);
    let err = parse_marks(&data).unwrap_err();
    assert!(matches!(err, MarksError::NotElf64), "{err:?}");
    assert!(err.to_string().contains("-m32"), "{err}");
}

#[test]
#[ignore = "slow: compiles C programs"]
fn other_machine_is_rejected() {
    let mut data = fib();
    data[18..20].copy_from_slice(&183u16.to_le_bytes()); // EM_AARCH64
    let err = parse_marks(&data).unwrap_err();
    assert!(
        matches!(err, MarksError::NotX86_64 { machine: 183 }),
        "{err:?}"
    );
    assert!(err.to_string().contains("AArch64"), "{err}");
}

#[test]
#[ignore = "slow: compiles C programs"]
fn object_file_is_not_linked() {
    let opts = BuildOptions::default().compiler("gcc").flag("-c");
    let obj = build("fib", &opts);
    let err = read_marks(&obj).unwrap_err();
    assert!(matches!(err, MarksError::NotLinked), "{err:?}");
    assert!(err.to_string().contains("link"), "{err}");
}

#[test]
#[ignore = "slow: compiles C programs"]
fn no_marks_is_not_an_error() {
    let exe = build("serial", &BuildOptions::default().compiler("gcc"));
    let image = read_marks(&exe).unwrap();
    assert!(image.marks.is_empty());
    assert!(image.position_independent);
}

#[test]
#[ignore = "slow: compiles C programs"]
fn truncated_files() {
    let data = fib();
    let (off, size) = marks_section(&data);
    // Cut inside the section's contents: the section header table (at the end) is gone.
    for cut in [20, 63, 64, 100, off + size / 2, data.len() - 1] {
        let err = parse_marks(&data[..cut]).unwrap_err();
        assert!(
            matches!(err, MarksError::Truncated { .. }),
            "cut at {cut}: {err:?}"
        );
        assert!(err.to_string().contains("truncated"), "{err}");
    }
    // Every prefix: never a panic.
    for cut in 0..data.len() {
        let _ = parse_marks(&data[..cut]);
    }
    // A file is read where its parts are, not whole: the same answers as from its bytes.
    let path = std::env::temp_dir().join(format!("cv-cut-{}", std::process::id()));
    for cut in [
        0,
        3,
        15,
        20,
        63,
        64,
        100,
        off,
        off + size / 2,
        data.len() - 1,
        data.len(),
    ] {
        std::fs::write(&path, &data[..cut]).unwrap();
        let (from_file, from_bytes) = (read_marks(&path), parse_marks(&data[..cut]));
        assert_eq!(
            format!("{from_file:?}"),
            format!("{from_bytes:?}"),
            "cut at {cut}"
        );
    }
    std::fs::remove_file(&path).unwrap();
    assert!(read_marks(Path::new("/"))
        .unwrap_err()
        .to_string()
        .contains("Is a directory"));
}

#[test]
#[ignore = "slow: compiles C programs"]
fn corrupt_records_are_malformed_with_offset() {
    let data = fib();
    let (off, _) = marks_section(&data);
    let cases: [(usize, u8, &str); 5] = [
        (0, 7, "version 7"),
        (1, 200, "unknown mark kind 200"),
        (3, 0x80, "flags"),
        (4, 9, "record length 9"),
        (4, 0xf8, "past the end"),
    ];
    for (at, value, want) in cases {
        let mut bad = data.clone();
        bad[off + 16 + at] = value; // the second record
        let err = parse_marks(&bad).unwrap_err();
        match &err {
            MarksError::Malformed { offset, .. } => assert_eq!(*offset, (off + 16) as u64),
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[test]
#[ignore = "slow: compiles C programs"]
fn zero_padding_is_skipped() {
    // Zero the first record (as if it were padding): the rest still parse.
    let mut data = fib();
    let (off, _) = marks_section(&data);
    let all = parse_marks(&data).unwrap().marks;
    data[off..off + 16].fill(0);
    let rest = parse_marks(&data).unwrap().marks;
    assert_eq!(rest[..], all[1..]);
}

#[test]
#[ignore = "slow: compiles C programs"]
fn discarded_code_records_are_dropped() {
    // A record whose address the linker resolved to 0 (discarded code) is ignored.
    let mut data = fib();
    let (off, _) = marks_section(&data);
    let all = parse_marks(&data).unwrap().marks;
    data[off + 8..off + 16].fill(0);
    assert_eq!(parse_marks(&data).unwrap().marks[..], all[1..]);
}

#[test]
#[ignore = "slow: compiles C programs"]
fn clang_objects_for_other_machines() {
    if !has_compiler("clang") {
        cilkview_fixtures::skip("clang not installed");
        return;
    }
    let opts = BuildOptions::default()
        .compiler("clang")
        .flag("--target=aarch64-linux-gnu")
        .flag("-c")
        .disabled();
    match cilkview_fixtures::compile_source(
        "aarch64_obj",
        "int f(int x) { return x + 1; }\n",
        cilkview_fixtures::Lang::C,
        &opts,
    ) {
        Ok(obj) => {
            let err = read_marks(&obj).unwrap_err();
            assert!(
                matches!(err, MarksError::NotX86_64 { machine: 183 }),
                "{err:?}"
            );
        }
        Err(e) => cilkview_fixtures::skip(format!(
            "clang cannot target aarch64 here: {}",
            e.output.lines().next().unwrap_or("")
        )),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = parse_marks(&data);
    }

    #[test]
    fn elf_like_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut data = b"\x7fELF\x02\x01\x01".to_vec();
        data.extend(tail);
        let _ = parse_marks(&data);
    }
}

#[test]
#[ignore = "slow: compiles C programs"]
fn mutated_binaries_never_panic() {
    let data = fib();
    let (off, size) = marks_section(&data);
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = proptest::collection::vec((any::<usize>(), any::<u8>(), any::<bool>()), 1..8);
    for _ in 0..3000 {
        let edits = strategy.new_tree(&mut runner).unwrap().current();
        let mut bad = data.clone();
        for (pos, byte, in_marks) in edits {
            // Half the edits hit the marks section, the rest anywhere (headers included).
            let len = bad.len();
            let at = if in_marks {
                off + pos % size
            } else if pos % 2 == 0 {
                pos % 128
            } else {
                pos % len
            };
            bad[at % len] = byte;
        }
        let _ = parse_marks(&bad);
    }
}
