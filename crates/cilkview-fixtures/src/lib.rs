//! Test support for the cilkview-rs workspace (not published).
//!
//! Compiles the C/C++ programs in `fixtures/` (at the repository root) with the
//! system compiler at test time, with `-I crates/cilkview-marks/include` and
//! `-I fixtures`, into a cache directory under the system temp dir:
//! `$TMPDIR/cilkview-fixtures-<hash>/<name>`, where the hash covers the source, the
//! headers, the compiler's identity and every flag. Repeated builds are reused; builds
//! racing from parallel tests are safe (each writes a private temp file, then renames).
//! [`build_rust`] builds the Rust fixtures (`fixtures/rust`, marked with the `cilkview` crate)
//! with cargo.
//!
//! Test tiers: a test that starts a process (these helpers, [`command`]) is
//! `#[ignore = "slow: <what it runs>"]`, so that `cargo test --workspace` runs the pure tests in
//! seconds and `cargo test --workspace -- --include-ignored` the whole suite; the helpers check
//! it ([`slow_tier`]). [`skip`] says what could not run here.
//!
//! ```no_run
//! use cilkview_fixtures::{build, BuildOptions};
//! let exe = build("fib", &BuildOptions::default().opt(2).no_pie());
//! ```

#![forbid(unsafe_code)]

mod compile;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

pub use compile::{
    build, build_rust, compile_source, fixture_source, BuildError, BuildOptions, Lang,
};

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .expect("cilkview-fixtures lives in <root>/crates/cilkview-fixtures")
        .to_owned()
}

/// `<root>/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    repo_root().join("fixtures")
}

/// `<root>/crates/cilkview-marks/include` (holds `cilkview.h`).
pub fn include_dir() -> PathBuf {
    repo_root().join("crates/cilkview-marks/include")
}

/// Whether `name` (e.g. `clang`, `valgrind`) runs: `name --version` exits 0.
pub fn has_tool(name: &str) -> bool {
    slow_tier(name);
    static CACHE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&known) = cache.lock().unwrap().get(name) {
        return known;
    }
    let ok = Command::new(name)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    cache.lock().unwrap().insert(name.to_owned(), ok);
    ok
}

/// Whether compiler `name` is installed and runs.
pub fn has_compiler(name: &str) -> bool {
    has_tool(name)
}

