//! Starting children: a fork held before its exec until released (`spawn_blocked`,
//! `spawn_fn`), and a `Command`'s child prepared the same way (`prepare_child`, `high_fds`,
//! `exec_in_order`). Part of `sys`: its `unsafe` blocks follow the module's rules.

use super::*;

fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?)
}

/// A forked child, blocked before `execvp` until [`Child::release`].
pub struct Child {
    pub pid: Tid,
    go: Option<OwnedFd>,
    err: OwnedFd,
}

impl Child {
    /// Let the child go on to `execvp`.
    pub fn release(&mut self) -> io::Result<()> {
        if let Some(go) = self.go.take() {
            if nix::unistd::write(&go, &[1u8])? != 1 {
                return Err(io::Error::from(io::ErrorKind::WriteZero));
            }
        }
        Ok(())
    }

    /// After the child exited without exec: the errno `execvp` failed with.
    pub fn exec_errno(&self) -> Option<i32> {
        let mut buf = [0u8; 4];
        let n = nix::unistd::read(self.err.as_raw_fd(), &mut buf).ok()?;
        (n == 4).then(|| i32::from_ne_bytes(buf))
    }
}

/// In a forked child before its exec: back to the default disposition of SIGINT/SIGQUIT where the
/// tool changed it (`reset`: see [`RESET_IN_CHILD`]), and an empty signal mask.
///
/// # Safety
/// Call only in a forked child before exec: it uses only async-signal-safe calls
/// (`signal`, `sigemptyset`, `sigprocmask`).
unsafe fn reset_child_signals(reset: u8) {
    if reset & 1 != 0 {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    if reset & 2 != 0 {
        libc::signal(libc::SIGQUIT, libc::SIG_DFL);
    }
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
}

/// Fork a child that waits for [`Child::release`], then resets SIGPIPE and
/// the signal mask and `execvp`s `program` with `argv` (`execvpe` with `envp`, `NAME=VALUE`
/// strings, when given). If the exec fails the child reports errno through a close-on-exec
/// pipe and `_exit(127)`s.
pub fn spawn_blocked(
    program: &CStr,
    argv: &[CString],
    envp: Option<&[CString]>,
) -> io::Result<Child> {
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let env_ptrs: Option<Vec<*const libc::c_char>> = envp.map(|e| {
        e.iter()
            .map(|v| v.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    });
    let reset = RESET_IN_CHILD.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY (of what the child runs): signal, sigprocmask, execvp and write are
    // async-signal-safe and read only data prepared before fork.
    unsafe {
        fork_held(|err_w| {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            reset_child_signals(reset);
            match &env_ptrs {
                Some(env) => libc::execvpe(program.as_ptr(), ptrs.as_ptr(), env.as_ptr()),
                None => libc::execvp(program.as_ptr(), ptrs.as_ptr()),
            };
            let e = (*libc::__errno_location()).to_ne_bytes();
            libc::write(err_w, e.as_ptr() as *const c_void, 4);
            127
        })
    }
}

/// Fork a child that waits for release, then runs `body` and `_exit(0)`s.
///
/// # Safety
/// `body` must be async-signal-safe (no allocation, no locks): it runs in the child of a
/// possibly multithreaded process.
pub unsafe fn spawn_fn(body: fn()) -> io::Result<Child> {
    // SAFETY: `body` is async-signal-safe (the caller's contract).
    unsafe {
        fork_held(|_| {
            body();
            0
        })
    }
}

/// Fork a child that waits for [`Child::release`] (a byte on a pipe; it `_exit(127)`s if the
/// parent goes first), then runs `in_child` with the write end of the close-on-exec error pipe
/// and `_exit`s with the status it returns.
///
/// # Safety
/// `in_child` must be async-signal-safe: it runs in the child of a possibly multithreaded
/// process.
unsafe fn fork_held(in_child: impl FnOnce(libc::c_int) -> libc::c_int) -> io::Result<Child> {
    let (go_r, go_w) = cloexec_pipe()?;
    let (err_r, err_w) = cloexec_pipe()?;
    // SAFETY: the child only calls async-signal-safe functions (close, read, then `in_child`,
    // restricted as documented) on data prepared before fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: async-signal-safe calls on descriptors made before the fork and a local.
        unsafe {
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut b = 0u8;
            if libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut c_void, 1) != 1 {
                libc::_exit(127);
            }
        }
        let status = in_child(err_w.as_raw_fd());
        // SAFETY: ends the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(status) }
    }
    drop(go_r);
    drop(err_w);
    Ok(Child {
        pid,
        go: Some(go_w),
        err: err_r,
    })
}

