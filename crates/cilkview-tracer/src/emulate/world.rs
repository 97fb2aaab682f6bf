//! The notes of an emulated run: the emulator, where the program's world under QEMU differed
//! from its native one (set-user-ID, signals QEMU cannot deliver, system calls it lacks,
//! descriptors the program closed) and what ran uncounted.

use std::path::Path;

use super::{emulator, launch, EmulatedRun, EmulationNotes, CPU_MODEL};
use crate::ExitStatus;
use cilkview_events::Note;
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
    /// The notes of the run: the emulator, then everything the run did that the report must
    /// say, one [`Note`] each (`text` one line, `detail` the rest).
    pub(super) fn notes(
        &self,
        emu: &emulator::Emulator,
        program: &Path,
        notes: &EmulationNotes,
        status: ExitStatus,
    ) -> Vec<Note> {
        let mut out = vec![Note::new("emulator", emu.version.clone())
            .with_detail(format!("emulated CPU: -cpu {CPU_MODEL}"))];
        out.extend(self.launch_notes(program));
        out.extend(self.uncounted_notes(notes));
        out.extend(
            self.world
                .iter()
                .filter_map(|&(w, d)| world_note(w, d))
                .map(|text| Note::new("emulation-changed", text)),
        );
        out.extend(self.ending_notes(status));
        out
    }

    /// What the program was started without: its set-user-ID bits, variables QEMU cannot pass.
    fn launch_notes(&self, program: &Path) -> Vec<Note> {
        let mut out = Vec::new();
        if let Some(what) = super::program::set_id(program) {
            out.push(
                Note::new(
                    "emulation-changed",
                    format!("{what}: it ran with the caller's ids (use --counter step)"),
                )
                .with_detail(format!(
                    "under emulation it ran with the caller's user and group ids (euid {}), not \
                     the ones its mode bits give it natively",
                    crate::sys::geteuid()
                )),
            );
        }
        let unpassable = launch::unpassable();
        if !unpassable.is_empty() {
            out.push(
                Note::new(
                    "emulation-changed",
                    format!("{} kept from the program", unpassable.join(", ")),
                )
                .with_detail(
                    "QEMU would take it as its own option, and its value has a comma, which \
                     QEMU's -E cannot pass",
                ),
            );
        }
        out
    }

    /// What ran outside the count, or was counted elsewhere than the program itself.
    fn uncounted_notes(&self, notes: &EmulationNotes) -> Vec<Note> {
        let s = self;
        let mut out = Vec::new();
        if !notes.forked_children.is_empty() {
            // A child's plugin has no channel to the tool (it must not write into the parent's
            // records): what the emulator changed there is not seen, so it is said to be unseen.
            out.push(
                Note::new(
                    "uncounted",
                    format!(
                        "{} forked child process(es) ran uncounted, and what the emulator \
                         changed in them is not seen",
                        notes.forked_children.len()
                    ),
                )
                .with_detail(
                    "a system call QEMU 7.2 lacks, such as ptrace, returns ENOSYS there too",
                ),
            );
        }
        if s.fds_lost != 0 {
            let mut note = Note::new(
                "emulation-changed",
                "the program closed the emulator's descriptors: the records went on through the \
                 shared ring",
            )
            .with_detail("e.g. close_range(3, ~0), closefrom");
            if let Some(first) = s.unseen.first() {
                note.text += &format!(
                    ", but {} file(s) it mapped for execution after that were not instrumented \
                     (their marks not counted; the first `{}`)",
                    s.unseen.len(),
                    first.display()
                );
            }
            out.push(note);
        }
        if let Some(last) = notes.followed_execs.last() {
            out.push(Note::new(
                "exec-followed",
                format!(
                    "the program exec'd {}, counted under the emulator",
                    match notes.followed_execs.len() {
                        1 => format!("`{}`", last.display()),
                        n => format!("{n} images (the last `{}`)", last.display()),
                    }
                ),
            ));
        }
        if let Some(p) = &notes.native_exec {
            out.push(Note::new(
                "uncounted",
                format!(
                    "the program exec'd `{}`, which ran natively, outside the emulator: not counted",
                    p.display()
                ),
            ));
        }
        out
    }

    /// How the run's end was read, and what a death by a signal means under the emulator.
    fn ending_notes(&self, status: ExitStatus) -> Vec<Note> {
        let mut out = Vec::new();
        if let Some(sig) = self.lost_at_death {
            out.push(
                Note::new(
                    "ended-without-exit",
                    format!(
                        "signal {sig} ended the program: its threads' last counts were read from \
                         the plugin's shared buffers"
                    ),
                )
                .with_detail(
                    "QEMU ran no exit path, so the threads' last marks and counts were read from \
                     the plugin's shared buffers (each thread's last strand is exact to within \
                     its last translation block)",
                ),
            );
        }
        if let ExitStatus::Signaled(sig) = status {
            if dumps_core(sig) && core_limit() != Some(0) {
                out.push(
                    Note::new(
                        "emulation-changed",
                        "no core dump was written, whatever QEMU's own message says",
                    )
                    .with_detail(
                        "QEMU's core limit is 0 under the plugin (it would write the program's as \
                         qemu_*.core and its own beside it), so a crash under emulation leaves \
                         none, though QEMU's line says \"core dumped\"",
                    ),
                );
            }
        }
        if let Some(sig) = self.unexplained {
            out.push(match sig {
                nix::libc::SIGILL => Note::new(
                    "emulator-signal",
                    "SIGILL did not come from the program itself: the emulated CPU may lack one \
                     of its instructions (use --counter step)",
                )
                .with_detail(format!(
                    "if nothing else sent it, the emulated CPU ({CPU_MODEL}) lacks one of its \
                     instructions (e.g. AVX-512)"
                )),
                _ => Note::new(
                    "emulator-signal",
                    format!(
                        "signal {sig} did not come from the program itself: QEMU may have failed \
                         (see its message above; use --counter step)"
                    ),
                ),
            });
        }
        out
    }
}
