//! Compiles preload/cilkview_omp.c (libgomp's), preload/cilkview_kmp.c (libomp's) and
//! preload/cilkview_tbb.c (oneTBB's), with
//! cilkview.h from cilkview-marks, into shared objects in
//! OUT_DIR (`cilkview-build`: the C compiler the `cc` crate detects, CC or the target's default),
//! with the header `cilkview_runtime_wire.h` rendered from `src/wire.rs` (the counters' and
//! warnings' one definition); and preload/locks.c, the `--locks` library, with the header of the
//! lock marks' labels rendered from cilkview-marks' `src/locks.rs`.

// The counters' and warnings' one definition, rendered here as the C header the library includes.
#[allow(dead_code)]
#[path = "src/wire.rs"]
mod wire;

// The lock marks' labels' one definition (cilkview-marks), rendered as the C header of the
// `--locks` library.
#[allow(dead_code)]
#[path = "../cilkview-marks/src/locks.rs"]
mod lock_labels;

fn main() {
    let out = cilkview_build::out_dir();
    println!("cargo:rerun-if-changed=preload");
    println!("cargo:rerun-if-changed=src/wire.rs");
    println!("cargo:rerun-if-changed=../cilkview-marks/include/cilkview.h");
    std::fs::write(
        out.join("cilkview_runtime_wire.h"),
        wire::c_header(wire::OPENMP_COUNTERS, &[]),
    )
    .expect("writing cilkview_runtime_wire.h");
    std::fs::write(
        out.join("cilkview_tbb_wire.h"),
        wire::c_header(wire::TBB_COUNTERS, wire::TBB_ENTRY_POINTS),
    )
    .expect("writing cilkview_tbb_wire.h");
    println!("cargo:rerun-if-changed=../cilkview-marks/src/locks.rs");
    std::fs::write(out.join("cilkview_lock_labels.h"), lock_labels::c_header())
        .expect("writing cilkview_lock_labels.h");
    // One library per runtime: (its name, its source, the variable naming the shared object, a
    // flag). oneTBB's: -fexceptions, a task's C++ exception unwinds through its wrappers, whose
    // cleanups end the task's frame.
    for (what, source, file, var, flag) in [
        (
            "the libgomp preload library",
            "preload/cilkview_omp.c",
            "cilkview_omp.so",
            "CILKVIEW_OPENMP_SO",
            "-fno-exceptions",
        ),
        (
            "the libomp preload library",
            "preload/cilkview_kmp.c",
            "cilkview_kmp.so",
            "CILKVIEW_KMP_SO",
            "-fno-exceptions",
        ),
        (
            "the oneTBB preload library",
            "preload/cilkview_tbb.c",
            "cilkview_tbb.so",
            "CILKVIEW_TBB_SO",
            "-fexceptions",
        ),
    ] {
        let so = cilkview_build::SharedObject::new(what, source)
            .flag(flag)
            .include("../cilkview-marks/include")
            .include(&out)
            .link("dl")
            .compile(file);
        println!("cargo:rustc-env={var}={}", so.display());
    }
    let locks = cilkview_build::SharedObject::new("the --locks preload library", "preload/locks.c")
        .include("../cilkview-marks/include")
        .include(&out)
        .link("dl")
        .compile("cilkview_locks.so");
    println!("cargo:rustc-env=CILKVIEW_LOCKS_SO={}", locks.display());
}
