//! Properties of cilkview.h itself: compile errors, serial elision, inlining, strip,
//! C and C++, odd labels.

mod common;

use cilkview_fixtures::{build, compile_source, has_tool, test_compilers, BuildOptions, Lang};
use cilkview_marks::{read_marks, MarkKind};
use common::{count, read_checked};

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn spawn_or_sync_without_cv_function_is_a_compile_error_naming_it() {
    let spawn = "#include \"cilkview.h\"\nstatic void f(void) {}\n\
                 int main(void) { cv_spawn(f()); return 0; }\n";
    let sync = "#include \"cilkview.h\"\nint main(void) { cv_sync(); return 0; }\n";
    for cc in test_compilers() {
        for (lang, disabled) in [(Lang::C, false), (Lang::Cxx, false), (Lang::C, true)] {
            for (name, src) in [("nofn_spawn", spawn), ("nofn_sync", sync)] {
                let mut opts = BuildOptions::default().compiler(cc);
                if disabled {
                    opts = opts.disabled();
                }
                let err = compile_source(name, src, lang, &opts)
                    .expect_err("cv_spawn/cv_sync without cv_function() must not compile");
                assert!(
                    err.output.contains("cv_function"),
                    "{cc} {lang:?}: message should name cv_function:\n{err}"
                );
            }
        }
    }
}

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn disabled_marks_leave_no_section_and_same_output() {
    for cc in test_compilers() {
        for fixture in ["fib", "qsort", "known_regions", "known_loop", "matmul"] {
            let opts = BuildOptions::default().compiler(cc).opt(2).disabled();
            let exe = build(fixture, &opts);
            let image = read_marks(&exe).unwrap();
            assert!(image.marks.is_empty(), "{fixture}: {image:?}");
            let data = std::fs::read(&exe).unwrap();
            assert!(
                !data.windows(15).any(|w| w == b".cilkview_marks"),
                "{fixture}: section name present with CILKVIEW_DISABLE"
            );
            let marked = build(fixture, &BuildOptions::default().compiler(cc).opt(2));
            assert_eq!(
                cilkview_fixtures::run(&exe, &[]),
                cilkview_fixtures::run(&marked, &[]),
                "{fixture}"
            );
        }
    }
}

const INLINED_TWICE: &str = r#"
#include "cilkview.h"
static int sink;
static inline __attribute__((always_inline)) void helper(int v)
{
    cv_region_begin("helper");
    sink += v;
    cv_region_end("helper");
}
int main(void)
{
    helper(1);
    helper(2);
    return sink == 3 ? 0 : 1;
}
"#;

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn each_inlined_copy_gets_its_own_record() {
    for cc in test_compilers() {
        for opt in ["0", "2"] {
            let opts = BuildOptions::default().compiler(cc).opt(opt);
            let exe = compile_source("inlined_twice", INLINED_TWICE, Lang::C, &opts).unwrap();
            let image = read_checked(&exe);
            assert_eq!(count(&image, MarkKind::RegionBegin), 2, "{cc} -O{opt}");
            assert_eq!(count(&image, MarkKind::RegionEnd), 2, "{cc} -O{opt}");
            let mut addrs: Vec<u64> = image.marks.iter().map(|m| m.address).collect();
            addrs.sort();
            addrs.dedup();
            assert_eq!(addrs.len(), 4, "distinct NOPs");
            cilkview_fixtures::run(&exe, &[]);
        }
    }
}

const ODD_LABELS: &str = r#"
#include "cilkview.h"
int main(void)
{
    cv_region_begin("50% {a|b} \"quoted\" \\ tab\t é");
    cv_region_end("");
    cv_region_begin("a label longer than sixteen bytes, to need several words");
    cv_region_end("x");
    return 0;
}
"#;

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn odd_labels_read_back_exactly() {
    for cc in test_compilers() {
        for lang in [Lang::C, Lang::Cxx] {
            let opts = BuildOptions::default().compiler(cc).opt(2);
            let exe = compile_source("odd_labels", ODD_LABELS, lang, &opts).unwrap();
            let image = read_checked(&exe);
            let labels: Vec<&str> = image
                .marks
                .iter()
                .map(|m| m.label.as_deref().unwrap())
                .collect();
            assert_eq!(
                labels,
                [
                    "50% {a|b} \"quoted\" \\ tab\t é",
                    "",
                    "a label longer than sixteen bytes, to need several words",
                    "x"
                ],
                "{cc} {lang:?}"
            );
        }
    }
}

