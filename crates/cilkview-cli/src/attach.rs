//! `cilkview-rs attach PID`: measure a running process for a while, then let it go unharmed.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use cilkview_report::{AttachReport, Ending, RunInfo};
use cilkview_tracer::{AttachOptions, StopFlag, STOP_SIGNALS};

use crate::cli::AttachArgs;
use crate::outputs;
use crate::session::{counter_mode, counter_report, ending, Session};

/// The process's command line from /proc (argv[0] and the rest), or its pid as a fallback.
fn command_line(pid: i32) -> (String, Vec<String>) {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let mut words = raw
        .split(|&b| b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned());
    let program = words.next().unwrap_or_else(|| format!("process {pid}"));
    (program, words.collect())
}

pub fn attach(args: AttachArgs) -> Result<ExitCode> {
    // From here on a fork does the work: killing the process the user sees (even with SIGKILL)
    // makes the fork detach cleanly instead of leaving the process traced.
    cilkview_tracer::survive_tool_death().context("cannot start the attach session")?;
    let reserved = outputs::check_writable(&outputs::exporters(&args.output))?;
    let stop = StopFlag::new();
    // Ctrl-C, SIGTERM, SIGHUP and the other catchable fatal signals end the measurement: the
    // probes are restored and the process detached, instead of the tool dying with the process
    // traced.
    let _signals = stop
        .on_signals(&STOP_SIGNALS)
        .context("cannot install the signal handlers that end an attach cleanly")?;
    let (program, program_args) = command_line(args.pid);
    if std::io::stderr().is_terminal() {
        eprintln!(
            "cilkview-rs: measuring process {} ({program}); Ctrl-C stops measuring and lets it run on",
            args.pid
        );
    }
    let session = Session::new(&args.model, &format!("attached to {}", args.pid));
    let options = AttachOptions {
        pid: args.pid,
        counter: counter_mode(args.counter),
        duration: args.duration.map(Duration::from_secs_f64),
        stop,
    };
    let started = SystemTime::now();
    let outcome = cilkview_tracer::attach(
        &options,
        |image| session.borrow_mut().probes_for(image),
        |event| session.borrow_mut().on_event(event),
    )
    .with_context(|| format!("cannot measure process {}", args.pid))?;

    let (report_ending, ended) = match outcome.ending {
        cilkview_tracer::Ending::Stopped => (Ending::Running, "stopped"),
        cilkview_tracer::Ending::TimeUp => (Ending::Running, "duration"),
        cilkview_tracer::Ending::Exited(status) => (ending(status), "exited"),
    };
    let info = RunInfo {
        program: program.clone(),
        args: program_args,
        ending: report_ending,
        counter: counter_report(&outcome.counter),
        burden: args.model.burden,
        span_coefficient: args.model.span_coefficient,
        max_cores: args.model.max_cores,
    };
    let (mut report, _) =
        session
            .into_inner()
            .finish(info, &format!("process {} ({program})", args.pid), true);
    report.attach = Some(AttachReport {
        pid: args.pid,
        started_at: humantime::format_rfc3339_seconds(started).to_string(),
        seconds: outcome.elapsed.as_secs_f64(),
        ended: ended.to_string(),
    });
    let passed = outputs::emit(&report, &args.output)?;
    reserved.keep();
    Ok(if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
