//! `cilkview-rs run`: launch the program under the tracer, report its scalability.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use cilkview_analysis::{check_program, ignore_terminal_interrupts, RunRequest};
use cilkview_report::ExportManager;

use crate::cli::RunArgs;
use crate::progress::Spinner;

/// Finds the program as the shell would and checks it can be run, before anything runs.
fn resolve_program(program: &OsString) -> Result<PathBuf> {
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

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let program = resolve_program(&args.program)?;
    // Not ELF, wrong architecture, truncated, corrupt marks: say so before running anything.
    check_program(&program).with_context(|| format!("cannot analyze {}", program.display()))?;
    let mut outputs = ExportManager::new(&(&args.output).into())?;

    let mut progress = Spinner::new("tracing");
    let request = RunRequest {
        program: program.clone(),
        name: args.program.to_string_lossy().into_owned(),
        args: args.args.clone(),
        counter: args.counter,
        bind_cpu: !args.no_cpu_binding,
        model: (&args.model).into(),
        profile: args.output.profile.enabled(),
    };
    // Ctrl-C at the terminal goes to the program (same process group); the tool lives on to
    // report what it measured.
    let interrupts = ignore_terminal_interrupts();
    let analysis = cilkview_analysis::run(&request, &mut progress);
    drop(interrupts);
    let analysis = analysis.with_context(|| format!("cannot analyze {}", program.display()))?;

    let gates_passed = outputs.write(&analysis.report, &mut std::io::stderr().lock())?;
    let status = analysis.ending.status().map_or(0, |s| s.code());
    Ok(if status != 0 {
        ExitCode::from(status.clamp(0, 255) as u8)
    } else {
        crate::gate_exit_code(gates_passed)
    })
}