/// The descriptor numbers a child gets `fds` at (see [`prepare_child`]): above the range
/// programs use, consecutive from 512 (from half the descriptor limit if it is below 1024: the
/// rule of the plugin's `high_fd`, which then leaves them where they are), and above `fds`.
pub fn high_fds<const N: usize>(fds: [c_int; N]) -> [c_int; N] {
    use nix::sys::resource::{getrlimit, Resource};
    let soft = getrlimit(Resource::RLIMIT_NOFILE).map_or(u64::MAX, |(soft, _)| soft);
    let min = if soft < 1024 {
        (soft / 2) as c_int
    } else {
        512
    };
    let base = min.max(fds.iter().max().map_or(0, |m| m + 1));
    std::array::from_fn(|i| base + i as c_int)
}

/// Prepares the child spawned by `cmd` as `spawn_blocked` prepares its own: it inherits exactly
/// these descriptors, each `(from, to)` duplicated from `from` to `to` between fork and exec (see
/// [`high_fds`]: made there, in a child with one thread, the larger descriptor table costs
/// nothing, where a threaded QEMU pays an RCU grace period, ~10 ms, to grow it), gets back the
/// SIGINT/SIGQUIT dispositions the tool changed (see [`RESET_IN_CHILD`]) and an empty signal mask.
pub fn prepare_child<const N: usize>(cmd: &mut std::process::Command, fds: [(c_int, c_int); N]) {
    use std::os::unix::process::CommandExt;
    let reset = RESET_IN_CHILD.load(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: the closure runs in the forked child before exec and only calls dup2(2),
    // signal(2) and sigprocmask(2), which are async-signal-safe; it allocates nothing and
    // touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            for (from, to) in fds {
                // The copy is inherited (no FD_CLOEXEC); the original closes at exec.
                if libc::dup2(from, to) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            reset_child_signals(reset);
            Ok(())
        });
    }
}

/// The exec of a child spawned by a `Command` prepared with [`prepare_child`], done by hand so
/// that the environment goes in exactly this order (`Command` sorts it): `execve(argv[0],
/// argv, envp)` in the child, after the descriptors and signals are set up. `Command`'s own
/// exec never runs (its program only names the child in errors); a failed `execve` is the
/// spawn's error.
pub fn exec_in_order(
    cmd: &mut std::process::Command,
    argv: Vec<std::ffi::CString>,
    envp: Vec<std::ffi::CString>,
) {
    use std::os::unix::process::CommandExt;
    /// The pointer arrays, made before the fork (the child must not allocate).
    struct Exec {
        _strings: (Vec<std::ffi::CString>, Vec<std::ffi::CString>),
        argv: Vec<*const libc::c_char>,
        envp: Vec<*const libc::c_char>,
    }
    // SAFETY: the pointers point into the CStrings owned alongside them, never written.
    unsafe impl Send for Exec {}
    // SAFETY: as above; shared only for reading.
    unsafe impl Sync for Exec {}
    let ptrs = |v: &[std::ffi::CString]| {
        v.iter()
            .map(|s| s.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect::<Vec<_>>()
    };
    let exec = Exec {
        argv: ptrs(&argv),
        envp: ptrs(&envp),
        _strings: (argv, envp),
    };
    // SAFETY: the closure runs in the forked child before Command's exec and only calls
    // execve(2), async-signal-safe, on NUL-terminated arrays built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let e = &exec; // the whole struct (Send), not its fields
            libc::execve(e.argv[0], e.argv.as_ptr(), e.envp.as_ptr());
            Err(io::Error::last_os_error())
        });
    }
}
