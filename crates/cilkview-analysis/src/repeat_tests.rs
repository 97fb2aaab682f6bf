use std::path::Path;

use cilkview_events::{EventSink, PackedHit, Probe, ProbesError, TraceEvent};

use super::{Divergence, Estimate, Folder, RecordedRun, Recorder, SAMPLED_RUNS};

/// A sink that answers two probes per image and keeps what it is fed, hits unpacked.
#[derive(Default)]
struct Kept {
    images: Vec<String>,
    bases: Vec<u64>,
    events: Vec<TraceEvent>,
}

impl EventSink for Kept {
    fn probes_for(&mut self, image: &Path) -> Result<Vec<Probe>, ProbesError> {
        self.images.push(image.display().to_string());
        Ok(vec![Probe::new(0x10, None), Probe::new(0x20, Some(0))])
    }
    fn image_base(&mut self, base: u64) {
        self.bases.push(base);
    }
    fn event(&mut self, event: TraceEvent) {
        self.events.push(event);
    }
}

fn hit(probe: usize, tid: i32, cost: u64) -> TraceEvent {
    TraceEvent::Hit {
        probe,
        tid,
        cost,
        operand: None,
    }
}

/// The exec of image 0 (two probes) by thread `tid`, after `cost`.
fn exec(tid: i32, cost: u64) -> TraceEvent {
    TraceEvent::Exec {
        image: 0,
        tid,
        cost,
        probes: 2,
    }
}

fn packed(hits: &[(usize, u64)]) -> Vec<u64> {
    hits.iter()
        .map(|&(p, c)| PackedHit::new(p, c).unwrap().0)
        .collect()
}

/// One run of a two-thread program as a backend feeds it: thread `main` with hits packed and
/// one with an operand, thread `worker` started by it; `costs` are its seven strands' costs in
/// the order below.
fn feed(sink: &mut dyn EventSink, main: i32, worker: i32, costs: [u64; 7]) {
    let probes = sink.probes_for(Path::new("/bin/app")).unwrap();
    assert_eq!(probes.len(), 2);
    sink.image_base(0x40_0000);
    sink.event(exec(main, costs[0]));
    sink.hits(main, &packed(&[(0, costs[1]), (1, costs[2])]));
    sink.event(TraceEvent::ThreadStart { tid: worker });
    sink.event(TraceEvent::Hit {
        probe: 1,
        tid: main,
        cost: costs[3],
        operand: Some(7),
    });
    sink.hits(worker, &packed(&[(0, costs[4])]));
    sink.event(TraceEvent::ThreadExit {
        tid: worker,
        cost: costs[5],
    });
    sink.event(TraceEvent::ThreadExit {
        tid: main,
        cost: costs[6],
    });
}

/// The first run's seven strand costs in most tests.
const FIRST: [u64; 7] = [50, 10, 20, 30, 40, 5, 6];

fn record(costs: [u64; 7]) -> RecordedRun {
    let mut answerer = Kept::default();
    let mut recorder = Recorder::new(&mut answerer);
    feed(&mut recorder, 100, 101, costs);
    let run = recorder.finish();
    assert_eq!(answerer.images, ["/bin/app"]);
    run
}

fn replayed(run: &RecordedRun) -> Kept {
    replayed_by(run, Estimate::Typical)
}

fn replayed_by(run: &RecordedRun, estimate: Estimate) -> Kept {
    let mut kept = Kept::default();
    run.replay(&mut kept, estimate).unwrap();
    kept
}

