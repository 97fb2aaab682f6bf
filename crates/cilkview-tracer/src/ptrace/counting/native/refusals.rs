//! What the native counter refuses before it changes anything in a process: it sets itself up by
//! running system calls inside the program (`inject.rs`), which a stopped process or a seccomp
//! filter of the program's own would not survive as it was.

use crate::procfs;
use crate::sys::Tid;

/// Why the native counter will not set itself up in process `pid` now (its threads all stopped
/// by the tracer; `group_stopped`: one is stopped by a signal), or `None`.
pub(super) fn refusal(pid: Tid, group_stopped: bool) -> Option<String> {
    if group_stopped {
        return Some(
            "it is stopped (SIGSTOP, a terminal's job control or a debugger), and the native \
             counter sets itself up by running system calls in it, which would take it out of \
             its stop"
                .into(),
        );
    }
    seccomp_refusal(pid)
}

/// A thread of `pid` under seccomp filters beyond the ones this tool runs under (those of its
/// container or service manager, inherited by both: they let the tool's own `mmap` and
/// `memfd_create` through): a filter of the program's own may fail or punish (`SECCOMP_RET_KILL`)
/// the calls the native counter injects — executable mappings, `memfd_create`, `madvise`.
fn seccomp_refusal(pid: Tid) -> Option<String> {
    let ours = filters("/proc/self/status");
    let tasks = procfs::tasks(pid).ok()?;
    tasks.into_iter().find_map(|tid| {
        let path = format!("/proc/{pid}/task/{tid}/status");
        let mode = procfs::status_field(&path, "Seccomp")?;
        let theirs = filters(&path);
        let why = match mode.as_str() {
            "1" => "in seccomp's strict mode (only read, write, exit and sigreturn)".to_string(),
            "2" if theirs > ours => format!(
                "under {} seccomp filter{} of its own",
                theirs - ours,
                if theirs - ours == 1 { "" } else { "s" }
            ),
            _ => return None,
        };
        Some(format!(
            "its thread {tid} runs {why}, and the native counter sets itself up by running \
             system calls in it (executable mappings, memfd_create), which a filter may refuse \
             or answer by killing the process"
        ))
    })
}

/// `Seccomp_filters` of a status file (0 where the kernel does not say).
fn filters(status: &str) -> u64 {
    procfs::status_field(status, "Seccomp_filters")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether process `pid`'s executable sets its own `%gs` base, where the native counter keeps
/// each thread's record slot: `Some(reason)` naming where.
pub(super) fn gs_refusal(pid: Tid) -> Option<String> {
    let exe = procfs::exe(pid).ok()?;
    let data = std::fs::read(format!("/proc/{pid}/exe")).ok()?;
    let (name, at) = sets_gs_base(&data)?;
    Some(format!(
        "{} sets its own %gs base ({name} at file offset {at:#x}), and the native counter's \
         stubs find each thread's record slot through %gs",
        exe.display()
    ))
}

/// The first instruction of `elf`'s code sections that sets the `%gs` base, as far as bytes
/// tell ([`gs_setter`]), and its file offset.
pub(super) fn sets_gs_base(elf: &[u8]) -> Option<(&'static str, usize)> {
    use object::{Object, ObjectSection, SectionKind};
    let file = object::File::parse(elf).ok()?;
    file.sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((s.file_range()?.0 as usize, s.data().ok()?)))
        .find_map(|(start, code)| gs_setter(code).map(|(what, i)| (what, start + i)))
}

/// The first `wrgsbase` in `code`, or the `ARCH_SET_GS` (0x1001) operand of `arch_prctl`
/// loaded into its first argument (`mov $0x1001, %edi`) or into `syscall()`'s second (`%esi`):
/// what it is and its offset.
fn gs_setter(code: &[u8]) -> Option<(&'static str, usize)> {
    code.windows(5).enumerate().find_map(|(i, w)| {
        if (w[0] == 0xbf || w[0] == 0xbe) && w[1..] == [0x01, 0x10, 0x00, 0x00] {
            return Some(("arch_prctl(ARCH_SET_GS)", i));
        }
        // wrgsbase r32/r64: f3 [REX] 0f ae /3 with mod 11.
        let rex = (0x40..=0x4f).contains(&w[1]);
        let (op, modrm) = if rex {
            (&w[2..4], w[4])
        } else {
            (&w[1..3], w[3])
        };
        (w[0] == 0xf3 && op == [0x0f, 0xae] && modrm & 0xf8 == 0xd8).then_some(("wrgsbase", i))
    })
}

#[cfg(test)]
mod tests {
    use super::gs_setter;

    #[test]
    fn code_setting_the_gs_base_is_found() {
        let nop = [0x90u8; 3];
        let found = |code: &[u8]| gs_setter(&[&nop[..], code, &nop[..]].concat());
        // mov $0x1001,%edi / %esi
        assert_eq!(
            found(&[0xbf, 1, 0x10, 0, 0]),
            Some(("arch_prctl(ARCH_SET_GS)", 3))
        );
        assert_eq!(
            found(&[0xbe, 1, 0x10, 0, 0]),
            Some(("arch_prctl(ARCH_SET_GS)", 3))
        );
        // wrgsbase %rax, %r8, %eax
        assert_eq!(
            found(&[0xf3, 0x48, 0x0f, 0xae, 0xd8]),
            Some(("wrgsbase", 3))
        );
        assert_eq!(
            found(&[0xf3, 0x49, 0x0f, 0xae, 0xd8]),
            Some(("wrgsbase", 3))
        );
        assert_eq!(found(&[0xf3, 0x0f, 0xae, 0xd8]), Some(("wrgsbase", 3)));
        // ARCH_SET_FS (0x1002), wrfsbase (/2), rdgsbase (/1), a 0x1001 in another register
        assert_eq!(found(&[0xbf, 2, 0x10, 0, 0]), None);
        assert_eq!(found(&[0xf3, 0x48, 0x0f, 0xae, 0xd0]), None);
        assert_eq!(found(&[0xf3, 0x48, 0x0f, 0xae, 0xc8]), None);
        assert_eq!(found(&[0xba, 1, 0x10, 0, 0]), None);
    }
}
