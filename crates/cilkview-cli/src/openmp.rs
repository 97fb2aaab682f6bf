//! `run --openmp` and `run --tbb`: an unmodified OpenMP or oneTBB program, through the preload
//! library of its runtime (`cilkview-openmp`'s `Runtime`; docs/openmp.md, docs/runtimes.md).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};
use cilkview_analysis::{Cost, CostDefault};
use cilkview_openmp::wire::{
    DETACHED_TASKS, EXCEPTIONS, PARALLEL_REGIONS, PIPELINES, ROOTS, SPAWNS, WAITS_LEFT_TO_TBB,
};
use cilkview_openmp::{Preload, RuntimeLibrary, OPENMP_RUNTIMES, TBB_RUNTIMES};
use cilkview_report::{RunReport, RuntimeCount, RuntimeReport, ThreadIdSite};
use clap::Args;

#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "OpenMP and oneTBB")]
#[command(group(clap::ArgGroup::new("runtime").args(["openmp", "tbb"]).multiple(false)))]
pub struct OpenMpOptions {
    /// Measure an unmodified OpenMP program (gcc's libgomp or clang's libomp, from its needed
    /// libraries): it runs as its serial elision (one thread, each task where it is created)
    /// with marks on the runtime's entry points; its parallel regions are the region
    /// "parallel".
    #[arg(long)]
    pub openmp: bool,
    /// Measure an unmodified oneTBB program (linked with -ltbb, oneTBB 2021): it runs as its
    /// serial elision (one thread, each spawned task where it is spawned, a wait a sync):
    /// task_group, parallel_invoke, parallel_for, parallel_reduce and what else spawns tasks.
    #[arg(long)]
    pub tbb: bool,
    /// With --openmp or --tbb: the runtime's cost per task, charged per spawn to the work of the
    /// predicted lower bound on 2 cores or more: instructions, or a time such as `2.5us` with
    /// --counter native measuring time [default: libgomp's and libomp's 10000 instructions or
    /// 2.5us (their locked task queues, each calibrated at 2 threads); libtbb's 1000 or 300ns]
    #[arg(long, value_name = "INSTRUCTIONS|TIME", value_parser = crate::cli::parse_task_cost,
          requires = "runtime")]
    pub task_cost: Option<Cost>,
    /// With --openmp: run each active parallel region as K virtual threads on one OS thread,
    /// switched at barriers, so that schedule(static) loops and thread-id code are split in K
    /// (1: one thread, the serial elision); libgomp and libomp.
    #[arg(long, value_name = "K", default_value_t = 1, requires = "openmp", conflicts_with = "tbb",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub omp_team: u32,
}

/// The preload library of a run, while the program runs.
pub struct OpenMpRun {
    preload: Preload,
    library: Option<RuntimeLibrary>,
    task_cost: Option<Cost>,
    team: u32,
}

impl OpenMpOptions {
    /// `--task-cost`, to be checked against the counter that will run, as `--burden`.
    pub fn cost_option(&self) -> crate::counter_checks::CostOption {
        crate::counter_checks::CostOption {
            flag: "--task-cost",
            cost: self.task_cost,
            examples: crate::counter_checks::TASK_COST_EXAMPLES,
        }
    }
}

impl OpenMpOptions {
    /// The option that names the runtime (`--openmp`, `--tbb`), if one does.
    pub fn runtime_option(&self) -> Option<&'static str> {
        (self.openmp || self.tbb).then_some(if self.tbb { "--tbb" } else { "--openmp" })
    }
}

/// Checks the program and writes the library, before anything runs; `None` without --openmp
/// or --tbb.
pub fn prepare(options: &OpenMpOptions, program: &Path) -> Result<Option<OpenMpRun>> {
    let Some(option) = options.runtime_option() else {
        return Ok(None);
    };
    if program.as_os_str().as_bytes().contains(&b'=') {
        bail!(
            "{option} cannot start a program whose path has a `=` ({}): rename it",
            program.display()
        );
    }
    let runtimes = if options.tbb {
        TBB_RUNTIMES
    } else {
        OPENMP_RUNTIMES
    };
    let (runtime, library) = cilkview_openmp::choose(program, runtimes)?;
    if options.omp_team > 1 && !runtime.virtual_team() {
        bail!(
            "--omp-team is not supported with {} yet (the program uses it): run without it, \
             where static loops are one strand each",
            runtime.name()
        );
    }
    let preload = Preload::new(runtime)
        .with_context(|| format!("cannot write the {} preload library", runtime.model()))?;
    Ok(Some(OpenMpRun {
        preload,
        library,
        task_cost: options.task_cost,
        team: options.omp_team,
    }))
}

impl OpenMpRun {
    /// The program's own variables: LD_PRELOAD (the user's, then the library) and the
    /// library's.
    /// The preload library's file (its marks report the program's regions: `parallel`, …).
    pub fn library(&self) -> &Path {
        self.preload.library()
    }

    pub fn environment(&self) -> Vec<(OsString, OsString)> {
        self.preload
            .environment(std::env::var_os("LD_PRELOAD").as_deref(), self.team)
    }

