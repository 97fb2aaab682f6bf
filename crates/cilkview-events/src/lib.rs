//! The seam between the backends that run a program (ptrace, emulation) and the analysis that
//! turns what they see into measures: the ordered [`TraceEvent`] stream, the [`Probe`]s a backend
//! is asked to watch, how instructions were counted ([`CounterMode`]) and how the run ended
//! ([`ExitStatus`]). Plain data, no I/O.
//!
//! Invariant of every backend: the costs of all events of one run ([`TraceEvent::Exec`],
//! [`TraceEvent::Hit`], [`TraceEvent::ThreadExit`]) add up to [`Outcome::total_cost`],
//! the user-space instructions the program would retire natively, without the tool.

#![forbid(unsafe_code)]

use std::fmt;

mod packed;
pub use packed::{HitPacker, HitsTotal, PackedHit};

/// How instructions are counted: the user's request (`Auto` included) and, in [`CounterInfo`],
/// the counter a run used (never `Auto`). One type, and one spelling of each name, from the
/// command-line flag to the JSON field (`hw`, `emulate`, `step`); the JSON's former spellings
/// `hardware` and `single-step` are read, and accepted by `--counter`, as aliases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub enum CounterMode {
    /// The hardware counter if it passes its self-test here, else emulation if a plugin-capable
    /// qemu-x86_64 is found, else single-step.
    #[default]
    #[cfg_attr(feature = "serde", serde(rename = "auto"))]
    Auto,
    /// The hardware instruction counter (perf_event); an error if unavailable.
    #[cfg_attr(feature = "clap", value(name = "hw", alias = "hardware"))]
    #[cfg_attr(feature = "serde", serde(rename = "hw", alias = "hardware"))]
    Hardware,
    // Run under qemu-x86_64 with the cilkview plugin (its help says how much slower, from
    // `EMULATION_SLOWDOWN`).
    #[cfg_attr(
        feature = "clap",
        value(help = format!(
            "Run under qemu-x86_64 with the cilkview plugin: exact, no PMU needed, \
             {EMULATION_SLOWDOWN}"
        ))
    )]
    #[cfg_attr(feature = "serde", serde(rename = "emulate"))]
    Emulate,
    /// Single-step every instruction under ptrace: exact everywhere, but ~20 µs per instruction.
    #[cfg_attr(feature = "clap", value(alias = "single-step"))]
    #[cfg_attr(feature = "serde", serde(rename = "step", alias = "single-step"))]
    Step,
    /// The program at native speed, its marks patched into jumps to an in-process recorder:
    /// strands measured in instructions where user space can read a PMU counter (`rdpmc`), else
    /// in nanoseconds (the invariant time-stamp counter), any x86-64 machine.
    #[cfg_attr(feature = "serde", serde(rename = "native"))]
    Native,
}

/// How much slower than native a program runs under `--counter emulate`, said once (the
/// `--counter` help, the long-run warning), from docs/benchmarks.md's measurements: ~3× on
/// coarse integer code (gzip), 11–38× with a mark every few instructions (fib_cutoff, fib),
/// 21–170× on floating point, which QEMU 7.2 emulates in software.
pub const EMULATION_SLOWDOWN: &str = "3-40x slower than native (up to 170x on floating point)";

impl CounterMode {
    /// The name used by `--counter`, in reports and in JSON: `auto`, `hw`, `emulate`, `step`,
    /// `native`.
    pub fn name(self) -> &'static str {
        match self {
            CounterMode::Auto => "auto",
            CounterMode::Hardware => "hw",
            CounterMode::Emulate => "emulate",
            CounterMode::Step => "step",
            CounterMode::Native => "native",
        }
    }
}

impl fmt::Display for CounterMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What costs count: user-space instructions (every exact counter, and the native counter where
/// its stubs read them with `rdpmc`), or nanoseconds of time (the native counter otherwise). In
/// reports and JSON: `"instructions"`, `"nanoseconds"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub enum CostUnit {
    #[default]
    Instructions,
    Nanoseconds,
}

impl CostUnit {
    /// `"instructions"` or `"nanoseconds"`.
    pub fn name(self) -> &'static str {
        match self {
            CostUnit::Instructions => "instructions",
            CostUnit::Nanoseconds => "nanoseconds",
        }
    }
}

