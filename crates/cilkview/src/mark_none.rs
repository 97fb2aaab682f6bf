//! Targets other than x86-64 Linux: no marks (the record format is for x86-64 ELF).

#[inline(always)]
pub(crate) fn function_enter() {}
#[inline(always)]
pub(crate) fn function_exit() {}
#[inline(always)]
pub(crate) fn spawn() {}
#[inline(always)]
pub(crate) fn spawn_return() {}
#[inline(always)]
pub(crate) fn sync() {}
#[inline(always)]
pub(crate) fn iteration_begin() {}
#[inline(always)]
pub(crate) fn iteration_end() {}
#[inline(always)]
pub(crate) fn loop_end() {}
#[inline(always)]
pub(crate) fn loop_begin(grain: usize) {
    let _ = grain;
}

#[doc(hidden)]
#[macro_export]
macro_rules! __cilkview_region_mark {
    ($kind:literal, $label:literal) => {{
        let _: &str = $label;
    }};
}

/// Whether this build emits marks: never on this target.
pub const ENABLED: bool = false;
