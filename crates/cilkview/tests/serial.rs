//! Under measurement (RAYON_NUM_THREADS=1, decided before `main`) every function runs its
//! closures on the calling thread in the serial elision's order. The test re-runs itself with
//! the variable set, as `cilkview-rs run` starts a program.

use std::sync::Mutex;
use std::thread;

const CHILD: &str = "CILKVIEW_SERIAL_TEST_CHILD";

#[test]
#[ignore = "slow: re-runs its test binary"]
fn serial_mode_runs_in_the_serial_elisions_order_on_the_calling_thread() {
    if std::env::var_os(CHILD).is_none() {
        let out = cilkview_fixtures::command(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "serial_mode_runs_in_the_serial_elisions_order_on_the_calling_thread",
                "--include-ignored",
            ])
            .env("RAYON_NUM_THREADS", "1")
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(cilkview::is_serial());
    let me = thread::current().id();
    let log = Mutex::new(Vec::new());
    let note = |what: String| {
        assert_eq!(thread::current().id(), me, "{what} ran on another thread");
        log.lock().unwrap().push(what);
    };

    let (a, b) = cilkview::join(
        || {
            note("a".into());
            1
        },
        || {
            note("b".into());
            2
        },
    );
    assert_eq!((a, b), (1, 2));
    cilkview::scope(|s| {
        s.spawn(|s| {
            note("task 1".into());
            s.spawn(|_| note("task 1.1".into()));
        });
        note("body".into());
        s.spawn(|_| note("task 2".into()));
    });
    cilkview::for_range(0..4, 3, |i| note(format!("i{i}")));
    let mut items = [10, 20];
    cilkview::for_each_mut(&mut items, 1, |x| {
        note(format!("x{x}"));
        *x += 1;
    });
    assert_eq!(items, [11, 21]);
    assert_eq!(
        *log.lock().unwrap(),
        ["a", "b", "task 1", "task 1.1", "body", "task 2", "i0", "i1", "i2", "i3", "x10", "x20"]
    );

    // A panic in the spawned child propagates; the continuation does not run.
    let ran_b = Mutex::new(false);
    let result = std::panic::catch_unwind(|| {
        cilkview::join(|| panic!("child"), || *ran_b.lock().unwrap() = true)
    });
    assert!(result.is_err());
    assert!(!*ran_b.lock().unwrap());
}
