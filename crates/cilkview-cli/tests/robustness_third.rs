//! Issue 26 (third robustness pass), outside the emulated world: no hang, no lost result, no
//! unsafe output. Real programs under the real cilkview-rs.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use cilkview_fixtures::{compile_source, Lang};
use common::static_opts;

fn program(name: &str, source: &str) -> PathBuf {
    compile_source(name, source, Lang::C, &static_opts()).unwrap_or_else(|e| panic!("{e}"))
}

fn tool() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("cilkview-rs"))
}

fn script(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Runs `cmd`, killing it after `limit`: its output, or a panic naming the hang.
fn within(mut cmd: Command, limit: Duration) -> std::process::Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("{cmd:?} still running after {limit:?}");
        }
    }
}

const TINY: &str = r#"
#include "cilkview.h"
static void child(void) { cv_function(); }
int main(void) { cv_function(); cv_spawn(child()); cv_sync(); return 0; }
"#;

/// A `qemu-x86_64` in PATH that never answers: the probe has a time limit, `auto` goes on
/// without emulation and says why, `--counter emulate` is one clear error.
#[test]
fn an_emulator_that_never_answers_does_not_hang_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "qemu-x86_64", "#!/bin/sh\nexec sleep 1000\n");
    let exe = program("tiny_spawn", TINY);
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut cmd = tool();
    cmd.env("PATH", &path)
        .args(["run", "--counter", "emulate"])
        .arg(&exe);
    let out = within(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("did not answer `--version`"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // Nothing it started is left behind.
    let leftover = std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x001000\x00"))
    });
    assert!(!leftover, "the emulator's `sleep 1000` is still running");
}

/// `sh -c 'exec cilkview-rs attach $$'`: the pid is the tool's own (its visible process, whose
/// worker would trace it): refused at once.
#[test]
fn attaching_to_the_tools_own_visible_process_is_refused() {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!(
        "exec {} attach $$",
        assert_cmd::cargo::cargo_bin("cilkview-rs").display()
    ));
    let out = within(cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is cilkview-rs itself"), "{err}");
}
