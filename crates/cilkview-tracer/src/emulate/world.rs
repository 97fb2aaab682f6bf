//! What an emulated run's counter reason says beyond the emulator's version: where the
//! program's world under QEMU differed from its native one (set-user-ID, signals QEMU cannot
//! deliver, system calls it lacks, descriptors the program closed) and what ran uncounted.

use std::path::Path;

use super::{launch, EmulatedRun, EmulationNotes, CPU_MODEL};
use crate::ExitStatus;
use cilkview_qemu_plugin::wire::{W_NOSYS, W_RT_HANDLER, W_RT_SELF, W_SECCOMP};

/// QEMU 7.2 gives the guest's real-time signals the host's two above (guest SIGRTMIN, 34, is
/// host 36), so a death by host signal `sig` is one by the guest's `guest_signal(sig)`; the
/// guest's last two (63, 64) have no host signal and are never delivered.
pub(super) fn guest_signal(sig: i32) -> i32 {
    let host_rtmin = nix::libc::SIGRTMIN();
    if sig >= host_rtmin + 2 {
        sig - 2
    } else {
        sig
    }
}

/// Whether a death by `sig` dumps core natively (signal(7): action "Core").
fn dumps_core(sig: i32) -> bool {
    use nix::libc::*;
    [
        SIGQUIT, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE, SIGSEGV, SIGXCPU, SIGXFSZ, SIGSYS,
    ]
    .contains(&sig)
}

/// The tool's soft core-dump limit (the program's when it started).
fn core_limit() -> Option<u64> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_CORE)
        .ok()
        .map(|(soft, _)| soft)
}

/// The name of a system call the plugin saw return ENOSYS.
fn syscall_name(num: u32) -> String {
    use nix::libc;
    let names = [
        (libc::SYS_seccomp, "seccomp"),
        (libc::SYS_io_uring_setup, "io_uring_setup"),
        (libc::SYS_io_uring_enter, "io_uring_enter"),
        (libc::SYS_io_uring_register, "io_uring_register"),
        (libc::SYS_openat2, "openat2"),
        (libc::SYS_ptrace, "ptrace"),
        (libc::SYS_pidfd_open, "pidfd_open"),
        (libc::SYS_pidfd_send_signal, "pidfd_send_signal"),
        (libc::SYS_landlock_create_ruleset, "landlock_create_ruleset"),
    ];
    names
        .iter()
        .find(|(n, _)| *n == i64::from(num))
        .map_or_else(
            || format!("system call {num}"),
            |(_, name)| name.to_string(),
        )
}

/// System calls QEMU 7.2 lacks that glibc tries and does without (at start-up, in
/// pthread_create): their ENOSYS changes nothing the program sees.
const QUIET_ENOSYS: [i64; 3] = [
    nix::libc::SYS_set_robust_list,
    nix::libc::SYS_rseq,
    nix::libc::SYS_clone3,
];

/// What the plugin reported (`Record::World`), in words (`None`: nothing the program sees).
fn world_note(what: u8, detail: u32) -> Option<String> {
    if u64::from(what) == W_NOSYS && QUIET_ENOSYS.contains(&i64::from(detail)) {
        return None;
    }
    Some(world_note_text(what, detail))
}

fn world_note_text(what: u8, detail: u32) -> String {
    let rt = |sig: u32| if sig == 64 { "SIGRTMAX" } else { "SIGRTMAX-1" };
    match u64::from(what) {
        W_RT_HANDLER => format!(
            "the program installed a handler for signal {detail} ({}), which QEMU 7.2 cannot \
             deliver: under emulation that handler never runs",
            rt(detail)
        ),
        W_RT_SELF => format!(
            "the program sent itself signal {detail} ({}), which QEMU 7.2 cannot deliver: it \
             went on where natively the signal would have been handled or ended it",
            rt(detail)
        ),
        W_NOSYS => format!(
            "{} returned ENOSYS under the emulator (QEMU 7.2 does not implement it; natively it \
             may have worked)",
            syscall_name(detail)
        ),
        W_SECCOMP => {
            "QEMU 7.2 refused the program's seccomp filter (prctl(PR_SET_SECCOMP)): it ran \
              without the sandbox it asked for"
                .to_string()
        }
        _ => format!("the emulator reported an unknown change ({what}, {detail})"),
    }
}

