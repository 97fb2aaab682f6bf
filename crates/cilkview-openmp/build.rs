//! Compiles preload/cilkview_omp.c (with cilkview.h from cilkview-marks) into a shared object in
//! OUT_DIR (`cilkview-build`: the C compiler the `cc` crate detects, CC or the target's default),
//! with the header `cilkview_runtime_wire.h` rendered from `src/wire.rs` (the counters' and
//! warnings' one definition).

// The counters' and warnings' one definition, rendered here as the C header the library includes.
#[allow(dead_code)]
#[path = "src/wire.rs"]
mod wire;

fn main() {
    let out = cilkview_build::out_dir();
    println!("cargo:rerun-if-changed=preload");
    println!("cargo:rerun-if-changed=src/wire.rs");
    println!("cargo:rerun-if-changed=../cilkview-marks/include/cilkview.h");
    std::fs::write(out.join("cilkview_runtime_wire.h"), wire::c_header())
        .expect("writing cilkview_runtime_wire.h");
    let so =
        cilkview_build::SharedObject::new("the OpenMP preload library", "preload/cilkview_omp.c")
            .include("../cilkview-marks/include")
            .include(&out)
            .link("dl")
            .compile("cilkview_omp.so");
    println!("cargo:rustc-env=CILKVIEW_OPENMP_SO={}", so.display());
}
