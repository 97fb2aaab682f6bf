/*
 * process.c -- the program's view of its process under QEMU: its name and its core-dump limit.
 * Part of cilkview_plugin.c, which includes it (one translation unit).
 *
 * Name: the kernel names the process after the file it execs (qemu-x86_64 here); the plugin
 * names QEMU's main thread, the guest's, after the program (comm=NAME, the basename of the file
 * as the kernel would), so /proc/self/comm, ps, pgrep and killall see the program's name (its
 * later threads inherit it). The command line (/proc/PID/cmdline) stays QEMU's.
 *
 * Core dumps: on the guest's fatal signal QEMU 7.2 writes the guest's core itself
 * (qemu_<prog>_<time>-<pid>.core, mode 0644, in the working directory) and then kills itself
 * with the signal, so the kernel dumps QEMU's own core (~150 MB) too. The plugin sets QEMU's
 * soft RLIMIT_CORE to 0, so neither is written, and keeps the program's view of the limit: its
 * getrlimit/prlimit64 read back the limit it had (or set), its setrlimit/prlimit64 take effect
 * for QEMU's hard limit and are reset to 0 at once; an exec (followed or native) gets the
 * program's limit back. What remains: no core dump at all of a program that dies under
 * emulation (the analyzer's reason says so).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include <sys/prctl.h>

/* The program's soft core-dump limit (QEMU's own is 0). */
static uint64_t g_core_soft;
static int g_core_kept; /* the limit was moved here */

static void core_limit_to_host(int program_s)
{
    struct rlimit rl;
    if (!g_core_kept || getrlimit(RLIMIT_CORE, &rl) != 0)
        return;
    rl.rlim_cur = program_s ? (g_core_soft > rl.rlim_max ? rl.rlim_max : g_core_soft) : 0;
    setrlimit(RLIMIT_CORE, &rl);
}

/* At install: name the process after the program, take the core limit from QEMU. */
static void process_setup(const char *comm)
{
    if (comm && comm[0])
        prctl(PR_SET_NAME, comm, 0, 0, 0);
    struct rlimit rl;
    if (getrlimit(RLIMIT_CORE, &rl) == 0) {
        g_core_soft = rl.rlim_cur;
        g_core_kept = 1;
        core_limit_to_host(0);
    }
}

/* The guest's struct rlimit at gaddr: its soft limit. */
static uint64_t *guest_rlimit(uint64_t gaddr) { return (uint64_t *)(uintptr_t)(gaddr + g_guest_base); }

/* At a syscall's return: the program's view of RLIMIT_CORE (see above). */
static void process_syscall_ret(int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4)
{
    if (!g_core_kept)
        return;
    if (num == SYS_getrlimit && a1 == RLIMIT_CORE && a2) {
        *guest_rlimit(a2) = g_core_soft;
    } else if (num == SYS_setrlimit && a1 == RLIMIT_CORE && a2) {
        g_core_soft = *guest_rlimit(a2);
        core_limit_to_host(0);
    } else if (num == SYS_prlimit64 && (a1 == 0 || (pid_t)a1 == getpid()) && a2 == RLIMIT_CORE) {
        uint64_t was = g_core_soft;
        if (a3) {
            g_core_soft = *guest_rlimit(a3);
            core_limit_to_host(0);
        }
        if (a4)
            *guest_rlimit(a4) = was;
    }
}
