//! Hardware-counter mode. Skips (printing why) where no usable PMU exists.
mod common;

use cilkview_tracer::{run, self_test, CounterMode, TraceError, TraceEvent, TraceOptions};

const SRC: &str = r#"
#include <stdio.h>
int main(void) {
    PROBE(probe_a);
    __asm__ volatile("mov $1000,%%rcx\n1: dec %%rcx\njnz 1b" ::: "rcx", "cc");
    PROBE(probe_b);
    printf("x\n");
    return 0;
}"#;

fn hits(
    mode: CounterMode,
    exe: &std::path::Path,
    probes: &[cilkview_tracer::Probe],
) -> (Vec<u64>, u64) {
    let mut costs = vec![];
    let o = TraceOptions {
        program: exe.to_path_buf(),
        args: vec![],
        counter: mode,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    };
    let out = run(
        &o,
        |_| Ok(probes.to_vec()),
        |e| {
            if let TraceEvent::Hit { cost, .. } = e {
                costs.push(cost)
            }
        },
    )
    .unwrap();
    (costs, out.total_cost)
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn auto_reports_its_choice() {
    let info = self_test().unwrap();
    println!("auto counter: {:?}: {}", info.kind, info.reason);
    assert!(!info.reason.is_empty());
    if info.kind == CounterMode::Step {
        // Hardware must then be refused with the reason.
        let o = TraceOptions {
            program: "/bin/true".into(),
            args: vec![],
            counter: CounterMode::Hardware,
            bind_cpu: true,
            host_dispatch: false,
            env: Vec::new(),
        };
        let e = run(&o, |_| Ok(vec![]), |_| {}).unwrap_err();
        assert!(matches!(e, TraceError::CounterUnavailable { .. }), "{e}");
    }
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn hardware_and_step_agree() {
    let info = self_test().unwrap();
    if info.kind != CounterMode::Hardware {
        cilkview_fixtures::skip(&info.reason);
        return;
    }
    let p = common::compile(SRC, &[]);
    let probes = common::probes(&p.exe, &[("probe_a", None), ("probe_b", None)]);
    let (hw, hw_total) = hits(CounterMode::Hardware, &p.exe, &probes);
    let (st, st_total) = hits(CounterMode::Step, &p.exe, &probes);
    assert_eq!(hw[1], 2002);
    assert_eq!(hw[1], st[1]);
    // Start-up code may differ slightly between runs (environment, argv length).
    let diff = hw_total.abs_diff(st_total);
    assert!(
        diff * 100 <= st_total,
        "hardware {hw_total} vs step {st_total}"
    );
}

/// The hardware counter runs the program with glibc's dispatch pinned, as every instruction
/// counter does (docs/emulation.md, "One glibc path on every host").
#[test]
#[ignore = "slow: traces compiled programs"]
fn hardware_runs_the_pinned_dispatch() {
    let info = self_test().unwrap();
    if info.kind != CounterMode::Hardware {
        cilkview_fixtures::skip(&info.reason);
        return;
    }
    let o = TraceOptions {
        program: "/bin/true".into(),
        args: vec![],
        counter: CounterMode::Hardware,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    };
    let out = run(&o, |_| Ok(vec![]), |_| {}).unwrap();
    let reason = out.counter.says();
    assert!(reason.contains("glibc dispatch pinned"), "{reason}");
}
