//! What a front end hears while a program is measured (the CLI draws a spinner from it).

/// Progress of a measurement. Every method has an empty default; `()` ignores everything.
pub trait Progress {
    /// A mark was hit; `hits` over all threads so far. Called at every hit: an implementation
    /// that draws should throttle.
    fn hits(&mut self, hits: u64) {
        let _ = hits;
    }
    /// The event stream ended; the report is being built (a progress line should clear now,
    /// before the report is printed).
    fn finished(&mut self) {}
}

impl Progress for () {}
