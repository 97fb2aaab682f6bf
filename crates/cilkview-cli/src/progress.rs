//! The progress line on a terminal: `⠋ cilkview-rs: measuring process 123, 1234 marks hit (12s)`,
//! drawn only where it cannot share a line with the program's output.

use std::io::IsTerminal;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

use cilkview_analysis::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner on stderr (drawn only when stderr is a terminal), cleared before the report.
/// `run` draws none: the program's output (its stderr is the tool's) goes to that terminal, and
/// a spinner redrawn between its lines would garble them.
pub struct Spinner {
    bar: ProgressBar,
    last_update: Instant,
}

impl Spinner {
    /// A spinner reading `{spinner} cilkview-rs: {what}, {msg} ({elapsed})`, drawn only if
    /// `visible` (and stderr is a terminal); a hidden one otherwise.
    pub fn drawn_if(visible: bool, what: &str) -> Spinner {
        let target = if visible {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{spinner}} cilkview-rs: {what}, {{msg}} ({{elapsed}})"
            ))
            .expect("a valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(250));
        bar.set_message("no mark hit yet");
        Spinner {
            bar,
            last_update: Instant::now(),
        }
    }
}

impl Progress for Spinner {
    fn hits(&mut self, hits: u64) {
        // Called every 4096 hits (thousands of times a second under emulation): redraw at most
        // five times a second.
        if self.last_update.elapsed() > Duration::from_millis(200) {
            self.last_update = Instant::now();
            self.bar.set_message(format!("{hits} marks hit"));
        }
    }

    fn finished(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Whether one of `paths` (e.g. a process's `/proc/PID/fd/1` and `fd/2`) is the terminal that
/// our stderr is: output written there would share lines with a spinner.
pub fn writes_to_our_terminal<P: AsRef<Path>>(paths: &[P]) -> bool {
    if !std::io::stderr().is_terminal() {
        return false;
    }
    let Ok(ours) = std::fs::metadata("/proc/self/fd/2") else {
        return true;
    };
    paths.iter().any(|p| {
        std::fs::metadata(p)
            .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == ours.rdev())
    })
}
