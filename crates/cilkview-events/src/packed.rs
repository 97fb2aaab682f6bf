//! Hits packed in 64-bit words, as [`EventSink::hits`] takes them: the emulation plugin's hit
//! records, handed to the analysis as they are (docs/emulation.md, "Records").

#[cfg(doc)]
use crate::EventSink;

/// What [`EventSink::hits`] unpacked: how many hits, and the sum of their costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HitsTotal {
    pub hits: u64,
    pub cost: u64,
}

impl HitsTotal {
    #[inline(always)]
    fn add(&mut self, cost: u64) {
        self.hits += 1;
        self.cost += cost;
    }
}

/// A word of packed hits, as [`EventSink::hits`] takes them (the emulation plugin's hit records,
/// docs/emulation.md). Either one hit: bits 0–1 `00`, the probe in bits 2–25, the cost in bits
/// 26–63; or one or two small hits: bits 0–1 `10`, the probe in bits 2–15, the cost in bits
/// 16–31, and bits 32–63 zero or a second small hit laid out alike. (Half the bytes per hit for
/// the common case of fine-grained programs.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedHit(pub u64);

const TAG_SMALL: u64 = 2;
const SMALL_PROBE_BITS: u32 = 14;
const SMALL_COST_BITS: u32 = 16;

impl PackedHit {
    /// The largest probe number a packed hit holds.
    pub const MAX_PROBE: usize = (1 << 24) - 1;
    /// The largest cost a packed hit holds.
    pub const MAX_COST: u64 = (1 << 38) - 1;
    /// Where a packed hit's cost begins: bit 26 (a packer that has checked the cost against
    /// [`PackedHit::MAX_COST`] itself shifts it by this).
    pub const COST_SHIFT: u32 = 26;
    /// The largest probe number a small hit holds.
    pub const MAX_SMALL_PROBE: usize = (1 << SMALL_PROBE_BITS) - 1;
    /// The largest cost a small hit holds.
    pub const MAX_SMALL_COST: u64 = (1 << SMALL_COST_BITS) - 1;

    /// One hit, `probe` and `cost` packed, if they fit.
    #[inline(always)]
    pub fn new(probe: usize, cost: u64) -> Option<PackedHit> {
        // Both bounds (each 2^k - 1) in one test: the native drain's hot path packs every hit.
        const _: () = assert!(
            PackedHit::MAX_PROBE & (PackedHit::MAX_PROBE + 1) == 0
                && PackedHit::MAX_COST & (PackedHit::MAX_COST + 1) == 0
        );
        const OVER: (u64, u64) = (!(PackedHit::MAX_PROBE as u64), !PackedHit::MAX_COST);
        ((probe as u64 & OVER.0) | (cost & OVER.1) == 0).then_some(PackedHit(
            (cost << Self::COST_SHIFT) | ((probe as u64) << 2),
        ))
    }

    /// The bits of a packed hit of `probe` that do not depend on its cost, if `probe` fits one:
    /// for [`PackedHit::with_probe_bits`], which packs a probe's hits over and over.
    pub fn probe_bits(probe: usize) -> Option<u64> {
        PackedHit::new(probe, 0).map(|w| w.0)
    }

    /// [`PackedHit::new`] of the probe whose bits are `bits` (from [`PackedHit::probe_bits`]):
    /// one test of the cost only (the native drain's hot path packs every hit).
    #[inline(always)]
    pub fn with_probe_bits(bits: u64, cost: u64) -> Option<PackedHit> {
        (cost <= Self::MAX_COST).then_some(PackedHit(bits | (cost << Self::COST_SHIFT)))
    }

    /// The sum of the costs of `words`, each a word of one hit ([`PackedHit::new`]'s; not
    /// small hits): a loop over the words the compiler vectorizes, for a packer that would
    /// otherwise keep the sum (a register through its loop) as it packs.
    pub fn cost_of_ones(words: &[u64]) -> u64 {
        words.iter().map(|&w| w >> Self::COST_SHIFT).sum()
    }

    /// The probe and cost of a word of one hit ([`PackedHit::new`]'s layout, read back).
    #[inline(always)]
    pub fn one_hit(x: u64) -> (usize, u64) {
        (
            ((x >> 2) & Self::MAX_PROBE as u64) as usize,
            x >> Self::COST_SHIFT,
        )
    }

