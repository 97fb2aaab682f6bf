/*
 * fds.c -- the analyzer's descriptors against a program that closes descriptors it did not open
 * (close_range(3, ~0), closefrom, a loop over /proc/self/fd, dup2 onto one of them: daemons do).
 * Part of cilkview_plugin.c, which includes it (one translation unit).
 *
 * Before such a syscall runs (the syscall callback comes first), each of the plugin's
 * descriptors it would close is moved out of its way (duplicated above the closed range, the
 * old number closed here, so the program's close of it fails with EBADF, as natively). Where no
 * number is left above the range (close_range(3, ~0)), the descriptor is given up before the
 * syscall can close it, and never used again (its number may be the program's next): the ring
 * and the threads' slots stay mapped, so the records still flow; without the bell the analyzer
 * is woken by a futex on the ring (stream.c) and watches QEMU's process; without the reply pipe
 * a file mapped later is not instrumented (K_UNSEEN); without the memfds a new thread's state
 * is private and execs run natively. K_FDS_LOST tells the analyzer, which says so in the report.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Whether a syscall about to run closes descriptor fd. */
static int closes(int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, int fd)
{
    if (fd < 0)
        return 0;
    switch (num) {
    case SYS_close:
        return (int)a1 == fd;
    case SYS_dup2:
        return (int)a2 == fd && (int)a1 != fd;
    case SYS_dup3:
        return (int)a2 == fd;
    case SYS_close_range:
        return !(a3 & CLOSE_RANGE_CLOEXEC) && (unsigned)a1 <= (unsigned)fd && (unsigned)fd <= (unsigned)a2;
    default:
        return 0;
    }
}

/* Move *fd above `above` (or anywhere else if above < 0); give it up if there is no room. */
static int move_fd(int *fd, long above)
{
    int min = above < 0 ? 3 : (above >= INT_MAX - 1 ? -1 : (int)above + 1);
    int h = min < 0 ? -1 : fcntl(*fd, F_DUPFD_CLOEXEC, min < 512 ? 512 : min);
    if (h < 0) {
        *fd = -1; /* the syscall closes it; its number may be the program's next */
        return 0;
    }
    close(*fd);
    *fd = h;
    return 1;
}

/* Before a syscall: keep the plugin's descriptors out of the program's closing. */
static void guard_fds(int64_t num, uint64_t a1, uint64_t a2, uint64_t a3)
{
    if (num != SYS_close && num != SYS_dup2 && num != SYS_dup3 && num != SYS_close_range)
        return;
    int *fds[] = {&g_out, &g_in, &g_shm, &g_so, &g_ring_fd};
    int hit = 0;
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        hit |= closes(num, a1, a2, a3, *fds[i]);
    if (!hit)
        return;
    pthread_mutex_lock(&g_map_lock);
    pthread_mutex_lock(&g_fin_lock);
    pthread_mutex_lock(&g_write_lock);
    pthread_mutex_lock(&g_shm_lock);
    int lost = 0;
    g_fds_changed = 1;
    long above = num == SYS_close_range ? (long)(unsigned)a2 : -1;
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (closes(num, a1, a2, a3, *fds[i]) && !move_fd(fds[i], above))
            lost |= 1 << i;
    pthread_mutex_unlock(&g_shm_lock);
    pthread_mutex_unlock(&g_write_lock);
    pthread_mutex_unlock(&g_fin_lock);
    pthread_mutex_unlock(&g_map_lock);
    if (lost) {
        uint64_t w = ctrl(K_FDS_LOST, (uint64_t)lost);
        write_chunk(tid_now(), &w, 1);
    }
}
