//! Single-stepping must not change the program's SIGTRAP state. A step trap is a forced SIGTRAP:
//! with SIGTRAP blocked (inside the program's own SIGTRAP handler, inside glibc's
//! pthread_create, anywhere all signals are blocked), the kernel would reset the program's
//! handler to SIG_DFL and unblock the signal. These programs exit 0 natively and died of
//! SIGTRAP (133) under the tool before the tracer unblocked SIGTRAP around such steps.
mod common;

use std::time::Duration;

use cilkview_tracer::{attach, run, AttachOptions, CounterMode, Ending, ExitStatus, StopFlag};
use common::*;

/// The handler raises SIGTRAP again (blocked inside it: delivered when it returns), three times.
const RAISE_IN_HANDLER: &str = r#"
#include <signal.h>
#include <stdio.h>
static volatile int count;
static void on_trap(int sig) { (void)sig; if (++count < 3) raise(SIGTRAP); }
int main(void) {
    signal(SIGTRAP, on_trap);
    raise(SIGTRAP);
    printf("handled %d\n", count);
    return count == 3 ? 0 : 1;
}"#;

/// The handler is installed before pthread_create (which blocks every signal for a while).
const HANDLER_BEFORE_THREAD: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
static volatile int count;
static void on_trap(int sig) { (void)sig; count++; }
static void *body(void *arg) { return arg; }
int main(void) {
    signal(SIGTRAP, on_trap);
    pthread_t t;
    pthread_create(&t, NULL, body, NULL);
    pthread_join(t, NULL);
    raise(SIGTRAP);
    printf("handled %d\n", count);
    return count == 1 ? 0 : 1;
}"#;

fn step_run(exe: &std::path::Path) -> ExitStatus {
    let opts = cilkview_tracer::TraceOptions {
        program: exe.to_path_buf(),
        args: vec![],
        counter: CounterMode::Step,
        bind_cpu: true,
        host_dispatch: false,
        env: Vec::new(),
    };
    run(&opts, |_| Ok(vec![]), |_| {}).unwrap().status
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn handler_raising_sigtrap_keeps_working_under_single_step() {
    let p = compile(RAISE_IN_HANDLER, &[]);
    assert!(cilkview_fixtures::command(&p.exe)
        .status()
        .unwrap()
        .success());
    assert_eq!(step_run(&p.exe), ExitStatus::Exited(0));
}

#[test]
#[ignore = "slow: traces compiled programs"]
fn handler_installed_before_pthread_create_survives_single_step() {
    let p = compile(HANDLER_BEFORE_THREAD, &["-pthread"]);
    assert!(cilkview_fixtures::command(&p.exe)
        .status()
        .unwrap()
        .success());
    assert_eq!(step_run(&p.exe), ExitStatus::Exited(0));
}

/// Saves its flags with each form of `pushf` (`9c`, `48 9c`, `66 9c`) and exits 1 if one has the
/// trap flag set. Natively none has; stepped, each saved the step's trap flag, and a program
/// detached between such a `pushf` and its `popf` set the flag itself and died of the next
/// trap (fixtures/popf_rounds.c under `attach --counter step`).
const SAVES_ITS_FLAGS: &str = r#"
#include <stdio.h>
int main(void) {
    unsigned long q, r;
    unsigned short w;
    __asm__ __volatile__("pushfq\n\tpopq %0" : "=r"(q) :: "memory");
    __asm__ __volatile__(".byte 0x48, 0x9c\n\tpopq %0" : "=r"(r) :: "memory");
    __asm__ __volatile__("pushfw\n\tpopw %0" : "=r"(w) :: "memory");
    printf("TF %lu %lu %u\n", (q >> 8) & 1, (r >> 8) & 1, (unsigned)(w >> 8) & 1);
    return ((q | r | w) & 0x100) ? 1 : 0;
}"#;

#[test]
#[ignore = "slow: traces compiled programs"]
fn a_stepped_pushf_saves_the_flags_without_the_steps_trap_flag() {
    // No red zone: the pushes inside the asm must not overwrite the compiler's locals.
    let p = compile(SAVES_ITS_FLAGS, &["-mno-red-zone"]);
    assert!(cilkview_fixtures::command(&p.exe)
        .status()
        .unwrap()
        .success());
    assert_eq!(step_run(&p.exe), ExitStatus::Exited(0));
}

/// Spends most of its time with every signal blocked, and regularly takes a SIGTRAP in its
/// handler; after the attach window it must go on doing so.
const BLOCKS_ALL: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile int count;
static void on_trap(int sig) { (void)sig; count++; }
int main(int argc, char **argv) {
    int rounds = atoi(argv[1]);
    signal(SIGTRAP, on_trap);
    sigset_t all, old;
    sigfillset(&all);
    for (int r = 0; r < rounds; r++) {
        sigprocmask(SIG_BLOCK, &all, &old);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
        sigprocmask(SIG_SETMASK, &old, NULL);
        raise(SIGTRAP);
    }
    printf("handled %d\n", count);
    return count == rounds ? 0 : 1;
}"#;

#[test]
#[ignore = "slow: traces compiled programs"]
fn attach_in_single_step_leaves_the_sigtrap_handler_in_place() {
    let p = compile(BLOCKS_ALL, &[]);
    let (child, pid, _dir) = start(&p.exe, &["150"]);
    std::thread::sleep(Duration::from_millis(200));
    let out = attach(
        &AttachOptions {
            pid,
            counter: CounterMode::Step,
            duration: Some(Duration::from_millis(500)),
            stop: StopFlag::new(),
        },
        |_| Ok(vec![]),
        |_| {},
    )
    .unwrap();
    assert_eq!(out.ending, Ending::TimeUp);
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("handled 150") && text.contains("status=0"),
        "the program lost its SIGTRAP handler: {text}"
    );
}