    /// The key of a word of one hit ([`PackedHit::new`]'s) in a table by a half word's low 16
    /// bits, as a small hit's is in one ([`PackedHit::small`]'s key has bits 0–1 `10`, this one
    /// `00`), if its probe is at most [`PackedHit::MAX_SMALL_PROBE`] (its bits 16–25 zero): a
    /// reader of one-hit words finds a probe's entry with no shift, mask or bounds check.
    #[inline(always)]
    pub fn one_hit_key(x: u64) -> Option<usize> {
        const ABOVE_SMALL: u64 = (PackedHit::MAX_PROBE & !PackedHit::MAX_SMALL_PROBE) as u64;
        (x & (ABOVE_SMALL << 2) == 0).then_some(x as u16 as usize)
    }

    /// The probe and cost of the small hit in the low half of `half` ([`PackedHit::small`]'s
    /// layout, read back; the high half ignored).
    #[inline(always)]
    pub fn small_hit(half: u64) -> (usize, u64) {
        (
            ((half >> 2) & Self::MAX_SMALL_PROBE as u64) as usize,
            (half >> 16) & Self::MAX_SMALL_COST,
        )
    }

    /// One small hit, if `probe` and `cost` fit one; [`PackedHit::pair`] adds a second.
    pub fn small(probe: usize, cost: u64) -> Option<PackedHit> {
        (probe <= Self::MAX_SMALL_PROBE && cost <= Self::MAX_SMALL_COST).then_some(PackedHit(
            (cost << (SMALL_PROBE_BITS + 2)) | ((probe as u64) << 2) | TAG_SMALL,
        ))
    }

    /// Two small hits in one word: `self`, then `second` (each made by [`PackedHit::small`]).
    pub fn pair(self, second: PackedHit) -> Option<PackedHit> {
        let one_small = |w: u64| w & 3 == TAG_SMALL && w >> 32 == 0;
        (one_small(self.0) && one_small(second.0)).then_some(PackedHit(self.0 | (second.0 << 32)))
    }

    /// Whether `w` is a word of packed hits (bit 0 clear; other records of the plugin have it set).
    #[inline(always)]
    pub fn is_packed(w: u64) -> bool {
        w & 1 == 0
    }

    /// Calls `f(probe, cost)` for each hit of the words of packed hits `words`, in order: how
    /// many hits they held and the sum of their costs.
    #[inline(always)]
    pub fn for_each_in(words: &[u64], mut f: impl FnMut(usize, u64)) -> HitsTotal {
        let mut total = HitsTotal::default();
        Self::for_each_hit_in(words, |probe, cost| {
            total.add(cost);
            f(probe, cost);
        });
        total
    }

    /// How many hits the words of packed hits hold and the sum of their costs, as
    /// [`PackedHit::for_each_in`] counts them, without calling anything per hit (for a sink
    /// that only passes the words on): ~9 instructions a word (callgrind).
    #[inline]
    pub fn total_of(words: &[u64]) -> HitsTotal {
        let (mut hits, mut cost) = (0u64, 0u64);
        for &x in words {
            let small = x & TAG_SMALL != 0;
            let one = x >> 26;
            // Bits 16–31 and, for a second small hit, bits 48–63.
            let two = ((x >> 16) & Self::MAX_SMALL_COST) + (x >> 48);
            hits += 1 + u64::from(small && x >> 32 != 0);
            cost += if small { two } else { one };
        }
        HitsTotal { hits, cost }
    }

    /// [`PackedHit::for_each_in`] without the totals (a caller that knows them otherwise).
    #[inline(always)]
    pub fn for_each_hit_in(words: &[u64], mut f: impl FnMut(usize, u64)) {
        // One call of `f` (the sink's hot path, inlined) in one loop over the hits: the second
        // small hit of a word waits in `second`.
        let mut words = words.iter();
        let mut second = 0u64;
        loop {
            let (probe, cost) = if second != 0 {
                let h = second;
                second = 0;
                Self::small_hit(h)
            } else {
                let Some(&x) = words.next() else { break };
                if x & TAG_SMALL != 0 {
                    second = x >> 32;
                    Self::small_hit(x)
                } else {
                    Self::one_hit(x)
                }
            };
            f(probe, cost);
        }
    }