#[test]
fn each_strand_is_the_mean_of_its_runs_near_their_median_in_the_first_runs_order() {
    let mut run = record(FIRST);
    // Other thread ids: threads are matched by order of appearance.
    let mut folder = Folder::new(&mut run);
    feed(&mut folder, 200, 201, [60, 4, 25, 3, 41, 5, 1]);
    assert_eq!(folder.finish(), None);
    let mut folder = Folder::new(&mut run);
    feed(&mut folder, 300, 301, [45, 12, 19, 90, 39, 9, 9]);
    assert_eq!(folder.finish(), None);
    // Each strand's runs (50, 60, 45), (10, 4, 12), (20, 25, 19), (30, 3, 90), ...: the mean,
    // rounded, of those within 40 ns of the middle one (90 is not) ...
    assert_eq!(
        run.strand_costs(Estimate::Typical),
        [vec![52, 9, 21, 17, 5], vec![40, 6]]
    );
    // ... 150 in all, scaled to the median run's work, 161 (threads in order of appearance,
    // each prefix rounded).
    assert_eq!(run.total(), 161);
    assert_eq!(
        run.total_by(Estimate::Minimum),
        45 + 4 + 19 + 3 + 39 + 5 + 1
    );
    assert_eq!(run.run_work(), [161, 139, 223]);
    let minima = replayed_by(&run, Estimate::Minimum);
    assert_eq!(minima.events[0], exec(100, 45));
    assert_eq!(minima.events[1], hit(0, 100, 4));

    let kept = replayed(&run);
    assert_eq!(kept.images, ["/bin/app"]);
    assert_eq!(kept.bases, [0x40_0000]);
    assert_eq!(
        kept.events,
        [
            exec(100, 56),
            hit(0, 100, 9),
            hit(1, 100, 23),
            TraceEvent::ThreadStart { tid: 101 },
            TraceEvent::Hit {
                probe: 1,
                tid: 100,
                cost: 18,
                operand: Some(7)
            },
            hit(0, 101, 43),
            TraceEvent::ThreadExit { tid: 101, cost: 6 },
            TraceEvent::ThreadExit { tid: 100, cost: 6 },
        ]
    );
}

/// Folds runs of the seven strands, each `costs` (the first is recorded).
fn record_runs(costs: &[[u64; 7]]) -> RecordedRun {
    let mut run = record(costs[0]);
    for (k, costs) in costs.iter().enumerate().skip(1) {
        let mut folder = Folder::new(&mut run);
        feed(&mut folder, 200 + k as i32, 300 + k as i32, *costs);
        assert_eq!(folder.finish(), None);
    }
    run
}

#[test]
fn interrupted_runs_of_a_strand_are_left_out() {
    // Strand 0 ticked in runs 2 and 4 (+20 µs), strand 3 in run 3: the median is one of the
    // runs not interrupted, and the strand the mean of those (within 1/64 of the median, or
    // 40 ns).
    let run = record_runs(&[
        [50_000, 10, 20, 30, 40, 5, 6],
        [70_000, 14, 20, 32, 40, 5, 6],
        [50_500, 12, 20, 25_000, 40, 5, 6],
        [70_400, 11, 20, 31, 40, 5, 6],
        [50_200, 9, 20, 30, 40, 5, 6],
        [50_100, 10, 20, 30, 40, 5, 6],
        [50_300, 12, 20, 29, 40, 5, 6],
    ]);
    assert_eq!(
        run.strand_costs(Estimate::Typical),
        [vec![50_220, 11, 20, 30, 6], vec![40, 5]]
    );
    // Those sum to 50,332; the median run's work is 50,412 (runs 1, 5, 6 and 7 were not
    // interrupted): scaled to it.
    let kept = replayed(&run);
    assert_eq!(kept.events[0], exec(100, 50_300));
    assert_eq!(kept.events[1], hit(0, 100, 11));
    assert_eq!(run.total(), 50_412);
    assert_eq!(
        run.total_by(Estimate::Minimum),
        50_000 + 9 + 20 + 29 + 40 + 5 + 6
    );
}

