//! `run --locks`: the marks of the `--locks` preload library (cilkview-marks' `locks.rs` labels,
//! read only in a runtime's preload library) turned into the work held under each lock, per
//! acquiring call site (docs/locks.md). They are not engine events: their strands are charged
//! to the thread's engine as any foreign probe's, and the work held is the engine's cost
//! accumulated between an acquire and its release.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use cilkview_marks::locks::{LOCK_ACQUIRE_LABEL, LOCK_RELEASE_LABEL, LOCK_SITE_LABEL};
use cilkview_marks::MarkedImage;
use cilkview_report::{LockSiteReport, LocksReport};
use cilkview_symbols::Symbolizer;

/// What a lock mark says; its operand is an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockMark {
    /// The return address of the call acquiring the lock of the next `Acquire`.
    Site,
    /// The lock at this address was acquired.
    Acquire,
    /// The lock at this address is about to be released.
    Release,
}

impl LockMark {
    /// The lock marks of an image, one per mark (`None`: not a lock mark): only a runtime's
    /// preload library's labels count, so that a program's own region of that name stays one.
    pub(crate) fn of_image(path: &Path, marked: &MarkedImage) -> Vec<Option<LockMark>> {
        let of = |label: Option<&str>| match label? {
            LOCK_SITE_LABEL => Some(LockMark::Site),
            LOCK_ACQUIRE_LABEL => Some(LockMark::Acquire),
            LOCK_RELEASE_LABEL => Some(LockMark::Release),
            _ => None,
        };
        let marks: Vec<_> = marked
            .marks
            .iter()
            .map(|m| of(m.label.as_deref()))
            .collect();
        if marks.iter().any(Option::is_some) && cilkview_marks::is_runtime_wrapper(path) {
            marks
        } else {
            vec![None; marks.len()]
        }
    }
}

/// One lock held by a thread.
#[derive(Clone, Copy, Debug)]
struct Held {
    lock: u64,
    site: u64,
    /// The thread's engine's cost when it was acquired.
    since: u64,
    /// Acquisitions not yet released (a recursive mutex): held until the last release.
    depth: u32,
}

/// The locks one thread holds.
#[derive(Default, Debug)]
pub(crate) struct HeldLocks {
    /// The site of the acquire mark that comes next.
    site: Option<u64>,
    held: Vec<Held>,
}

/// Acquisitions and work held of one acquiring site.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(crate) struct Usage {
    pub(crate) acquisitions: u64,
    pub(crate) held: u64,
}

/// The locks of a session: the images (to name the sites) and each site's usage.
#[derive(Default, Debug)]
pub(crate) struct Locks {
    /// Whether an image had lock marks (the `--locks` library was loaded).
    pub(crate) seen: bool,
    images: Vec<(PathBuf, Option<u64>)>,
    /// Acquiring call's return address (absolute) → its usage.
    sites: HashMap<u64, Usage>,
}

impl HeldLocks {
    /// A lock mark hit with `operand` when the thread's engine has cost `now` (the hit's strand
    /// charged).
    pub(crate) fn hit(
        &mut self,
        mark: LockMark,
        operand: Option<u64>,
        now: u64,
        locks: &mut Locks,
    ) {
        let Some(address) = operand else { return };
        match mark {
            LockMark::Site => self.site = Some(address),
            LockMark::Acquire => {
                let site = self.site.take().unwrap_or(0);
                locks.sites.entry(site).or_default().acquisitions += 1;
                match self.held.iter_mut().rev().find(|h| h.lock == address) {
                    Some(h) => h.depth += 1,
                    None => self.held.push(Held {
                        lock: address,
                        site,
                        since: now,
                        depth: 1,
                    }),
                }
            }
            LockMark::Release => {
                // A release without its acquire (a read lock's, one taken before the marks) is
                // no critical section.
                let Some(i) = self.held.iter().rposition(|h| h.lock == address) else {
                    return;
                };
                self.held[i].depth -= 1;
                if self.held[i].depth == 0 {
                    let h = self.held.remove(i);
                    locks.sites.entry(h.site).or_default().held += now.wrapping_sub(h.since);
                }
            }
        }
    }

    /// The thread ended with cost `now`: what it still holds is held until then.
    pub(crate) fn end(&mut self, now: u64, locks: &mut Locks) {
        for h in self.held.drain(..) {
            locks.sites.entry(h.site).or_default().held += now.wrapping_sub(h.since);
        }
    }
}

impl Locks {
    /// An image asked for (all of them, in order).
    pub(crate) fn image(&mut self, path: &Path) {
        self.images.push((path.to_owned(), None));
    }

