//! scripts/setup.sh's decisions (what the README's two set-up commands run first), on a PATH that
//! lacks the tools it looks for: which packages it asks apt-get for, as root, through sudo, or
//! the line it prints without either; the Rust it requires. apt-get, sudo, id, rustc and cargo
//! are stand-ins that record their arguments: nothing is installed or removed.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use cilkview_fixtures::{repo_root, skip};

/// A directory of commands: the few real ones the script needs to run (bash and its text tools)
/// and stand-ins; `extra` are real commands to add.
struct FakePath {
    dir: tempfile::TempDir,
}

impl FakePath {
    fn new(extra: &[&str]) -> FakePath {
        let dir = tempfile::tempdir().unwrap();
        for tool in ["bash", "dirname", "awk", "sort", "head", "cat"]
            .iter()
            .chain(extra)
        {
            let real = which::which(tool).unwrap_or_else(|_| panic!("{tool} on this machine"));
            symlink(real, dir.path().join(tool)).unwrap();
        }
        let fake = FakePath { dir };
        fake.script(
            "rustc",
            r#"echo "rustc ${FAKE_RUST:-1.90.0} (fake 2025-01-01)""#,
        );
        fake.script("cargo", "exit 0");
        fake.script("apt-get", r#"echo "apt-get $*" >> "$LOG""#);
        fake.script(
            "id",
            r#"if [ "$1" = -u ]; then echo "${FAKE_UID:-0}"; else exit 1; fi"#,
        );
        fake
    }

    fn script(&self, name: &str, body: &str) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn remove(&self, name: &str) {
        std::fs::remove_file(self.dir.path().join(name)).unwrap();
    }

    /// Runs `scripts/setup.sh ARGS` with only this directory in PATH (then `also`); returns its
    /// output and what apt-get was asked.
    fn setup(&self, args: &[&str], env: &[(&str, &str)], also: &str) -> (Output, String) {
        let log = self.dir.path().join("apt.log");
        let _ = std::fs::remove_file(&log);
        let mut path = self.dir.path().as_os_str().to_owned();
        if !also.is_empty() {
            path.push(":");
            path.push(also);
        }
        let out = cilkview_fixtures::command(repo_root().join("scripts/setup.sh"))
            .args(args)
            .env_clear()
            .env("PATH", path)
            .env("LOG", &log)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (out, std::fs::read_to_string(&log).unwrap_or_default())
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What a machine with none of the tools needs (`time`: /usr/bin/time is looked for by its
/// path, which this test cannot hide).
fn everything() -> String {
    let time = if Path::new("/usr/bin/time").exists() {
        ""
    } else {
        " time"
    };
    format!(
        "gcc g++ libc6-dev qemu-user gnuplot-nox clang libomp-dev gfortran libtbb-dev valgrind{time} bsdutils man-db"
    )
}

#[test]
#[ignore = "slow: runs scripts/setup.sh"]
fn on_a_machine_without_the_tools_it_installs_them_all_as_root() {
    let fake = FakePath::new(&[]);
    let (out, apt) = fake.setup(&["test"], &[], "");
    assert!(out.status.success(), "{}", stderr(&out));
    let want = everything();
    assert_eq!(
        apt,
        format!("apt-get update -qq\napt-get install -y -qq --no-install-recommends {want}\n")
    );
    assert!(
        stderr(&out).contains(&format!("setup: installing {want} (apt-get)")),
        "{}",
        stderr(&out)
    );
}

#[test]
#[ignore = "slow: runs scripts/setup.sh"]
fn without_root_it_uses_sudo_or_prints_the_line_to_run() {
    let fake = FakePath::new(&[]);
    let (out, apt) = fake.setup(&[], &[("FAKE_UID", "1000")], "");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(apt, "", "nothing installed without root or sudo");
    let want = everything();
    assert!(
        stderr(&out).contains(&format!(
            "  apt-get update && apt-get install --no-install-recommends {want}"
        )),
        "{}",
        stderr(&out)
    );
    fake.script("sudo", r#"echo "sudo:" >> "$LOG"; exec "$@""#);
    let (out, apt) = fake.setup(&[], &[("FAKE_UID", "1000")], "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        apt.starts_with("sudo:\napt-get update -qq\nsudo:\napt-get install -y -qq"),
        "{apt}"
    );
}

#[test]
#[ignore = "slow: runs scripts/setup.sh"]
fn it_checks_the_rust_it_needs_before_anything() {
    let fake = FakePath::new(&[]);
    for (args, rust, ok) in [
        (&[][..], "1.84.1", false),
        (&[][..], "1.85.0", true),
        (&["test"][..], "1.87.0", false),
        (&["test"][..], "1.88.0", true),
    ] {
        let (out, apt) = fake.setup(args, &[("FAKE_RUST", rust)], "");
        assert_eq!(
            out.status.success(),
            ok,
            "{args:?} {rust}: {}",
            stderr(&out)
        );
        if !ok {
            assert!(
                stderr(&out).contains("is older than 1.8"),
                "{}",
                stderr(&out)
            );
            assert_eq!(apt, "");
        }
    }
    fake.remove("cargo");
    let (out, apt) = fake.setup(&[], &[], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("setup: no cargo in PATH: install Rust 1.85"));
    assert_eq!(apt, "");
    let (out, _) = fake.setup(&["bogus"], &[], "");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
#[ignore = "slow: runs scripts/setup.sh"]
fn with_the_tools_installed_it_installs_nothing() {
    let tools = [
        "cc",
        "g++",
        "qemu-x86_64",
        "gnuplot",
        "clang",
        "valgrind",
        "script",
        "man",
    ];
    let absent: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| which::which(t).is_err())
        .collect();
    if !absent.is_empty() || !Path::new("/usr/bin/time").exists() {
        return skip(format!(
            "not every tool scripts/setup.sh looks for is installed here (missing: {absent:?})"
        ));
    }
    // The machine's PATH after the stand-ins (apt-get first: a call would be recorded).
    let fake = FakePath::new(&[]);
    let real: Vec<PathBuf> = std::env::split_paths(&std::env::var_os("PATH").unwrap()).collect();
    let real = std::env::join_paths(real).unwrap();
    let (out, apt) = fake.setup(&["test"], &[], real.to_str().unwrap());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(apt, "", "{}", stderr(&out));
}
