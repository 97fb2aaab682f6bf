//! Breakpoints mode: the dynamic loader's debugger hook `r_brk` (`_dl_debug_state`), patched
//! with an `int3` whose stop emulates the function (a bare `ret`) and rescans the mapped files,
//! so that libraries loaded after start-up (`dlopen`) get their probes.

use std::path::{Path, PathBuf};

use nix::libc;
use object::{Object, ObjectSegment, ObjectSymbol};

use super::probes::{exec_files, Patch};
use super::{ptrace_err, Core};
use crate::procfs::{self, Mem};
use crate::sys::{self, Tid};
use crate::TraceError;

#[derive(Clone, Copy, Debug)]
pub(crate) struct LoaderHook {
    pub(crate) addr: u64,
    /// Instructions the function executes natively (`ret`: 1, `endbr64; ret`: 2).
    pub(crate) native: u64,
    /// Address of `_r_debug.r_state` (rescan only when it is `RT_CONSISTENT`),
    /// if the loader exports `_r_debug`; else rescan at every call.
    r_state: Option<u64>,
}

impl LoaderHook {
    /// Is the link map consistent (a good moment to rescan)?
    pub(crate) fn consistent(&self, tid: Tid) -> bool {
        self.r_state
            .is_none_or(|a| sys::peek(tid, a).map_or(true, |v| v as u32 == 0))
    }
}

/// Offset of symbol `name` in an ELF file's image, as for [`crate::Probe::offset`]: symbol value
/// minus the page-aligned lowest `PT_LOAD` virtual address. Looks in the dynamic symbols, then
/// the static ones. `None` if not found or not a readable ELF file.
pub(crate) fn symbol_offset(data: &[u8], name: &str) -> Option<u64> {
    let file = object::File::parse(data).ok()?;
    let base = file.segments().map(|s| s.address()).min()? & !0xfff;
    file.dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.name() == Ok(name))
        .map(|s| s.address().wrapping_sub(base))
}

/// Patch an `int3` on the loader's `r_brk` of process `pid` (found through `AT_BASE` and the
/// loader's symbol table). `None` (nothing patched) when there is no loader (static
/// executables), its symbols cannot be read, or the function is not a plain `ret`
/// (`[endbr64;] ret`, `rep ret`).
pub(crate) fn plant(core: &mut Core<'_>, pid: Tid) -> Result<Option<LoaderHook>, TraceError> {
    const AT_BASE: u64 = 7;
    let Some(at_base) = procfs::auxv(pid, AT_BASE)
        .ok()
        .flatten()
        .filter(|&b| b != 0)
    else {
        return Ok(None);
    };
    let maps = procfs::maps(pid).map_err(|source| TraceError::Proc { pid, source })?;
    let Some(ld) = exec_files(pid, &maps)
        .into_iter()
        .find(|f| f.base == at_base)
    else {
        return Ok(None);
    };
    let path = if Path::new(&ld.key.2).exists() {
        PathBuf::from(&ld.key.2)
    } else {
        PathBuf::from(&ld.map_file)
    };
    let Ok(data) = std::fs::read(&path) else {
        return Ok(None);
    };
    let Some(off) = symbol_offset(&data, "_dl_debug_state") else {
        return Ok(None);
    };
    // struct r_debug { int r_version; struct link_map *r_map; ElfW(Addr) r_brk; enum r_state; ... }
    let r_state = symbol_offset(&data, "_r_debug").map(|o| at_base + o + 24);
    let addr = at_base + off;
    let mem = Mem::open(pid).map_err(|source| TraceError::Proc { pid, source })?;
    let mut code = [0u8; 5];
    if mem.read(addr, &mut code).is_err() {
        return Ok(None);
    }
    let native = match code {
        [0xc3, ..] | [0xf3, 0xc3, ..] => 1,  // ret, rep ret
        [0xf3, 0x0f, 0x1e, 0xfa, 0xc3] => 2, // endbr64; ret
        _ => return Ok(None),
    };
    mem.write(addr, &[0xcc])
        .map_err(|source| TraceError::Proc { pid, source })?;
    core.add_patch(Patch {
        addr,
        orig: code,
        len: 1,
    });
    Ok(Some(LoaderHook {
        addr,
        native,
        r_state,
    }))
}

/// Thread `tid` stopped at the hook's `int3`: return from the function as its `ret` would.
pub(crate) fn emulate_ret(tid: Tid, regs: &libc::user_regs_struct) -> Result<(), TraceError> {
    let ret = sys::peek(tid, regs.rsp).map_err(ptrace_err("PEEKDATA", tid))?;
    let mut r = *regs;
    r.rip = ret;
    r.rsp = r.rsp.wrapping_add(8);
    sys::setregs(tid, r).map_err(ptrace_err("SETREGS", tid))
}
