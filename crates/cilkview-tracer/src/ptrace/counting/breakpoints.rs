//! Counting at breakpoints: every mark is patched with an `int3`, threads run freely between
//! marks, and a strand's cost is the difference of an instruction counter read at consecutive
//! stops: the hardware counter, or [`NullCounter`] (no counter, every cost 0: a testing aid, the `testing` feature).

use std::collections::HashMap;
use std::io;

use nix::libc;

use super::{patched_sigtrap, Counting, PatchedTrap};
use crate::counter;
use crate::ptrace::loader_hook::{self, LoaderHook};
use crate::ptrace::{restart, Core};
use crate::sys::{Restart, Tid};
use crate::{TraceError, TraceEvent};

/// A per-thread instruction counter.
pub(crate) trait InstructionCounter: Sized {
    /// The counter of thread `tid` (`at_exec`: counting from its next exec on). `None`: this
    /// kind counts nothing.
    fn open(tid: Tid, at_exec: bool) -> io::Result<Option<Self>>;
    /// User-space instructions retired so far.
    fn read(&mut self) -> io::Result<u64>;
}

impl InstructionCounter for perf_event::Counter {
    fn open(tid: Tid, at_exec: bool) -> io::Result<Option<Self>> {
        counter::open(tid, at_exec).map(Some)
    }
    fn read(&mut self) -> io::Result<u64> {
        perf_event::Counter::read(self)
    }
}

/// No counter: the breakpoints-only testing aid (all costs 0; the `testing` feature).
#[cfg(feature = "testing")]
pub(crate) enum NullCounter {}

#[cfg(feature = "testing")]
impl InstructionCounter for NullCounter {
    fn open(_: Tid, _: bool) -> io::Result<Option<Self>> {
        Ok(None)
    }
    fn read(&mut self) -> io::Result<u64> {
        match *self {}
    }
}

struct Thread<K> {
    counter: Option<K>,
    /// The counter's value at the thread's last event.
    base: u64,
    /// Instructions to add to the next event's cost (the native instructions of an emulated
    /// loader-hook function, and the counted work before that stop).
    carry: u64,
}

pub(crate) struct Breakpoints<K> {
    threads: HashMap<Tid, Thread<K>>,
    /// Instructions the counter sees per probe stop beyond the native program (self-test).
    bias: u64,
    /// The dynamic loader's debugger hook of the current image, if planted.
    hook: Option<LoaderHook>,
}

impl<K: InstructionCounter> Breakpoints<K> {
    pub(crate) fn new(bias: u64) -> Self {
        Breakpoints {
            threads: HashMap::new(),
            bias,
            hook: None,
        }
    }

    /// Instructions since the thread's last event, minus `bias` (plus what was carried).
    fn cost(&mut self, tid: Tid, bias: u64) -> Result<u64, TraceError> {
        let Some(th) = self.threads.get_mut(&tid) else {
            return Ok(0);
        };
        let Some(ctr) = th.counter.as_mut() else {
            return Ok(0); // no counter
        };
        let v = ctr
            .read()
            .map_err(|source| TraceError::Counter { tid, source })?;
        let d = v.saturating_sub(th.base);
        th.base = v;
        Ok(d.saturating_sub(bias) + std::mem::take(&mut th.carry))
    }

    /// Thread `tid` hit the loader hook: emulate the `ret` of `_dl_debug_state`, account its
    /// native instructions, and arm the probes of newly mapped files.
    /// The loader's hook trapped (its `ret` emulated): the work since the last event is carried
    /// to the next one, plus the function's own instructions, minus the stop.
    fn loader_hook(&mut self, tid: Tid, hook: LoaderHook) -> Result<(), TraceError> {
        let bias = self.bias;
        if let Some(th) = self.threads.get_mut(&tid) {
            if let Some(ctr) = th.counter.as_mut() {
                // Counted: the work since the last event, plus this stop
                // (`bias`: the int3); native: the work plus the function.
                let v = ctr
                    .read()
                    .map_err(|source| TraceError::Counter { tid, source })?;
                th.carry += v.saturating_sub(th.base).saturating_sub(bias) + hook.native;
                th.base = v;
            }
        }
        Ok(())
    }
}

impl<K: InstructionCounter> Counting for Breakpoints<K> {
    fn add_thread(&mut self, tid: Tid, at_exec: bool) -> Result<(), TraceError> {
        let counter = K::open(tid, at_exec).map_err(|source| match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) if !at_exec => TraceError::CounterUnavailable {
                mode: crate::CounterMode::Hardware,
                reason: format!(
                    "perf_event_open on thread {tid}: {source}{}",
                    crate::procfs::perf_paranoid_hint()
                ),
            },
            _ => TraceError::Counter { tid, source },
        })?;
        self.threads.insert(
            tid,
            Thread {
                counter,
                base: 0,
                carry: 0,
            },
        );
        Ok(())
    }

    fn remove_thread(&mut self, tid: Tid) {
        self.threads.remove(&tid);
    }

    fn take_tail(&mut self, tid: Tid) -> u64 {
        let Some(th) = self.threads.get_mut(&tid) else {
            return 0;
        };
        th.counter
            .as_mut()
            .and_then(|c| c.read().ok())
            .map_or(0, |v| {
                let d = v.saturating_sub(th.base) + std::mem::take(&mut th.carry);
                th.base = v;
                d
            })
    }

    fn resume(&mut self, tid: Tid, sig: i32) -> Result<(), TraceError> {
        restart(tid, Restart::Continue(sig))
    }

    fn exec(&mut self, former: Tid, tid: Tid) -> Result<u64, TraceError> {
        if let Some(th) = self.threads.remove(&former) {
            self.threads.insert(tid, th);
        }
        self.hook = None; // the old image is gone
        self.cost(tid, 0)
    }

    fn armed(
        &mut self,
        core: &mut Core<'_>,
        pid: Tid,
        addrs: &[u64],
        new_image: bool,
    ) -> Result<(), TraceError> {
        core.patch_probes(pid, addrs)?;
        if new_image {
            self.hook = loader_hook::plant(core, pid)?;
        }
        Ok(())
    }

    fn at_boundary(&mut self, _: &mut Core<'_>, _: Tid) -> Result<(), TraceError> {
        Ok(()) // a mark right here is an int3: it will stop the thread
    }

    fn sigtrap(&mut self, core: &mut Core<'_>, tid: Tid) -> Result<Option<i32>, TraceError> {
        match patched_sigtrap(core, tid, self.hook)? {
            PatchedTrap::Gone => Ok(None),
            PatchedTrap::LoaderHook { hook, rescanned } => {
                self.loader_hook(tid, hook)?;
                if let Some(addrs) = rescanned {
                    let pid = core.pid();
                    self.armed(core, pid, &addrs, false)?;
                }
                Ok(Some(0))
            }
            PatchedTrap::Int3 { at, regs } => match core.probe_at(at) {
                Some(probe) => {
                    let cost = self.cost(tid, self.bias)?;
                    let operand = probe.operand(tid, &regs);
                    core.emit(TraceEvent::Hit {
                        probe: probe.index,
                        tid,
                        cost,
                        operand,
                    });
                    Ok(Some(0))
                }
                None => Ok(Some(libc::SIGTRAP)), // the program's own int3
            },
            PatchedTrap::Program => Ok(Some(libc::SIGTRAP)), // the program's own SIGTRAP
        }
    }
}
