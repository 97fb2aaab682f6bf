//! Starting the program under QEMU with the plugin (from a memfd), the record ring, the threads'
//! shared states and the two pipes (the bell and the replies).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use nix::fcntl::OFlag;
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};

use super::emulator::{Emulator, CPU_MODEL};
use super::program::Runnable;
use crate::{TraceError, TraceOptions};

/// QEMU's environment for a guest that is to see `vars` (in this order), and the `-E VAR=VALUE`
/// options for the variables QEMU would take as its own options (`QEMU_*`: `QEMU_STRACE`,
/// `QEMU_GDB`, …), which are kept out of QEMU's environment. QEMU 7.2 builds the guest's
/// environment by putting each variable of its own, then of `-E`, at the front of a list, so
/// its environment is the guest's reversed, and the `QEMU_*` variables come first in the
/// guest's (in their order). A `QEMU_*` variable whose value has a comma cannot be passed
/// (`-E` splits at commas): it is left out (see [`unpassable`]).
pub fn qemu_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> (Vec<std::ffi::OsString>, Vec<std::ffi::OsString>) {
    let mut env = Vec::new();
    let mut qemu = Vec::new();
    for (k, v) in vars {
        let mut kv = k.clone();
        kv.push("=");
        kv.push(&v);
        if !k.as_bytes().starts_with(b"QEMU_") {
            env.push(kv);
        } else if !v.as_bytes().contains(&b',') {
            qemu.push(kv);
        }
    }
    env.reverse();
    qemu.reverse();
    (env, qemu)
}

/// The `QEMU_*` variables of the tool's environment that the guest cannot get (see
/// [`qemu_environment`]).
pub fn unpassable() -> Vec<String> {
    std::env::vars_os()
        .filter(|(k, v)| k.as_bytes().starts_with(b"QEMU_") && v.as_bytes().contains(&b','))
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect()
}

/// A running emulated program and the analyzer's ends of the ring and the pipes.
pub struct Launched {
    pub child: Child,
    /// The plugin's records (see `ring`).
    pub ring: File,
    /// The plugin's bell: a byte when records wait in the ring, its end when QEMU is gone.
    pub bell: File,
    /// Replies to the plugin's requests.
    pub replies: File,
    /// The threads' states, shared with the plugin (see `protocol::slot`).
    pub threads: File,
}

fn os_err(what: &str) -> impl Fn(nix::errno::Errno) -> TraceError + '_ {
    move |e| TraceError::Spawn {
        program: PathBuf::from(what),
        source: std::io::Error::from(e),
    }
}

