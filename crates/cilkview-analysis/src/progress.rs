//! What a front end hears while a program is measured (the CLI draws a spinner from it).

/// How many hits between two calls of [`Progress::hits`] (a power of two).
pub const HITS_STEP: u64 = 4096;

/// Progress of a measurement. Every method has an empty default; `()` ignores everything. Heard
/// on the analysis's thread (`Send`), which may not be the caller's.
pub trait Progress: Send {
    /// Marks hit over all threads so far: called each time the count passes a multiple of
    /// [`HITS_STEP`] (the count may be a little past it), and once with the
    /// total when the stream ends (before [`Progress::finished`]). Under emulation that is
    /// thousands of times a second: an implementation that draws should throttle.
    fn hits(&mut self, hits: u64) {
        let _ = hits;
    }
    /// The event stream ended; the report is being built (a progress line should clear now,
    /// before the report is printed).
    fn finished(&mut self) {}
}

impl Progress for () {}
