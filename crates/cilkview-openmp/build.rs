//! Compiles preload/cilkview_omp.c (with cilkview.h from cilkview-marks) into a shared object in
//! OUT_DIR (`cilkview-build`: the C compiler the `cc` crate detects, CC or the target's default).

fn main() {
    println!("cargo:rerun-if-changed=preload");
    println!("cargo:rerun-if-changed=../cilkview-marks/include/cilkview.h");
    let so =
        cilkview_build::SharedObject::new("the OpenMP preload library", "preload/cilkview_omp.c")
            .include("../cilkview-marks/include")
            .link("dl")
            .compile("cilkview_omp.so");
    println!("cargo:rustc-env=CILKVIEW_OPENMP_SO={}", so.display());
}