    /// Puts what the library saw in the report (and its task cost in the prediction), with the
    /// warnings it calls for.
    pub fn finish(self, report: &mut RunReport, program: &Path) {
        let counts = self.preload.counts();
        let runtime = self.preload.runtime();
        let (library, abi) = match &self.library {
            Some(l) => (l.path.display().to_string(), l.abi.clone()),
            None => (
                format!("{} (not checked: a script)", runtime.name()),
                "?".into(),
            ),
        };
        // In the run's unit: the given cost (checked against the counter before the run), else
        // the default.
        let cost = runtime.task_cost();
        let default_cost = CostDefault {
            instructions: cost.instructions,
            nanoseconds: cost.nanoseconds,
        };
        let task_cost = default_cost
            .or_given(self.task_cost, report.unit)
            .unwrap_or_else(|given| {
                let default = default_cost.in_unit(report.unit);
                report.warnings.push(format!(
                    "--task-cost {given} is not in {}, what this run counted: {default} used",
                    report.unit
                ));
                default.amount
            });
        let block = RuntimeReport {
            name: runtime.name().into(),
            model: runtime.model().into(),
            option: runtime.option().into(),
            library,
            abi,
            task_cost,
            team: self.team,
            counts: counts
                .iter()
                .flat_map(|c| &c.counters)
                .map(|(name, value)| RuntimeCount {
                    name: name.clone(),
                    value: *value,
                })
                .collect(),
            thread_id_code: counts
                .iter()
                .flat_map(|c| &c.thread_queries)
                .map(|q| ThreadIdSite {
                    site: cilkview_openmp::name_thread_query(q, program),
                    calls: q.calls,
                })
                .collect(),
        };
        report.warnings.extend(warnings(&block, report));
        let from_library = counts.iter().flat_map(|c| &c.warnings);
        report
            .warnings
            .extend(from_library.map(|w| format!("{}: {}", runtime.option(), w.text)));
        report.set_runtime(block);
    }
}

/// A run without --openmp or --tbb of a program without marks of its own that links a runtime
/// those options measure: a warning naming the option.
pub fn suggest_runtime(report: &mut RunReport, program: &Path) {
    if report.measures.spawns > 0 || cilkview_analysis::has_marks_section(program) {
        return;
    }
    let Ok(Some(linked)) = cilkview_openmp::Linked::read(program, "--openmp", "libgomp") else {
        return;
    };
    let runtimes = OPENMP_RUNTIMES.iter().chain(TBB_RUNTIMES);
    if let Some(runtime) = runtimes.into_iter().find(|r| r.uses(&linked)) {
        report.warnings.push(format!(
            "{} links {}: `cilkview-rs run {}` measures it unmodified (its serial elision, \
             with marks on the runtime's entry points)",
            program.display(),
            runtime.name(),
            runtime.option()
        ));
    }
}

/// What the user should know about a --tbb run: nothing spawned, or tasks run by libtbb itself.
fn tbb_warnings(tbb: &RuntimeReport) -> Vec<String> {
    let mut out = Vec::new();
    if tbb.count(SPAWNS.name) == 0 && tbb.count(ROOTS.name) == 0 {
        out.push(
            "--tbb: the program spawned no oneTBB task: nothing in it runs in parallel".into(),
        );
    }
    if tbb.count(WAITS_LEFT_TO_TBB.name) > 0 {
        out.push(format!(
            "--tbb: {} wait(s) found tasks that were not spawned through the wrapped entry \
             points (enqueued, a flow graph's or a pipeline's): libtbb's threads ran them, and \
             their work is not in the dag; see docs/runtimes.md",
            tbb.count(WAITS_LEFT_TO_TBB.name)
        ));
    }
    if tbb.count(PIPELINES.name) > 0 {
        out.push(format!(
            "--tbb: {} parallel_pipeline run(s): each token's stages run as one chain here, so \
             a pipeline's parallelism (tokens in flight, parallel stages) is not seen; see \
             docs/runtimes.md",
            tbb.count(PIPELINES.name)
        ));
    }
    if tbb.count(EXCEPTIONS.name) > 0 {
        out.push(format!(
            "--tbb: {} task(s) threw: each exception left from the task's spawn (oneTBB would \
             cancel the group and rethrow it at the wait)",
            tbb.count(EXCEPTIONS.name)
        ));
    }
    out
}

/// What the user should know about an --openmp or --tbb run.
fn warnings(openmp: &RuntimeReport, report: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    if openmp.counts.is_empty() {
        out.push(format!(
            "{}: the preload library wrote no counts (the program did not end through \
             exit, or did not load {})",
            openmp.option, openmp.name
        ));
        return out;
    }
    if openmp.option == "--tbb" {
        out.extend(tbb_warnings(openmp));
    } else if openmp.count(PARALLEL_REGIONS.name) == 0 {
        out.push(
            "--openmp: the program ran no parallel region with more than one thread: nothing \
             in it runs in parallel"
                .into(),
        );
    }
    if !openmp.thread_id_code.is_empty() {
        out.push(format!(
            "--openmp: {} place(s) split work by thread number (static loops, omp_get_thread_num): \
             one thread runs each as one strand, so their parallelism is not seen (--omp-team K \
             splits them in K; or use schedule(dynamic)); see the OpenMP section",
            openmp.thread_id_code.len()
        ));
    }
    if openmp.count(DETACHED_TASKS.name) > 0 {
        out.push(format!(
            "--openmp: {} detached task(s) were left to {name}: their work is counted where \
             {name} ran them, not as spawns",
            openmp.count(DETACHED_TASKS.name),
            name = openmp.name
        ));
    }
    if report.measures.spawns > 0 && openmp.task_cost > 0 {
        let per_spawn = report.measures.work / report.measures.spawns;
        if per_spawn < openmp.task_cost {
            out.push(format!(
                "{}: {per_spawn} {unit} of work per spawn, below {}'s cost per task \
                 (~{} {unit} at 2 threads): the program may run slower in parallel than \
                 serially; coarser tasks (a cutoff, a grainsize) would pay for it",
                openmp.option,
                openmp.name,
                openmp.task_cost,
                unit = report.unit
            ));
        }
    }
    out
}