#[test]
fn the_typical_strands_sum_to_the_median_runs_work() {
    // A strand lengthened in one run only, a different strand each run (a cache miss, a small
    // interruption): each strand's typical run leaves it out, every run's work has one. Five
    // runs of five 20-ns strands and a 1,000-ns one, one of the 20s taking 400 more each run.
    let mut costs = Vec::new();
    for k in 0..5 {
        let mut c = [1_000, 20, 20, 20, 20, 20, 0];
        c[1 + k] += 400;
        costs.push(c);
    }
    let run = record_runs(&costs);
    assert_eq!(
        run.strand_costs(Estimate::Typical),
        [vec![1_000, 20, 20, 20, 0], vec![20, 20]]
    );
    // 1,100 by the strands, 1,500 every run: scaled by 15/11.
    assert_eq!(run.run_work(), [1_500; 5]);
    assert_eq!(run.total(), 1_500);
    assert_eq!(replayed(&run).events[0], exec(100, 1_364));
}

#[test]
fn the_median_keeps_the_strands_own_spread_the_shortest_does_not() {
    // A strand of ~2 µs whose runs differ by 10% (caches): the shortest of five is its luckiest
    // run, 5% under its typical time; the median is not (cilkbench's matmul 256: the kernel's
    // work by the shortest runs 0.75 of its CPU time untraced, 1.03 by the median).
    let run = record_runs(&[
        [2_000, 10, 20, 30, 40, 5, 6],
        [2_200, 10, 20, 30, 40, 5, 6],
        [1_900, 10, 20, 30, 40, 5, 6],
        [2_100, 10, 20, 30, 40, 5, 6],
        [1_950, 10, 20, 30, 40, 5, 6],
    ]);
    assert_eq!(replayed(&run).events[0], exec(100, 2_000));
    assert_eq!(
        replayed_by(&run, Estimate::Minimum).events[0],
        exec(100, 1_900)
    );
}

#[test]
fn two_runs_that_disagree_give_the_shorter() {
    // Two runs of a 0.5 ms leaf 5% apart: the machine's (a busy sibling vCPU slows whole
    // stretches), not the leaf's; two within 1/64 are averaged.
    let run = record_runs(&[
        [500_000, 10, 20, 30, 40, 5, 6],
        [525_000, 14, 20, 30, 40, 5, 6],
    ]);
    let kept = replayed(&run);
    assert_eq!(kept.events[0], exec(100, 500_000));
    assert_eq!(kept.events[1], hit(0, 100, 12));
}

#[test]
fn the_median_is_of_the_first_sampled_runs_the_shortest_of_all() {
    // SAMPLED_RUNS runs at 1,000 ns, then as many again at 10: the median stays 1,000.
    let mut costs = vec![[1_000, 10, 20, 30, 40, 5, 6]; SAMPLED_RUNS];
    costs.extend(vec![[10, 10, 20, 30, 40, 5, 6]; SAMPLED_RUNS]);
    let run = record_runs(&costs);
    assert_eq!(replayed(&run).events[0], exec(100, 1_000));
    assert_eq!(
        replayed_by(&run, Estimate::Minimum).events[0],
        exec(100, 10)
    );
}

#[test]
fn a_run_that_departs_is_used_up_to_where_it_departs() {
    let mut run = record(FIRST);
    let mut folder = Folder::new(&mut run);
    folder.probes_for(Path::new("/bin/app")).unwrap();
    folder.event(exec(7, 1));
    // Probe 1 where the first run had probe 0: the main thread's rest is not used.
    folder.hits(7, &packed(&[(1, 1), (1, 1)]));
    assert_eq!(
        folder.finish(),
        Some(Divergence {
            thread: 1,
            strand: 1,
            what: "probe 1 where the first run had probe 0".into()
        })
    );
    // Strand 0 matched (runs 50 and 1, apart by more than 40 ns: the 1), the others are the
    // first run's.
    assert_eq!(run.total(), 1 + 10 + 20 + 30 + 40 + 5 + 6);
}

