//! The probes of the current program image as the hot path reads them: each one's entry
//! ([`ProbeEntry`]) and its [`HotKind`], a byte, in a table of their own ([`ProbeTable`]),
//! the small hits' kinds by the low 16 bits of their half word.

use cilkview_engine::EventKind;
use cilkview_events::PackedHit;

use crate::locks::LockMark;
use crate::nesting::MarkPlace;
use crate::sites::ProbeSite;

/// What one probe of the current program image means: one entry of the session's probe table.
#[derive(Clone, Copy)]
pub(crate) struct ProbeEntry {
    /// The engine's event (region labels interned; a loop's grain comes with each hit).
    pub(crate) kind: EventKind,
    /// Where the mark is (read only for warnings).
    pub(crate) place: MarkPlace,
    /// The call site its hits belong to (`ProbeSite::None` unless profiling call sites).
    pub(crate) site: ProbeSite,
    /// A lock mark of the `--locks` library: not an engine event (`locks.rs`).
    pub(crate) lock: Option<LockMark>,
}

/// What a hit of a probe without an operand is to the hot loops: its engine event, when that is
/// all the hit is (a kind with no data, or a loop's beginning of grain 1), or `General`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum HotKind {
    FunctionEnter,
    FunctionExit,
    Spawn,
    SpawnReturn,
    Sync,
    LoopBegin,
    IterationBegin,
    IterationEnd,
    LoopEnd,
    /// The general path: a lock mark, a region's begin or end, a spawn-after or wait-for.
    General,
    /// In the table of small hits ([`ProbeTable::small`]) only: the bits are no small hit. In a
    /// word's low half, the word is one hit ([`PackedHit::new`]'s form); in its high half, the
    /// word has no second hit (the half is zero).
    NotSmall,
}

impl HotKind {
    pub(super) fn of(entry: &ProbeEntry) -> HotKind {
        if entry.lock.is_some() {
            return HotKind::General;
        }
        match entry.kind {
            EventKind::FunctionEnter => HotKind::FunctionEnter,
            EventKind::FunctionExit => HotKind::FunctionExit,
            EventKind::Spawn => HotKind::Spawn,
            EventKind::SpawnReturn => HotKind::SpawnReturn,
            EventKind::Sync => HotKind::Sync,
            EventKind::LoopBegin { grain: 1 } => HotKind::LoopBegin,
            EventKind::IterationBegin => HotKind::IterationBegin,
            EventKind::IterationEnd => HotKind::IterationEnd,
            EventKind::LoopEnd => HotKind::LoopEnd,
            _ => HotKind::General,
        }
    }

    /// The index of a word's two kinds in the hot loop's one jump a word.
    #[inline(always)]
    pub(super) const fn pair(first: HotKind, second: HotKind) -> u8 {
        ((first as u8) << 4) | second as u8
    }
}

/// The low 16 bits of a word of packed hits: its form (bits 0–1) and, for a small hit, the
/// probe (bits 2–15).
const SMALL_KEYS: usize = 1 << 16;

/// The probes of the current program image, indexed like the backend's probe numbers: each
/// one's entry, and its [`HotKind`] in a table of its own (a byte a probe: what the hot loops
/// read).
pub(crate) struct ProbeTable {
    pub(super) entries: Vec<ProbeEntry>,
    pub(super) hot: Vec<HotKind>,
    /// The [`HotKind`] of a small hit by the low 16 bits of its half word (form and probe, as
    /// the plugin writes them): the loop over words of small hits reads its kind with no
    /// shift, mask or bounds check. A key without bit 1 (no small hit) is
    /// [`HotKind::NotSmall`]; a probe that is not ours, `General`.
    pub(super) small: Box<[HotKind; SMALL_KEYS]>,
    /// The [`HotKind`] of a word of one hit whose probe is small, by its low 16 bits
    /// ([`PackedHit::one_hit_key`]: the probe shifted, bits 0–1 `00`), as `small` for small
    /// hits: the loop over the native drain's words of one hit reads its kind with no shift,
    /// mask or bounds check. A key with bits 0–1 not `00` is never read (`General`).
    pub(super) ones: Box<[HotKind; SMALL_KEYS]>,
}

/// A table of [`HotKind`]s by a half word's low 16 bits, every entry `General`.
fn general_by_key() -> Box<[HotKind; SMALL_KEYS]> {
    let table = vec![HotKind::General; SMALL_KEYS].into_boxed_slice();
    table.try_into().expect("SMALL_KEYS entries")
}

impl Default for ProbeTable {
    fn default() -> ProbeTable {
        let mut table = ProbeTable {
            entries: Vec::new(),
            hot: Vec::new(),
            small: general_by_key(),
            ones: general_by_key(),
        };
        table.fill_small();
        table
    }
}

impl ProbeTable {
    pub(crate) fn push(&mut self, entry: ProbeEntry) {
        let kind = HotKind::of(&entry);
        if let Some(key) = PackedHit::small(self.hot.len(), 0) {
            // Both keys with bit 1 set: the hot loop reads any word with it as a small hit.
            let key = key.0 as usize & (SMALL_KEYS - 1);
            self.small[key] = kind;
            self.small[key | 1] = kind;
            self.ones[key & !3] = kind;
        }
        self.hot.push(kind);
        self.entries.push(entry);
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops the first `n` probes: the others are numbered from 0.
    pub(crate) fn drop_first(&mut self, n: usize) {
        self.entries.drain(..n);
        self.hot.drain(..n);
        self.fill_small();
    }

    /// [`ProbeTable::small`] from `hot`.
    fn fill_small(&mut self) {
        let kind_of = |key: usize| self.hot.get(key >> 2).copied();
        for (key, kind) in self.small.iter_mut().enumerate() {
            *kind = match key & 2 {
                0 => HotKind::NotSmall,
                _ => kind_of(key).unwrap_or(HotKind::General),
            };
        }
        for (key, kind) in self.ones.iter_mut().enumerate() {
            *kind = match key & 3 {
                0 => kind_of(key).unwrap_or(HotKind::General),
                _ => HotKind::General,
            };
        }
    }

    /// The [`HotKind`] of the hit of `word`, a word of one hit ([`PackedHit::new`]'s) whose
    /// probe is not small (not in [`ProbeTable::ones`]): out of line.
    #[cold]
    #[inline(never)]
    pub(super) fn kind_of_large(&self, word: u64) -> HotKind {
        self.kind_of(PackedHit::one_hit(word).0)
    }

    /// The [`HotKind`] of `probe`'s hits (`General` for a probe not ours).
    #[inline(always)]
    pub(super) fn kind_of(&self, probe: usize) -> HotKind {
        self.hot.get(probe).copied().unwrap_or(HotKind::General)
    }
}
