//! The program's CPU time as the kernel counts it (each thread's `sum_exec_runtime`, from
//! `/proc/TID/schedstat`), set against what the time counter accounts for: the work by time,
//! the mark hits' cost taken off it, and the waits for the analysis. The tool's own stops (its
//! set-up at exec and at each library load, a signal's delivery) run on the program's threads
//! and are taken out of both: what is left is the program's own CPU time, which the work should
//! account for. The report's note says how much it does: a careful user's check of a time
//! measurement, where a program's own clock cannot be read (docs/tracer.md, "The report checks
//! itself").

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::sys::Tid;

/// One thread's CPU-time reader and readings.
struct ThreadCpu {
    schedstat: File,
    /// Its reading when its measurement began (exec, attach, or its first stop).
    start: Schedstat,
    /// Its CPU time when the tracer saw it stop, until it is resumed.
    at_stop: Option<u64>,
}

/// A thread's `/proc/TID/schedstat`: its CPU time (ns) and how many times it was switched onto
/// a CPU.
#[derive(Clone, Copy)]
struct Schedstat {
    ns: u64,
    runs: u64,
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
    /// How many times the threads that ended were switched onto a CPU, and how many of those
    /// were the tool's resumes after its stops.
    runs: u64,
    resumes: u64,
    /// The work by time of the threads that ended (ns).
    work: u64,
}

/// A thread's schedstat: `sum_exec_runtime run_delay pcount`.
fn read(file: &File) -> Option<Schedstat> {
    let mut buf = [0u8; 80];
    let n = file.read_at(&mut buf, 0).ok()?;
    let text = std::str::from_utf8(&buf[..n]).ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let ns = fields.next()??;
    let runs = fields.nth(1)??;
    Some(Schedstat { ns, runs })
}

/// A thread's CPU time in nanoseconds.
fn read_ns(file: &File) -> Option<u64> {
    read(file).map(|r| r.ns)
}

impl ProgramCpu {
    /// `tid`'s measurement begins now, at a stop (its attach, its first stop after its clone;
    /// the launched program's at its exec: [`ProgramCpu::exec`]): what the tool does before
    /// resuming it (its set-up) is the tool's.
    pub fn start(&mut self, tid: Tid) {
        let reading = File::open(format!("/proc/{tid}/schedstat"))
            .ok()
            .and_then(|f| read(&f).map(|r| (f, r)));
        match reading {
            Some((schedstat, start)) => {
                let th = ThreadCpu {
                    schedstat,
                    start,
                    at_stop: Some(start.ns),
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
                self.resumes += 1;
            }
        }
    }

    /// `tid` ends (its exit stop, or it is no longer measured), its work by time `work` ns.
    pub fn ended(&mut self, tid: Tid, work: u64) {
        let Some(th) = self.threads.remove(&tid) else {
            return;
        };
        match read(&th.schedstat) {
            Some(now) => {
                self.ended += now.ns.saturating_sub(th.start.ns);
                self.runs += now.runs.saturating_sub(th.start.runs);
                self.work += work;
            }
            None => self.unread += 1,
        }
    }

    /// The report's note: the program's CPU time, the tool's stops' share, and how much of the
    /// rest the work, the `hits` hits' cost taken off the strands (`stubs` ns) and the waits
    /// (`waited_ns`) account for. None where a thread's CPU time could not be read (no schedstat, a thread gone
    /// unseen) or one is still running.
    pub fn note(&self, hits: u64, stubs: f64, waited_ns: f64) -> Option<String> {
        if self.unread > 0 || !self.threads.is_empty() || self.ended == 0 {
            return None;
        }
        let own = self.ended.saturating_sub(self.in_stops);
        let accounted = self.work as f64 + stubs + waited_ns;
        let ms = |ns: f64| ns / 1e6;
        let switched = self.runs.saturating_sub(self.resumes);
        Some(format!(
            "the program's threads ran {:.3} ms on the CPU (the kernel's count), {:.3} ms of it \
             in the tool's stops (its set-up, library loads, signals); of the {:.3} ms left, \
             the work by time ({:.3} ms), its {hits} mark hits' cost ({:.3} ms) and its waits \
             for the analysis ({:.3} ms) account for {:.1}% (its threads were switched back \
             onto a CPU {switched} times; on a VM the kernel's count can hold 10-60 µs at each \
             wake-up from a sleep that no strand has)",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn share(note: &str) -> f64 {
        let after = note.split("account for ").nth(1).unwrap();
        after.split('%').next().unwrap().parse().unwrap()
    }

    #[test]
    fn the_tools_stops_are_taken_off_before_the_share() {
        let cpu = ProgramCpu {
            ended: 10_000_000,
            in_stops: 2_000_000,
            work: 7_000_000,
            runs: 30,
            resumes: 10,
            ..ProgramCpu::default()
        };
        // 7 ms of work + 1,000 hits' 0.5 ms + 0.5 ms of waits against 8 ms.
        let note = cpu.note(1_000, 500_000.0, 500_000.0).unwrap();
        assert_eq!(share(&note), 100.0, "{note}");
        assert!(note.contains("ran 10.000 ms"), "{note}");
        assert!(
            note.contains("2.000 ms of it in the tool's stops"),
            "{note}"
        );
        assert!(note.contains("switched back onto a CPU 20 times"), "{note}");
    }

    #[test]
    fn no_share_without_every_threads_cpu_time() {
        let unread = ProgramCpu {
            ended: 10_000_000,
            unread: 1,
            ..ProgramCpu::default()
        };
        assert!(unread.note(0, 10.0, 0.0).is_none());
        assert!(ProgramCpu::default().note(0, 10.0, 0.0).is_none());
    }

    #[test]
    fn a_thread_is_read_from_its_start_to_its_end() {
        // This test's own thread: its CPU time grows while it computes.
        let tid = nix::unistd::gettid().as_raw();
        let mut cpu = ProgramCpu::default();
        cpu.start(tid);
        cpu.resumed(tid);
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        cpu.ended(tid, 1);
        assert_eq!(cpu.unread, 0);
        assert!(cpu.ended > 0 && cpu.threads.is_empty(), "{x}");
        assert!(cpu.note(0, 0.0, 0.0).is_some());
    }
}