impl EmulatedRun {
    /// The counter reason of the run: the emulator, then everything the run did that the
    /// report must say.
    pub(super) fn reason(
        &self,
        emu: &launch::Emulator,
        program: &Path,
        notes: &EmulationNotes,
        status: ExitStatus,
    ) -> String {
        let s = self;
        let mut reason = format!("{} -cpu {CPU_MODEL}", emu.version);
        if let Some(what) = launch::set_id(program) {
            reason += &format!(
                "; {what}: under emulation it ran with the caller's user and group ids (euid {}), \
                 not the ones its mode bits give it natively (use --counter step)",
                crate::sys::geteuid()
            );
        }
        let unpassable = launch::unpassable();
        if !unpassable.is_empty() {
            reason += &format!(
                "; {} kept from the program: QEMU would take it as its own option, and its value has \
                 a comma, which QEMU's -E cannot pass",
                unpassable.join(", ")
            );
        }
        if !notes.forked_children.is_empty() {
            // A child's plugin has no channel to the tool (it must not write into the parent's
            // records): what the emulator changed there is not seen, so it is said to be unseen.
            reason += &format!(
                "; {} forked child process(es) ran uncounted, and what the emulator changed in \
                 them is not seen (a system call QEMU 7.2 lacks, such as ptrace, returns ENOSYS \
                 there too)",
                notes.forked_children.len()
            );
        }
        if s.fds_lost != 0 {
            reason += "; the program closed the emulator's descriptors (e.g. close_range(3, ~0), \
                       closefrom): the records went on through the shared ring";
            if let Some(first) = s.unseen.first() {
                reason += &format!(
                    ", but {} file(s) it mapped for execution after that were not instrumented \
                     (their marks not counted; the first `{}`)",
                    s.unseen.len(),
                    first.display()
                );
            }
        }
        if let Some(sig) = s.lost_at_death {
            reason += &format!(
                "; the program was killed by signal {sig} from outside its own code: QEMU ran no exit \
                 path, so the threads' last marks and counts were read from the plugin's shared \
                 buffers (each thread's last strand is exact to within its last translation block)"
            );
        }
        if let Some(last) = notes.followed_execs.last() {
            reason += &format!(
                "; the program exec'd {}, counted under the emulator",
                match notes.followed_execs.len() {
                    1 => format!("`{}`", last.display()),
                    n => format!("{n} images (the last `{}`)", last.display()),
                }
            );
        }
        if let Some(p) = &notes.native_exec {
            reason += &format!(
                "; the program exec'd `{}`, which ran natively, outside the emulator: not counted",
                p.display()
            );
        }
        let changed: Vec<String> = self
            .world
            .iter()
            .filter_map(|&(w, d)| world_note(w, d))
            .collect();
        if !changed.is_empty() {
            reason += &format!("; what emulation changed: {}", changed.join("; "));
        }
        if let ExitStatus::Signaled(sig) = status {
            if dumps_core(sig) && core_limit() != Some(0) {
                reason += "; no core dump was written: QEMU's core limit is 0 under the plugin \
                           (it would write the program's as qemu_*.core and its own beside it), \
                           so a crash under emulation leaves none";
            }
        }
        if let Some(sig) = self.unexplained {
            reason += &match sig {
                nix::libc::SIGILL => format!(
                    "; SIGILL did not come from the program itself: if nothing else sent it, the \
                     emulated CPU ({CPU_MODEL}) lacks one of its instructions (e.g. AVX-512): use \
                     --counter step"
                ),
                _ => format!(
                    "; signal {sig} did not come from the program itself: if nothing else sent \
                     it, QEMU failed (see its message above): use --counter step"
                ),
            };
        }
        reason
    }
}
