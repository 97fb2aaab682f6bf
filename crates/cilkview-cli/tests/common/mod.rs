//! Shared by the integration tests: run the real `cilkview-rs` on fixtures and read its JSON.
#![allow(dead_code)] // each test file uses a part

pub mod bench;
pub mod omp_known;

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use cilkview_fixtures::{build, compile_source, BuildOptions, Lang};
use serde_json::Value;

/// Exit status of cilkview-rs's own failures (bad options, bad input), as env's and timeout's.
pub const TOOL_FAILED: i32 = 125;
/// Exit status when PROGRAM was found but cannot be executed.
pub const NOT_EXECUTABLE: i32 = 126;
/// Exit status when PROGRAM (or its interpreter) was not found.
pub const NOT_FOUND: i32 = 127;

pub fn bin() -> assert_cmd::Command {
    assert_cmd::Command::from_std(std_bin())
}

/// `run --profile DIR/p OPTIONS --json DIR/r.json EXE ARGS` with `counter`: the JSON and stderr,
/// or `None` (after saying why) where that counter cannot run here.
pub fn profiled(
    exe: &Path,
    counter: &str,
    options: &[&str],
    args: &[&str],
    dir: &Path,
) -> Option<(Value, String)> {
    let json = dir.join("r.json");
    let out = bin()
        .args(["run", "--counter", counter, "--profile"])
        .arg(dir.join("p"))
        .args(options)
        .arg("--json")
        .arg(&json)
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && counter == "emulate" && stderr.contains("qemu") {
        cilkview_fixtures::skip(format!("emulation unavailable here: {stderr}"));
        return None;
    }
    assert!(out.status.success(), "{stderr}");
    let json = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    Some((json, stderr))
}

