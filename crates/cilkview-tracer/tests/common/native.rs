//! The native counter's test support: run a compiled program under `--counter native` (or
//! another counter) with probes in its executable only.

use std::path::Path;

use cilkview_tracer::{
    run, Backend, CounterMode, Native, Outcome, Probe, ProbesError, TraceEvent, TraceOptions,
};

use super::assert_costs_add_up;

/// Whether the native counter can run here (else a visible skip).
pub fn available() -> bool {
    match Native.check() {
        Ok(_) => true,
        Err(why) => {
            cilkview_fixtures::skip(why);
            false
        }
    }
}

/// The probes source of a run: `probes` in the executable `exe_name` (canonical), none elsewhere.
pub fn in_exe<'a>(
    exe_name: &'a Path,
    probes: &'a [Probe],
) -> impl FnMut(&Path) -> Result<Vec<Probe>, ProbesError> + 'a {
    move |image| {
        Ok(
            if std::fs::canonicalize(image).ok().as_deref() == Some(exe_name) {
                probes.to_vec()
            } else {
                vec![]
            },
        )
    }
}

pub fn opts_with(exe: &Path, args: &[&str], counter: CounterMode) -> TraceOptions {
    TraceOptions {
        program: exe.to_path_buf(),
        args: args.iter().map(Into::into).collect(),
        counter,
        bind_cpu: false,
        host_dispatch: false,
        env: Vec::new(),
    }
}

/// Runs `exe` with `--counter native`, `probes` in the executable only; returns the outcome,
/// the events and the program's stdout (captured through a file).
pub fn trace(exe: &Path, args: &[&str], probes: Vec<Probe>) -> (Outcome, Vec<TraceEvent>) {
    trace_with(CounterMode::Native, exe, args, probes)
}

pub fn trace_with(
    counter: CounterMode,
    exe: &Path,
    args: &[&str],
    probes: Vec<Probe>,
) -> (Outcome, Vec<TraceEvent>) {
    let mut events = vec![];
    let exe_name = std::fs::canonicalize(exe).unwrap();
    let out = run(
        &opts_with(exe, args, counter),
        in_exe(&exe_name, &probes),
        |e| events.push(e),
    )
    .unwrap();
    assert_costs_add_up(out.total_cost, &events);
    (out, events)
}

/// `EXE ARGS` measured natively through `sh -c 'exec EXE ARGS > OUT'` (its standard output in
/// the file `out`, read after the run).
pub fn native_with_stdout(exe: &str, args: &[&str], out: &Path) -> TraceOptions {
    TraceOptions {
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            format!("exec {exe} {} > {}", args.join(" "), out.display()).into(),
        ],
        counter: CounterMode::Native,
        bind_cpu: false,
        host_dispatch: false,
        env: Vec::new(),
    }
}
