//! The glibc dispatch the exact counters run a program with.
//!
//! glibc picks its string-function variants (`memcpy`, `strlen`, ...), the size thresholds of
//! its copies and its lazy-binding trampoline from the CPU it finds at start-up. The emulator
//! shows the program a fixed CPU ([`crate::CPU_MODEL`]); the ptrace counters (`step`, `hw`,
//! `native` by `rdpmc`) show it this machine's. So every exact counter runs the program with
//! the same `GLIBC_TUNABLES`: the features glibc dispatches on that the emulated CPU lacks
//! masked (AVX-512, RTM, XSAVEC), ERMS masked (see [`MASKED`]), the preferred-variant flags and
//! the cache-size thresholds set to the emulated CPU's. The value is the same on every host, so
//! emulation counts the same everywhere, and the ptrace counters count what it counts.
//! `TraceOptions::host_dispatch` leaves the environment alone. docs/emulation.md, "One glibc
//! path on every host".

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use crate::{CostUnit, TraceOptions};
use cilkview_events::Note;

/// The variable glibc reads its tunables from.
pub const TUNABLES: &str = "GLIBC_TUNABLES";

/// Where CPUID says a CPU has a feature: leaf, subleaf, register (0 eax .. 3 edx), bit.
#[derive(Clone, Copy, Debug)]
struct Feature {
    name: &'static str,
    leaf: u32,
    subleaf: u32,
    reg: usize,
    bit: u32,
}

const fn leaf7(name: &'static str, bit: u32) -> Feature {
    Feature {
        name,
        leaf: 7,
        subleaf: 0,
        reg: 1,
        bit,
    }
}

const fn leaf1(name: &'static str, bit: u32) -> Feature {
    Feature {
        name,
        leaf: 1,
        subleaf: 0,
        reg: 2,
        bit,
    }
}

/// The features masked (`glibc.cpu.hwcaps=-NAME`, names as glibc 2.36's `cpu-tunables.c`
/// takes them): those glibc dispatches on that the emulated Haswell lacks, and ERMS, which it
/// has: with ERMS glibc's `memmove` stops using `rep movsb` above a threshold that is the L2
/// cache's size on AMD CPUs and the non-temporal threshold on Intel's and that no tunable sets,
/// so without it both take the vector loops up to the (pinned) non-temporal threshold.
const MASKED: [Feature; 10] = [
    leaf7("AVX512F", 16),
    leaf7("AVX512DQ", 17),
    leaf7("AVX512PF", 26),
    leaf7("AVX512ER", 27),
    leaf7("AVX512CD", 28),
    leaf7("AVX512BW", 30),
    leaf7("AVX512VL", 31),
    leaf7("RTM", 11),
    Feature {
        name: "XSAVEC",
        leaf: 0xd,
        subleaf: 1,
        reg: 0,
        bit: 1,
    },
    leaf7("ERMS", 9),
];

/// Features glibc dispatches on that the emulated CPU has: a host without one of them takes
/// other paths, which masking cannot undo (said in the counter's reason).
const EMULATED_HAS: [Feature; 7] = [
    leaf1("AVX", 28),
    leaf1("FMA", 12),
    leaf1("MOVBE", 22),
    leaf1("SSE4_2", 20),
    leaf7("AVX2", 5),
    leaf7("BMI1", 3),
    leaf7("BMI2", 8),
];

/// The preferred-variant flags, set or cleared as glibc sets them for the emulated Haswell
/// (its vendor-specific choices: AMD's CPUs get other ones).
const PREFERRED: &str = "Fast_Rep_String,Fast_Unaligned_Load,Fast_Unaligned_Copy,\
    Prefer_PMINUB_for_stringop,AVX_Fast_Unaligned_Load,-Prefer_No_VZEROUPPER,-Prefer_ERMS,\
    -Prefer_FSRM,-Fast_Copy_Backward,-Slow_BSF,-Slow_SSE4_2";

