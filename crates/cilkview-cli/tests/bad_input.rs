//! Bad input gets one clear `error: …` line (what was wrong, what to do) and exit status 125
//! (126 for a program that cannot be executed, 127 for one not found) — never a panic, a
//! backtrace or a hang — and is detected before the program starts.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

mod common;

use common::{bin, fixture, run_tool, NOT_EXECUTABLE, NOT_FOUND, TOOL_FAILED};

/// Runs cilkview-rs and returns its stderr, asserting exit status 125 (the tool's own failure)
/// and no panic.
fn fails(args: &[&std::ffi::OsStr]) -> String {
    fails_with(TOOL_FAILED, args)
}

/// Runs cilkview-rs and returns its stderr, asserting exit status `code` and no panic.
fn fails_with(code: i32, args: &[&std::ffi::OsStr]) -> String {
    let out = run_tool(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{err}"
    );
    assert!(err.starts_with("error: "), "{err}");
    err
}

fn run_fails(program: &Path) -> String {
    run_fails_with(TOOL_FAILED, program)
}

fn run_fails_with(code: i32, program: &Path) -> String {
    let err = fails_with(code, &["run".as_ref(), program.as_os_str()]);
    // The program must not have run: nothing but our one line.
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

fn executable_copy(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn sample() -> Vec<u8> {
    std::fs::read(fixture("known_spawn")).unwrap()
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn missing_file_directory_text_and_unexecutable() {
    let dir = tempfile::tempdir().unwrap();
    let err = run_fails_with(NOT_FOUND, &dir.path().join("nope"));
    assert!(err.contains("no such file"), "{err}");
    let err = run_fails_with(NOT_EXECUTABLE, dir.path());
    assert!(err.contains("is a directory"), "{err}");
    let text = executable_copy(dir.path(), "notes.txt", b"just some text\n");
    let err = run_fails(&text);
    assert!(err.contains("not an ELF file"), "{err}");
    let plain = dir.path().join("plain");
    std::fs::write(&plain, sample()).unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = run_fails_with(NOT_EXECUTABLE, &plain);
    assert!(
        err.contains("not executable") && err.contains("chmod +x"),
        "{err}"
    );
    let err = fails_with(
        NOT_FOUND,
        &["run".as_ref(), "no-such-program-anywhere".as_ref()],
    );
    assert!(err.contains("not found in PATH"), "{err}");
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn foreign_truncated_and_corrupt_elf_files() {
    let dir = tempfile::tempdir().unwrap();
    let good = sample();

    let mut arm = good.clone();
    arm[18..20].copy_from_slice(&183u16.to_le_bytes()); // e_machine = EM_AARCH64
    let err = run_fails(&executable_copy(dir.path(), "arm", &arm));
    assert!(err.contains("not x86-64"), "{err}");

    let mut elf32 = good.clone();
    elf32[4] = 1; // EI_CLASS = ELFCLASS32
    let err = run_fails(&executable_copy(dir.path(), "elf32", &elf32));
    assert!(err.contains("32-bit"), "{err}");

    let err = run_fails(&executable_copy(
        dir.path(),
        "truncated",
        &good[..good.len() / 3],
    ));
    assert!(err.contains("truncated"), "{err}");

    // Corrupt records: the marks section holds a record of an unknown version.
    let src = executable_copy(dir.path(), "src", &good);
    if let Some(corrupt) = common::with_corrupt_marks(&src, dir.path(), "corrupt") {
        let err = run_fails(&corrupt);
        assert!(
            err.contains("malformed") && err.contains("cilkview.h"),
            "{err}"
        );
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn malformed_options() {
    let exe = fixture("known_spawn");
    for (flags, says) in [
        (&["--burden", "-5"][..], "whole number of instructions"),
        (&["--burden", "lots"][..], "whole number of instructions"),
        (&["--max-cores", "0"][..], "--max-cores"),
        (&["--span-coefficient", "-1"][..], "number ≥ 0"),
        (&["--fail-below", "nonsense"][..], "MEASURE=N"),
        (&["--counter", "magic"][..], "--counter"),
        (&["--bogus"][..], "--bogus"),
    ] {
        let mut args: Vec<&std::ffi::OsStr> = vec!["run".as_ref()];
        args.extend(flags.iter().map(std::ffi::OsStr::new));
        args.push(exe.as_os_str());
        let err = fails(&args);
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn unwritable_outputs_are_detected_before_the_program_starts() {
    let dir = tempfile::tempdir().unwrap();
    // The program would create this file if it ran.
    let marker = dir.path().join("ran");
    let script = executable_copy(
        dir.path(),
        "touch.sh",
        format!("#!/bin/sh\ntouch {}\n", marker.display()).as_bytes(),
    );
    for flag in ["--json", "--gnuplot"] {
        let err = fails(&[
            "run".as_ref(),
            flag.as_ref(),
            dir.path().join("no/such/folder/out").as_os_str(),
            script.as_os_str(),
        ]);
        assert!(err.contains("cannot write output file"), "{err}");
        assert!(
            !marker.exists(),
            "the program ran although its report could not be written"
        );
    }
}

#[test]
#[ignore = "slow: runs cilkview-rs"]
fn report_of_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = fails(&["report".as_ref(), dir.path().join("none.json").as_os_str()]);
    assert!(err.contains("cannot read"), "{err}");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "[1, 2]").unwrap();
    let err = fails(&["report".as_ref(), junk.as_os_str()]);
    assert!(err.contains("not a cilkview-rs JSON report"), "{err}");
}

/// `--counter emulate` with a `qemu-x86_64` that cannot take the plugin: one line saying why and
/// what to install, and `auto` says it in the counter line and falls back. The fake emulators
/// are shell scripts first in PATH.
#[test]
#[ignore = "slow: runs cilkview-rs"]
fn emulator_that_cannot_take_the_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let program = executable_copy(dir.path(), "known_spawn", &sample());
    let cases = [
        // Debian's newer static builds: QEMU 10, plugin API v1 refused.
        (
            "echo 'qemu-x86_64 version 10.0.2 (Debian 1:10.0.2+ds-1)'; echo; \
             echo 'usage: qemu-x86_64 [options] program [arguments...]'",
            "is QEMU 10.0.2",
        ),
        // A 7.2 built without plugins.
        (
            "case \"$1\" in --version) echo 'qemu-x86_64 version 7.2.0';; \
             *) echo 'usage: qemu-x86_64 [options] program [arguments...]';; esac",
            "built without plugin support",
        ),
    ];
    for (body, says) in cases {
        let fake = dir.path().join("bin");
        std::fs::create_dir_all(&fake).unwrap();
        executable_copy(
            &fake,
            "qemu-x86_64",
            format!("#!/bin/sh\n{body}\n").as_bytes(),
        );
        let path = format!("{}:/usr/bin:/bin", fake.display());
        let out = bin()
            .env("PATH", &path)
            .args(["run", "--counter", "emulate"])
            .arg(&program)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(TOOL_FAILED), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{err}");
        assert!(err.contains("apt-get install qemu-user"), "{err}");
        // `auto` falls back to single-stepping and says why not emulation (where a hardware
        // counter works, auto takes it and emulation is not considered).
        let out = bin()
            .env("PATH", &path)
            .arg("run")
            .arg(&program)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let counter = err
            .lines()
            .find(|l| l.starts_with("Counter: "))
            .unwrap_or("");
        // The Counter line says auto passed emulation over; a `note:` line says why.
        assert!(
            counter.starts_with("Counter: hw")
                || (counter.starts_with("Counter: step — chosen by auto (")
                    && counter.contains("emulate")
                    && err
                        .lines()
                        .any(|l| l.starts_with("note: emulate: ") && l.contains(says))),
            "{err}"
        );
    }
}