const LOOP_FORMS: &str = r#"
#include "cilkview.h"
static int sum;
int main(int argc, char **argv)
{
    (void)argv;
    /* continue keeps the iteration-end; nested loops; runtime grain; commas */
    cv_for (int i = 0, j = 10; i < 10; i++, j--) {
        if (i % 2)
            continue;
        cv_for_grain(argc + 1, int k = 0; k < 3; k++) sum += k + j;
    }
    return sum == 5 * 3 + (10 + 8 + 6 + 4 + 2) * 3 ? 0 : 1;
}
"#;

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn loop_forms_compile_and_run() {
    for cc in test_compilers() {
        for lang in [Lang::C, Lang::Cxx] {
            for opt in ["0", "3"] {
                let opts = BuildOptions::default()
                    .compiler(cc)
                    .opt(opt)
                    .flag("-Wall")
                    .flag("-Wextra")
                    .flag("-Wshadow")
                    .flag("-Werror");
                let exe = compile_source("loop_forms", LOOP_FORMS, lang, &opts)
                    .unwrap_or_else(|e| panic!("{e}"));
                let image = read_checked(&exe);
                assert!(count(&image, MarkKind::LoopBegin) >= 2);
                let status = cilkview_fixtures::command(&exe).status().unwrap();
                assert!(status.success(), "{cc} {lang:?} -O{opt}: wrong loop result");
            }
        }
    }
}

#[test]
#[ignore = "slow: compiles and runs fixtures"]
fn fixtures_are_warning_free() {
    for cc in test_compilers() {
        for fixture in [
            "fib",
            "qsort",
            "matmul",
            "known_loop",
            "known_regions",
            "stencil_inner",
        ] {
            for define in [None, Some("CILKVIEW_DISABLE")] {
                let mut opts = BuildOptions::default()
                    .compiler(cc)
                    .opt(2)
                    .flag("-Wall")
                    .flag("-Wextra")
                    .flag("-Werror");
                if let Some(d) = define {
                    opts = opts.define(d);
                }
                build(fixture, &opts);
            }
        }
    }
}

#[test]
#[ignore = "slow: compiles fixtures, runs objdump"]
fn no_call_at_function_exit_at_o0() {
    // cv_function()'s cleanup is always_inline: -O0 code has no call to it.
    if !has_tool("objdump") {
        cilkview_fixtures::skip("objdump not installed");
        return;
    }
    for cc in test_compilers() {
        let exe = build("fib", &BuildOptions::default().compiler(cc).opt(0));
        let out = cilkview_fixtures::command("objdump")
            .arg("-d")
            .arg(&exe)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("cv__function_exit"),
            "{cc}: cleanup not inlined"
        );
        assert!(!text.contains("cv__mark"), "{cc}: mark helper not inlined");
    }
}

#[test]
#[ignore = "slow: compiles fixtures, runs strip"]
fn strip_keeps_the_section() {
    let orig = build("fib", &BuildOptions::default().compiler("gcc").opt(2));
    let want = read_marks(&orig).unwrap();
    assert!(!want.marks.is_empty());
    let dir = orig.parent().unwrap();
    let mut tried = 0;
    for (tool, args) in [
        ("strip", vec![]),
        ("strip", vec!["--strip-all"]),
        ("strip", vec!["--strip-debug"]),
        ("strip", vec!["--strip-unneeded"]),
        ("objcopy", vec!["--strip-all"]),
        ("llvm-strip", vec!["--keep-section=.cilkview_marks"]),
        (
            "llvm-strip",
            vec!["--strip-all", "--keep-section=.cilkview_marks"],
        ),
    ] {
        if !has_tool(tool) {
            cilkview_fixtures::skip("{tool} not installed");
            continue;
        }
        tried += 1;
        let out = dir.join(format!(
            "fib.stripped.{tool}{}.{}",
            args.join(""),
            std::process::id()
        ));
        let status = if tool == "objcopy" {
            cilkview_fixtures::command(tool)
                .args(&args)
                .arg(&orig)
                .arg(&out)
                .status()
                .unwrap()
        } else {
            cilkview_fixtures::command(tool)
                .args(&args)
                .arg(&orig)
                .arg("-o")
                .arg(&out)
                .status()
                .unwrap()
        };
        assert!(status.success(), "{tool} {args:?}");
        let got = read_marks(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        assert_eq!(got, want, "{tool} {args:?} changed the marks");
    }
    assert!(tried > 0, "no strip tool found");
}

/// llvm-strip (LLVM 14) removes every non-allocated section, SHT_NOTE ones too, unless
/// told `--keep-section=.cilkview_marks` (docs/marks-format.md says so). This test
/// pins that down, so a change in llvm-strip's behaviour is noticed.
#[test]
#[ignore = "slow: compiles fixtures, runs llvm-strip"]
fn llvm_strip_needs_keep_section() {
    if !has_tool("llvm-strip") {
        cilkview_fixtures::skip("llvm-strip not installed");
        return;
    }
    let orig = build("fib", &BuildOptions::default().compiler("gcc").opt(2));
    let out = orig.with_extension(format!("llvm-stripped.{}", std::process::id()));
    let status = cilkview_fixtures::command("llvm-strip")
        .arg(&orig)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let got = read_marks(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    if got.marks.is_empty() {
        println!("note: plain llvm-strip removed .cilkview_marks (use --keep-section)");
    } else {
        assert_eq!(got, read_marks(&orig).unwrap());
    }
}
