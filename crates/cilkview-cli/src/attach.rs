//! `cilkview-rs attach PID`: measure a running process for a while, then let it go unharmed.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use cilkview_analysis::{
    command_line, survive_tool_death, AttachRequest, StopFlag, ATTACH_STOP_SIGNALS,
};
use cilkview_report::ExportManager;

use crate::cli::AttachArgs;
use crate::counter_checks::{check_costs, Use};
use crate::progress::Spinner;

pub fn attach(args: AttachArgs) -> Result<ExitCode> {
    if args.locks {
        anyhow::bail!(
            "attach cannot measure locks: --locks preloads its wrappers of the lock calls when \
             the program starts; use `cilkview-rs run --locks PROGRAM`"
        );
    }
    // The counter that will run (`auto` resolved), and the options checked against it.
    let chosen = cilkview_analysis::choose_for_attach(args.counter)
        .with_context(|| format!("cannot measure process {}", args.pid))?;
    check_costs(
        &[args.model.cost_option()],
        args.counter,
        &chosen,
        Use::Attach,
    )?;
    // A mistyped region label is found before attaching, from the process's executable.
    let exe = format!("/proc/{}/exe", args.pid);
    let name = format!("process {} ({})", args.pid, command_line(args.pid).0);
    crate::program::check_region_labels(std::path::Path::new(&exe), None, &name, &args.output)?;
    args.output
        .what_if
        .check_request(args.output.profile.profile_region.as_deref())?;
    // From here on a fork does the work: killing the process the user sees (even with SIGKILL)
    // makes the fork detach cleanly instead of leaving the process traced.
    survive_tool_death().context("cannot start the attach session")?;
    let options = (&args.output).into();
    // The process's own executable is no output file either.
    crate::program::refuse_overwriting(
        std::path::Path::new(&format!("/proc/{}/exe", args.pid)),
        &options,
    )?;
    let mut outputs = ExportManager::new(&options)?;
    let stop = StopFlag::new();
    // Ctrl-C, SIGTERM, SIGHUP and the other catchable fatal signals end the measurement: the
    // probes are restored and the process detached, instead of the tool dying with the process
    // traced.
    let _signals = stop
        .on_signals(&ATTACH_STOP_SIGNALS)
        .context("cannot install the signal handlers that end an attach cleanly")?;
    if std::io::stderr().is_terminal() {
        let (program, _) = command_line(args.pid);
        let _ = writeln!(
            std::io::stderr(),
            "cilkview-rs: measuring process {} ({program}); Ctrl-C stops measuring and lets it run on",
            args.pid
        );
    }
    // No spinner if the process writes to this terminal (`./server & cilkview-rs attach $!`).
    let fds = [1, 2].map(|fd| format!("/proc/{}/fd/{fd}", args.pid));
    let mut progress = Spinner::drawn_if(
        !crate::progress::writes_to_our_terminal(&fds),
        &format!("attached to {}", args.pid),
    );
    let request = AttachRequest {
        pid: args.pid,
        counter: args.counter,
        duration: args.duration.map(Duration::from_secs_f64),
        stop,
        model: (&args.model).into(),
        profile: args.output.profile.enabled() || args.output.what_if.needs_profile(),
        profile_region: args.output.profile.profile_region.clone(),
    };
    let mut analysis = cilkview_analysis::attach_chosen(&request, chosen, &mut progress)
        .with_context(|| format!("cannot measure process {}", args.pid))?;
    args.output.what_if.apply(&mut analysis.report)?;
    let passed = outputs.write(&analysis.report, &mut std::io::stderr().lock())?;
    Ok(crate::gate_exit_code(passed))
}
