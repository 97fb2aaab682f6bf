//! Per-probe hit counts and costs of one run with a given counter (a debugging aid):
//! `probe_costs COUNTER PROGRAM [ARGS...]`.
use std::collections::BTreeMap;
use std::path::PathBuf;

use cilkview_tracer::{CounterMode, Probe, TraceEvent, TraceOptions};

fn main() {
    let mut args = std::env::args_os().skip(1);
    let counter = match args.next().unwrap().to_str().unwrap() {
        "native" => CounterMode::Native,
        "emulate" => CounterMode::Emulate,
        "step" => CounterMode::Step,
        _ => CounterMode::Auto,
    };
    let program = PathBuf::from(args.next().unwrap());
    let opts = TraceOptions {
        program,
        args: args.collect(),
        counter,
        bind_cpu: false,
        host_dispatch: false,
        env: Vec::new(),
    };
    let mut kinds = Vec::new();
    let mut per: BTreeMap<(i32, usize), (u64, u64, u64)> = BTreeMap::new();
    let out = cilkview_tracer::run(
        &opts,
        |path| {
            let Ok(img) = cilkview_marks::read_marks(path) else {
                return Ok(vec![]);
            };
            Ok(img
                .marks
                .iter()
                .map(|m| {
                    kinds.push(m.kind.name());
                    Probe::new(m.offset(&img), m.operand)
                })
                .collect())
        },
        |ev| {
            if let TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand,
            } = ev
            {
                if operand.is_some() && std::env::var_os("OPERANDS").is_some() {
                    eprintln!("probe {probe} operand {operand:?}");
                }
                let e = per.entry((tid, probe)).or_default();
                e.0 += 1;
                e.1 += cost;
                e.2 = e.2.max(cost);
            }
        },
    )
    .unwrap();
    for ((tid, p), (n, c, m)) in per {
        eprintln!(
            "tid {tid} probe {p:3} {:16} hits {n:9} cost {c:12} mean {:10.1} max {m}",
            kinds.get(p).copied().unwrap_or("?"),
            c as f64 / n as f64
        );
    }
    eprintln!("{out:?}");
}
