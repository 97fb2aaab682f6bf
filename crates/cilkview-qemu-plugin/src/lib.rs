//! The TCG plugin of cilkview-rs's emulation backend, as bytes.
//!
//! `plugin/cilkview_plugin.c` is compiled by this crate's build script into a
//! shared object that `qemu-x86_64` (user mode, plugin API v1: QEMU 6.0–8.x,
//! e.g. Debian bookworm's qemu-user 7.2) loads with `-plugin`. The bytes are
//! embedded so that the `cilkview-rs` binary is self-contained; the tracer's
//! emulation driver hands them to QEMU through a memfd. What the plugin does
//! and its record format: `docs/emulation.md`.
//!
//! License: GPL-2.0-or-later (the plugin is loaded into QEMU and declares
//! QEMU's plugin API); see README.md in this crate.

#![forbid(unsafe_code)]

pub mod wire;

/// The plugin, a shared object for x86-64 Linux hosts.
pub static PLUGIN_SO: &[u8] = include_bytes!(env!("CILKVIEW_PLUGIN_SO"));