/// Runs an executable with arguments and returns its stdout; panics if it fails.
pub fn run(exe: &Path, args: &[&str]) -> String {
    let out = command(exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed: {}\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The compilers to test with: `gcc`, and `clang` when installed. Prints
/// `skipped: clang not installed` otherwise.
pub fn test_compilers() -> Vec<&'static str> {
    let mut v = vec!["gcc"];
    if has_compiler("clang") {
        v.push("clang");
    } else {
        skip("clang not installed");
    }
    v
}

/// Says that (part of) a test could not run here, and why: `skipped: <reason>` on the test
/// process's real stderr, written past the test harness's output capture (which hides the
/// `println!` of passing tests), so a skip shows in `cargo test` output. Where
/// `CILKVIEW_SKIP_LOG` names a file (`scripts/test.sh` sets it), also appends one line to it,
/// `<package> <test>: <reason>` (one append, safe from parallel tests and test binaries): the
/// script counts the skips and lists them at the end of the run.
pub fn skip(reason: impl fmt::Display) {
    use std::io::Write;
    let reason = reason.to_string();
    let _ = writeln!(std::io::stderr().lock(), "skipped: {reason}");
    if let Some(log) = std::env::var_os(SKIP_LOG) {
        let line = format!(
            "{} {}: {}\n",
            std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "?".into()),
            std::thread::current().name().unwrap_or("?"),
            reason.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// `Command::new(program)` for a test: the way a test starts a process, after checking that the
/// test is in the slow tier ([`slow_tier`]). The crate's `tests/tiers.rs` checks that no test
/// starts one otherwise.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let program = program.as_ref();
    slow_tier(&program.to_string_lossy());
    Command::new(program)
}

/// The environment variable naming the file [`skip`] appends to.
pub const SKIP_LOG: &str = "CILKVIEW_SKIP_LOG";

/// Checks the test tiers' convention: a test that runs a real program (a compiler, the tracer,
/// QEMU, cargo, gnuplot, valgrind, the `cilkview-rs` binary…) is in the slow tier, marked
/// `#[ignore = "slow: <what it runs>"]`, so that `cargo test --workspace` runs the pure tests
/// only, in seconds, and `cargo test --workspace -- --include-ignored` the whole suite.
///
/// Every helper here that runs a program calls it, as do the tests' own helpers that start one.
/// It panics, naming the convention, when the test binary runs without `--ignored` or
/// `--include-ignored`: only a test without the attribute can get here then. (With those
/// flags it cannot tell; `scripts/test.sh` runs the fast tier on its own first, so CI checks
/// every test.)
pub fn slow_tier(what: &str) {
    static SLOW_TIER_RUN: OnceLock<bool> = OnceLock::new();
    let slow = *SLOW_TIER_RUN
        .get_or_init(|| std::env::args_os().any(|a| a == "--ignored" || a == "--include-ignored"));
    if !slow {
        panic!(
            "{}: runs {what}, a real program, in the fast tier: mark the test \
             #[ignore = \"slow: <what it runs>\"] (docs/architecture.md, \"Tests\"); \
             `cargo test -- --include-ignored` runs it",
            std::thread::current().name().unwrap_or("this test")
        );
    }
}

/// Whether a plugin-capable `qemu-x86_64` is installed (what `--counter emulate` and `auto`
/// need): `Err(why not)` otherwise, to pass to [`skip`].
pub fn emulator() -> Result<(), String> {
    let out = command("qemu-x86_64")
        .arg("-h")
        .output()
        .map_err(|e| format!("qemu-x86_64 not found ({e}): apt-get install qemu-user"))?;
    if String::from_utf8_lossy(&out.stdout).contains("-plugin") {
        Ok(())
    } else {
        Err("this qemu-x86_64 does not accept -plugin (a static build?)".into())
    }
}

/// Runs `gnuplot SCRIPT` in `dir`, as a user would, and returns the bytes of the PNG it drew
/// (`png`, relative to `dir`); panics if gnuplot fails. `None`, after printing
/// `skipped: gnuplot is not installed`, where it is missing.
pub fn gnuplot_render(dir: &Path, script: &str, png: &str) -> Option<Vec<u8>> {
    if !has_tool("gnuplot") {
        skip("gnuplot is not installed (apt-get install gnuplot-nox; .ci/run does)");
        return None;
    }
    let out = command("gnuplot")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run gnuplot: {e}"));
    assert!(
        out.status.success(),
        "gnuplot {script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(dir.join(png))
        .unwrap_or_else(|e| panic!("gnuplot {script} drew no {png}: {e}"));
    assert!(bytes.starts_with(b"\x89PNG"), "{png} is not a PNG");
    Some(bytes)
}

/// Compiles C `source` with `cc` and exactly `flags` (no defaults added: tests that build a
/// shared library and a program linked against it choose every flag) into `dir/name`.
/// Panics with the compiler's output if it fails.
pub fn compile_into(dir: &Path, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap_or_else(|e| panic!("cannot write {}: {e}", src.display()));
    let exe = dir.join(name);
    let out = command("cc")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .args(flags)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Offset of symbol `sym` of an ELF file from the start of its lowest mapping (the page-aligned
/// virtual address of its first `PT_LOAD` segment), as the tracer's probe offsets are.
/// Panics if the file cannot be read or has no such symbol.
pub fn symbol_offset(elf: &Path, sym: &str) -> u64 {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let data = std::fs::read(elf).unwrap_or_else(|e| panic!("cannot read {}: {e}", elf.display()));
    let file = object::File::parse(&*data).unwrap_or_else(|e| panic!("{}: {e}", elf.display()));
    let base = file
        .segments()
        .map(|s| s.address())
        .min()
        .expect("a PT_LOAD segment")
        & !0xfff;
    let addr = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.name() == Ok(sym))
        .unwrap_or_else(|| panic!("symbol {sym} not found in {}", elf.display()))
        .address();
    addr - base
}

#[cfg(test)]
mod tests {
    use super::compile::cxx_driver;
    use super::*;

    #[test]
    fn paths() {
        assert!(include_dir().join("cilkview.h").is_file());
        assert_eq!(cxx_driver("clang"), "clang++");
        assert_eq!(cxx_driver("gcc-12"), "g++-12");
    }

    #[test]
    fn a_program_in_the_fast_tier_is_refused() {
        let slow_tier_run = std::env::args().any(|a| a == "--ignored" || a == "--include-ignored");
        let started = std::panic::catch_unwind(|| slow_tier("gcc"));
        assert_eq!(started.is_ok(), slow_tier_run);
        if let Err(panic) = started {
            let message = panic.downcast_ref::<String>().unwrap();
            assert!(
                message.contains("runs gcc, a real program, in the fast tier")
                    && message.contains("#[ignore = \"slow: <what it runs>\"]"),
                "{message}"
            );
        }
    }

    #[test]
    #[ignore = "slow: runs gcc"]
    fn builds_and_caches() {
        let opts = BuildOptions::default().compiler("gcc").opt(1);
        let src = "int main(void) { return 0; }\n";
        let a = compile_source("trivial", src, Lang::C, &opts).unwrap();
        let b = compile_source("trivial", src, Lang::C, &opts).unwrap();
        assert_eq!(a, b);
        assert!(a.is_file());
        let err =
            compile_source("broken", "int main(void) { return x; }", Lang::C, &opts).unwrap_err();
        assert!(err.output.contains('x'), "{err}");
    }
}
