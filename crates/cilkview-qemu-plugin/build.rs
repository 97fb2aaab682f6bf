//! Compiles plugin/cilkview_plugin.c into a shared object in OUT_DIR with the
//! C compiler the `cc` crate detects (CC, or the target's default), with the header
//! `cilkview_wire.h` rendered from `src/wire.rs` (the wire format's one definition).

use std::path::PathBuf;

// The wire format's one definition, rendered here as the C header the plugin includes.
#[allow(dead_code)]
#[path = "src/wire.rs"]
mod wire;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let so = out.join("cilkview_plugin.so");
    println!("cargo:rerun-if-changed=plugin");
    println!("cargo:rerun-if-changed=src/wire.rs");
    std::fs::write(out.join("cilkview_wire.h"), wire::c_header()).expect("writing cilkview_wire.h");
    println!("cargo:rerun-if-changed=plugin/qemu_plugin_v1.h");
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .opt_level(2)
        // The hot callbacks' fast paths are a few dozen instructions with no stack frame: a
        // frame pointer (cc's default with debug info) would add a prologue to each.
        .force_frame_pointer(false)
        .get_compiler();
    let status = compiler
        .to_command()
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-fvisibility=hidden",
            "-fno-plt",
            "-Wall",
            "-Wextra",
            "-std=gnu11",
            "-pthread",
        ])
        .arg("-I")
        .arg(&out)
        .arg("-o")
        .arg(&so)
        .arg("plugin/cilkview_plugin.c")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "compiling the QEMU plugin failed ({s}): {:?}",
            compiler.path()
        ),
        Err(e) => panic!(
            "cannot run the C compiler {:?} to build the QEMU plugin: {e}",
            compiler.path()
        ),
    }
    println!("cargo:rustc-env=CILKVIEW_PLUGIN_SO={}", so.display());
}
