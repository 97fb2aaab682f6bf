//! Call sites for call-site profiles (Cilkprof): which site each spawn and function-entry hit
//! belongs to, and the names of the sites (function and `file:line`, by `cilkview-symbols`).
//!
//! * A spawn's site is its mark (named by where the spawn statement is); in a runtime's preload
//!   library (`cilkview_marks::is_runtime_wrapper`: `run --openmp`'s wrappers, whose spawns are
//!   the program's task constructs) it is the call of the wrapper, keyed and named as an entry's
//!   below (the spawn mark when that is not possible).
//! * A call of a function that has `cv_function()` is keyed by the caller's return address: the
//!   entry mark's probe asks the backend for it ([`ReturnAddress`], from the file's `.eh_frame`),
//!   and it is named by the caller's function and the call's `file:line`.
//! * Where that is not possible the site is, in order: the inlined call (the marked function was
//!   inlined into its caller: the mark is in the caller, named by the inline call's `file:line`);
//!   the callee (no CFI at the mark, the return address unreadable, or in a file the backend
//!   gave no load address of: every call of the function is one site, named by the entry
//!   mark's `file:line`, function `NAME (callee)`). A call inlined from a system header (a
//!   oneTBB template calling `run --tbb`'s wrappers, `std::for_each` calling a marked function)
//!   is named by the innermost inlined frame in the program's own code (the user's
//!   `task_group::run` or `parallel_for` line). A return address in another image than the
//!   mark (a program calling a marked library, `run --openmp`'s preload library called by the
//!   program) is named in that image, with the load addresses the backend reports
//!   (`EventSink::image_base`).
//!
//! Each site also carries its caller function ([`CallSite::in_function`], for top-caller
//! measurements): the source function (DWARF, inlined ones included) containing the spawn mark,
//! the call before the return address, or the inlined call, interned per image with its file;
//! without DWARF the ELF symbol containing it; a callee-keyed site's caller is unknown (docs/engine.md).

use std::collections::HashMap;
use std::path::Path;

/// The site keys' index, looked up at every profiled entry hit whose site is its caller's return
/// address: hashed with foldhash's fixed fast hasher (SipHash took ~15 instructions per hit of a
/// fully marked fib under `--profile`). Nothing iterates it, so its order is never seen.
type KeyIndex = HashMap<(u32, u64, Origin), CallSite, foldhash::fast::FixedState>;

use cilkview_engine::CallSite;
use cilkview_events::{Probe, ReturnAddress};
use cilkview_marks::{MarkKind, MarkedImage};
use cilkview_report::SiteName;
use cilkview_symbols::{CfaRule, Symbolizer};

/// What a site key stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// The spawn mark at this offset.
    Spawn,
    /// A call whose return address is at this offset.
    Call,
    /// A spawn in a runtime's wrapper called with this return address (apart from the call's
    /// own site: the task is both spawned and entered there).
    SpawnCall,
    /// A marked function inlined at the mark at this offset.
    Inlined,
    /// Any call of the function whose entry mark is at this offset.
    Callee,
}

/// What a probe's hits say about sites (kept with the probe in the session's probe table).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ProbeSite {
    /// Not an entry or a spawn.
    None,
    /// Always this site.
    Fixed(CallSite),
    /// An entry (or a runtime wrapper's spawn: `origin`) reporting the return address in its
    /// image; `fallback` when it is not usable.
    Caller {
        image: u32,
        origin: Origin,
        fallback: CallSite,
    },
}

/// The call sites of one session, over every image and thread.
#[derive(Default)]
pub(crate) struct Sites {
    /// Per image asked for (in `probes_for` order): its symbols, if it has entry or spawn marks
    /// and could be read.
    symbols: Vec<Option<Symbolizer>>,
    /// Per image asked for: its path, its load address when the backend said it, and whether
    /// its symbols were looked for (images without marks: only when a return address lies in
    /// them).
    paths: Vec<std::path::PathBuf>,
    bases: Vec<Option<u64>>,
    opened: Vec<bool>,
    /// (image, file-relative offset, origin) → key; `names[key - 1]` is the reverse.
    keys: KeyIndex,
    names: Vec<(u32, u64, Origin)>,
    /// Call-keyed site → the entry mark (image, offset) of the function it calls.
    callees: HashMap<CallSite, (u32, u64)>,
    /// The sites of return addresses inside the image asked about, found lately: a cache in
    /// front of `keys` and the image's bounds, by the return address ([`Recent::slot`]; empty
    /// until the first).
    recent: Vec<Option<Recent>>,
    /// (image, function name, its file) → caller-function key (1, 2, …).
    functions: HashMap<(u32, String, Option<String>), u64>,
}

/// A site keyed by a return address inside the image of the mark that reported it.
#[derive(Clone, Copy)]
struct Recent {
    image: u32,
    origin: Origin,
    return_address: u64,
    site: CallSite,
}

impl Recent {
    /// How many [`Sites::recent`] holds.
    const SLOTS: usize = 256;

