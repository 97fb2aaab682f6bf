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

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// How to compile a fixture.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BuildOptions {
    /// C compiler driver: `cc`, `gcc` or `clang` (for `.cpp` fixtures the matching C++
    /// driver is used: `c++`, `g++`, `clang++`). A C++ driver name works too.
    pub compiler: String,
    /// Optimization level, passed as `-O<opt>`: `"0"`, `"1"`, `"2"`, `"3"`, `"s"`.
    pub opt: String,
    /// `-fPIE -pie` when true, `-fno-pie -no-pie` when false.
    pub pie: bool,
    /// `-static` (with `pie`: `-static-pie`).
    pub static_link: bool,
    /// Preprocessor defines: `"CILKVIEW_DISABLE"` or `"N=10"` become `-D...`.
    pub defines: Vec<String>,
    /// Any further compiler arguments, placed before the source file.
    pub extra_flags: Vec<String>,
}

impl Default for BuildOptions {
    /// `cc -O0`, PIE, dynamic, no defines.
    fn default() -> Self {
        BuildOptions {
            compiler: "cc".to_owned(),
            opt: "0".to_owned(),
            pie: true,
            static_link: false,
            defines: Vec::new(),
            extra_flags: Vec::new(),
        }
    }
}

impl BuildOptions {
    pub fn compiler(mut self, name: &str) -> Self {
        self.compiler = name.to_owned();
        self
    }
    pub fn opt(mut self, level: impl fmt::Display) -> Self {
        self.opt = level.to_string();
        self
    }
    pub fn pie(mut self, pie: bool) -> Self {
        self.pie = pie;
        self
    }
    pub fn no_pie(self) -> Self {
        self.pie(false)
    }
    /// `-static` (non-PIE unless `pie(true)` is set after it, which gives `-static-pie`).
    pub fn static_link(mut self) -> Self {
        self.static_link = true;
        self.pie = false;
        self
    }
    pub fn define(mut self, define: &str) -> Self {
        self.defines.push(define.to_owned());
        self
    }
    /// Compiles the marks out (`-DCILKVIEW_DISABLE`): the serial elision.
    pub fn disabled(self) -> Self {
        self.define("CILKVIEW_DISABLE")
    }
    pub fn flag(mut self, flag: &str) -> Self {
        self.extra_flags.push(flag.to_owned());
        self
    }

    /// The compiler driver for a source of the given language.
    pub fn driver(&self, lang: Lang) -> String {
        match lang {
            Lang::C => self.compiler.clone(),
            Lang::Cxx => cxx_driver(&self.compiler),
        }
    }

    /// The arguments (without driver, source and output).
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![format!("-O{}", self.opt), "-g".to_owned()];
        match (self.pie, self.static_link) {
            (true, false) => args.extend(["-fPIE".into(), "-pie".into()]),
            (false, false) => args.extend(["-fno-pie".into(), "-no-pie".into()]),
            (true, true) => args.extend(["-fPIE".into(), "-static-pie".into()]),
            (false, true) => args.extend(["-fno-pie".into(), "-no-pie".into(), "-static".into()]),
        }
        args.push(format!("-I{}", include_dir().display()));
        args.push(format!("-I{}", fixtures_dir().display()));
        args.extend(self.defines.iter().map(|d| format!("-D{d}")));
        args.extend(self.extra_flags.iter().cloned());
        args
    }
}

/// Source language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    C,
    Cxx,
}

impl Lang {
    pub fn extension(self) -> &'static str {
        match self {
            Lang::C => "c",
            Lang::Cxx => "cpp",
        }
    }
}

fn cxx_driver(c: &str) -> String {
    match c {
        "cc" => "c++".to_owned(),
        "gcc" => "g++".to_owned(),
        "clang" => "clang++".to_owned(),
        other => match other.strip_prefix("gcc-") {
            Some(v) => format!("g++-{v}"),
            None => match other.strip_prefix("clang-") {
                Some(v) => format!("clang++-{v}"),
                None => other.to_owned(),
            },
        },
    }
}

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

/// The first line of `name --version`, part of the cache key.
fn compiler_identity(name: &str) -> String {
    static CACHE: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(id) = cache.lock().unwrap().get(name) {
        return id.clone();
    }
    let id = Command::new(name)
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_owned()
        })
        .unwrap_or_default();
    cache.lock().unwrap().insert(name.to_owned(), id.clone());
    id
}

/// Finds `fixtures/<name>.c` or `fixtures/<name>.cpp`.
pub fn fixture_source(name: &str) -> Option<(PathBuf, Lang)> {
    [Lang::C, Lang::Cxx].into_iter().find_map(|lang| {
        let path = fixtures_dir().join(format!("{name}.{}", lang.extension()));
        path.is_file().then_some((path, lang))
    })
}

