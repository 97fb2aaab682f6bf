//! The annotation side of cilkview-rs.
//!
//! * [`HEADER`] is `include/cilkview.h`, the C/C++ header programs use to mark their
//!   parallel structure (`cv_function`, `cv_spawn`, `cv_sync`, `cv_for`, regions).
//! * [`read_marks`] / [`parse_marks`] read the records that header leaves in the
//!   non-allocated ELF section `.cilkview_marks` (format: `docs/marks-format.md`).
//!
//! Every mark is a 5-byte NOP in the program text; a [`Mark`] tells where it is
//! (link-time virtual address) and what it means. To turn it into a run-time address,
//! add [`Mark::offset`] to the run-time start of the image's lowest mapping.

#![forbid(unsafe_code)]

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

pub mod locks;
mod parse;

use object::elf;
use object::read::elf::FileHeader;
use object::{LittleEndian as LE, ReadCache};

pub use parse::{parse_marks, parse_marks_in};

/// The C/C++ annotation header (`include/cilkview.h`), so tools can install or print it.
pub const HEADER: &str = include_str!("../include/cilkview.h");

/// Name of the ELF section holding the mark records.
pub const SECTION_NAME: &str = ".cilkview_marks";

/// Name of the non-allocated ELF section that the Rust `cilkview` crate's marks add a byte to:
/// the program runs its parallel code through rayon, serially when `RAYON_NUM_THREADS=1`.
pub const RAYON_SECTION_NAME: &str = ".cilkview_rayon";

/// Name of the non-allocated ELF section of a runtime's preload library (`run --openmp`): its
/// spawn marks are in the wrappers of the runtime's entry points that the program calls, so a
/// profile names each spawn by that call (the return address into the program), not by the
/// wrapper's own source.
pub const RUNTIME_SECTION_NAME: &str = ".cilkview_runtime";

/// The record format version this reader understands.
pub const FORMAT_VERSION: u8 = 1;

/// The bytes of the NOP at every mark: `nopl 0x0(%rax,%rax,1)`.
pub const MARK_NOP: [u8; 5] = [0x0f, 0x1f, 0x44, 0x00, 0x00];

/// Page size used to compute [`MarkedImage::base_vaddr`].
pub const PAGE_SIZE: u64 = 4096;

/// What a mark means. The numeric codes are those of the record format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MarkKind {
    /// 1: entry of a function that called `cv_function()`.
    FunctionEnter,
    /// 2: a return path of such a function (an implicit sync).
    FunctionExit,
    /// 3: just before a spawned statement.
    Spawn,
    /// 4: just after a spawned statement.
    SpawnReturn,
    /// 5: `cv_sync()`.
    Sync,
    /// 6: start of a parallel loop; the operand register holds the grain size.
    LoopBegin,
    /// 7: start of one iteration of a parallel loop.
    IterationBegin,
    /// 8: end of one iteration of a parallel loop.
    IterationEnd,
    /// 9: end of a parallel loop (an implicit sync of its iterations).
    LoopEnd,
    /// 10: start of a labeled region.
    RegionBegin,
    /// 11: end of a labeled region.
    RegionEnd,
    /// 12: just before a spawn mark: the child it spawns starts only after a sibling ends; the
    /// operand register holds the sibling's ordinal among the frame's spawns since its last sync.
    SpawnAfter,
    /// 13: the strand after it starts only after one child of the current frame ends (the
    /// others stay out); the operand register holds the child's ordinal, as for `SpawnAfter`.
    WaitFor,
}

impl MarkKind {
    /// All kinds, in code order.
    pub const ALL: [MarkKind; 13] = [
        MarkKind::FunctionEnter,
        MarkKind::FunctionExit,
        MarkKind::Spawn,
        MarkKind::SpawnReturn,
        MarkKind::Sync,
        MarkKind::LoopBegin,
        MarkKind::IterationBegin,
        MarkKind::IterationEnd,
        MarkKind::LoopEnd,
        MarkKind::RegionBegin,
        MarkKind::RegionEnd,
        MarkKind::SpawnAfter,
        MarkKind::WaitFor,
    ];

    /// The kind byte of the record format.
    pub fn code(self) -> u8 {
        self as u8 + 1
    }

    /// The kind for a record's kind byte, if it is one this reader knows.
    pub fn from_code(code: u8) -> Option<MarkKind> {
        MarkKind::ALL
            .get(usize::from(code).checked_sub(1)?)
            .copied()
    }

    /// Whether records of this kind carry a label.
    pub fn has_label(self) -> bool {
        matches!(self, MarkKind::RegionBegin | MarkKind::RegionEnd)
    }

    /// A short snake_case name, e.g. `spawn_return`.
    pub fn name(self) -> &'static str {
        match self {
            MarkKind::FunctionEnter => "function_enter",
            MarkKind::FunctionExit => "function_exit",
            MarkKind::Spawn => "spawn",
            MarkKind::SpawnReturn => "spawn_return",
            MarkKind::Sync => "sync",
            MarkKind::LoopBegin => "loop_begin",
            MarkKind::IterationBegin => "iteration_begin",
            MarkKind::IterationEnd => "iteration_end",
            MarkKind::LoopEnd => "loop_end",
            MarkKind::RegionBegin => "region_begin",
            MarkKind::RegionEnd => "region_end",
            MarkKind::SpawnAfter => "spawn_after",
            MarkKind::WaitFor => "wait_for",
        }
    }
}

