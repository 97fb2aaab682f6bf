//! Test support: compile tiny C programs with the system compiler.
#![allow(dead_code)]

pub mod emulated;
pub mod native;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use cilkview_tracer::{Probe, TraceEvent};

/// `PROBE(name)`: a cilkview-style 5-byte NOP at global symbol `name`.
pub const PRELUDE: &str = r#"
#define PROBE(name) __asm__ volatile(".globl " #name "\n" #name ": .byte 0x0f,0x1f,0x44,0x00,0x00" ::: "memory")
#define PROBE_RDI(name, v) __asm__ volatile("mov %0, %%rdi\n.globl " #name "\n" #name ": .byte 0x0f,0x1f,0x44,0x00,0x00" :: "r"((long)(v)) : "rdi", "memory")
"#;

pub struct Prog {
    pub dir: tempfile::TempDir,
    pub exe: PathBuf,
}

/// Compile `src` (C) statically with -O1 into a temp dir.
pub fn compile(src: &str, extra: &[&str]) -> Prog {
    compile_with(src, &[&["-static"], extra].concat())
}

/// Compile `src` (C) with -O1 and exactly the given extra flags.
pub fn compile_with(src: &str, extra: &[&str]) -> Prog {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile_into(dir.path(), "prog", src, extra);
    Prog { dir, exe }
}

/// Compile `src` (C, after the PRELUDE) with -O1 and the given flags into `dir/name`.
pub fn compile_into(dir: &Path, name: &str, src: &str, extra: &[&str]) -> PathBuf {
    let flags = [&["-O1"], extra].concat();
    cilkview_fixtures::compile_into(dir, name, &format!("{PRELUDE}\n{src}"), &flags)
}

/// Writes `contents` to `path`, executable (mode 755): a script or a doctored binary.
pub fn write_executable(path: &Path, contents: impl AsRef<[u8]>) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, contents).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Offset of symbol `sym` from the start of the image's lowest mapping.
pub fn offset_of(exe: &Path, sym: &str) -> u64 {
    cilkview_fixtures::symbol_offset(exe, sym)
}

pub fn probes(exe: &Path, syms: &[(&str, Option<u16>)]) -> Vec<Probe> {
    syms.iter()
        .map(|&(s, operand)| Probe::new(offset_of(exe, s), operand))
        .collect()
}

/// Starts `exe` under `sh` (its parent, so that the tracer attaching to it is not its parent);
/// returns (the sh child, the program's pid, the temp dir holding the pid file). sh prints
/// `status=N` when the program ends.
pub fn start(exe: &Path, args: &[&str]) -> (Child, i32, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let child = cilkview_fixtures::command("sh")
        .arg("-c")
        .arg(r#"p="$1"; f="$2"; shift 2; "$p" "$@" & echo $! > "$f.tmp"; mv "$f.tmp" "$f"; wait $!; echo "status=$?""#)
        .arg("sh")
        .arg(exe)
        .arg(&pidfile)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let pid = loop {
        if let Ok(s) = std::fs::read_to_string(&pidfile) {
            break s.trim().parse().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no pid file");
        std::thread::sleep(Duration::from_millis(5));
    };
    (child, pid, dir)
}

/// The tracer's invariant: the events' costs add up to the run's total instructions.
pub fn assert_costs_add_up(total_cost: u64, events: &[TraceEvent]) {
    assert_eq!(total_cost, events.iter().map(|e| e.cost()).sum::<u64>());
}

/// The hits of an event stream: (probe, thread, cost, operand).
pub fn hits(events: &[TraceEvent]) -> Vec<(usize, i32, u64, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match *e {
            TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand,
            } => Some((probe, tid, cost, operand)),
            _ => None,
        })
        .collect()
}
