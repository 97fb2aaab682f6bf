//! Marks in shared libraries: a marked library linked by an unmarked program (DT_NEEDED) or
//! loaded with dlopen is measured. Dynamic linking runs the loader's ~100k serial instructions
//! first, so these runs are slower to single-step than the static fixtures.

mod common;

use std::path::PathBuf;

use cilkview_fixtures::{compile_source, BuildOptions, Lang};
use common::analyze;

const LIBRARY: &str = r#"
#include "cilkview.h"
#include "work.h"
static void child(void) { CV_WORK(1000); }   /* 2002 instructions */
void lib_step(void)
{
    cv_function();
    cv_spawn(child());
    CV_WORK(500);                             /* 1002, in parallel with the child */
    cv_sync();
}
"#;

fn opts() -> BuildOptions {
    BuildOptions::default().compiler("gcc").opt(2)
}

fn library() -> PathBuf {
    compile_source(
        "libcvstep.so",
        LIBRARY,
        Lang::C,
        &opts().flag("-shared").flag("-fPIC"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_library_linked_by_an_unmarked_program_is_measured() {
    let lib = library();
    let exe = compile_source(
        "uses_libcvstep",
        r#"void lib_step(void);
           int main(void) { for (int i = 0; i < 3; i++) lib_step(); return 0; }"#,
        Lang::C,
        &opts()
            .flag("-Wl,--no-as-needed")
            .flag(lib.to_str().unwrap())
            .flag(&format!("-Wl,-rpath,{}", lib.parent().unwrap().display())),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let a = analyze(&exe, &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    assert_eq!((a.u("spawns"), a.u("syncs")), (3, 3), "{}", a.json);
    // Three steps, each with 1002 instructions off the critical path (plus a call or two).
    assert!(a.parallel_part().abs_diff(3 * 1002) <= 3 * 16, "{}", a.json);
    assert!(
        !a.stderr().contains("has no cilkview marks"),
        "{}",
        a.stderr()
    );
}

#[test]
#[ignore = "slow: runs cilkview-rs on compiled programs"]
fn a_library_loaded_with_dlopen_is_measured() {
    let lib = library();
    let source = format!(
        r#"#include <dlfcn.h>
           #include <stdio.h>
           int main(void) {{
               void *h = dlopen("{}", RTLD_NOW);
               if (!h) {{ puts(dlerror()); return 1; }}
               void (*step)(void) = (void (*)(void))dlsym(h, "lib_step");
               step(); step();
               dlclose(h);
               puts("ok");
               return 0;
           }}"#,
        lib.display()
    );
    let exe = compile_source("dlopens_libcvstep", &source, Lang::C, &opts().flag("-ldl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let a = analyze(&exe, &[]);
    assert_eq!(a.stdout(), "ok\n");
    assert_eq!((a.u("spawns"), a.u("syncs")), (2, 2), "{}", a.json);
    assert!(a.parallel_part().abs_diff(2 * 1002) <= 2 * 16, "{}", a.json);
}