impl fmt::Display for MarkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One mark: a NOP in the program text and what it means.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Mark {
    pub kind: MarkKind,
    /// Link-time virtual address of the NOP.
    pub address: u64,
    /// DWARF x86-64 register number holding the operand at the NOP (the grain of a
    /// [`MarkKind::LoopBegin`], the sibling of a [`MarkKind::SpawnAfter`] or [`MarkKind::WaitFor`]: 0 =
    /// `%rax`), if any.
    pub operand: Option<u16>,
    /// The label of a region mark.
    pub label: Option<String>,
}

impl Mark {
    /// `address - image.base_vaddr`: add the run-time start address of the image's
    /// lowest mapping to get the run-time address of the NOP.
    pub fn offset(&self, image: &MarkedImage) -> u64 {
        self.address.wrapping_sub(image.base_vaddr)
    }
}

/// The marks of one ELF image (executable or shared library).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarkedImage {
    /// In section order (which is link order, not execution order).
    pub marks: Vec<Mark>,
    /// Lowest `PT_LOAD` `p_vaddr`, rounded down to a multiple of [`PAGE_SIZE`].
    pub base_vaddr: u64,
    /// `true` for `ET_DYN` (PIE executables, shared libraries): loaded at an address
    /// chosen at run time.
    pub position_independent: bool,
}

/// Why marks could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MarksError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "not an ELF file (it does not start with \\x7fELF): give cilkview-rs an x86-64 Linux \
         executable or shared library, not a script or source file"
    )]
    NotElf,
    #[error(
        "32-bit ELF file: cilkview-rs handles 64-bit x86-64 programs only; rebuild it without -m32"
    )]
    NotElf64,
    #[error(
        "ELF file is for machine {machine} ({}), not x86-64 (62): rebuild it for x86-64 Linux",
        machine_name(*machine)
    )]
    NotX86_64 { machine: u16 },
    #[error(
        "ELF relocatable object file (.o): mark addresses are only known after linking; link it \
         into an executable or shared library first"
    )]
    NotLinked,
    #[error(
        "truncated ELF file: {what} extends past the end of the file; was the file copied or \
         written completely?"
    )]
    Truncated { what: String },
    #[error(
        "malformed ELF file or cilkview marks at file offset {offset:#x}: {reason}; rebuild the \
         program with the cilkview.h of this version of cilkview-rs"
    )]
    Malformed { offset: u64, reason: String },
}

fn machine_name(machine: u16) -> &'static str {
    match machine {
        elf::EM_386 => "i386",
        elf::EM_ARM => "ARM",
        elf::EM_AARCH64 => "AArch64",
        elf::EM_RISCV => "RISC-V",
        elf::EM_PPC64 => "PowerPC64",
        elf::EM_S390 => "s390",
        elf::EM_X86_64 => "x86-64",
        _ => "unknown machine",
    }
}

/// The ELF file at `path`, for reading where its parts are: a program with debug information
/// can be hundreds of megabytes, of which the marks need the headers and one section. A first
/// read reports what reading cannot do (a directory, an I/O error) as such.
fn open_elf(path: &Path) -> Result<ReadCache<File>, MarksError> {
    let io = |source| MarksError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    file.read(&mut [0u8; 1]).map_err(io)?;
    Ok(ReadCache::new(file))
}

/// Reads the marks of the ELF file at `path`.
pub fn read_marks(path: &Path) -> Result<MarkedImage, MarksError> {
    parse_marks_in(&open_elf(path)?)
}

/// Whether the file at `path` is a 64-bit ELF file with a `.cilkview_marks` section, whatever
/// its contents: a [`read_marks`] error about such a file means corrupt marks, not merely a file
/// that is not a marked program (a script's interpreter, a foreign library).
pub fn has_marks_section(path: &Path) -> bool {
    has_section(path, SECTION_NAME)
}

/// Whether the file at `path` is a 64-bit ELF file marked with the Rust `cilkview` crate (it has
/// a [`RAYON_SECTION_NAME`] section): its parallel code runs serially, in the serial elision's
/// order, when it is started with `RAYON_NUM_THREADS=1`.
pub fn has_rayon_marks(path: &Path) -> bool {
    has_section(path, RAYON_SECTION_NAME)
}

/// Whether the file at `path` is a runtime's preload library (it has a [`RUNTIME_SECTION_NAME`]
/// section): its spawns are named by their caller.
pub fn is_runtime_wrapper(path: &Path) -> bool {
    has_section(path, RUNTIME_SECTION_NAME)
}

fn has_section(path: &Path, name: &str) -> bool {
    let Ok(file) = open_elf(path) else {
        return false;
    };
    let Ok(header) = elf::FileHeader64::<LE>::parse(&file) else {
        return false;
    };
    header
        .sections(LE, &file)
        .is_ok_and(|s| s.section_by_name(LE, name.as_bytes()).is_some())
}
