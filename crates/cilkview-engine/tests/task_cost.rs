//! The per-spawn runtime cost of `run --openmp`'s prediction (`speedup_with_task_cost`), against
//! its definition and the plain Cilkview bounds.

use cilkview_engine::{speedup, speedup_with_task_cost, Measures};
use proptest::prelude::*;

fn measures() -> impl Strategy<Value = Measures> {
    (1u64..1 << 40, 0u64..1 << 20, 0u64..1 << 30).prop_flat_map(|(work, spawns, extra)| {
        (1..=work).prop_map(move |span| Measures {
            work,
            span,
            burdened_span: span + extra,
            spawns,
            syncs: spawns,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_cost_only_lowers_the_lower_bound(
        m in measures(), cores in 1u32..512, delta in 0.0f64..2.0, cost in 0u64..1 << 20,
    ) {
        let plain = speedup(&m, cores, delta);
        let charged = speedup_with_task_cost(&m, cores, delta, cost);
        // Cost 0 is the Cilkview estimate exactly; the upper bound never changes.
        prop_assert_eq!(speedup_with_task_cost(&m, cores, delta, 0), plain);
        prop_assert_eq!(charged.upper, plain.upper);
        prop_assert!(charged.lower <= plain.lower);
        prop_assert!(charged.lower <= charged.upper);
        // More cost, lower bound no higher.
        let more = speedup_with_task_cost(&m, cores, delta, cost + 1000);
        prop_assert!(more.lower <= charged.lower);
        // One core runs uncontended: 1, as without the cost.
        if cores == 1 {
            prop_assert_eq!(charged.lower, plain.lower);
        } else {
            // The definition: T1 / ((T1 + spawns·cost)/P + 2δ(1 − 1/P)·burdened span), capped.
            let (p, t1) = (f64::from(cores), m.work as f64);
            let expected = t1
                / ((t1 + m.spawns as f64 * cost as f64) / p
                    + 2.0 * delta * (1.0 - 1.0 / p) * m.burdened_span as f64);
            prop_assert!((charged.lower - expected.min(charged.upper)).abs() <= 1e-9 * expected);
        }
    }
}

/// The notes' BOTS fib without a cutoff: ~98 instructions per task, ~10k per task in libgomp at
/// 2 threads: the plain estimate says 2.00, the charged lower bound ~0.02 (measured: 0.12).
#[test]
fn fine_grained_tasks_are_predicted_to_slow_down() {
    let tasks = 1_000_000u64;
    let m = Measures {
        work: 98 * tasks,
        span: 98 * 40,
        burdened_span: 98 * 40 + 15_000 * 40,
        spawns: tasks,
        syncs: tasks,
    };
    let plain = speedup(&m, 2, 0.85);
    let charged = speedup_with_task_cost(&m, 2, 0.85, 10_000);
    assert!(plain.lower > 1.97, "{plain:?}");
    assert!((0.019..0.020).contains(&charged.lower), "{charged:?}");
    assert_eq!(charged.upper, 2.0);
}