    /// The load address of the image last asked for.
    pub(crate) fn base(&mut self, base: u64) {
        if let Some(last) = self.images.last_mut() {
            last.1 = Some(base);
        }
    }

    /// Each site's usage, by return address.
    #[cfg(test)]
    pub(crate) fn usage(&self) -> &HashMap<u64, Usage> {
        &self.sites
    }

    /// The report's block, the shares of `work`; `None` when no image had lock marks.
    pub(crate) fn report(&self, work: u64) -> Option<LocksReport> {
        if !self.seen {
            return None;
        }
        let mut symbols: HashMap<usize, Option<Symbolizer>> = HashMap::new();
        let sites = self
            .sites
            .iter()
            .map(|(&address, usage)| {
                let (function, location) = self.name(address, &mut symbols);
                LockSiteReport::new(function, location, usage.acquisitions, usage.held, work)
            })
            .collect();
        Some(LocksReport { sites })
    }

    /// The function and `file:line` of the call returning to `address`, in the image loaded
    /// nearest below it (in the program's own code, out of inlined system headers).
    fn name(
        &self,
        address: u64,
        symbols: &mut HashMap<usize, Option<Symbolizer>>,
    ) -> (String, String) {
        let unknown = || ("??".to_string(), format!("{address:#x}"));
        let Some((i, base)) = self
            .images
            .iter()
            .enumerate()
            .filter_map(|(i, (_, b))| Some((i, (*b)?)))
            .filter(|&(_, b)| b <= address)
            .max_by_key(|&(_, b)| b)
        else {
            return unknown();
        };
        let symbolizer = symbols
            .entry(i)
            .or_insert_with(|| Symbolizer::open(&self.images[i].0).ok());
        match symbolizer {
            Some(s) if s.contains(address - base) => {
                let symbol = s.lookup_call_in_own_code(address - base);
                (symbol.function_name(), symbol.location())
            }
            _ => unknown(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Site marks, acquires and releases at engine costs: the work between each acquire and its
    /// release goes to the acquiring site.
    #[test]
    fn work_between_acquire_and_release_goes_to_the_acquiring_site() {
        let (mut locks, mut t) = (Locks::default(), HeldLocks::default());
        let mut hit = |mark, operand, now| t.hit(mark, Some(operand), now, &mut locks);
        // Site 0x10 takes lock A at 100, site 0x20 takes lock B inside it at 150.
        hit(LockMark::Site, 0x10, 100);
        hit(LockMark::Acquire, 0xa, 100);
        hit(LockMark::Site, 0x20, 150);
        hit(LockMark::Acquire, 0xb, 150);
        // A released first (not LIFO): held 100..200; B until 260.
        hit(LockMark::Release, 0xa, 200);
        hit(LockMark::Release, 0xb, 260);
        // A read lock's release: no acquire, ignored.
        hit(LockMark::Release, 0xc, 300);
        // A recursive mutex taken twice at site 0x10: held from the first to the last release.
        hit(LockMark::Site, 0x10, 400);
        hit(LockMark::Acquire, 0xa, 400);
        hit(LockMark::Site, 0x10, 410);
        hit(LockMark::Acquire, 0xa, 410);
        hit(LockMark::Release, 0xa, 420);
        hit(LockMark::Release, 0xa, 450);
        // Held at the thread's end: held until then.
        hit(LockMark::Site, 0x20, 500);
        hit(LockMark::Acquire, 0xb, 500);
        t.end(530, &mut locks);
        let usage = locks.usage();
        assert_eq!(
            usage[&0x10],
            Usage {
                acquisitions: 3,
                held: 100 + 50
            }
        );
        assert_eq!(
            usage[&0x20],
            Usage {
                acquisitions: 2,
                held: 110 + 30
            }
        );
        assert_eq!(usage.len(), 2);
    }

    #[test]
    fn no_block_without_the_library_and_unnamed_sites_say_their_address() {
        let mut locks = Locks::default();
        assert_eq!(locks.report(1000), None);
        locks.seen = true;
        assert_eq!(locks.report(1000), Some(LocksReport::default()));
        let mut t = HeldLocks::default();
        t.hit(LockMark::Site, Some(0x1234), 0, &mut locks);
        t.hit(LockMark::Acquire, Some(0xa), 0, &mut locks);
        t.hit(LockMark::Release, Some(0xa), 250, &mut locks);
        let block = locks.report(1000).unwrap();
        assert_eq!(block.sites.len(), 1);
        let s = &block.sites[0];
        assert_eq!(
            (s.location.as_str(), s.held_work, s.share),
            ("0x1234", 250, 0.25)
        );
        assert_eq!(s.bound, Some(4.0));
    }
}
