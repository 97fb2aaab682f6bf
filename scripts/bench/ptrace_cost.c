/* ptrace_cost.c -- the bare cost, on this machine, of (1) a ptrace stop at an int3 and (2) one
 * PTRACE_SINGLESTEP, each measured as a tracer loop of N round trips with nothing else in it.
 * Prints: "int3_stop_us <x>" and "single_step_us <y>". Used by scripts/bench.sh. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static pid_t start(int traps)
{
    pid_t p = fork();
    if (p == 0) {
        ptrace(PTRACE_TRACEME, 0, 0, 0);
        raise(SIGSTOP);
        for (int i = 0; i < traps; i++)
            __asm__ volatile("int3");
        for (volatile long i = 0; i < 20000; i++)
            ;
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    return p;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    int st;
    pid_t p = start(n);
    double t0 = now();
    for (int i = 0; i < n; i++) {
        ptrace(PTRACE_CONT, p, 0, 0);
        waitpid(p, &st, 0);
    }
    double t1 = now();
    ptrace(PTRACE_CONT, p, 0, 0);
    waitpid(p, &st, 0);
    printf("int3_stop_us %.2f\n", (t1 - t0) / n * 1e6);

    p = start(0);
    long steps = 0;
    t0 = now();
    for (;;) {
        ptrace(PTRACE_SINGLESTEP, p, 0, 0);
        waitpid(p, &st, 0);
        if (WIFEXITED(st))
            break;
        steps++;
    }
    t1 = now();
    printf("single_step_us %.2f\n", (t1 - t0) / steps * 1e6);
    return 0;
}