    /// The slot of a return address in [`Sites::recent`].
    #[inline(always)]
    fn slot(return_address: u64) -> usize {
        ((return_address ^ (return_address >> 8)) as usize) % Recent::SLOTS
    }
}

impl Sites {
    fn key(&mut self, image: u32, offset: u64, origin: Origin) -> CallSite {
        if let Some(&site) = self.keys.get(&(image, offset, origin)) {
            return site;
        }
        self.names.push((image, offset, origin));
        let site = CallSite::new(self.names.len() as u64)
            .expect("non-zero")
            .in_function(self.function(image, offset, origin));
        self.keys.insert((image, offset, origin), site);
        site
    }

    /// The key of the function containing a new site (0: unknown).
    fn function(&mut self, image: u32, offset: u64, origin: Origin) -> u64 {
        let Some(symbols) = self.symbols.get(image as usize).and_then(Option::as_ref) else {
            return 0;
        };
        let symbol = match origin {
            Origin::Spawn => symbols.lookup(offset),
            Origin::Call | Origin::SpawnCall => symbols.lookup_call_in_own_code(offset),
            Origin::Inlined => symbols
                .inlined_call(offset)
                .unwrap_or_else(|| symbols.lookup(offset)),
            Origin::Callee => return 0,
        };
        let name = match (symbol.function, symbol.symbol) {
            (Some(f), _) => (image, f, symbol.file),
            (None, Some((s, _))) => (image, s, None),
            (None, None) => return 0,
        };
        let next = self.functions.len() as u64 + 1;
        *self.functions.entry(name).or_insert(next)
    }

    /// The probes of a newly asked-for image (`probes`, one per mark of `marked`): each one's
    /// site, in the order of `probes`; asks for the return address at function entries.
    pub(crate) fn image(
        &mut self,
        path: &Path,
        marked: &MarkedImage,
        probes: &mut [Probe],
    ) -> Vec<ProbeSite> {
        let image = self.symbols.len() as u32;
        let wanted = marked
            .marks
            .iter()
            .any(|m| matches!(m.kind, MarkKind::FunctionEnter | MarkKind::Spawn));
        self.symbols
            .push(wanted.then(|| Symbolizer::open(path).ok()).flatten());
        self.paths.push(path.to_owned());
        self.bases.push(None);
        self.opened.push(wanted);
        let spawns_at_caller = wanted && cilkview_marks::is_runtime_wrapper(path);
        let mut sites = Vec::with_capacity(probes.len());
        for (m, probe) in marked.marks.iter().zip(probes.iter_mut()) {
            let offset = probe.offset;
            let site = match m.kind {
                MarkKind::Spawn if spawns_at_caller => {
                    let fallback = self.key(image, offset, Origin::Spawn);
                    self.at_caller(image, Origin::SpawnCall, probe, fallback)
                }
                MarkKind::Spawn => ProbeSite::Fixed(self.key(image, offset, Origin::Spawn)),
                MarkKind::FunctionEnter => {
                    let symbols = self.symbols[image as usize].as_ref();
                    if symbols.is_some_and(|s| s.inlined_call(offset).is_some()) {
                        ProbeSite::Fixed(self.key(image, offset, Origin::Inlined))
                    } else {
                        let fallback = self.key(image, offset, Origin::Callee);
                        self.at_caller(image, Origin::Call, probe, fallback)
                    }
                }
                _ => ProbeSite::None,
            };
            sites.push(site);
        }
        sites
    }

    /// A site keyed by the caller of the function holding `probe` (its return address, asked of
    /// the backend, by the `.eh_frame` rule at the mark), `fallback` where that is not possible.
    fn at_caller(
        &self,
        image: u32,
        origin: Origin,
        probe: &mut Probe,
        fallback: CallSite,
    ) -> ProbeSite {
        let symbols = self.symbols[image as usize].as_ref();
        let rule = symbols.and_then(|s| s.return_address_rule(probe.offset).ok());
        match rule {
            Some(r) if r.return_address_offset == -8 && probe.operand.is_none() => {
                let CfaRule::RegisterOffset {
                    register, offset, ..
                } = r.cfa;
                probe.return_address = Some(ReturnAddress {
                    cfa_register: register,
                    cfa_offset: offset,
                    function_entry: r.function_start,
                });
                ProbeSite::Caller {
                    image,
                    origin,
                    fallback,
                }
            }
            _ => ProbeSite::Fixed(fallback),
        }
    }

    /// The load address of the image last asked for.
    pub(crate) fn base(&mut self, base: u64) {
        if let Some(last) = self.bases.last_mut() {
            *last = Some(base);
        }
    }

    /// The image holding the address `operand` relative to image `from` (a return address in
    /// another file, e.g. a program calling a marked library), and the address relative to it.
    fn foreign(&mut self, from: u32, operand: u64) -> Option<(u32, u64)> {
        let absolute = operand.wrapping_add((*self.bases.get(from as usize)?)?);
        // The image loaded nearest below it.
        let (image, base) = self
            .bases
            .iter()
            .enumerate()
            .filter_map(|(i, b)| Some((i, (*b)?)))
            .filter(|&(i, b)| i != from as usize && b <= absolute)
            .max_by_key(|&(_, b)| b)?;
        if !self.opened[image] {
            self.opened[image] = true;
            self.symbols[image] = Symbolizer::open(&self.paths[image]).ok();
        }
        let offset = absolute - base;
        self.symbols[image]
            .as_ref()
            .is_some_and(|s| s.contains(offset))
            .then_some((image as u32, offset))
    }

