//! What the preload libraries report, in one place: their counters and warnings, and the counts
//! file's first line (docs/openmp.md, "What the report says").
//!
//! This file is the only definition. The crate's build script includes it and renders it as the
//! C header `cilkview_runtime_wire.h` that the libraries are compiled with (`enum counter` with
//! one `C_NAME` per counter, `counter_names[]`, `enum warning` with one `W_NAME` per warning,
//! `warning_names[]`, `COUNTS_HEADER`; the oneTBB library's `cilkview_tbb_wire.h` the same with
//! [`TBB_COUNTERS`]); the Rust side reads the same names here.

/// A counter of a preload library: its name in the counts file and the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    pub name: &'static str,
    /// What it counts (the C header's comment).
    pub doc: &'static str,
}

/// Something a preload library could not do as asked: its id in the counts file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warning {
    pub name: &'static str,
    /// What the report says.
    pub text: &'static str,
}

macro_rules! counters {
    ($list:ident: $($(#[doc = $doc:literal])+ $konst:ident = $name:literal;)*) => {
        $($(#[doc = $doc])+ pub const $konst: Counter = Counter { name: $name, doc: concat!($($doc),+) };)*
        /// Every counter above, in the library's order.
        pub const $list: &[Counter] = &[$($konst),*];
    };
}

macro_rules! warnings {
    ($($(#[doc = $doc:literal])+ $konst:ident = ($name:literal, $text:literal);)*) => {
        $($(#[doc = $doc])+ pub const $konst: Warning = Warning { name: $name, text: $text };)*
        /// Every warning above.
        pub const WARNINGS: &[Warning] = &[$($konst),*];
    };
}

/// The counts file's first line: its format and version.
pub const COUNTS_HEADER: &str = "cilkview-openmp 1";

counters! { OPENMP_COUNTERS:
    /// Parallel regions with more than one thread in the real program.
    PARALLEL_REGIONS = "parallel_regions";
    /// Parallel regions that one thread runs (if(0), num_threads(1), nested too deep).
    SERIAL_PARALLEL_REGIONS = "serial_parallel_regions";
    /// Deferred tasks: spawns.
    TASKS = "tasks";
    /// Undeferred (included) tasks: calls.
    UNDEFERRED_TASKS = "undeferred_tasks";
    /// Tasks with a detach clause, left to the runtime.
    DETACHED_TASKS = "detached_tasks";
    /// Tasks with depend clauses.
    DEPEND_TASKS = "depend_tasks";
    /// Spawn-after and wait-for marks placed for dependences.
    DEPEND_EDGES = "depend_edges";
    /// taskloop constructs that created tasks.
    TASKLOOPS = "taskloops";
    /// Tasks of taskloops.
    TASKLOOP_TASKS = "taskloop_tasks";
    /// Worksharing loops seen chunk by chunk.
    LOOPS = "loops";
    /// Chunks of those loops (and sections).
    CHUNKS = "chunks";
    /// sections constructs.
    SECTIONS = "sections";
    /// Worksharing constructs outside any parallel region with more than one thread.
    SERIAL_WORKSHARING = "serial_worksharing";
    /// taskwait constructs.
    TASKWAITS = "taskwaits";
    /// taskwait constructs with depend clauses.
    TASKWAIT_DEPENDS = "taskwait_depends";
    /// taskgroup constructs.
    TASKGROUPS = "taskgroups";
    /// Barriers of parallel regions (explicit, or ending a worksharing construct).
    BARRIERS = "barriers";
    /// critical sections entered.
    CRITICAL = "critical";
    /// atomic constructs run under the runtime's lock.
    ATOMIC = "atomic";
    /// ordered sections entered.
    ORDERED = "ordered";
    /// Parallel regions run as --omp-team's virtual threads.
    VIRTUAL_TEAM_REGIONS = "virtual_team_regions";
}

counters! { TBB_COUNTERS:
    /// Tasks spawned (`tbb::detail::r1::spawn`): each run where it is spawned, a spawn.
    SPAWNS = "spawns";
    /// Root tasks (`execute_and_wait`: parallel_for, parallel_reduce, parallel_invoke,
    /// task_group::run_and_wait): each run as a call, then a sync.
    ROOTS = "roots";
    /// Waits (`r1::wait`: task_group::wait): syncs.
    WAITS = "waits";
    /// Tasks an execute() returned to run next (bypass): run after it, in its strand.
    BYPASSES = "bypasses";
    /// Tasks of a cancelled group: their cancel() run instead of their body.
    CANCELLED = "cancelled";
    /// Waits that found tasks not run here (enqueued, or from a flow graph or pipeline): left to
    /// the real scheduler, whose threads ran them.
    WAITS_LEFT_TO_TBB = "waits_left_to_tbb";
    /// Tasks whose body threw: the exception left from their spawn.
    EXCEPTIONS = "exceptions";
    /// Continuations (a task returned by execute() that an earlier execute() made) that waited
    /// for the tasks spawned since they were made.
    CONTINUATIONS = "continuations";
    /// Waits in a frame that also spawned other groups' tasks since its sync: each waited for
    /// its group's tasks only (wait-for marks), not the others.
    GROUP_WAITS = "group_waits";
    /// parallel_pipeline runs: libtbb's own stage tasks, each token's stages one chain here, so
    /// the pipeline's parallelism is not seen.
    PIPELINES = "pipelines";
}

/// The oneTBB entry points (`tbb::detail::r1::…`, oneTBB 2021's interface 12) the library wraps
/// or calls, by mangled name: `(its SYM_ macro in the C header, the symbol)`. A libtbb without
/// one of them has an ABI the library does not know.
pub const TBB_ENTRY_POINTS: &[(&str, &str)] = &[
    ("SPAWN", "_ZN3tbb6detail2r15spawnERNS0_2d14taskERNS2_18task_group_contextE"),
    ("SPAWN_SLOT", "_ZN3tbb6detail2r15spawnERNS0_2d14taskERNS2_18task_group_contextEt"),
    (
        "EXECUTE_AND_WAIT",
        "_ZN3tbb6detail2r116execute_and_waitERNS0_2d14taskERNS2_18task_group_contextERNS2_12wait_contextES6_",
    ),
    ("WAIT", "_ZN3tbb6detail2r14waitERNS0_2d112wait_contextERNS2_18task_group_contextE"),
    ("ALLOCATE", "_ZN3tbb6detail2r18allocateERPNS0_2d117small_object_poolEm"),
    (
        "ALLOCATE_ED",
        "_ZN3tbb6detail2r18allocateERPNS0_2d117small_object_poolEmRKNS2_14execution_dataE",
    ),
    ("DEALLOCATE", "_ZN3tbb6detail2r110deallocateERNS0_2d117small_object_poolEPvm"),
    (
        "DEALLOCATE_ED",
        "_ZN3tbb6detail2r110deallocateERNS0_2d117small_object_poolEPvmRKNS2_14execution_dataE",
    ),
    ("EXECUTION_SLOT", "_ZN3tbb6detail2r114execution_slotEPKNS0_2d114execution_dataE"),
    ("CURRENT_CONTEXT", "_ZN3tbb6detail2r115current_contextEv"),
    (
        "IS_CANCELLED",
        "_ZN3tbb6detail2r128is_group_execution_cancelledERNS0_2d118task_group_contextE",
    ),
    (
        "PARALLEL_PIPELINE",
        "_ZN3tbb6detail2r117parallel_pipelineERNS0_2d118task_group_contextEmRKNS2_11filter_nodeE",
    ),
];

warnings! {
    /// --omp-team K: no memory for the virtual threads' stacks.
    TEAM_NO_MEMORY = ("team_no_memory",
        "no memory for the --omp-team stacks: a parallel region ran as one thread");
}

/// The C header a preload library includes: `counters` (its runtime's: [`OPENMP_COUNTERS`],
/// [`TBB_COUNTERS`]) and the warnings as C enums and names, and `symbols` (`SYM_NAME`: the
/// entry points it wraps by mangled name, [`TBB_ENTRY_POINTS`]).
pub fn c_header(counters: &[Counter], symbols: &[(&str, &str)]) -> String {
    let mut h = String::from(
        "/* Generated by crates/cilkview-openmp/build.rs from src/wire.rs: do not edit. */\n\
         #ifndef CILKVIEW_RUNTIME_WIRE_H\n#define CILKVIEW_RUNTIME_WIRE_H\n\n",
    );
    h += &format!("#define COUNTS_HEADER \"{COUNTS_HEADER}\"\n\nenum counter {{\n");
    for c in counters {
        h += &format!("    C_{}, /* {} */\n", c.name.to_uppercase(), c.doc.trim());
    }
    h += "    C_COUNT\n};\nstatic const char *const counter_names[C_COUNT] = {\n";
    for c in counters {
        h += &format!("    \"{}\",\n", c.name);
    }
    h += "};\n\nenum warning {\n";
    for w in WARNINGS {
        h += &format!("    W_{},\n", w.name.to_uppercase());
    }
    h += "    W_COUNT\n};\nstatic const char *const warning_names[W_COUNT] = {\n";
    for w in WARNINGS {
        h += &format!("    \"{}\",\n", w.name);
    }
    h += "};\n\n";
    for (name, symbol) in symbols {
        h += &format!("#define SYM_{name} \"{symbol}\"\n");
    }
    h += "\n#endif\n";
    h
}
