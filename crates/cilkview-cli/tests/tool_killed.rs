//! The tool SIGKILLed at every phase of an attach (issue 41): seizing, stopping, patching the
//! marks (after the set-up's injected system calls), measuring, restoring them, detaching. A debug build dies
//! where `CILKVIEW_TEST_KILL_AT` says (`cilkview-tracer`'s `kill_point`); each phase must leave
//! the process running on, its output and exit status those of a run without the tool.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use cilkview_fixtures::build;
use common::{static_opts, std_bin};

/// The injected system calls of the set-up (`native/inject.rs`) at each of their phases: the
/// registers set to the call, its entry, its end with the registers not yet put back; for the
/// first call (which maps the page the others run from, run from spare bytes of the program's
/// own code) and later ones (`@3`: the region's `mmap`, `@5`: the first slot's `madvise`).
const PHASES: &[&str] = &[
    "seized",
    "stopped",
    "injecting@1",
    "in-call@1",
    "call-done@1",
    "injecting@3",
    "in-call@3",
    "call-done@5",
    "patching",
    "measuring",
    "restoring",
    "detaching",
];

/// `fixtures/adversarial.c` modes: one thread, a thread started and ended every round, a
/// SIGTRAP handler with the program's own `int3`, threads started and ended all the time.
const MODES: &[&str] = &["plain", "threads", "sigtrap", "churn"];

fn args(mode: &str) -> [&str; 3] {
    [mode, "30", "5"]
}

/// The program's (stdout, exit status) with the tool attached and SIGKILLed at `phase`;
/// `Err` if the tool did not die there.
fn killed_at(
    exe: &std::path::Path,
    mode: &str,
    phase: &str,
) -> Result<(String, Option<i32>), String> {
    let mut running = cilkview_fixtures::command(exe)
        .args(args(mode))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(running.stdout.take().unwrap());
    let mut seen = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut seen).unwrap();
    let started = Instant::now();
    let tool = std_bin()
        .env("CILKVIEW_TEST_KILL_AT", phase)
        .args(["attach", "--duration", "0.5", "--counter", "native"])
        .arg(running.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let took = started.elapsed();
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    let status = running.wait().unwrap().code();
    // The worker died of SIGKILL; the process the user sees exits as it did (137).
    let died = std::os::unix::process::ExitStatusExt::signal(&tool.status) == Some(9)
        || tool.status.code() == Some(137);
    if !died || took > Duration::from_secs(30) {
        return Err(format!(
            "the tool did not die at {phase} ({:?} after {took:?}): {}",
            tool.status,
            String::from_utf8_lossy(&tool.stderr)
        ));
    }
    Ok((seen, status))
}

#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs and kills it"]
fn the_tool_killed_at_any_phase_of_attach_leaves_the_program_unharmed() {
    let exe = build("adversarial", &static_opts().flag("-pthread"));
    let mut failures = Vec::new();
    for mode in MODES {
        let out = cilkview_fixtures::command(&exe)
            .args(args(mode))
            .output()
            .unwrap();
        let alone = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code(),
        );
        assert_eq!(alone.1, Some(5), "{mode}: {alone:?}");
        for phase in PHASES {
            let result = killed_at(&exe, mode, phase).and_then(|program| {
                (program == alone).then_some(()).ok_or(format!(
                    "the program changed: {program:?} against {alone:?}"
                ))
            });
            eprintln!(
                "{mode} killed at {phase}: {}",
                result.as_ref().map_or("FAILED", |_| "ok")
            );
            if let Err(why) = result {
                failures.push(format!("{mode} killed at {phase}: {why}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
