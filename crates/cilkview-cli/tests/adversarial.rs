//! The native recorder against programs built to trip it (issue 41): one table, each case a mode
//! of `fixtures/adversarial.c`, how the tool meets it (`attach`, `run --counter native`) and what
//! must happen (measured, or refused before anything is touched in one line). Every case: the
//! program's output and exit status equal a run without the tool, and the tool ends.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use cilkview_fixtures::build;
use common::{counter_says, kill, static_opts, std_bin, try_within};
use serde_json::Value;

/// How the tool meets the program.
#[derive(Clone, Copy, Debug)]
enum How {
    /// `attach --duration 1 --counter C PID` once the program printed its first round.
    Attach(&'static str),
    /// `attach --counter native PID`, the tool SIGKILLed 0.5 s in.
    AttachKilled,
    /// `run --counter native PROGRAM`.
    RunNative,
}

/// What the tool must do.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Measured: spawns counted (each round spawns twice).
    Measured,
    /// Measured by single-stepping (`attach --counter step`): spawns counted.
    Stepped,
    /// A report by the native counter, however few rounds it saw (a signal storm stops the
    /// program at each signal, and the tool's polling slows it down many times over).
    Reported,
    /// Refused in one `error:` line containing this, exit status 125.
    Refused(&'static str),
    /// Attaching denied in one `error:` line containing this (a non-zero exit status).
    Denied(&'static str),
    /// Measured by single-stepping instead of the native counter, saying why (this).
    SteppedInstead(&'static str),
    /// Nothing asked of the tool's report (it was killed).
    Nothing,
}

struct Case {
    mode: &'static str,
    how: How,
    expect: Expect,
    /// A command the program runs under (`unshare --pid --fork`: it is a namespace's init).
    under: &'static [&'static str],
}

const fn case(mode: &'static str, how: How, expect: Expect) -> Case {
    Case {
        mode,
        how,
        expect,
        under: &[],
    }
}

const NATIVE: How = How::Attach("native");
const AUTO: How = How::Attach("auto");

const CASES: &[Case] = &[
    case("plain", NATIVE, Expect::Measured),
    case("plain", How::RunNative, Expect::Measured),
    case("nnp", NATIVE, Expect::Measured),
    case("nnp", How::RunNative, Expect::Measured),
    case("mdwe", NATIVE, Expect::Measured),
    case("mdwe", How::RunNative, Expect::Measured),
    case("sigtrap", NATIVE, Expect::Measured),
    case("sigtrap", How::RunNative, Expect::Measured),
    case("blocked", NATIVE, Expect::Measured),
    case("blocked", How::RunNative, Expect::Measured),
    case("vfork", NATIVE, Expect::Measured),
    case("vfork", How::RunNative, Expect::Measured),
    case("threads", NATIVE, Expect::Measured),
    case("threads", How::RunNative, Expect::Measured),
    case(
        "seccomp",
        NATIVE,
        Expect::Refused("seccomp filter of its own"),
    ),
    case(
        "seccomp",
        AUTO,
        Expect::SteppedInstead("seccomp filter of its own"),
    ),
    // The filter comes after the set-up at exec: measured.
    case("seccomp", How::RunNative, Expect::Measured),
    case("churn", NATIVE, Expect::Measured),
    case("churn", How::RunNative, Expect::Measured),
    case("storm", NATIVE, Expect::Reported),
    case("storm", How::RunNative, Expect::Measured),
    case("mseal", NATIVE, Expect::Measured),
    case("mseal", How::RunNative, Expect::Measured),
    case("segv", NATIVE, Expect::Measured),
    case("segv", How::RunNative, Expect::Measured),
    case("selfmod", NATIVE, Expect::Measured),
    case("selfmod", How::RunNative, Expect::Measured),
    case("flood", NATIVE, Expect::Measured),
    case("flood", How::RunNative, Expect::Measured),
    case("flood", How::AttachKilled, Expect::Nothing),
    // Its text as it was: single-stepping patches nothing (the native counter's jumps would
    // change the checksum: not in the table, see docs/tracer.md).
    case("checksum", How::Attach("step"), Expect::Stepped),
    case("traced", NATIVE, Expect::Denied("another tracer")),
    case("traced", AUTO, Expect::Denied("another tracer")),
    case("zombie", NATIVE, Expect::Denied("main thread has exited")),
    case("plain", How::AttachKilled, Expect::Nothing),
    case("storm", How::AttachKilled, Expect::Nothing),
    case("threads", How::AttachKilled, Expect::Nothing),
    case("sigtrap", How::AttachKilled, Expect::Nothing),
    Case {
        mode: "plain",
        how: NATIVE,
        expect: Expect::Measured,
        under: &["unshare", "--pid", "--fork"],
    },
];

const ROUNDS: &str = "30";
const STATUS: &str = "5";

fn adversarial() -> PathBuf {
    build("adversarial", &static_opts().flag("-pthread"))
}

/// The program's command line under `case.under`.
fn program(case: &Case, exe: &Path) -> Command {
    let mut words: Vec<&std::ffi::OsStr> = case.under.iter().map(|w| w.as_ref()).collect();
    words.push(exe.as_os_str());
    let mut cmd = cilkview_fixtures::command(words[0]);
    cmd.args(&words[1..]).args([case.mode, ROUNDS, STATUS]);
    cmd
}

/// The pid to attach to: the program's, or under `unshare --fork` its only child's.
fn target(case: &Case, pid: u32) -> u32 {
    if case.under.is_empty() {
        return pid;
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    children.split_whitespace().next().unwrap().parse().unwrap()
}

/// A program's stdout and exit status.
type Ran = (String, Option<i32>);

/// The program under the tool as `case.how` says: its (stdout, status) and the tool's output.
fn under_tool(case: &Case, exe: &Path) -> Result<(Ran, Option<Output>), String> {
    if let How::RunNative = case.how {
        let mut cmd = std_bin();
        cmd.args(["run", "--counter", "native", "--json", "/dev/stderr"]);
        cmd.args(case.under)
            .arg(exe)
            .args([case.mode, ROUNDS, STATUS]);
        let out = try_within(cmd, Duration::from_secs(120))?;
        let program = String::from_utf8_lossy(&out.stdout).into_owned();
        return Ok(((program, out.status.code()), Some(out)));
    }
    let mut running = program(case, exe).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdout = std::io::BufReader::new(running.stdout.take().unwrap());
    let mut seen = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut seen).unwrap();
    let pid = target(case, running.id());
    let tool = match case.how {
        How::Attach(counter) => {
            let mut cmd = std_bin();
            cmd.args(["attach", "--duration", "1", "--counter", counter])
                .args(["--json", "-"])
                .arg(pid.to_string());
            Some(try_within(cmd, Duration::from_secs(60)))
        }
        _ => {
            let mut tool = std_bin()
                .args(["attach", "--counter", "native", &pid.to_string()])
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(500));
            kill("-KILL", tool.id());
            let _ = tool.wait();
            None
        }
    };
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    let status = running.wait().unwrap().code();
    Ok(((seen, status), tool.transpose()?))
}

/// Whether the tool did what `expect` says; `Err(why not)`.
fn check(expect: Expect, how: How, tool: Option<&Output>) -> Result<(), String> {
    let Some(out) = tool else {
        return Ok(());
    };
    let err = String::from_utf8_lossy(&out.stderr);
    let report = || -> Result<Value, String> {
        let text = match how {
            How::RunNative => err.lines().skip_while(|l| *l != "{").collect::<String>(),
            _ => String::from_utf8_lossy(&out.stdout).into_owned(),
        };
        serde_json::from_str(&text).map_err(|e| format!("no report ({e}): {err}"))
    };
    let spawns = |r: &Value| r["spawns"].as_u64().unwrap_or(0);
    match expect {
        Expect::Nothing => Ok(()),
        Expect::Measured => {
            let r = report()?;
            let ok = (matches!(how, How::RunNative) || out.status.code() == Some(0))
                && r["counter"]["mode"] == "native"
                && spawns(&r) >= 2;
            ok.then_some(()).ok_or(format!("not measured: {r} {err}"))
        }
        Expect::Stepped => {
            let r = report()?;
            let ok =
                out.status.code() == Some(0) && r["counter"]["mode"] == "step" && spawns(&r) >= 2;
            ok.then_some(()).ok_or(format!("not stepped: {r} {err}"))
        }
        Expect::Reported => {
            let r = report()?;
            let ok = out.status.code() == Some(0) && r["counter"]["mode"] == "native";
            ok.then_some(()).ok_or(format!("no report: {r} {err}"))
        }
        Expect::Refused(why) => {
            let lines: Vec<&str> = err.lines().collect();
            let ok = out.status.code() == Some(125)
                && lines.len() == 1
                && lines[0].starts_with("error: ")
                && lines[0].contains(why)
                && lines[0].contains("nothing was changed");
            ok.then_some(()).ok_or(format!("not refused: {err}"))
        }
        Expect::Denied(why) => {
            let lines: Vec<&str> = err.lines().collect();
            let ok = !out.status.success()
                && lines.len() == 1
                && lines[0].starts_with("error: ")
                && lines[0].contains(why);
            ok.then_some(()).ok_or(format!("not denied: {err}"))
        }
        Expect::SteppedInstead(why) => {
            let r = report()?;
            let reason = counter_says(&r);
            let ok = r["counter"]["mode"] == "step"
                && reason.contains(why)
                && err.contains("warning: single-stepped instead");
            ok.then_some(())
                .ok_or(format!("not stepped instead: {r} {err}"))
        }
    }
}

#[test]
#[ignore = "slow: runs and attaches cilkview-rs to compiled programs"]
fn every_adversarial_case_is_measured_or_refused_and_the_program_is_unharmed() {
    let exe = adversarial();
    let mut failures = Vec::new();
    for case in CASES {
        let name = format!("{} {:?} {}", case.mode, case.how, case.under.join(" "));
        let out = program(case, &exe).output().unwrap();
        let alone = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code(),
        );
        // Exit status 93: the kernel lacks what the mode needs (mseal).
        if (!case.under.is_empty() && alone.1 != Some(5)) || alone.1 == Some(93) {
            let why = String::from_utf8_lossy(&out.stderr);
            cilkview_fixtures::skip(format!("{name}: cannot run here: {why}"));
            continue;
        }
        assert_eq!(alone.1, Some(5), "{name}: {alone:?}");
        let result = under_tool(case, &exe).and_then(|(program, tool)| {
            if program != alone {
                return Err(format!(
                    "the program changed: {program:?} against {alone:?}"
                ));
            }
            check(case.expect, case.how, tool.as_ref())
        });
        eprintln!("{name}: {}", result.as_ref().map_or("FAILED", |_| "ok"));
        if let Err(why) = result {
            failures.push(format!("{name}: {why}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A thread found by the attach stopped inside `clone3` (the `clones` mode starts threads back to
/// back) must see the call's own result: a call injected there (the thread's slot) made `clone3`
/// return `-ENOSYS`, and glibc's retry with `clone` started a second thread on the first one's
/// stack (SIGSEGV at address 0, in 3 attaches of 8 before the fix). Five attaches, each run
/// to its end: the program's output and status unchanged every time.
#[test]
#[ignore = "slow: attaches cilkview-rs to compiled programs"]
fn attaching_to_a_thread_inside_clone_harms_nothing() {
    let exe = adversarial();
    let clones = case("clones", NATIVE, Expect::Measured);
    let out = program(&clones, &exe).output().unwrap();
    let alone = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    );
    assert_eq!(alone.1, Some(5), "{alone:?}");
    for attach in 1..=5 {
        let (program, tool) = under_tool(&clones, &exe).unwrap();
        assert_eq!(program, alone, "attach {attach}: the program changed");
        check(clones.expect, clones.how, tool.as_ref()).unwrap();
    }
}

/// A signal every ~100 µs (`storm`) stops the program at each signal until the tool looks: the
/// tool wakes at each stop (SIGCHLD) instead of sleeping out its poll, so the program keeps
/// most of its pace (measured: 30 rounds in 6.1 s under `run --counter native` against 2.1 s
/// alone; 39 s when the tool looked 20 µs after each stop, 20 s for 3 rounds before that).
#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_signal_storm_keeps_its_pace_under_the_native_counter() {
    let exe = adversarial();
    let storm = case("storm", How::RunNative, Expect::Measured);
    let start = std::time::Instant::now();
    let out = program(&storm, &exe).output().unwrap();
    let alone = start.elapsed();
    assert_eq!(out.status.code(), Some(5));
    let start = std::time::Instant::now();
    let ((stdout, status), tool) = under_tool(&storm, &exe).unwrap();
    let measured = start.elapsed();
    assert_eq!((stdout.as_bytes(), status), (&out.stdout[..], Some(5)));
    check(storm.expect, storm.how, tool.as_ref()).unwrap();
    eprintln!("storm: {measured:?} under the tool, {alone:?} alone");
    assert!(
        measured < alone * 10,
        "{measured:?} under the tool against {alone:?} alone"
    );
}