impl fmt::Display for CostUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One thing a report says about how its run was measured: why a counter was passed over, the
/// emulator that ran, what emulation changed in the program's world, what ran uncounted. `id`
/// names the kind of note (stable: JSON readers match on it; one id may occur more than once),
/// `text` is one line, `detail` its long form (`-v`), if any. A new note is one
/// [`Note::new`] where it is known, pushed on [`CounterInfo::notes`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Note {
    /// What kind of note, e.g. `passed-over`, `emulator`, `emulation-changed`, `uncounted`.
    pub id: String,
    /// One line.
    pub text: String,
    /// The long form, shown with `-v`.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub detail: Option<String>,
}

impl Note {
    pub fn new(id: &str, text: impl Into<String>) -> Note {
        Note {
            id: id.to_string(),
            text: text.into(),
            detail: None,
        }
    }

    /// The note with its long form.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Note {
        self.detail = Some(detail.into());
        self
    }
}

/// A cost in its unit: a number of instructions or a time in nanoseconds (`--burden`,
/// `--task-cost`). Shown as `15000` or `5000ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cost {
    pub amount: u64,
    pub unit: CostUnit,
}

impl Cost {
    /// `n` instructions.
    pub const fn instructions(n: u64) -> Cost {
        Cost {
            amount: n,
            unit: CostUnit::Instructions,
        }
    }

    /// `ns` nanoseconds.
    pub const fn nanoseconds(ns: u64) -> Cost {
        Cost {
            amount: ns,
            unit: CostUnit::Nanoseconds,
        }
    }

    /// The amount, if the cost is in `unit`.
    pub fn in_unit(self, unit: CostUnit) -> Option<u64> {
        (self.unit == unit).then_some(self.amount)
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.unit {
            CostUnit::Instructions => write!(f, "{}", self.amount),
            CostUnit::Nanoseconds => write!(f, "{}ns", self.amount),
        }
    }
}

/// A default cost given in each unit (the burden: 15,000 instructions or 5 µs), the one that
/// applies chosen by the unit the run counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostDefault {
    pub instructions: u64,
    pub nanoseconds: u64,
}

impl CostDefault {
    /// The default in `unit`.
    pub const fn in_unit(self, unit: CostUnit) -> Cost {
        match unit {
            CostUnit::Instructions => Cost::instructions(self.instructions),
            CostUnit::Nanoseconds => Cost::nanoseconds(self.nanoseconds),
        }
    }

    /// `given` if there is one, else the default, in `unit`: `Err(given)` if `given` is in
    /// another unit (an option that does not apply to what ran).
    pub fn or_given(self, given: Option<Cost>, unit: CostUnit) -> Result<u64, Cost> {
        match given {
            Some(cost) => cost.in_unit(unit).ok_or(cost),
            None => Ok(self.in_unit(unit).amount),
        }
    }
}

/// Which counter a run used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterInfo {
    /// Never [`CounterMode::Auto`].
    pub kind: CounterMode,
    /// Why this counter, in a few words, e.g. "chosen by auto (hw unavailable here)".
    pub reason: String,
    /// Everything else the report says about the measurement, one [`Note`] each.
    pub notes: Vec<Note>,
    /// What its costs count: nanoseconds only for the native counter where it cannot read
    /// instructions.
    pub unit: CostUnit,
    /// Hardware only: instructions the counter sees per probe stop beyond the
    /// native program (learned by the self-test, subtracted from each hit). 0 otherwise.
    pub bias: u64,
}

impl CounterInfo {
    /// The reason and every note (text and long form) in one string, `; ` between them: what
    /// the report says about the counter, for a message or a search.
    pub fn says(&self) -> String {
        let mut parts = vec![self.reason.clone()];
        for note in &self.notes {
            parts.push(note.text.clone());
            parts.extend(note.detail.clone());
        }
        parts.join("; ")
    }
}

