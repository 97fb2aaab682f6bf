//! The region labels a program can report, known before it runs: those of its marks and of the
//! marks of the libraries it links (DT_NEEDED, found as the loader finds them). Options that
//! name a region (`--plot-region`, `--fail-below region:…`) are checked against them, so that a
//! mistyped label is reported before a long run, not after it. The same for the marked functions
//! `--what-if FUNCTION=…` names.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{Dyn, ElfFile64};
use object::read::ReadCache;
use object::{Endianness, Object, ObjectSymbol};

/// At most this many files are read (the program and the libraries it needs, transitively).
const MAX_IMAGES: usize = 64;

/// The directories the loader searches after `LD_LIBRARY_PATH` and `DT_RUNPATH` on Debian
/// x86-64 (besides `/etc/ld.so.cache`, which lists libraries in them).
const SYSTEM_DIRS: [&str; 7] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

/// What one ELF image says about the labels: its own, the libraries it needs and where to look
/// for them, and whether it can load others at run time.
struct Image {
    labels: Vec<String>,
    /// The link-time addresses of its function-entry marks.
    entries: Vec<u64>,
    needed: Vec<String>,
    runpath: Vec<PathBuf>,
    dlopens: bool,
}

fn read_image(path: &Path) -> Option<Image> {
    let marks = cilkview_marks::read_marks(path).ok()?;
    let entries = marks
        .marks
        .iter()
        .filter(|m| m.kind == cilkview_marks::MarkKind::FunctionEnter)
        .map(|m| m.address)
        .collect();
    // The lock marks' labels (`run --locks`, `--openmp`'s critical sections) name no region.
    let labels = marks
        .marks
        .into_iter()
        .filter_map(|m| m.label)
        .filter(|l| !cilkview_marks::locks::is_lock_label(l))
        .collect();
    let file = File::open(path).ok()?;
    let cache = ReadCache::new(file);
    let elf = ElfFile64::<Endianness, _>::parse(&cache).ok()?;
    let endian = elf.endian();
    let data = elf.data();
    let origin = path.parent().unwrap_or(Path::new("."));
    let mut needed = Vec::new();
    let mut runpath = Vec::new();
    let sections = elf.elf_section_table();
    if let Some((dyns, link)) = sections.dynamic(endian, data).ok()? {
        let strings = sections.strings(endian, data, link).ok()?;
        for d in dyns {
            let tag = d.tag32(endian);
            if !matches!(tag, Some(elf::DT_NEEDED | elf::DT_RUNPATH | elf::DT_RPATH)) {
                continue;
            }
            let offset = u32::try_from(d.d_val(endian)).ok()?;
            let value = String::from_utf8_lossy(strings.get(offset).ok()?).into_owned();
            if tag == Some(elf::DT_NEEDED) {
                needed.push(value);
            } else {
                let origin = origin.to_string_lossy();
                runpath.extend(
                    value
                        .split(':')
                        .map(|p| PathBuf::from(p.replace("$ORIGIN", &origin))),
                );
            }
        }
    }
    let dlopens = elf
        .dynamic_symbols()
        .any(|s| s.is_undefined() && s.name().is_ok_and(|n| n == "dlopen"));
    Some(Image {
        labels,
        entries,
        needed,
        runpath,
        dlopens,
    })
}

/// Where the loader would find library `name` needed by an image with `runpath`.
fn find_library(name: &str, runpath: &[PathBuf]) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let env = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    std::env::split_paths(&env)
        .chain(runpath.iter().cloned())
        .chain(SYSTEM_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The labels of the regions `program` can report, or `None` when they cannot be known before
/// it runs: a script (its marks are those of what it execs), a program or marked library that
/// imports `dlopen`, a needed library not found.
pub fn region_labels(program: &Path) -> Option<BTreeSet<String>> {
    let mut labels = BTreeSet::new();
    each_image(program, |_, image| {
        labels.extend(image.labels.iter().cloned())
    })?;
    Some(labels)
}

/// The functions with `cv_function()` that `program` (and the libraries it links) can enter,
/// named as the call-site profile names a call's callee (`--what-if FUNCTION=…`); `None` when
/// they cannot be known before it runs (as [`region_labels`]).
pub fn marked_functions(program: &Path) -> Option<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    each_image(program, |path, image| {
        if image.entries.is_empty() {
            return;
        }
        if let Ok(symbols) = cilkview_symbols::Symbolizer::open(path) {
            let base = symbols.address(0);
            names.extend(
                image
                    .entries
                    .iter()
                    .map(|&a| symbols.lookup(a.wrapping_sub(base)).function_name()),
            );
        }
    })?;
    Some(names)
}

/// Calls `visit` on the program and on every library it needs (transitively); `None` when they
/// cannot be known before it runs.
fn each_image(program: &Path, mut visit: impl FnMut(&Path, &Image)) -> Option<()> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![program.to_owned()];
    while let Some(path) = queue.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        if seen.len() > MAX_IMAGES {
            return None;
        }
        let image = read_image(&path)?;
        if image.dlopens && (path == program || !image.labels.is_empty()) {
            return None;
        }
        visit(&path, &image);
        for name in &image.needed {
            queue.push(find_library(name, &image.runpath)?);
        }
    }
    Some(())
}
