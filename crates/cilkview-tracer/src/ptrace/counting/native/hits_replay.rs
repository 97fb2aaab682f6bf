//! A fixed record stream through the drain: the short path (`Hits::ring`) reports what the
//! general path, record by record, does.

use std::collections::VecDeque;

use cilkview_events::{EventSink, Probe, ProbesError, TraceEvent};

use super::super::strands::{short_cut, Strands};
use super::super::stub::RING_RECORDS;
use super::*;
use crate::ptrace::Core;

/// A hit as a sink is handed it: probe, cost, operand.
type Hit = (usize, u64, Option<u64>);

/// The hits a sink is handed, in order.
#[derive(Default)]
struct Kept(Vec<Hit>);

impl EventSink for Kept {
    fn probes_for(&mut self, _: &std::path::Path) -> Result<Vec<Probe>, ProbesError> {
        Ok(vec![])
    }
    fn event(&mut self, event: TraceEvent) {
        if let TraceEvent::Hit {
            probe,
            cost,
            operand,
            ..
        } = event
        {
            self.0.push((probe, cost, operand));
        }
    }
    fn hit(&mut self, probe: usize, _: i32, cost: u64) {
        self.0.push((probe, cost, None));
    }
    fn hits_counted(&mut self, tid: i32, hits: &[u64], total: HitsTotal) {
        // The drain's totals are those of the words.
        let words = HitsTotal {
            hits: hits.len() as u64,
            cost: PackedHit::cost_of_ones(hits),
        };
        assert_eq!(total, words);
        self.hits(tid, hits);
    }
}

/// Probes 0-5: 1's mark follows 0's, 4 has an operand, 5 a number no packed hit holds is not
/// needed (probes from 6 on have no stub).
fn stubs(startup: HitCost) -> Vec<ProbeStub> {
    let mut stubs: Vec<ProbeStub> = (0..6)
        .map(|i| ProbeStub::plain(i, startup, short_cut(2000)))
        .collect();
    stubs[1].follows = 0;
    stubs[4].operand = Operand::Value;
    stubs[4] = stubs[4].unpacked();
    stubs
}

/// A stream of `len` records from pseudo-random gaps (some interruptions, some strands far
/// shorter than a hit's cost, a few over what a packed hit holds, a few back in time), probes (some without a
/// stub), waits and operands (`all`; else only probes 0-3, and no cost too large: every hit
/// packs); and off-CPU intervals cutting some of its strands.
fn stream(len: usize, all: bool) -> (Vec<[u64; 3]>, VecDeque<(u64, u64)>) {
    let (mut x, mut tsc) = (0x2545_f491_4f6c_dd1d_u64, 1000u64);
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut records, mut off) = (Vec::new(), VecDeque::new());
    for i in 0..len {
        let r = next();
        tsc += match r % 1000 {
            0 => 5000 + r % 100_000,
            1 if all => 1 << 40,
            // Stretches of strands far shorter than a hit: what they owe reaches its bound.
            _ if (i / 4000) % 7 == 3 => r % 4,
            2..=500 => r % 30,
            _ => 20 + r % 200,
        };
        if i % 5003 == 17 {
            off.push_back((tsc + 3, tsc + 300));
        }
        let probe = match (r >> 20) % 16 {
            0..=5 => 0,
            6..=10 => 1,
            11 => 2,
            12 => 3,
            13 => 4,
            14 => 5,
            _ => 6 + (r >> 30) % 3,
        };
        let probe = if all || probe < 4 { probe } else { 0 };
        let wait = if (r >> 40) % 997 == 0 {
            1 + (r >> 50) % 9
        } else {
            0
        };
        // Now and then a clock behind the last (another CPU's).
        let at = if r % 1000 == 2 { tsc - 9 } else { tsc };
        records.push([at, r >> 8, probe | wait << 32]);
        if wait != 0 {
            tsc += wait << 4;
        }
    }
    (records, off)
}