/// Start `program` under `emu` with the plugin, as `how` says.
pub fn launch(
    emu: &Emulator,
    program: &Path,
    how: &Runnable,
    opts: &TraceOptions,
) -> Result<Launched, TraceError> {
    let so = plugin_in_memfd()?;
    // Close-on-exec everywhere (other threads of ours may spawn processes
    // meanwhile); only QEMU gets its ends, moved high, in `pre_exec`.
    let (bell_r, bell_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(os_err("pipe"))?;
    let (rep_r, rep_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(os_err("pipe"))?;
    // The records go through a ring in shared memory, read in place (see ring.rs).
    let ring_name = CString::new("cilkview-records").expect("no NUL");
    let ring = File::from(
        memfd_create(&ring_name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?,
    );
    super::ring::ring_file(&ring).map_err(memfd_err)?;
    // The threads' states, shared: readable after a crash of the program (see protocol::slot).
    let shm_name = CString::new("cilkview-threads").expect("no NUL");
    let shm =
        memfd_create(&shm_name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?;
    let ours: [i32; 5] = [
        so.as_raw_fd(),
        bell_w.as_raw_fd(),
        rep_r.as_raw_fd(),
        shm.as_raw_fd(),
        ring.as_raw_fd(),
    ];
    // QEMU gets them at these numbers (high, where the plugin keeps them).
    let keep = crate::sys::high_fds(ours);
    let (mut cmd, with_comma) =
        qemu_command(emu, program, how, opts, plugin_argument(keep, program));
    crate::sys::prepare_child(
        &mut cmd,
        std::array::from_fn::<_, 5, _>(|i| (ours[i], keep[i])),
    );
    exec_with_environment(&mut cmd, emu, &with_comma);
    let child = cmd.spawn().map_err(|source| TraceError::Spawn {
        program: emu.path.clone(),
        source,
    })?;
    drop::<[OwnedFd; 3]>([so, bell_w, rep_r]);
    Ok(Launched {
        ring,
        threads: File::from(shm),
        child,
        bell: File::from(bell_r),
        replies: File::from(rep_w),
    })
}

fn memfd_err(source: std::io::Error) -> TraceError {
    TraceError::Spawn {
        program: "memfd".into(),
        source,
    }
}

/// The plugin in a memfd: nothing to clean up, nothing another user can swap.
fn plugin_in_memfd() -> Result<OwnedFd, TraceError> {
    let name = CString::new("cilkview-plugin.so").expect("no NUL");
    let so = memfd_create(&name, MemFdCreateFlag::MFD_CLOEXEC).map_err(os_err("memfd_create"))?;
    File::from(so.try_clone().map_err(memfd_err)?)
        .write_all(cilkview_qemu_plugin::PLUGIN_SO)
        .map_err(memfd_err)?;
    Ok(so)
}

/// QEMU's `-plugin` argument: the plugin's file and the descriptors it gets (`keep`: the plugin,
/// the bell, the replies, the threads' states, the ring), the tool's process id and the
/// program's name.
fn plugin_argument(keep: [i32; 5], program: &Path) -> String {
    let mut plugin = format!(
        "/proc/self/fd/{},out={},in={},so={},shm={},ring={},tool={}",
        keep[0],
        keep[1],
        keep[2],
        keep[0],
        keep[3],
        keep[4],
        std::process::id()
    );
    // The process's name, as the kernel would give it (the file's name; QEMU's otherwise).
    if let Some(name) = program.file_name().map(OsStr::as_bytes) {
        if !name.contains(&b',') {
            plugin += ",comm=";
            plugin += &String::from_utf8_lossy(&name[..name.len().min(15)]);
        }
    }
    plugin
}

/// The emulator's command line for `program`, and the program's variables whose value has a comma
/// (they go through QEMU's own environment: see [`exec_with_environment`]).
fn qemu_command<'o>(
    emu: &Emulator,
    program: &Path,
    how: &Runnable,
    opts: &'o TraceOptions,
    plugin: String,
) -> (Command, Vec<&'o (std::ffi::OsString, std::ffi::OsString)>) {
    let mut cmd = Command::new(&emu.path);
    cmd.arg("-cpu").arg(CPU_MODEL).arg("-plugin").arg(plugin);
    // The program's own variables, for the guest only (QEMU's -E splits its argument at commas:
    // one variable per -E, whose value must have none). A value with a comma (the pinned
    // GLIBC_TUNABLES) goes through QEMU's own environment, which the guest gets.
    let (with_comma, guest_only_vars): (Vec<_>, Vec<_>) = opts
        .env
        .iter()
        .partition(|(_, value)| value.as_bytes().contains(&b','));
    for (name, value) in guest_only_vars {
        let mut pair = name.clone();
        pair.push("=");
        pair.push(value);
        cmd.arg("-E").arg(pair);
    }
    cmd.arg("-0");
    match how {
        Runnable::Elf => cmd.arg(&opts.program).arg(program),
        // As the kernel: interpreter [argument] script (the path found) arguments.
        Runnable::Script { interpreter, arg } => {
            cmd.arg(interpreter).arg(interpreter).args(arg).arg(program)
        }
    }
    .args(&opts.args);
    (cmd, with_comma)
}

/// Makes `cmd` exec the emulator with the tool's environment (`with_comma` set in it) as QEMU
/// passes it on (see [`qemu_environment`]).
fn exec_with_environment(
    cmd: &mut Command,
    emu: &Emulator,
    with_comma: &[&(std::ffi::OsString, std::ffi::OsString)],
) {
    let vars = std::env::vars_os()
        .filter(|(k, _)| !with_comma.iter().any(|(name, _)| name == k))
        .chain(with_comma.iter().map(|(k, v)| (k.clone(), v.clone())));
    let (env, guest_only) = qemu_environment(vars);
    let mut argv = vec![emu.path.as_os_str().to_owned()];
    // Before the other options: QEMU reads `-E` before it loads anything.
    for var in &guest_only {
        argv.push("-E".into());
        argv.push(var.clone());
    }
    argv.extend(cmd.get_args().map(OsStr::to_owned));
    let c = |s: &std::ffi::OsString| CString::new(s.as_bytes()).unwrap_or_default();
    crate::sys::exec_in_order(
        cmd,
        argv.iter().map(c).collect(),
        env.iter().map(c).collect(),
    );
}
