//! `run --openmp` on a Fortran OpenMP program (gfortran -fopenmp: libgomp, the same entry points
//! as gcc's C): `fixtures/omp_fortran.f90`, 8 tasks of the same loop and a taskwait in a parallel
//! region.

mod common;

use cilkview_fixtures::{command, has_tool, skip};
use common::analyze_with;

#[test]
#[ignore = "slow: compiles a Fortran program with gfortran and runs cilkview-rs on it"]
fn a_fortran_openmp_program_is_measured() {
    if !has_tool("gfortran") {
        skip("gfortran is not installed (scripts/setup.sh test installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("omp_fortran");
    let source = cilkview_fixtures::fixtures_dir().join("omp_fortran.f90");
    let built = command("gfortran")
        .args(["-O2", "-fopenmp"])
        .arg(&source)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let plain = command(&exe).output().unwrap();
    let a = analyze_with(&exe, &["--openmp"], &[]);
    assert_eq!(a.code(), Some(0), "{}", a.stderr());
    // The program's output is its own, and the same as without the tool.
    assert_eq!(a.stdout(), String::from_utf8_lossy(&plain.stdout));
    let counts = &a.json["runtime"]["counts"];
    let count = |name: &str| {
        counts
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map_or(0, |c| c["value"].as_u64().unwrap())
    };
    assert_eq!(a.json["runtime"]["name"], "libgomp");
    assert_eq!(
        (
            count("parallel_regions"),
            count("tasks"),
            count("taskwaits")
        ),
        (1, 8, 1)
    );
    // The region: 8 tasks of equal work run in parallel: its span is one task's (1/8 of the
    // work) plus the little its one thread runs serially.
    let region = &a.json["regions"][0];
    assert_eq!(region["label"], "parallel");
    assert_eq!(region["spawns"], 8);
    let (work, span) = (
        region["work"].as_u64().unwrap(),
        region["span"].as_u64().unwrap(),
    );
    assert!(work > 8 * 1_000_000, "{region}");
    assert!(span >= work / 8 && span < work / 8 + work / 200, "{region}");
    let parallelism = region["parallelism"].as_f64().unwrap();
    assert!((7.9..=8.0).contains(&parallelism), "{region}");
}