/// A failed compilation.
#[derive(Debug, Clone)]
pub struct BuildError {
    /// The command line, for the failure message.
    pub command: String,
    /// What the compiler printed on stderr (and stdout).
    pub output: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` failed:\n{}", self.command, self.output)
    }
}

impl std::error::Error for BuildError {}

/// Compiles `fixtures/<fixture>.c` (or `.cpp`) and returns the executable's path.
/// Panics with the compiler's output if the fixture is missing or does not compile.
pub fn build(fixture: &str, opts: &BuildOptions) -> PathBuf {
    let (path, lang) = fixture_source(fixture)
        .unwrap_or_else(|| panic!("no fixture {fixture}.c or {fixture}.cpp in fixtures/"));
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    compile_source(fixture, &source, lang, opts).unwrap_or_else(|e| panic!("{e}"))
}

/// Compiles `source` (the text of a C or C++ file; it may `#include "cilkview.h"` and
/// `"work.h"`) into an executable named `name` in the cache, and returns its path or
/// the compiler's complaint.
pub fn compile_source(
    name: &str,
    source: &str,
    lang: Lang,
    opts: &BuildOptions,
) -> Result<PathBuf, BuildError> {
    let driver = opts.driver(lang);
    slow_tier(&driver);
    let args = opts.args();
    let mut hasher = DefaultHasher::new();
    source.hash(&mut hasher);
    lang.hash(&mut hasher);
    driver.hash(&mut hasher);
    compiler_identity(&driver).hash(&mut hasher);
    args.hash(&mut hasher);
    for header in headers() {
        header.hash(&mut hasher);
    }
    let dir = std::env::temp_dir().join(format!("cilkview-fixtures-{:016x}", hasher.finish()));
    let exe = dir.join(name);
    if exe.is_file() {
        return Ok(exe);
    }
    let fail = |output: String, command: String| BuildError { command, output };
    std::fs::create_dir_all(&dir).map_err(|e| {
        fail(
            format!("cannot create {}: {e}", dir.display()),
            String::new(),
        )
    })?;

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        "{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let src = dir.join(format!("{name}.{unique}.{}", lang.extension()));
    let tmp = dir.join(format!("{name}.{unique}.tmp"));
    std::fs::write(&src, source).map_err(|e| {
        fail(
            format!("cannot write {}: {e}", src.display()),
            String::new(),
        )
    })?;
    let mut cmd = Command::new(&driver);
    cmd.args(&args).arg(&src).arg("-o").arg(&tmp);
    let command = format!(
        "{driver} {} {} -o {}",
        args.join(" "),
        src.display(),
        tmp.display()
    );
    let output = cmd.output();
    let _ = std::fs::remove_file(&src);
    let output = output.map_err(|e| fail(format!("cannot run {driver}: {e}"), command.clone()))?;
    if !output.status.success() {
        let _ = std::fs::remove_file(&tmp);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stderr),
            String::from_utf8_lossy(&output.stdout)
        );
        return Err(fail(text, command));
    }
    std::fs::rename(&tmp, &exe).map_err(|e| {
        fail(
            format!("cannot rename {} to {}: {e}", tmp.display(), exe.display()),
            command.clone(),
        )
    })?;
    Ok(exe)
}

/// The text of every header a fixture may include (part of the cache key).
fn headers() -> Vec<String> {
    let mut files: Vec<PathBuf> = vec![include_dir().join("cilkview.h")];
    if let Ok(entries) = std::fs::read_dir(fixtures_dir()) {
        files.extend(
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "h")),
        );
    }
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// Builds the Rust fixtures (`fixtures/rust`, the workspace member `cilkview-rust-fixtures`:
/// programs marked with the `cilkview` crate) with cargo, and returns the path of the binary
/// `name` (e.g. `rs_fib`). `marks: false` builds them without the crate's `marks` feature (the
/// serial elision).
///
/// Release profile without LTO, statically linked (`-C target-feature=+crt-static`: no dynamic
/// loader to single-step), into a target directory of its own per variant under the system temp
/// dir (cargo's lock serializes concurrent builds; cargo rebuilds what changed). Panics with
/// cargo's output if the build fails.
pub fn build_rust(name: &str, marks: bool) -> PathBuf {
    slow_tier("cargo");
    static BUILT: OnceLock<Mutex<HashMap<bool, PathBuf>>> = OnceLock::new();
    let built = BUILT.get_or_init(Default::default);
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = built.get(&marks) {
        return dir.join(name);
    }
    let mut hasher = DefaultHasher::new();
    repo_root().hash(&mut hasher);
    let target = std::env::temp_dir().join(format!(
        "cilkview-rust-fixtures-{:016x}-{}",
        hasher.finish(),
        if marks { "marks" } else { "elision" }
    ));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.args([
        "build",
        "--release",
        "--bins",
        "-p",
        "cilkview-rust-fixtures",
    ])
    .arg("--manifest-path")
    .arg(repo_root().join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target)
    .args(["--config", "profile.release.lto=false"])
    .env("RUSTFLAGS", "-C target-feature=+crt-static")
    .env_remove("CARGO_ENCODED_RUSTFLAGS")
    .env_remove("CARGO_BUILD_TARGET");
    if !marks {
        cmd.arg("--no-default-features");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", Path::new(&cargo).display()));
    assert!(
        out.status.success(),
        "building the Rust fixtures failed: {:?}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = target.join("release");
    built.insert(marks, dir.clone());
    dir.join(name)
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
