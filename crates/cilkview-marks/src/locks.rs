//! The labels of `run --locks`' marks (docs/locks.md): the preload library of
//! `cilkview-openmp` (`preload/locks.c`) places them, with the lock's address or the acquiring
//! call's return address as the mark's operand, and the analysis reads them as lock events, not
//! as regions, in a runtime's preload library only ([`crate::is_runtime_wrapper`]).
//!
//! This file is their one definition: `cilkview-openmp`'s build script includes it and renders
//! [`c_header`] as the C header the library is compiled with.

/// Region-begin mark whose operand is the return address of the call that acquires a lock (the
/// acquiring call site); the acquire mark follows it.
pub const LOCK_SITE_LABEL: &str = "cilkview:lock-site";
/// Region-begin mark whose operand is the address of the lock just acquired (by the call the
/// site mark before it named).
pub const LOCK_ACQUIRE_LABEL: &str = "cilkview:lock-acquire";
/// Region-begin mark whose operand is the address of the lock about to be released.
pub const LOCK_RELEASE_LABEL: &str = "cilkview:lock-release";

/// Whether `label` is one of the lock marks' (no region a program reports).
pub fn is_lock_label(label: &str) -> bool {
    [LOCK_SITE_LABEL, LOCK_ACQUIRE_LABEL, LOCK_RELEASE_LABEL].contains(&label)
}

/// The C header of the labels (`LOCK_SITE_LABEL`, … as string literals).
pub fn c_header() -> String {
    format!(
        "/* Generated from crates/cilkview-marks/src/locks.rs: do not edit. */\n\
         #ifndef CILKVIEW_LOCK_LABELS_H\n#define CILKVIEW_LOCK_LABELS_H\n\
         #define LOCK_SITE_LABEL \"{LOCK_SITE_LABEL}\"\n\
         #define LOCK_ACQUIRE_LABEL \"{LOCK_ACQUIRE_LABEL}\"\n\
         #define LOCK_RELEASE_LABEL \"{LOCK_RELEASE_LABEL}\"\n#endif\n"
    )
}
