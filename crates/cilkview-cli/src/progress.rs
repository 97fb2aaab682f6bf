//! The progress line on a terminal: `⠋ cilkview-rs: tracing, 1234 marks hit (12s)`.

use std::time::{Duration, Instant};

use cilkview_analysis::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner on stderr (drawn only when stderr is a terminal), cleared before the report.
pub struct Spinner {
    bar: ProgressBar,
    last_update: Instant,
}

impl Spinner {
    /// A spinner reading `{spinner} cilkview-rs: {what}, {msg} ({elapsed})`.
    pub fn new(what: &str) -> Spinner {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
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
