//! Compiles plugin/cilkview_plugin.c into a shared object in OUT_DIR (`cilkview-build`: the C
//! compiler the `cc` crate detects, CC or the target's default), with the header
//! `cilkview_wire.h` rendered from `src/wire.rs` (the wire format's one definition).

// The wire format's one definition, rendered here as the C header the plugin includes.
#[allow(dead_code)]
#[path = "src/wire.rs"]
mod wire;

fn main() {
    let out = cilkview_build::out_dir();
    println!("cargo:rerun-if-changed=plugin");
    println!("cargo:rerun-if-changed=src/wire.rs");
    std::fs::write(out.join("cilkview_wire.h"), wire::c_header()).expect("writing cilkview_wire.h");
    println!("cargo:rerun-if-changed=plugin/qemu_plugin_v1.h");
    let so = cilkview_build::SharedObject::new("the QEMU plugin", "plugin/cilkview_plugin.c")
        // The hot callbacks' fast paths are a few dozen instructions with no stack frame: a
        // frame pointer (cc's default with debug info) would add a prologue to each.
        .no_frame_pointer()
        .flag("-fno-plt")
        .flag("-pthread")
        .include(&out)
        .compile("cilkview_plugin.so");
    println!("cargo:rustc-env=CILKVIEW_PLUGIN_SO={}", so.display());
}
