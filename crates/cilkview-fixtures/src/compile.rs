//! Compiling the fixtures: the C/C++ programs of `fixtures/` into the cache ([`build`],
//! [`compile_source`]), the Rust ones with cargo ([`build_rust`]).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::{fixtures_dir, include_dir, repo_root, slow_tier};

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

pub(crate) fn cxx_driver(c: &str) -> String {
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
