//! The program's CPU time as the kernel counts it (each thread's `sum_exec_runtime`, from
//! `/proc/TID/schedstat`), set against what the time counter accounts for: the work by time,
//! the mark hits' cost taken off it, and the waits for the analysis. The tool's own stops (its
//! set-up at exec and at each library load, a signal's delivery) run on the program's threads
//! and are taken out of both: what is left is the program's own CPU time, which the work should
//! account for. The report's note says how much it does: a careful user's check of a time
//! measurement, where a program's own clock cannot be read (docs/tracer.md, "How exact").

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::sys::Tid;

/// One thread's CPU-time reader and readings (nanoseconds).
struct ThreadCpu {
    schedstat: File,
    /// Its CPU time when its measurement began (exec, attach, or its first stop).
    start: u64,
    /// Its CPU time when the tracer saw it stop, until it is resumed.
    at_stop: Option<u64>,
}

/// The program's CPU time, its threads' in all, and the share of it in the tool's stops.
#[derive(Default)]
pub(super) struct ProgramCpu {
    threads: HashMap<Tid, ThreadCpu>,
    /// The CPU time of the threads that ended, from the start of their measurement.
    ended: u64,
    /// The CPU time spent between a stop the tracer saw and the thread's resume.
    in_stops: u64,
    /// Threads whose CPU time could not be read at their start or end: no total.
    unread: u32,
    /// The work by time of the threads that ended (ns).
    work: u64,
}

/// A thread's CPU time in nanoseconds (the first field of `/proc/TID/schedstat`).
fn read_ns(file: &File) -> Option<u64> {
    let mut buf = [0u8; 64];
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

impl ProgramCpu {
    /// `tid`'s measurement begins now, at a stop (its attach, its first stop after its clone;
    /// the launched program's at its exec: [`ProgramCpu::exec`]): what the tool does before
    /// resuming it (its set-up) is the tool's.
    pub fn start(&mut self, tid: Tid) {
        let reading = File::open(format!("/proc/{tid}/schedstat"))
            .ok()
            .and_then(|f| read_ns(&f).map(|ns| (f, ns)));
        match reading {
            Some((schedstat, start)) => {
                let th = ThreadCpu {
                    schedstat,
                    start,
                    at_stop: Some(start),
                };
                self.threads.insert(tid, th);
            }
            None => self.unread += 1,
        }
    }

    /// `former` exec'd and is now `tid`: measured from now if the old image was not
    /// (`measured`: the launcher's own time before its exec is not the program's), else its
    /// old image's time goes on counting, as its work does.
    pub fn exec(&mut self, former: Tid, tid: Tid, measured: bool) {
        match self.threads.remove(&former) {
            Some(th) if measured => {
                self.threads.insert(tid, th);
            }
            _ => self.start(tid),
        }
    }

    /// The tracer saw `tid` stop.
    pub fn stopped(&mut self, tid: Tid) {
        if let Some(th) = self.threads.get_mut(&tid) {
            th.at_stop = read_ns(&th.schedstat);
        }
    }

    /// `tid` is resumed: the CPU time since its stop was the tool's.
    pub fn resumed(&mut self, tid: Tid) {
        if let Some(th) = self.threads.get_mut(&tid) {
            if let (Some(at), Some(now)) = (th.at_stop.take(), read_ns(&th.schedstat)) {
                self.in_stops += now.saturating_sub(at);
            }
        }
    }

    /// `tid` ends (its exit stop, or it is no longer measured), its work by time `work` ns.
    pub fn ended(&mut self, tid: Tid, work: u64) {
        let Some(th) = self.threads.remove(&tid) else {
            return;
        };
        match read_ns(&th.schedstat) {
            Some(now) => {
                self.ended += now.saturating_sub(th.start);
                self.work += work;
            }
            None => self.unread += 1,
        }
    }

    /// The report's note: the program's CPU time, the tool's stops' share, and how much of the
    /// rest the work, the hits' cost (`hits` × `hit_ns`) and the waits (`waited_ns`) account
    /// for. None where a thread's CPU time could not be read (no schedstat, a thread gone
    /// unseen) or one is still running.
    pub fn note(&self, hits: u64, hit_ns: f64, waited_ns: f64) -> Option<String> {
        if self.unread > 0 || !self.threads.is_empty() || self.ended == 0 {
            return None;
        }
        let own = self.ended.saturating_sub(self.in_stops);
        let stubs = hits as f64 * hit_ns;
        let accounted = self.work as f64 + stubs + waited_ns;
        let ms = |ns: f64| ns / 1e6;
        Some(format!(
            "the program's threads ran {:.3} ms on the CPU (the kernel's count), {:.3} ms of it \
             in the tool's stops (its set-up, library loads, signals); of the {:.3} ms left, \
             the work by time ({:.3} ms), its {hits} mark hits' cost ({:.3} ms) and its waits \
             for the analysis ({:.3} ms) account for {:.1}%",
            ms(self.ended as f64),
            ms(self.in_stops as f64),
            ms(own as f64),
            ms(self.work as f64),
            ms(stubs),
            ms(waited_ns),
            if own > 0 {
                100.0 * accounted / own as f64
            } else {
                0.0
            }
        ))
    }
}