    /// [`PackedHit::for_each_hit_in`] for words that each hold one hit ([`PackedHit::new`]'s,
    /// not small hits): no test of a word's form, no state between words.
    #[inline(always)]
    pub fn for_each_one_in(words: &[u64], mut f: impl FnMut(usize, u64)) {
        for &x in words {
            let (probe, cost) = Self::one_hit(x);
            f(probe, cost);
        }
    }

    /// Calls `f(probe, cost)` for each hit of the word, in order. (Bits 32–63 of a word of small
    /// hits, when not zero, are read as a small hit whatever their bits 0–1.)
    #[inline(always)]
    pub fn for_each(self, mut f: impl FnMut(usize, u64)) {
        let mut x = self.0;
        let small = x & TAG_SMALL != 0;
        loop {
            // One copy of `f` for every kind of hit: it is the sink's hot path, inlined.
            let (probe, cost) = if small {
                Self::small_hit(x)
            } else {
                Self::one_hit(x)
            };
            f(probe, cost);
            x >>= 32;
            if !small || x == 0 {
                return;
            }
        }
    }
}

/// Hits packed into words in the forms the emulation plugin writes: small hits two to a word, the
/// others one to a word (for tests and benchmarks of [`EventSink::hits`]). The packer fills every
/// half it can; the plugin pairs only the hits one callback reports (a run of marks in one block)
/// and gives a lone hit a word of its own, its upper half zero — both decode alike.
#[derive(Clone, Debug, Default)]
pub struct HitPacker {
    words: Vec<u64>,
    /// The last word holds one small hit: room for a second.
    half: bool,
}

impl HitPacker {
    /// Adds a hit. Panics if it fits no packed hit (see [`PackedHit::new`]).
    pub fn push(&mut self, probe: usize, cost: u64) {
        match PackedHit::small(probe, cost) {
            Some(s) if self.half => {
                let last = self.words.last_mut().expect("a half word");
                *last = PackedHit(*last).pair(s).expect("two small hits").0;
                self.half = false;
            }
            Some(s) => {
                self.words.push(s.0);
                self.half = true;
            }
            None => {
                let one = PackedHit::new(probe, cost).expect("a hit that fits a packed hit");
                self.words.push(one.0);
                self.half = false;
            }
        }
    }

    /// The words so far.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.half = false;
    }
}

#[cfg(test)]
mod tests {
    use super::{HitPacker, PackedHit};
    use proptest::prelude::*;

    fn unpack(w: PackedHit) -> Vec<(usize, u64)> {
        let mut v = vec![];
        w.for_each(|p, c| v.push((p, c)));
        v
    }

    #[test]
    fn packed_hits_round_trip() {
        let one = PackedHit::new(PackedHit::MAX_PROBE, PackedHit::MAX_COST).unwrap();
        assert_eq!(
            unpack(one),
            vec![(PackedHit::MAX_PROBE, PackedHit::MAX_COST)]
        );
        assert_eq!(unpack(PackedHit::new(0, 0).unwrap()), vec![(0, 0)]);
        assert_eq!(PackedHit::new(PackedHit::MAX_PROBE + 1, 0), None);
        // A one-hit word's key: a small probe's as a small hit's but for bits 0-1, any cost.
        let key = |probe, cost| PackedHit::one_hit_key(PackedHit::new(probe, cost).unwrap().0);
        let small_key = |probe| PackedHit::small(probe, 7).unwrap().0 as u16 as usize;
        for probe in [0, 1, 300, PackedHit::MAX_SMALL_PROBE] {
            assert_eq!(key(probe, PackedHit::MAX_COST), Some(small_key(probe) & !3));
        }
        assert_eq!(key(PackedHit::MAX_SMALL_PROBE + 1, 0), None);
        assert_eq!(key(PackedHit::MAX_PROBE, 9), None);

        let a = PackedHit::small(5, 0).unwrap();
        let b = PackedHit::small(PackedHit::MAX_SMALL_PROBE, PackedHit::MAX_SMALL_COST).unwrap();
        assert_eq!(unpack(a), vec![(5, 0)]);
        let ab = a.pair(b).unwrap();
        assert_eq!(
            unpack(ab),
            vec![
                (5, 0),
                (PackedHit::MAX_SMALL_PROBE, PackedHit::MAX_SMALL_COST)
            ]
        );
        assert_eq!(PackedHit::small(0, PackedHit::MAX_SMALL_COST + 1), None);
        assert_eq!(PackedHit::small(PackedHit::MAX_SMALL_PROBE + 1, 0), None);
        assert_eq!(ab.pair(a), None, "a word holds two small hits at most");
        assert_eq!(one.pair(a), None, "only small hits pair");

        for w in [one, a, ab] {
            assert!(PackedHit::is_packed(w.0));
        }
        assert!(!PackedHit::is_packed(1), "a hit with an operand");
        assert!(!PackedHit::is_packed(3), "a control record");
        // A second half is a small hit whatever its tag bits.
        assert_eq!(unpack(PackedHit(a.0 | (8 << 32))), vec![(5, 0), (2, 0)]);
    }