/// The cache-size-derived thresholds, as glibc computes them for the emulated CPU (32 KiB L1d,
/// 16 MiB L3; `ld.so --list-diagnostics` under QEMU).
const SIZES: [(&str, u64); 5] = [
    ("glibc.cpu.x86_data_cache_size", 0x8000),
    ("glibc.cpu.x86_shared_cache_size", 0x100_0000),
    ("glibc.cpu.x86_non_temporal_threshold", 0xc0_0000),
    ("glibc.cpu.x86_rep_movsb_threshold", 0x2000),
    ("glibc.cpu.x86_rep_stosb_threshold", 0x800),
];

const HWCAPS: &str = "glibc.cpu.hwcaps";

/// The pinned `GLIBC_TUNABLES` merged with the one the program would get (`user`): the user's
/// own settings are kept and win (a hwcaps list of theirs is applied after ours; a threshold of
/// theirs replaces ours). Returns the value and the names of the settings of the user's that
/// replace or amend ours.
fn merged(user: Option<&[u8]>) -> (Vec<u8>, Vec<String>) {
    let masks: Vec<String> = MASKED.iter().map(|f| format!("-{}", f.name)).collect();
    let mut hwcaps = format!("{}={},{PREFERRED}", HWCAPS, masks.join(","));
    let entries: Vec<&[u8]> = user
        .unwrap_or_default()
        .split(|&b| b == b':')
        .filter(|e| !e.is_empty())
        .collect();
    let name_of = |e: &[u8]| e.split(|&b| b == b'=').next().unwrap_or_default().to_vec();
    let mut kept = Vec::new();
    let mut others: Vec<&[u8]> = Vec::new();
    for e in &entries {
        if name_of(e) == HWCAPS.as_bytes() {
            hwcaps.push(',');
            hwcaps += &String::from_utf8_lossy(&e[HWCAPS.len() + 1..]);
            kept.push(HWCAPS.to_string());
        } else {
            others.push(e);
        }
    }
    let mut out = hwcaps.into_bytes();
    for (name, value) in SIZES {
        if others.iter().any(|e| name_of(e) == name.as_bytes()) {
            kept.push(name.to_string());
        } else {
            out.extend_from_slice(format!(":{name}={value:#x}").as_bytes());
        }
    }
    for e in others {
        out.push(b':');
        out.extend_from_slice(e);
    }
    (out, kept)
}

/// The CPU's answer to `cpuid` with a leaf and subleaf.
type Cpuid<'a> = &'a dyn Fn(u32, u32) -> [u32; 4];

/// Whether the CPU that answers `cpuid` has `f` (a leaf above its highest has nothing).
fn has(f: &Feature, cpuid: Cpuid) -> bool {
    let max = cpuid(f.leaf & 0x8000_0000, 0)[0];
    f.leaf <= max && cpuid(f.leaf, f.subleaf)[f.reg] & (1 << f.bit) != 0
}

/// The counter reason's line for a pinned run on the CPU answering `cpuid`: what was masked
/// that it has, the user's settings kept, and what it lacks.
fn note(kept: &[String], cpuid: Cpuid) -> String {
    let masked: Vec<&str> = MASKED
        .iter()
        .filter(|f| has(f, cpuid))
        .map(|f| f.name)
        .collect();
    let mut note = format!(
        "glibc dispatch pinned to the emulated CPU's (GLIBC_TUNABLES set in the program's \
         environment: {} masked, cache thresholds fixed; --host-dispatch keeps this CPU's)",
        if masked.is_empty() {
            "nothing of this CPU's".to_string()
        } else {
            masked.join(", ")
        }
    );
    if !kept.is_empty() {
        note += &format!(
            "; your GLIBC_TUNABLES kept over the pinning: {} (exact counters may differ where \
             it matters)",
            kept.join(", ")
        );
    }
    let lacks: Vec<&str> = EMULATED_HAS
        .iter()
        .filter(|f| !has(f, cpuid))
        .map(|f| f.name)
        .collect();
    if !lacks.is_empty() {
        note += &format!(
            "; this CPU lacks {} that the emulated one has: glibc's paths under ptrace and \
             under emulation may differ",
            lacks.join(", ")
        );
    }
    note
}