#[test]
fn a_run_that_ends_early_says_so_and_keeps_what_it_matched() {
    let mut run = record(FIRST);
    let mut folder = Folder::new(&mut run);
    folder.probes_for(Path::new("/bin/app")).unwrap();
    folder.event(exec(7, 2));
    folder.hits(7, &packed(&[(0, 3)]));
    let divergence = folder.finish().unwrap();
    assert_eq!(divergence.thread, 1);
    assert_eq!(divergence.strand, 2);
    assert_eq!(
        divergence.to_string(),
        "thread 1 after 2 strands: it ended where the first run had 5"
    );
    assert_eq!(run.total(), 2 + 6 + 20 + 30 + 40 + 5 + 6);
}

#[test]
fn a_run_mapping_another_image_is_not_used_from_there() {
    let mut run = record(FIRST);
    let mut folder = Folder::new(&mut run);
    assert_eq!(folder.probes_for(Path::new("/bin/other")).unwrap(), []);
    folder.event(exec(1, 1));
    folder.hits(1, &packed(&[(0, 1), (1, 1)]));
    let divergence = folder.finish().unwrap();
    assert_eq!(divergence.what, "it mapped /bin/other as its image 0");
    assert_eq!(run.total(), 50 + 10 + 20 + 30 + 40 + 5 + 6);
}

#[test]
fn a_thread_the_first_run_did_not_have_is_a_divergence() {
    let mut run = record(FIRST);
    let mut folder = Folder::new(&mut run);
    feed(&mut folder, 1, 2, [1; 7]);
    folder.event(TraceEvent::ThreadStart { tid: 3 });
    folder.hits(3, &packed(&[(0, 1)]));
    let divergence = folder.finish().unwrap();
    assert_eq!(divergence.thread, 3);
    assert_eq!(run.total(), 1 + 5 + 10 + 15 + 20 + 3 + 3);
}

/// A step of a synthetic run: a packed hit of a thread, an event with an operand, a thread
/// start, a thread exit (each thread `0..3`; thread 0 is there from the start).
#[derive(Clone, Copy, Debug)]
enum Step {
    Packed(u8, usize),
    Operand(u8, usize, u64),
    Exit(u8),
}

/// Feeds the steps with `costs` (one per strand, in order) as a backend would: thread `t` is
/// `tid0 + t`, started (ThreadStart) at its first step, nothing after its exit. Returns the
/// thread of each strand fed.
fn feed_steps(sink: &mut dyn EventSink, steps: &[Step], costs: &[u64], tid0: i32) -> Vec<usize> {
    sink.probes_for(Path::new("/bin/app")).unwrap();
    let mut started = [true, false, false];
    let mut exited = [false; 3];
    let mut costs = costs.iter().copied();
    let mut fed = Vec::new();
    for &step in steps {
        let t = match step {
            Step::Packed(t, _) | Step::Operand(t, ..) | Step::Exit(t) => t as usize,
        };
        if exited[t] {
            continue;
        }
        let tid = tid0 + t as i32;
        if !started[t] {
            started[t] = true;
            sink.event(TraceEvent::ThreadStart { tid });
        }
        let cost = costs.next().unwrap();
        fed.push(t);
        match step {
            Step::Packed(_, probe) => {
                sink.hits(tid, &packed(&[(probe, cost)]));
            }
            Step::Operand(_, probe, operand) => sink.event(TraceEvent::Hit {
                probe,
                tid,
                cost,
                operand: Some(operand),
            }),
            Step::Exit(_) => {
                exited[t] = true;
                sink.event(TraceEvent::ThreadExit { tid, cost });
            }
        }
    }
    fed
}