    proptest! {
        /// The run's loop decodes any words of packed hits as the word's own decoding does, in
        /// order, with their count and total cost.
        #[test]
        fn a_run_decodes_as_its_words(words in prop::collection::vec(
            prop_oneof![
                // any small pair, any upper half (its tag bits too), or none
                (0u64..1 << 30, 0u64..1 << 32).prop_map(|(lo, hi)| (lo << 2) | 2 | (hi << 32)),
                (0u64..1 << 30).prop_map(|lo| (lo << 2) | 2),
                // any one hit, its low half zero included
                (0u64..1 << 62).prop_map(|w| w << 2),
                Just(1u64 << 32),
            ],
            0..40,
        )) {
            let mut expected = vec![];
            for &w in &words {
                PackedHit(w).for_each(|p, c| expected.push((p, c)));
            }
            let mut got = vec![];
            let total = PackedHit::for_each_in(&words, |p, c| got.push((p, c)));
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(total.hits, expected.len() as u64);
            prop_assert_eq!(total.cost, expected.iter().map(|&(_, c)| c).sum::<u64>());
            prop_assert_eq!(PackedHit::total_of(&words), total);
        }
    }

    proptest! {
        /// A hit packed from its probe's bits is the hit `new` packs, and fits where it does.
        #[test]
        fn packing_from_the_probes_bits_is_packing(
            probe in prop_oneof![0usize..1 << 25, Just(PackedHit::MAX_PROBE)],
            cost in prop_oneof![0u64..1 << 40, Just(PackedHit::MAX_COST), Just(u64::MAX)],
        ) {
            let by_bits = PackedHit::probe_bits(probe).and_then(|b| PackedHit::with_probe_bits(b, cost));
            prop_assert_eq!(by_bits, PackedHit::new(probe, cost));
        }

        /// The costs of words of one hit each sum as their decoding's; their own decoding gives
        /// the hits packed.
        #[test]
        fn words_of_one_hit_decode_and_sum_as_packed(hits in prop::collection::vec(
            (0..=PackedHit::MAX_PROBE, 0..=PackedHit::MAX_COST >> 4), 0..40,
        )) {
            let words: Vec<u64> = hits.iter().map(|&(p, c)| PackedHit::new(p, c).unwrap().0).collect();
            prop_assert_eq!(PackedHit::cost_of_ones(&words), PackedHit::total_of(&words).cost);
            let mut ones = vec![];
            PackedHit::for_each_one_in(&words, |p, c| ones.push((p, c)));
            prop_assert_eq!(ones, hits);
        }
    }

    #[test]
    fn the_packer_pairs_small_hits_and_keeps_their_order() {
        let hits = [(1, 3), (2, 70_000), (3, 4), (4, 5), (5, 6), (1 << 20, 1)];
        let mut p = HitPacker::default();
        for &(probe, cost) in &hits {
            p.push(probe, cost);
        }
        // (1,3) alone (a large one follows), (2,70000) large, (3,4)+(4,5), (5,6) alone, large.
        assert_eq!(p.words().len(), 5);
        let mut back = vec![];
        for &w in p.words() {
            PackedHit(w).for_each(|probe, cost| back.push((probe, cost)));
        }
        assert_eq!(back, hits);
    }
}