/// `opts` as a counter of `unit` runs the program: for an instruction counter, unless
/// `opts.host_dispatch`, with `GLIBC_TUNABLES` pinned (merged with the one the program would get:
/// `opts.env`'s, else the tool's) and the line the counter's reason gets. A time counter runs
/// the program as it is (its time is that of the host's paths).
pub(crate) fn pin(opts: &TraceOptions, unit: CostUnit) -> (TraceOptions, Option<Note>) {
    if unit != CostUnit::Instructions {
        return (opts.clone(), None);
    }
    if opts.host_dispatch {
        let note = "glibc dispatch not pinned (--host-dispatch): glibc picks its paths for the \
                    CPU the program sees";
        return (opts.clone(), Some(Note::new("dispatch", note)));
    }
    let user: Option<OsString> = match opts.env.iter().rev().find(|(k, _)| k == TUNABLES) {
        Some((_, v)) => Some(v.clone()),
        None => std::env::var_os(TUNABLES),
    };
    let (value, kept) = merged(user.as_deref().map(OsStr::as_bytes));
    let mut pinned = opts.clone();
    pinned.env.retain(|(k, _)| k != TUNABLES);
    pinned
        .env
        .push((TUNABLES.into(), OsString::from_vec(value)));
    (
        pinned,
        Some(Note::new(
            "dispatch",
            note(&kept, &crate::sys::cpuid::cpuid),
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(user: Option<&str>) -> (String, Vec<String>) {
        let (v, kept) = merged(user.map(str::as_bytes));
        (String::from_utf8(v).unwrap(), kept)
    }

    #[test]
    fn the_pinned_value_masks_and_sets_everything_once() {
        let (v, kept) = text(None);
        assert!(kept.is_empty());
        assert!(v.starts_with(
            "glibc.cpu.hwcaps=-AVX512F,-AVX512DQ,-AVX512PF,-AVX512ER,-AVX512CD,-AVX512BW,\
             -AVX512VL,-RTM,-XSAVEC,-ERMS,Fast_Rep_String,"
        ));
        assert!(v.ends_with(
            ":glibc.cpu.x86_data_cache_size=0x8000:glibc.cpu.x86_shared_cache_size=0x1000000\
             :glibc.cpu.x86_non_temporal_threshold=0xc00000:glibc.cpu.x86_rep_movsb_threshold\
             =0x2000:glibc.cpu.x86_rep_stosb_threshold=0x800"
        ));
        assert_eq!(v.matches("glibc.cpu.hwcaps=").count(), 1);
        assert!(!v.contains(' '), "{v}");
    }

    #[test]
    fn the_users_tunables_are_kept_and_win() {
        let (v, kept) = text(Some(
            "glibc.malloc.arena_max=2:glibc.cpu.hwcaps=-AVX2:glibc.cpu.x86_rep_movsb_threshold=4096",
        ));
        assert_eq!(
            kept,
            ["glibc.cpu.hwcaps", "glibc.cpu.x86_rep_movsb_threshold"]
        );
        // The user's hwcaps come after ours (glibc applies them in order), in the one list.
        assert_eq!(v.matches("glibc.cpu.hwcaps=").count(), 1);
        assert!(v.contains("-Slow_SSE4_2,-AVX2:"), "{v}");
        assert!(v.contains(":glibc.cpu.x86_rep_movsb_threshold=4096"), "{v}");
        assert!(!v.contains("x86_rep_movsb_threshold=0x2000"), "{v}");
        assert!(v.ends_with(":glibc.malloc.arena_max=2:glibc.cpu.x86_rep_movsb_threshold=4096"));
        // An empty or odd value of the user's is passed on as it is.
        assert_eq!(text(Some("")).0, text(None).0);
        assert!(text(Some("junk")).0.ends_with(":junk"));
    }

    #[test]
    fn only_instruction_counters_are_pinned_and_host_dispatch_pins_nothing() {
        let mut opts = TraceOptions {
            program: "/bin/true".into(),
            args: vec![],
            counter: crate::CounterMode::Step,
            bind_cpu: false,
            host_dispatch: false,
            env: vec![(TUNABLES.into(), "glibc.malloc.arena_max=2".into())],
        };
        let (pinned, note) = pin(&opts, CostUnit::Instructions);
        assert_eq!(pinned.env.len(), 1);
        let value = pinned.env[0].1.to_str().unwrap();
        assert!(value.starts_with("glibc.cpu.hwcaps=-AVX512F"), "{value}");
        assert!(value.ends_with(":glibc.malloc.arena_max=2"), "{value}");
        assert!(note.unwrap().text.contains("--host-dispatch keeps"));
        let (same, note) = pin(&opts, CostUnit::Nanoseconds);
        assert_eq!((same.env, note), (opts.env.clone(), None));
        opts.host_dispatch = true;
        let (same, note) = pin(&opts, CostUnit::Instructions);
        assert_eq!(same.env, opts.env);
        assert!(note.unwrap().text.contains("not pinned"));
    }

    #[test]
    fn cpuid_finds_what_every_x86_64_cpu_has() {
        let cpuid = &crate::sys::cpuid::cpuid;
        // SSE2 (leaf 1, edx bit 26) is part of x86-64.
        let sse2 = Feature {
            name: "SSE2",
            leaf: 1,
            subleaf: 0,
            reg: 3,
            bit: 26,
        };
        assert!(has(&sse2, cpuid));
        // A leaf above the highest one is never asked.
        let beyond = Feature {
            leaf: cpuid(0, 0)[0] + 1,
            ..sse2
        };
        assert!(!has(&beyond, cpuid));
    }

    /// What CPUID answers on a Cascade Lake server (AVX-512, TSX off: no RTM, XSAVEC) and on an AMD EPYC
    /// (Zen 3: ERMS, XSAVEC, no AVX-512), leaves 0, 1, 7 and 0xd.1 as they report them.
    fn cascade_lake(leaf: u32, subleaf: u32) -> [u32; 4] {
        match (leaf, subleaf) {
            (0, _) => [0x16, 0x756e_6547, 0x6c65_746e, 0x4965_6e69],
            (1, _) => [0x50657, 0x0, 0x7ffe_fbff, 0xbfeb_fbff],
            (7, 0) => [0, 0xd19f_47ab, 0x0000_0808, 0xbc00_0400],
            (0xd, 1) => [0xf, 0, 0, 0],
            _ => [0; 4],
        }
    }

    fn epyc_milan(leaf: u32, subleaf: u32) -> [u32; 4] {
        match (leaf, subleaf) {
            (0, _) => [0x10, 0x6874_7541, 0x444d_4163, 0x6974_6e65],
            (1, _) => [0xa00f11, 0, 0x7ef8_320b, 0x178b_fbff],
            (7, 0) => [0, 0x219c_97a9, 0x0040_069c, 0x10],
            (0xd, 1) => [0xf, 0, 0, 0],
            _ => [0; 4],
        }
    }

    #[test]
    fn the_note_names_what_this_cpu_has_that_is_masked() {
        let intel = note(&[], &cascade_lake);
        assert!(
            intel
                .contains(": AVX512F, AVX512DQ, AVX512CD, AVX512BW, AVX512VL, XSAVEC, ERMS masked"),
            "{intel}"
        );
        assert!(!intel.contains("lacks"), "{intel}");
        let amd = note(&[], &epyc_milan);
        assert!(amd.contains(": XSAVEC, ERMS masked"), "{amd}");
        // A CPU without AVX2, BMI1/2 (leaf 7 empty): said, as masking cannot undo it.
        let old = |leaf, sub| match leaf {
            7 => [0; 4],
            _ => epyc_milan(leaf, sub),
        };
        let note = note(&["glibc.cpu.hwcaps".into()], &old);
        assert!(note.contains("this CPU lacks AVX2, BMI1, BMI2"), "{note}");
        assert!(note.contains("your GLIBC_TUNABLES kept over the pinning: glibc.cpu.hwcaps"));
    }
}
