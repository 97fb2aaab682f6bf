//! The checks every backend makes on the probes it is given for one mapped file, before using
//! them: each points at a mark's NOP in the process's memory, names registers that exist, and
//! appears once.

use std::collections::HashSet;
use std::path::Path;

use cilkview_marks::MARK_NOP;

use crate::procfs::Mem;
use crate::{Probe, TraceError};

/// Checks `probes` of `image`, mapped at `base` in the process whose memory is `mem`.
pub(crate) fn check_probes(
    mem: &Mem,
    image: &Path,
    base: u64,
    probes: &[Probe],
) -> Result<(), TraceError> {
    let register = |probe: usize, what: &'static str, register: u16| TraceError::BadRegister {
        image: image.to_path_buf(),
        probe,
        what,
        register,
    };
    let mut offsets = HashSet::with_capacity(probes.len());
    for (i, p) in probes.iter().enumerate() {
        let mut found = [0u8; 5];
        if mem.read(base.wrapping_add(p.offset), &mut found).is_err() || found != MARK_NOP {
            return Err(TraceError::BadProbe {
                image: image.to_path_buf(),
                offset: p.offset,
                found,
            });
        }
        if let Some(r) = p.operand.filter(|&r| r > 15) {
            return Err(register(i, "operand", r));
        }
        if let Some(ra) = p.return_address.filter(|ra| ra.cfa_register > 15) {
            return Err(register(i, "CFA", ra.cfa_register));
        }
        if !offsets.insert(p.offset) {
            return Err(TraceError::DuplicateProbe {
                image: image.to_path_buf(),
                offset: p.offset,
            });
        }
    }
    Ok(())
}
