//! Finding the separate debug file of a stripped ELF file, as GDB does (GDB manual, "Debugging
//! Information in Separate Files"): by build-id under `ROOT/.build-id/`, then by
//! `.gnu_debuglink` (name and CRC-32) beside the file, in its `.debug/` folder, and under `ROOT`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use object::Object;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn crc_matches(path: &Path, crc: u32) -> bool {
    std::fs::read(path).is_ok_and(|data| crc32fast::hash(&data) == crc)
}

/// The separate debug file of `file` (read from `path`), if one is found.
pub(crate) fn find(path: &Path, file: &object::File, root: &Path) -> Option<PathBuf> {
    if let Ok(Some(id)) = file.build_id() {
        if id.len() >= 2 {
            let h = hex(id);
            let p = root
                .join(".build-id")
                .join(&h[..2])
                .join(format!("{}.debug", &h[2..]));
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let (name, crc) = file.gnu_debuglink().ok()??;
    let name = Path::new(OsStr::from_bytes(name));
    let dir = path.parent().unwrap_or(Path::new("."));
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    if let Ok(abs) = dir.canonicalize() {
        let relative = abs.strip_prefix("/").unwrap_or(&abs);
        candidates.push(root.join(relative).join(name));
    }
    let own = path.canonicalize().ok();
    candidates
        .into_iter()
        .find(|c| c.is_file() && c.canonicalize().ok() != own && crc_matches(c, crc))
}
