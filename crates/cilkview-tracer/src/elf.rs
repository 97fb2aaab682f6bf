//! Just enough ELF64 (little-endian) reading to find a symbol of the dynamic
//! loader: the `_dl_debug_state` / `_r_debug` pair of its debugger interface.

/// Offset of symbol `name` in the file's image, as for [`crate::Probe::offset`]:
/// symbol value minus the page-aligned lowest `PT_LOAD` virtual address.
/// Looks in `.dynsym`, then `.symtab`. `None` if not found or malformed.
pub fn symbol_offset(data: &[u8], name: &str) -> Option<u64> {
    if data.get(..6)? != b"\x7fELF\x02\x01" {
        return None; // not ELF64 little-endian
    }
    let phoff = u64_at(data, 0x20)? as usize;
    let shoff = u64_at(data, 0x28)? as usize;
    let phentsize = u16_at(data, 0x36)? as usize;
    let phnum = u16_at(data, 0x38)? as usize;
    let shentsize = u16_at(data, 0x3a)? as usize;
    let shnum = u16_at(data, 0x3c)? as usize;
    let mut first_load: Option<u64> = None;
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(data, ph)? == 1 {
            let vaddr = u64_at(data, ph + 0x10)?;
            first_load = Some(first_load.map_or(vaddr, |l| l.min(vaddr)));
        }
    }
    let base = first_load? & !0xfff;
    for want in [11u32, 2] {
        // SHT_DYNSYM, then SHT_SYMTAB
        for i in 0..shnum {
            let sh = shoff.checked_add(i.checked_mul(shentsize)?)?;
            if u32_at(data, sh + 4)? != want {
                continue;
            }
            let off = u64_at(data, sh + 0x18)? as usize;
            let size = u64_at(data, sh + 0x20)? as usize;
            let link = u32_at(data, sh + 0x28)? as usize;
            let strsh = shoff.checked_add(link.checked_mul(shentsize)?)?;
            let stroff = u64_at(data, strsh + 0x18)? as usize;
            let strsize = u64_at(data, strsh + 0x20)? as usize;
            let strtab = data.get(stroff..stroff.checked_add(strsize)?)?;
            for s in (off..off.checked_add(size)?).step_by(24) {
                let n = u32_at(data, s)? as usize;
                let Some(rest) = strtab.get(n..) else {
                    continue;
                };
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                if &rest[..end] == name.as_bytes() {
                    let value = u64_at(data, s + 8)?;
                    if value != 0 {
                        return value.checked_sub(base);
                    }
                }
            }
        }
    }
    None
}

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        d.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        d.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        d.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_the_loader_debug_symbols() {
        // The system's dynamic loader, where there is one.
        let Ok(data) = std::fs::read("/lib64/ld-linux-x86-64.so.2") else {
            return;
        };
        let brk = super::symbol_offset(&data, "_dl_debug_state").expect("_dl_debug_state");
        let rdebug = super::symbol_offset(&data, "_r_debug").expect("_r_debug");
        assert_ne!(brk, rdebug);
        assert_eq!(super::symbol_offset(&data, "no_such_symbol_xyz"), None);
        assert_eq!(super::symbol_offset(b"not an elf", "_r_debug"), None);
    }
}