/// The hits the drain reports for `records` (from record number `from` of the ring) and the
/// thread's clock after: by `Hits::ring`, or (`general_only`) record by record on the general
/// path.
fn report(
    records: &[[u64; 3]],
    from: u64,
    off: VecDeque<(u64, u64)>,
    general_only: bool,
) -> (Vec<Hit>, StrandState, u64, u64) {
    let startup = HitCost::whole(23);
    let stubs = stubs(startup);
    let set = Setting {
        tid: 7,
        stubs: &stubs,
        unpatched: ProbeStub::plain(0, startup, 0).unpacked(),
        interruption: 2000,
        scale: TickScale::new(0.417),
        wait_shift: 4,
    };
    let mut ring: Box<Ring> = vec![[0u64; 3]; RING_RECORDS as usize]
        .into_boxed_slice()
        .try_into()
        .expect("a ring");
    for (k, r) in records.iter().enumerate() {
        ring[ring_index(from + k as u64)] = *r;
    }
    let mut sink = Kept::default();
    let mut core = Core::new(1, &mut sink);
    let (mut packed, mut waits, mut waited) = ([0u64; PACKED_RUN], 0, 0);
    let mut th = Strands::new(1000);
    th.off = off;
    th.off_moved();
    let (mut st, off) = (th.state, &mut th.off);
    let mut hits = Hits {
        set: &set,
        packed: &mut packed,
        len: 0,
        run_from: st.reported(),
        waits: &mut waits,
        waited: &mut waited,
        n: 0,
    };
    let head = from + records.len() as u64;
    if general_only {
        for n in from..head {
            let packed = (&mut *hits.packed, hits.len, &mut hits.run_from);
            let room = (packed, &mut *hits.waits, &mut *hits.waited);
            let r = Record::read(&ring[ring_index(n)]);
            (st, hits.len) = general(&set, &mut core, st, off, room, r);
        }
    } else {
        hits.ring(&mut core, &mut st, off, (&ring, from, head));
    }
    hits.flush(&mut core, st.reported());
    drop(core);
    (sink.0, st, waits, waited)
}

#[test]
fn the_short_path_reports_what_the_general_path_does() {
    let (records, off) = stream(150_000, true);
    // Across the ring's end.
    let from = (1 << 16) - 777;
    let (short, st, waits, waited) = report(&records, from, off.clone(), false);
    let (general, st_general, waits_general, waited_general) = report(&records, from, off, true);
    assert_eq!(short.len(), records.len());
    assert_eq!(short, general);
    assert_eq!((waits, waited), (waits_general, waited_general));
    assert!(waits > 100);
    assert_eq!(st.hit_ticks(), st_general.hit_ticks());
    assert_eq!(st.reported(), st_general.reported());
    assert_eq!(st.empty_gaps(), st_general.empty_gaps());
    assert!(st.empty_gaps().1 > 10_000);
    // Every kind of record was met: costs of 0 and over what a packed hit holds, operands.
    assert!(short.iter().any(|h| h.1 == 0) && short.iter().any(|h| h.1 > PackedHit::MAX_COST));
    assert!(short.iter().any(|h| h.2.is_some()));
    // What the old and the new drain give for this stream (printed, `--nocapture`).
    let digest = short.iter().fold(0u64, |d, h| {
        d.wrapping_mul(0x100_0000_01b3) ^ (h.0 as u64 ^ h.1 << 8 ^ h.2.unwrap_or(7) << 1)
    });
    println!("digest {digest:x} reported {}", st.reported());
}

#[test]
fn runs_of_packed_hits_are_handed_over_with_their_costs() {
    // Without operands: runs of packed hits longer than the drain hands over at once, whose
    // totals the sink checks against their words.
    let (records, off) = stream(50_000, false);
    let (short, st, ..) = report(&records, 3, off.clone(), false);
    let (general, st_general, ..) = report(&records, 3, off, true);
    assert_eq!(short, general);
    assert_eq!(st.reported(), st_general.reported());
    let charged = short.iter().filter(|h| h.1 > 0).count();
    assert!(charged > 5_000, "{charged} hits charged");
}