/// What the native counter's costs count here: `"instructions"` where its stubs read them with
/// `rdpmc`, else `"nanoseconds"` (what a run of a program without marks reports).
pub fn native_unit() -> String {
    let out = bin()
        .args(["run", "--counter", "native", "--json", "-", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    r["unit"].as_str().unwrap().to_string()
}

/// Whether the native counter can run here (else said aloud).
pub fn native() -> bool {
    let out = bin()
        .args(["run", "--counter", "native", "true"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("time-stamp counter is not invariant") {
        cilkview_fixtures::skip(err.trim());
        return false;
    }
    true
}

/// Whether the native counter runs here and measures time, as `--repeat` needs (else said
/// aloud: where its stubs read instructions with `rdpmc`, every run counts the same).
pub fn native_measures_time() -> bool {
    if !native() {
        return false;
    }
    let unit = native_unit();
    if unit != "nanoseconds" {
        cilkview_fixtures::skip(format!(
            "the native counter counts {unit} here (rdpmc): --repeat is for time"
        ));
        return false;
    }
    true
}

/// The unmodified OpenMP build of a fixture, marks compiled out (dynamically linked: libgomp is
/// preloaded over; the marked build is `bench::marked_openmp`).
pub fn openmp(name: &str) -> PathBuf {
    build(
        name,
        &BuildOptions::default()
            .compiler("gcc")
            .opt(2)
            .flag("-fopenmp")
            .disabled(),
    )
}

/// Fixture `name` built by clang -fopenmp (LLVM's libomp) with `opts` (whose compiler is set to
/// clang); `None`, said aloud, where clang or libomp is missing (scripts/setup.sh installs clang
/// and libomp-dev).
pub fn clang_openmp(name: &str, opts: BuildOptions) -> Option<PathBuf> {
    let opts = opts.compiler("clang");
    let probe = "#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n";
    if !cilkview_fixtures::has_compiler("clang")
        || compile_source("omp_clang_works", probe, Lang::C, &opts).is_err()
    {
        cilkview_fixtures::skip(
            "clang -fopenmp (libomp) not available: scripts/setup.sh installs clang, libomp-dev",
        );
        return None;
    }
    Some(build(name, &opts))
}

/// cilkview-rs with `args` (killed after 60 s): its exit status, stdout and stderr.
pub fn run_tool(args: &[&std::ffi::OsStr]) -> Output {
    bin()
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap()
}

/// cilkview-rs as a plain `Command`: to give it other stdout/stderr or a process group, or to act
/// while it runs.
pub fn std_bin() -> Command {
    cilkview_fixtures::command(assert_cmd::cargo::cargo_bin("cilkview-rs"))
}

/// Spawns `cmd` with stdout and stderr piped and reads the first line of its stdout (what the
/// program prints once it is ready: a word, its pid); the rest of stdout is left unread.
pub fn spawn_to_first_line(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

/// `kill SIG PID` (`sig` as kill spells it: `-HUP`, `-KILL`), as a user signals a process from a
/// shell.
pub fn kill(sig: &str, pid: impl std::fmt::Display) {
    cilkview_fixtures::command("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
}

/// `kill -9 PID`, best effort: the clean-up after a test that failed.
pub fn kill_quietly(pid: impl std::fmt::Display) {
    let _ = cilkview_fixtures::command("kill")
        .args(["-9", &pid.to_string()])
        .status();
}

/// Asserts that a run succeeded, showing its stderr otherwise.
#[track_caller]
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Static -O2 gcc builds: the dynamic loader would add ~100k serial instructions (slow to
/// single-step).
pub fn static_opts() -> BuildOptions {
    BuildOptions::default().compiler("gcc").opt(2).static_link()
}

pub fn fixture(name: &str) -> PathBuf {
    build(name, &static_opts())
}

/// A test's own C program (`source`, which may include `cilkview.h` and `work.h`), compiled as
/// the fixtures are ([`static_opts`]) into the cache as `name`.
pub fn program(name: &str, source: &str) -> PathBuf {
    compile_source(name, source, Lang::C, &static_opts()).unwrap_or_else(|e| panic!("{e}"))
}

/// One `cilkview-rs run --json` of a program.
pub struct Analysis {
    pub json: Value,
    pub out: Output,
}

impl Analysis {
    pub fn u(&self, key: &str) -> u64 {
        self.json[key]
            .as_u64()
            .unwrap_or_else(|| panic!("{key} in {}", self.json))
    }
    pub fn f(&self, key: &str) -> f64 {
        self.json[key].as_f64().unwrap()
    }
    /// Work − span: what ran in parallel with the critical path.
    pub fn parallel_part(&self) -> u64 {
        self.u("work") - self.u("span")
    }
    pub fn region(&self, label: &str) -> &Value {
        self.json["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("region {label} in {}", self.json))
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }
}

pub fn analyze_with(exe: &Path, flags: &[&str], args: &[&str]) -> Analysis {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let out = bin()
        .arg("run")
        .args(flags)
        .arg("--json")
        .arg(&json)
        .arg(exe)
        .arg("--")
        .args(args)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|_| {
        panic!(
            "no JSON report; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Analysis {
        json: serde_json::from_str(&text).unwrap(),
        out,
    }
}

pub fn analyze(exe: &Path, args: &[&str]) -> Analysis {
    analyze_with(exe, &[], args)
}

/// A copy of `exe` in `dir` (as `name`) whose `.cilkview_marks` section holds one record of an
/// unknown format version: corrupt marks. `None`, said aloud, where `objcopy` is missing.
pub fn with_corrupt_marks(exe: &Path, dir: &Path, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let garbage = dir.join(format!("{name}.garbage"));
    std::fs::write(
        &garbage,
        [9u8, 3, 0xff, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    )
    .unwrap();
    let corrupt = dir.join(name);
    let made = cilkview_fixtures::command("objcopy")
        .arg(format!(
            "--update-section=.cilkview_marks={}",
            garbage.display()
        ))
        .arg(exe)
        .arg(&corrupt)
        .status();
    if !matches!(made, Ok(s) if s.success()) {
        cilkview_fixtures::skip("objcopy not available to corrupt a marks section");
        return None;
    }
    std::fs::set_permissions(&corrupt, std::fs::Permissions::from_mode(0o755)).unwrap();
    Some(corrupt)
}

/// A running program whose stdout we collect.
pub struct Running {
    pub child: std::process::Child,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    pub seen: String,
}

/// Starts the program and waits for its first line, so that it is past its start-up.
pub fn start(exe: &Path, args: &[&str]) -> Running {
    let mut child = cilkview_fixtures::command(exe)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    stdout.read_line(&mut seen).unwrap();
    Running {
        child,
        stdout,
        seen,
    }
}

/// Waits for the program: its whole stdout and exit code.
pub fn finish(mut p: Running) -> (String, Option<i32>) {
    p.stdout.read_to_string(&mut p.seen).unwrap();
    (p.seen, p.child.wait().unwrap().code())
}

/// What a JSON report says about its counter: the reason and every note's text and long form,
/// `; ` between them.
pub fn counter_says(json: &serde_json::Value) -> String {
    let counter = &json["counter"];
    let mut parts = vec![counter["reason"].as_str().unwrap_or_default().to_string()];
    for note in counter["notes"].as_array().into_iter().flatten() {
        for key in ["text", "detail"] {
            if let Some(t) = note[key].as_str() {
                parts.push(t.to_string());
            }
        }
    }
    parts.join("; ")
}

/// Runs `cmd` to its end (standard input empty), killed after `limit`: its output, or `Err`
/// naming the hang.
pub fn try_within(mut cmd: Command, limit: std::time::Duration) -> Result<Output, String> {
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
    rx.recv_timeout(limit).map(|o| o.unwrap()).map_err(|_| {
        kill_quietly(pid);
        format!("{cmd:?} still running after {limit:?}")
    })
}

/// [`try_within`], a hang a panic.
pub fn within(cmd: Command, limit: std::time::Duration) -> Output {
    try_within(cmd, limit).unwrap_or_else(|hang| panic!("{hang}"))
}
