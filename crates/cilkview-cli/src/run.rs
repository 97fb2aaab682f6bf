//! `cilkview-rs run`: launch the program under the tracer, report its scalability.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cilkview_marks::read_marks;
use cilkview_report::RunInfo;
use cilkview_tracer::TraceOptions;

use crate::cli::RunArgs;
use crate::outputs;
use crate::session::{counter_mode, counter_report, ending, Session};

/// Finds the program as the shell would and checks it can be run, before anything runs.
pub fn resolve_program(program: &OsString) -> Result<PathBuf> {
    let path = PathBuf::from(program);
    let path = if path.components().count() == 1 && !path.exists() {
        which::which(&path).with_context(|| {
            format!(
                "program `{}` not found in PATH (give a path such as ./{0})",
                path.display()
            )
        })?
    } else {
        path
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{}: no such file (check the path)", path.display())
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {}", path.display())),
    };
    if meta.is_dir() {
        bail!("{} is a directory, not a program", path.display());
    }
    if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 == 0 {
        bail!(
            "{} is not executable (chmod +x it, or build it with cc)",
            path.display()
        );
    }
    Ok(path)
}

/// Whether the file starts with `#!` (a script that will exec an interpreter: the marks are those
/// of the images exec'd after it).
fn is_script(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"#!"
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let program = resolve_program(&args.program)?;
    if !is_script(&program) {
        // Not ELF, wrong architecture, truncated, corrupt marks: say so before running anything.
        read_marks(&program).with_context(|| format!("cannot analyze {}", program.display()))?;
    }
    let reserved = outputs::check_writable(&outputs::exporters(&args.output))?;
    if args.bench {
        crate::bench::precheck(&args.bench_tuning, &program)?;
    }

    let session = Session::new(&args.model, "tracing");
    let options = TraceOptions {
        program: program.clone(),
        args: args.args.clone(),
        counter: counter_mode(args.counter),
        bind_cpu: !args.no_cpu_binding,
    };
    // Ctrl-C at the terminal goes to the program (same process group); the tool lives on to
    // report what it measured.
    let interrupts = cilkview_tracer::ignore_terminal_interrupts();
    let outcome = cilkview_tracer::run(
        &options,
        |image| session.borrow_mut().probes_for(image),
        |event| session.borrow_mut().on_event(event),
    );
    drop(interrupts);
    let outcome = outcome.with_context(|| format!("cannot analyze {}", program.display()))?;

    let info = RunInfo {
        program: args.program.to_string_lossy().into_owned(),
        args: args
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        ending: ending(outcome.status),
        counter: counter_report(&outcome.counter),
        burden: args.model.burden,
        span_coefficient: args.model.span_coefficient,
        max_cores: args.model.max_cores,
    };
    let subject = program.display().to_string();
    let (report, _) = session.into_inner().finish(info, &subject, false);
    let bench = match args.bench {
        true => {
            match crate::bench::after_analysis(&args.bench_tuning, &program, &args.args, &report)? {
                Ok(bench) => Some(bench),
                Err(code) => return Ok(code),
            }
        }
        false => None,
    };
    let measured = bench
        .as_ref()
        .map(crate::bench::measured_points)
        .unwrap_or_default();
    let gates_passed = outputs::emit_with(&report, &args.output, &measured)?;
    if let Some(bench) = &bench {
        eprint!("\n{}", crate::bench::table(bench));
    }
    reserved.keep();
    let status = outcome.status.code();
    Ok(if status != 0 {
        ExitCode::from(status.clamp(0, 255) as u8)
    } else if !gates_passed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
