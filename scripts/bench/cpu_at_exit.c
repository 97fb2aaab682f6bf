/* Preloaded into a program (LD_PRELOAD): at its exit, prints its own CPU time on stderr,
 * `CPUAT <pid> <user s> <system s> <involuntary switches> <comm>`, from getrusage(RUSAGE_SELF).
 * The bench scripts compare a time report's work with the CPU time of the same traced run
 * (a wall time counts the time the machine's load took; a run minutes apart, its drift). */
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>
__attribute__((destructor)) static void cpu_at_exit(void) {
    struct rusage r; getrusage(RUSAGE_SELF, &r);
    char comm[64] = {0}; FILE *f = fopen("/proc/self/comm", "r"); if (f) { fgets(comm, sizeof comm, f); fclose(f); }
    fprintf(stderr, "CPUAT %d %.6f %.6f %ld %s", getpid(), r.ru_utime.tv_sec + r.ru_utime.tv_usec / 1e6, r.ru_stime.tv_sec + r.ru_stime.tv_usec / 1e6, r.ru_nivcsw, comm);
}
