//! The seam between the analyzer and a parallel runtime measured through a preload library
//! (docs/architecture.md, "A new runtime"): which programs use it and whether its ABI is known,
//! the library that wraps its entry points, the program's environment, and the counts the
//! library reports.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use crate::check::{Linked, RuntimeError, RuntimeLibrary};
use crate::wire::Counter;

/// What names a runtime and tells a program that uses it, once per runtime.
#[derive(Debug)]
pub struct Description {
    /// Its name in the report (`runtime.name` in the JSON), e.g. `libgomp`.
    pub name: &'static str,
    /// The programming model it runs, e.g. `OpenMP` (the report's section title).
    pub model: &'static str,
    /// The option of `run` that measures it, e.g. `--openmp`.
    pub option: &'static str,
    /// How a program gets it, e.g. `gcc -fopenmp`.
    pub built_with: &'static str,
    /// The beginnings of its libraries' names among a program's needed libraries, e.g.
    /// `libgomp.so`.
    pub libraries: &'static [&'static str],
    /// The library files, for the error where none is needed, e.g. `libgomp.so.1`.
    pub files: &'static str,
}

/// A runtime whose entry points a preload library wraps, so that an unmodified program runs as
/// its serial elision with `cilkview.h` marks where its dag has spawns, syncs, loops and regions.
pub trait Runtime: Sync {
    /// Its names and how programs use it.
    fn description(&self) -> &'static Description;
    /// The runtime library the program will load, checked: one whose ABI the library knows;
    /// an error says what to do otherwise.
    fn check(&self, program: &Linked) -> Result<RuntimeLibrary, RuntimeError>;
    /// The preload library (a shared object for x86-64 Linux), embedded in the tool.
    fn preload_library(&self) -> &'static [u8];
    /// The counters the library reports, in its order.
    fn counters(&self) -> &'static [Counter];
    /// Its cost per task in a parallel run, charged per spawn to the work of the predicted
    /// lower bound (the default of `--task-cost`).
    fn task_cost(&self) -> TaskCost {
        TaskCost {
            instructions: crate::DEFAULT_TASK_COST,
            nanoseconds: crate::DEFAULT_TASK_COST_NS,
        }
    }
    /// Whether its library runs a region as `--omp-team K`'s virtual threads.
    fn virtual_team(&self) -> bool {
        true
    }

    /// [`Description::name`].
    fn name(&self) -> &'static str {
        self.description().name
    }
    /// [`Description::model`].
    fn model(&self) -> &'static str {
        self.description().model
    }
    /// [`Description::option`].
    fn option(&self) -> &'static str {
        self.description().option
    }
    /// [`Description::built_with`].
    fn built_with(&self) -> &'static str {
        self.description().built_with
    }
    /// Whether the program links this runtime (its needed libraries name it).
    fn uses(&self, program: &Linked) -> bool {
        program.needs(self.description().libraries).is_some()
    }
    /// Where the runtime library `program` needs is (as the loader finds it); an error where it
    /// needs none or it is not found.
    fn library_of(&self, program: &Linked) -> Result<std::path::PathBuf, RuntimeError> {
        let d = self.description();
        let Some(name) = program.needs(d.libraries) else {
            return Err(RuntimeError::NotUsed {
                path: program.path.clone(),
                option: d.option,
                runtime: d.name,
                files: d.files,
                built_with: d.built_with,
            });
        };
        program.find(name)
    }

    /// The variables to set for the program only: `LD_PRELOAD` with `library` appended to the
    /// user's (`user_preload`, the tool's own `LD_PRELOAD`), where the library writes its counts,
    /// and `team` (`--omp-team K`; below 2: off). The library removes itself and its variables
    /// from the program's environment when it starts.
    fn environment(
        &self,
        library: &Path,
        counts: &Path,
        user_preload: Option<&OsStr>,
        team: u32,
    ) -> Vec<(OsString, OsString)> {
        let mut preload = OsString::new();
        if let Some(user) = user_preload.filter(|u| !u.is_empty()) {
            preload.push(user);
            preload.push(":");
        }
        preload.push(library);
        let mut env = vec![
            ("LD_PRELOAD".into(), preload),
            ("CILKVIEW_OPENMP_LIBRARY".into(), library.into()),
            ("CILKVIEW_OPENMP_COUNTS".into(), counts.into()),
        ];
        if team > 1 {
            env.push(("CILKVIEW_OPENMP_TEAM".into(), team.to_string().into()));
        }
        env
    }
}

/// A runtime's cost per task, as instructions and as a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskCost {
    pub instructions: u64,
    pub nanoseconds: u64,
}

/// The OpenMP runtimes `--openmp` measures, in the order they are looked for.
pub static OPENMP_RUNTIMES: &[&dyn Runtime] = &[&crate::Libgomp, &crate::Libomp];
/// The runtime `--tbb` measures.
pub static TBB_RUNTIMES: &[&dyn Runtime] = &[&crate::Libtbb];

/// The runtime of `runtimes` that `program` links, checked, and the library it will load
/// (`None` for a `#!` script, which is not checked: the first runtime is assumed).
pub fn choose(
    program: &Path,
    runtimes: &'static [&'static dyn Runtime],
) -> Result<(&'static dyn Runtime, Option<RuntimeLibrary>), RuntimeError> {
    let first = runtimes[0];
    let Some(linked) = Linked::read(program, first.option(), first.name())? else {
        return Ok((first, None));
    };
    let Some(runtime) = runtimes.iter().copied().find(|r| r.uses(&linked)) else {
        let names: Vec<_> = runtimes.iter().map(|r| r.name()).collect();
        let builds: Vec<_> = runtimes.iter().map(|r| r.built_with()).collect();
        return Err(RuntimeError::NoRuntime {
            path: program.to_owned(),
            option: first.option(),
            runtimes: names.join(", "),
            builds: builds.join(" or "),
        });
    };
    let library = runtime.check(&linked)?;
    Ok((runtime, Some(library)))
}