    /// The site of a hit of a probe whose site is `probe` with `operand` (the return address,
    /// for an entry). `spawn_caller`, the thread's: the return address a runtime wrapper's spawn
    /// reported, kept for the next hit only — the task's entry in the same wrapper call, which
    /// the emulator reports without one (it reads a return address once per function entry).
    #[inline(always)]
    pub(crate) fn site(
        &mut self,
        probe: ProbeSite,
        mut operand: Option<u64>,
        spawn_caller: &mut Option<u64>,
    ) -> Option<CallSite> {
        let kept = spawn_caller.take();
        if let ProbeSite::Caller { origin, .. } = probe {
            match origin {
                Origin::SpawnCall => *spawn_caller = operand,
                _ => operand = operand.or(kept),
            }
        }
        match probe {
            ProbeSite::None => None,
            ProbeSite::Fixed(site) => Some(site),
            ProbeSite::Caller {
                image,
                origin,
                fallback,
            } => {
                // No return address (none kept either): the fallback, no site keyed.
                let Some(operand) = operand else {
                    return Some(fallback);
                };
                self.keyed_site(image, origin, fallback, operand)
            }
        }
    }

    /// The site of a mark of `origin` in `image` (with its `fallback`) reporting return
    /// address `operand`: [`Sites::caller_site`], and a new call-keyed site's callee noted.
    #[inline(never)]
    fn keyed_site(
        &mut self,
        image: u32,
        origin: Origin,
        fallback: CallSite,
        operand: u64,
    ) -> Option<CallSite> {
        let known = self.names.len();
        let site = self.caller_site(image, origin, fallback, Some(operand));
        // A new call-keyed site: remember the entry mark it calls (its callee's name).
        if self.names.len() > known {
            if let (Some(site), Some(&(image, entry, _))) =
                (site, self.names.get(fallback.key() as usize - 1))
            {
                self.callees.insert(site, (image, entry));
            }
        }
        site
    }

    /// The site of a mark (`origin`: an entry, or a runtime's spawn) reporting return address
    /// `operand` in `image`.
    fn caller_site(
        &mut self,
        image: u32,
        origin: Origin,
        fallback: CallSite,
        operand: Option<u64>,
    ) -> Option<CallSite> {
        let inside = |ra: &u64| {
            self.symbols[image as usize]
                .as_ref()
                .is_some_and(|s| s.contains(*ra))
        };
        let slot = operand.map(Recent::slot);
        if let (Some(ra), Some(Some(r))) = (operand, slot.and_then(|i| self.recent.get(i))) {
            if (r.return_address, r.image, r.origin) == (ra, image, origin) {
                return Some(r.site);
            }
        }
        match (operand, slot) {
            (Some(ra), Some(slot)) if inside(&ra) => {
                let site = self.key(image, ra, origin);
                if self.recent.is_empty() {
                    self.recent.resize(Recent::SLOTS, None);
                }
                self.recent[slot] = Some(Recent {
                    image,
                    origin,
                    return_address: ra,
                    site,
                });
                Some(site)
            }
            (Some(ra), _) => match self.foreign(image, ra) {
                Some((other, offset)) => Some(self.key(other, offset, origin)),
                None => Some(fallback),
            },
            (None, _) => Some(fallback),
        }
    }

    /// The name of `site`: the function containing it and its location.
    pub(crate) fn name(&self, site: CallSite) -> SiteName {
        let Some(&(image, offset, origin)) = self.names.get(site.key() as usize - 1) else {
            return SiteName::default();
        };
        let Some(symbols) = self.symbols.get(image as usize).and_then(Option::as_ref) else {
            return SiteName {
                function: "??".into(),
                location: format!("{offset:#x}"),
                address: None,
                callee: None,
            };
        };
        let symbol = match origin {
            Origin::Spawn | Origin::Callee => symbols.lookup(offset),
            Origin::Call | Origin::SpawnCall => symbols.lookup_call_in_own_code(offset),
            Origin::Inlined => symbols
                .inlined_call(offset)
                .unwrap_or_else(|| symbols.lookup(offset)),
        };
        let mut function = symbol.function_name();
        let callee = match origin {
            Origin::Spawn | Origin::SpawnCall => None,
            Origin::Inlined => Some(symbols.lookup(offset).function_name()),
            Origin::Callee => Some(function.clone()),
            Origin::Call => self.callees.get(&site).and_then(|&(image, entry)| {
                let symbols = self.symbols.get(image as usize)?.as_ref()?;
                Some(symbols.lookup(entry).function_name())
            }),
        };
        if origin == Origin::Callee {
            function.push_str(" (callee)");
        }
        SiteName {
            function,
            location: symbol.location(),
            address: Some(offset),
            callee,
        }
    }
}
