//! Compiles preload/cilkview_omp.c (with cilkview.h from cilkview-marks) into a shared object in
//! OUT_DIR with the C compiler the `cc` crate detects (CC, or the target's default).

use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let so = out.join("cilkview_omp.so");
    println!("cargo:rerun-if-changed=preload");
    println!("cargo:rerun-if-changed=../cilkview-marks/include/cilkview.h");
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .opt_level(2)
        .get_compiler();
    let status = compiler
        .to_command()
        .args([
            "-shared",
            "-fPIC",
            "-O2",
            "-fvisibility=hidden",
            "-Wall",
            "-Wextra",
            "-std=gnu11",
            "-I../cilkview-marks/include",
            "-o",
        ])
        .arg(&so)
        .arg("preload/cilkview_omp.c")
        .arg("-ldl")
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "compiling the OpenMP preload library failed ({s}): {:?}",
            compiler.path()
        ),
        Err(e) => panic!(
            "cannot run the C compiler {:?} to build the OpenMP preload library: {e}",
            compiler.path()
        ),
    }
    println!("cargo:rustc-env=CILKVIEW_OPENMP_SO={}", so.display());
}