/// A probe: a 5-byte NOP `0f 1f 44 00 00` in an executable image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    /// Offset from the start of the image's lowest mapping (for an ELF file:
    /// virtual address minus the page-aligned virtual address of its first
    /// `PT_LOAD` segment; for a non-PIE x86-64 executable usually `vaddr - 0x400000`).
    pub offset: u64,
    /// DWARF x86-64 register number whose value to report at each hit
    /// (0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8–15 r8–r15).
    pub operand: Option<u16>,
    /// Report the return address of the function this probe is in instead of an operand (for
    /// call-site profiles: the probe of a function's entry mark). The hit's `operand` is then the
    /// return address found on the stack at the hit, **relative to the load address of this
    /// probe's file** (`address - load`, wrapping: a caller in another file gives a value outside
    /// this file), or `None` if it could not be read exactly. `operand` must be `None`.
    pub return_address: Option<ReturnAddress>,
}

/// Where a probe's function keeps its return address at the probe (from the file's `.eh_frame`
/// CFI): in memory at CFA − 8, CFA = value of `cfa_register` + `cfa_offset`. The ptrace backends
/// use the rule at the hit; the emulation backend reads `[rsp]` when the function is entered at
/// `function_entry` (the start of its FDE, file-relative like [`Probe::offset`]) and reports it at
/// the probe's next hit by the same thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReturnAddress {
    /// DWARF x86-64 register number (7 = rsp, 6 = rbp).
    pub cfa_register: u16,
    pub cfa_offset: i64,
    pub function_entry: u64,
}

impl ReturnAddress {
    /// The address of the saved return address, given the CFA register's value at the probe.
    pub fn slot(&self, cfa_register_value: u64) -> u64 {
        cfa_register_value
            .wrapping_add_signed(self.cfa_offset)
            .wrapping_sub(8)
    }
}

impl Probe {
    /// A probe at `offset` reporting register `operand` (or nothing) at each hit.
    pub fn new(offset: u64, operand: Option<u16>) -> Probe {
        Probe {
            offset,
            operand,
            return_address: None,
        }
    }
}

/// One event of a run, delivered in order. Costs are user-space instructions
/// of the thread `tid` since its previous event (or since it started).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// The program exec'd an image and its probes are armed. `image` counts
    /// execs from 0. It follows the `probes_for` calls made at the exec (the
    /// executable first, then the files already mapped executable, e.g. the
    /// dynamic loader); see [`TraceEvent::Hit`] for the numbering. `cost`:
    /// instructions run in the previous image since the thread's last event
    /// (0 for image 0). `probes`: how many probes those calls returned in all
    /// (so a caller that keeps one table of every call's probes knows that
    /// the last `probes` entries are the new image's).
    Exec {
        image: u32,
        tid: i32,
        cost: u64,
        probes: usize,
    },
    /// A new thread of the program (not the initial one) started.
    ThreadStart { tid: i32 },
    /// Thread `tid` reached probe number `probe` of the current image.
    /// The probe's NOP itself is counted in the *following* strand.
    ///
    /// Numbering: `probe` indexes the concatenation, in call order, of all
    /// the vectors `probes_for` returned since (and including) the call for
    /// the current executable image: that call comes first (indices
    /// `0..n`), then one call per file mapped executable later (the dynamic
    /// loader, the `DT_NEEDED` libraries, each `dlopen`), each vector taking
    /// the next indices. At each exec the numbering restarts at 0. A library
    /// unmapped by `dlclose` keeps its indices (they are never reused, its
    /// probes simply stop being hit); if the same file is mapped again it
    /// gets a new call and new indices.
    Hit {
        probe: usize,
        tid: i32,
        cost: u64,
        operand: Option<u64>,
    },
    /// Thread `tid` ended; `cost` is its tail since its last event.
    ThreadExit { tid: i32, cost: u64 },
}

impl TraceEvent {
    /// The cost carried by this event (0 for `ThreadStart`).
    pub fn cost(&self) -> u64 {
        match *self {
            TraceEvent::Exec { cost, .. }
            | TraceEvent::Hit { cost, .. }
            | TraceEvent::ThreadExit { cost, .. } => cost,
            TraceEvent::ThreadStart { .. } => 0,
        }
    }
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    Exited(i32),
    Signaled(i32),
}