/// `typical` (one per strand, in feed order; `threads[i]`: strand i's thread) as replayed from
/// `runs` (each run's costs per strand): of three runs or more, scaled to the median (the
/// lower middle) run's work, each prefix rounded, the threads in order of first appearance.
fn scaled_to_median_run(typical: &[u64], threads: &[usize], runs: &[Vec<u64>]) -> Vec<u64> {
    if runs.len() < 3 {
        return typical.to_vec();
    }
    let mut works: Vec<u64> = runs
        .iter()
        .map(|c| c[..typical.len()].iter().sum())
        .collect();
    works.sort_unstable();
    let target = u128::from(works[(works.len() - 1) / 2]);
    let sum: u128 = typical.iter().map(|&c| u128::from(c)).sum();
    if sum == 0 {
        return typical.to_vec();
    }
    let mut order: Vec<usize> = Vec::new();
    for &t in threads {
        if !order.contains(&t) {
            order.push(t);
        }
    }
    let (mut raw, mut done, mut out) = (0u128, 0u128, typical.to_vec());
    for t in order {
        for i in (0..typical.len()).filter(|&i| threads[i] == t) {
            raw += u128::from(typical[i]);
            let upto = (raw * target + sum / 2) / sum;
            out[i] = (upto - done) as u64;
            done = upto;
        }
    }
    out
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (0u8..3, 0usize..2).prop_map(|(t, p)| Step::Packed(t, p)),
        2 => (0u8..3, 0usize..2, any::<u64>()).prop_map(|(t, p, o)| Step::Operand(t, p, o)),
        1 => (0u8..3).prop_map(Step::Exit),
    ]
}

proptest::proptest! {
    /// Recorded, folded with runs of the same strands (other thread ids, other costs) and
    /// replayed: the first run's stream, each cost its strand's typical one (of three runs or
    /// more the mean of those near their median, all scaled to the median run's work; of two
    /// their mean where they agree within 1/64 of the shorter or 40 ns, else the shorter; by
    /// `Estimate::Minimum`, the least).
    #[test]
    fn the_replay_is_the_first_run_with_each_strands_typical_cost(
        steps in proptest::collection::vec(step(), 0..60),
        runs in proptest::collection::vec(proptest::collection::vec(0u64..10_000, 60), 1..6),
    ) {
        let mut answerer = Kept::default();
        let mut recorder = Recorder::new(&mut answerer);
        let threads = feed_steps(&mut recorder, &steps, &runs[0], 100);
        let strands = threads.len();
        let mut run = recorder.finish();
        for (k, costs) in runs.iter().enumerate().skip(1) {
            let mut folder = Folder::new(&mut run);
            feed_steps(&mut folder, &steps, costs, 100 * (k as i32 + 1));
            proptest::prop_assert_eq!(folder.finish(), None);
        }
        let typical: Vec<u64> = (0..strands)
            .map(|i| {
                let mut costs: Vec<u64> = runs.iter().map(|c| c[i]).collect();
                costs.sort_unstable();
                match costs[..] {
                    [one] => one,
                    [a, b] if b - a <= (a / 64).max(40) => (a + b) / 2,
                    [a, _] => a,
                    _ => {
                        let mid = costs.len() / 2;
                        let median = if costs.len() % 2 == 1 {
                            costs[mid] as f64
                        } else {
                            (costs[mid - 1] + costs[mid]) as f64 / 2.0
                        };
                        let near = ((median as u64) / 64).max(40) as f64;
                        let kept: Vec<f64> = costs
                            .iter()
                            .map(|&c| c as f64)
                            .filter(|c| (c - median).abs() <= near)
                            .collect();
                        (kept.iter().sum::<f64>() / kept.len() as f64).round() as u64
                    }
                }
            })
            .collect();
        let typical = scaled_to_median_run(&typical, &threads, &runs);
        let minima: Vec<u64> = (0..strands)
            .map(|i| runs.iter().map(|c| c[i]).min().unwrap())
            .collect();
        for (estimate, costs) in [(Estimate::Typical, &typical), (Estimate::Minimum, &minima)] {
            let mut expected = Kept::default();
            feed_steps(&mut expected, &steps, costs, 100);
            let kept = replayed_by(&run, estimate);
            proptest::prop_assert_eq!(kept.images, expected.images);
            proptest::prop_assert_eq!(kept.events, expected.events);
            proptest::prop_assert_eq!(run.total_by(estimate), costs.iter().sum::<u64>());
        }
        proptest::prop_assert_eq!(run.run_work().len(), runs.len());
    }
}
