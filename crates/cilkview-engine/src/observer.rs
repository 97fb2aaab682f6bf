//! What the engine tells a call-site profiler as it goes, as a trait the engine's event handling
//! is generic over: the unprofiled engine runs it with `()`, whose hooks do nothing and compile
//! away, so the hot path carries no "is profiling on?" tests. A hook is given the engine's
//! running total (`acc`) where the profiler needs it: a strand, which only adds to it, is no
//! hook.

use crate::frame::FrameKind;
use crate::profile::cilkprof::Profiler;
use crate::profile::CallSite;

pub(crate) trait Observer {
    /// Whether the observer needs a frame for every function instance (the engine's leaf
    /// shortcut, which pushes no frame for a call without events, is for those that do not).
    const FRAMES: bool;
    fn push(&mut self, kind: FrameKind, site: Option<CallSite>, acc: u64);
    fn push_loop(&mut self, acc: u64);
    /// The top frame is a loop whose open chunk closes now.
    fn chunk_closed(&mut self, acc: u64);
    fn sync(&mut self, acc: u64);
    fn spawn_after(&mut self, sibling: u64);
    fn wait_for(&mut self, sibling: u64, acc: u64);
    fn pop(&mut self, kind: FrameKind, work: u64, span: u64, acc: u64);
}

/// No observer: the unprofiled engine.
impl Observer for () {
    const FRAMES: bool = false;
    #[inline(always)]
    fn push(&mut self, _: FrameKind, _: Option<CallSite>, _: u64) {}
    #[inline(always)]
    fn push_loop(&mut self, _: u64) {}
    #[inline(always)]
    fn chunk_closed(&mut self, _: u64) {}
    #[inline(always)]
    fn sync(&mut self, _: u64) {}
    #[inline(always)]
    fn spawn_after(&mut self, _: u64) {}
    #[inline(always)]
    fn wait_for(&mut self, _: u64, _: u64) {}
    #[inline(always)]
    fn pop(&mut self, _: FrameKind, _: u64, _: u64, _: u64) {}
}

impl Observer for Profiler {
    const FRAMES: bool = true;
    #[inline(always)]
    fn push(&mut self, kind: FrameKind, site: Option<CallSite>, acc: u64) {
        Profiler::push(self, kind, site, acc)
    }
    fn push_loop(&mut self, acc: u64) {
        Profiler::push_loop(self, acc)
    }
    fn chunk_closed(&mut self, acc: u64) {
        Profiler::chunk_closed(self, acc)
    }
    fn sync(&mut self, acc: u64) {
        Profiler::sync(self, acc)
    }
    fn spawn_after(&mut self, sibling: u64) {
        Profiler::spawn_after(self, sibling)
    }
    fn wait_for(&mut self, sibling: u64, acc: u64) {
        Profiler::wait_for(self, sibling, acc)
    }
    #[inline(always)]
    fn pop(&mut self, kind: FrameKind, work: u64, span: u64, acc: u64) {
        Profiler::pop(self, kind, work, span, acc)
    }
}
