//! Compiles plugin/cilkview_plugin.c into a shared object in OUT_DIR with the
//! C compiler the `cc` crate detects (CC, or the target's default).

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let so = out.join("cilkview_plugin.so");
    println!("cargo:rerun-if-changed=plugin");
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
            "-o",
        ])
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