impl ExitStatus {
    /// The shell convention: the exit code, or 128 + signal number.
    pub fn code(&self) -> i32 {
        match *self {
            ExitStatus::Exited(c) => c,
            ExitStatus::Signaled(s) => 128 + s,
        }
    }
}

/// How a measured run ended: the program's exit, or (attach) the end of the measuring window
/// while the program runs on. One type from the backend to the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The program ended (always, for a run from start to end).
    Exited(ExitStatus),
    /// Attach: a stop was requested (Ctrl-C, SIGTERM); detached, the program runs on.
    Stopped,
    /// Attach: the `--duration` elapsed; detached, the program runs on.
    TimeUp,
}

impl Ending {
    /// How the program ended, if it did.
    pub fn status(&self) -> Option<ExitStatus> {
        match *self {
            Ending::Exited(status) => Some(status),
            Ending::Stopped | Ending::TimeUp => None,
        }
    }

    /// Why a measuring window ended, as the JSON report's `attach.ended` says it:
    /// `"exited"`, `"stopped"` or `"duration"`.
    pub fn name(&self) -> &'static str {
        match self {
            Ending::Exited(_) => "exited",
            Ending::Stopped => "stopped",
            Ending::TimeUp => "duration",
        }
    }
}

/// Summary of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: ExitStatus,
    pub counter: CounterInfo,
    /// Number of `Hit` events.
    pub hits: u64,
    /// Sum of the `ThreadExit` costs (work after each thread's last hit).
    pub tail_cost: u64,
    /// Sum of all event costs, in [`CounterInfo::unit`]: the program's user-space instructions,
    /// or its time in nanoseconds under a counter of time.
    pub total_cost: u64,
    /// Threads seen, including the initial one.
    pub threads: u32,
}

/// Why a sink could not give the probes of an image (its marks are corrupt, say): any error,
/// shown to the user as its text after the image's name.
pub type ProbesError = Box<dyn std::error::Error + Send + Sync>;

/// What a backend feeds while it runs a program: it asks for the probes of each image it meets
/// (see [`TraceEvent::Hit`] for the order and numbering) and hands over every event, in order.
pub trait EventSink {
    /// The probes of `image` (the executable, then each file mapped executable); `Ok(vec![])` for
    /// files without marks. An error stops the run.
    fn probes_for(&mut self, image: &std::path::Path) -> Result<Vec<Probe>, ProbesError>;
    /// Where the image `probes_for` was last asked about is loaded: the start of its lowest
    /// mapping, in the address space that return-address operands are relative to (a backend
    /// that knows it says it, after each `probes_for`). Call-site profiles use it to name a
    /// return address that lies in another image than its entry mark.
    fn image_base(&mut self, _base: u64) {}
    /// The next event of the run.
    fn event(&mut self, event: TraceEvent);
    /// Thread `tid` reached probe `probe`, no operand: the same as
    /// `event(TraceEvent::Hit { probe, tid, cost, operand: None })`, for backends that deliver
    /// tens of millions of hits a second (emulation).
    fn hit(&mut self, probe: usize, tid: i32, cost: u64) {
        self.event(TraceEvent::Hit {
            probe,
            tid,
            cost,
            operand: None,
        });
    }
    /// A run of hits of thread `tid`, in order, without operands, packed in words
    /// ([`PackedHit`]): the same as [`EventSink::hit`] for each. One call per run lets a sink
    /// keep its hot loop inlined, and a backend hand over its records as they are. Returns how
    /// many hits the words held and the sum of their costs (the backend's totals: counted where
    /// the hits are unpacked anyway).
    fn hits(&mut self, tid: i32, hits: &[u64]) -> HitsTotal {
        PackedHit::for_each_in(hits, |probe, cost| self.hit(probe, tid, cost))
    }
    /// [`EventSink::hits`] from a backend that packed each hit in a word of its own
    /// ([`PackedHit::new`]'s, never small hits) and counted the run's `total` as it packed it:
    /// a sink decodes such words with no test of their form, and one that only passes the
    /// words on (to another thread) need not unpack them to count.
    fn hits_counted(&mut self, tid: i32, hits: &[u64], total: HitsTotal) {
        let _ = total;
        self.hits(tid, hits);
    }
}
