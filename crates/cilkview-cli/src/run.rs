//! `cilkview-rs run`: launch the program under the tracer, report its scalability.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cilkview_analysis::{
    check_program, forward_signals, ignore_terminal_interrupts, Analysis, Chosen, RunRequest,
    FORWARDED_SIGNALS,
};
use cilkview_openmp::LockPreload;
use cilkview_report::ExportManager;

use crate::cli::RunArgs;
use crate::counter_checks::{check_binding, check_costs, check_host_dispatch, check_repeat, Use};
use crate::openmp::OpenMpRun;

pub fn run(args: RunArgs) -> Result<ExitCode> {
    // `_locks` keeps the --locks library's file until the program has run.
    let (request, openmp, _locks) = request(&args)?;
    let program = request.program.clone();
    // The counter that will run (`auto` resolved), and the options checked against it.
    let chosen = cilkview_analysis::choose_for_run(&request)
        .with_context(|| format!("cannot analyze {}", program.display()))?;
    let costs = [args.model.cost_option(), args.openmp.cost_option()];
    check_costs(&costs, args.counter, &chosen, Use::Run)?;
    check_repeat(args.repeat, &chosen)?;
    check_binding(args.no_cpu_binding, args.counter, &chosen)?;
    check_host_dispatch(args.host_dispatch, &chosen)?;
    let options = (&args.output).into();
    crate::program::refuse_overwriting(&program, &options)?;
    let mut outputs = ExportManager::new(&options)?;
    let mut bench_outputs = None;
    if args.bench {
        crate::bench::precheck(&args.bench_tuning, &program)?;
        bench_outputs = Some(ExportManager::bench_after_analysis()?);
    }

    let mut analysis = measure(&args, &request, chosen)?;
    match openmp {
        Some(openmp) => openmp.finish(&mut analysis.report, &program),
        None => crate::openmp::suggest_runtime(&mut analysis.report, &program),
    }
    args.output.what_if.apply(&mut analysis.report)?;

    // A failed or interrupted benchmark (said on stderr) keeps the analysis: its report is
    // written, and the exit code is the benchmark's.
    let mut bench_failed = None;
    let bench = if args.bench {
        let report = &analysis.report;
        match crate::bench::after_analysis(&args.bench_tuning, &program, args.args(), report)? {
            Ok(bench) => Some(bench),
            Err(code) => {
                bench_failed = Some(code);
                None
            }
        }
    } else {
        None
    };
    if let Some(bench) = &bench {
        analysis.report.measured = cilkview_report::measured_points(bench);
    }
    let gates_passed = outputs.write(&analysis.report, &mut std::io::stderr().lock())?;
    if let (Some(bench), Some(outputs)) = (&bench, &mut bench_outputs) {
        outputs.write(bench, &mut std::io::stderr().lock())?;
    }
    if let Some(code) = bench_failed {
        return Ok(code);
    }
    let status = analysis.ending.status().map_or(0, |s| s.code());
    Ok(if status != 0 {
        ExitCode::from(status.clamp(0, 255) as u8)
    } else {
        crate::gate_exit_code(gates_passed)
    })
}

/// What to run, the program and the options that need no counter checked first (the program
/// itself, `--openmp`, `--locks`, region labels, `--what-if`), with the environment they give the
/// program; the `--openmp` run to finish the report with; and the `--locks` library, whose file
/// must outlive the run.
fn request(args: &RunArgs) -> Result<(RunRequest, Option<OpenMpRun>, Option<LockPreload>)> {
    args.output
        .what_if
        .check_request(args.output.profile.profile_region.as_deref())?;
    let program = crate::program::resolve(args.program())?;
    // Not ELF, wrong architecture, truncated, corrupt marks: say so before running anything.
    check_program(&program).with_context(|| format!("cannot analyze {}", program.display()))?;
    let openmp = crate::openmp::prepare(&args.openmp, &program).with_context(|| {
        let option = args.openmp.runtime_option().unwrap_or("--openmp");
        format!("cannot analyze {} with {option}", program.display())
    })?;
    let locks = crate::locks::prepare(&args.locks, &program)?;
    crate::program::check_region_labels(
        &program,
        openmp.as_ref().map(|o| o.library()),
        &program.display().to_string(),
        &args.output,
    )?;
    args.output.what_if.check_functions(
        &program,
        openmp.as_ref().map(|o| o.library()),
        &program.display().to_string(),
    )?;
    // The program's own environment (never the tool's nor the emulator's).
    let mut env = openmp.as_ref().map(|o| o.environment()).unwrap_or_default();
    crate::locks::add_to(locks.as_ref(), &mut env);
    if cilkview_analysis::has_rayon_marks(&program) {
        // Marked with the Rust `cilkview` crate: its joins, scopes and loops run serially, in the
        // serial elision's order, on one thread (crates/cilkview).
        env.push(("RAYON_NUM_THREADS".into(), "1".into()));
    }
    let request = RunRequest {
        program,
        name: args.program().to_string_lossy().into_owned(),
        args: args.args().to_vec(),
        counter: args.counter,
        bind_cpu: !args.no_cpu_binding,
        host_dispatch: args.host_dispatch,
        model: (&args.model).into(),
        profile: args.output.profile.enabled() || args.output.what_if.needs_profile(),
        profile_region: args.output.profile.profile_region.clone(),
        env,
        repeat: args.repeat,
    };
    Ok((request, openmp, locks))
}

/// Runs the program under counter `chosen`, the terminal's interrupts and the signals sent to
/// the tool going to the program meanwhile.
fn measure(args: &RunArgs, request: &RunRequest, chosen: Chosen) -> Result<Analysis> {
    // The program writes to our terminal (its stderr is ours): no spinner while it runs, one
    // line saying what runs instead.
    let mut progress = ();
    if std::io::stderr().is_terminal() {
        eprintln!(
            "cilkview-rs: measuring {}; the report follows when it ends",
            args.program().to_string_lossy()
        );
    }
    // Ctrl-C at the terminal goes to the program (same process group); the tool lives on to
    // report what it measured.
    let interrupts = ignore_terminal_interrupts();
    // `kill PID` of the tool (SIGTERM, SIGHUP, SIGUSR1, …) is meant for the program: it gets the signal and
    // ends as it would without the tool, which lives on to write the report of what was measured.
    let forwarding = forward_signals(&FORWARDED_SIGNALS)
        .context("cannot install the handlers that forward signals to the program")?;
    let analysis = cilkview_analysis::run_chosen(request, chosen, &mut progress);
    drop(forwarding);
    drop(interrupts);
    analysis.with_context(|| format!("cannot analyze {}", request.program.display()))
}
