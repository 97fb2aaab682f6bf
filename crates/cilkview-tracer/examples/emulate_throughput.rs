//! Throughput of the emulation backend: runs PROGRAM [ARGS] natively, then
//! under `run_emulated` (marks from `.cilkview_marks`), and prints wall times,
//! mark hits and the cost per hit.
//!
//! `cargo run --release -p cilkview-tracer --example emulate_throughput -- ./fib 35`

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use cilkview_tracer::{run_emulated, CounterMode, Probe, ProbesError, TraceOptions};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let Some(program) = args.next().map(PathBuf::from) else {
        eprintln!("usage: emulate_throughput PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let rest: Vec<_> = args.collect();
    let t = Instant::now();
    Command::new(&program)
        .args(&rest)
        .stdout(Stdio::null())
        .status()
        .expect("run natively");
    let native = t.elapsed();
    let opts = TraceOptions {
        program: program.clone(),
        args: rest,
        counter: CounterMode::Auto,
        bind_cpu: false,
        host_dispatch: false,
        env: Vec::new(),
    };
    let probes_for = |img: &Path| -> Result<Vec<Probe>, ProbesError> {
        Ok(cilkview_marks::read_marks(img)
            .map(|m| {
                m.marks
                    .iter()
                    .map(|k| Probe::new(k.offset(&m), k.operand))
                    .collect()
            })
            .unwrap_or_default())
    };
    let mut events = 0u64;
    let t = Instant::now();
    let mut sink = Counting {
        probes_for,
        events: &mut events,
    };
    let (out, _) = run_emulated(&opts, &mut sink).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(1)
    });
    let emulated = t.elapsed();
    println!(
        "native {:.3} s, emulated {:.3} s ({:.1}x), {} hits, {} instructions, {} events",
        native.as_secs_f64(),
        emulated.as_secs_f64(),
        emulated.as_secs_f64() / native.as_secs_f64(),
        out.hits,
        out.total_cost,
        events
    );
}

/// Counts the events; asks the marks reader for probes.
struct Counting<'a, P> {
    probes_for: P,
    events: &'a mut u64,
}

impl<P: FnMut(&Path) -> Result<Vec<Probe>, ProbesError>> cilkview_tracer::EventSink
    for Counting<'_, P>
{
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        (self.probes_for)(image)
    }
    fn event(&mut self, _: cilkview_tracer::TraceEvent) {
        *self.events += 1;
    }
}
