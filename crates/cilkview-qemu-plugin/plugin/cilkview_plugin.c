/*
 * cilkview_plugin.c -- the TCG plugin of cilkview-rs's emulation backend.
 *
 * Loaded into qemu-x86_64 (user mode, plugin API v1, QEMU 7.2) by
 * cilkview-tracer's `run_emulated`. Counts each guest thread's instructions
 * exactly, and at each cilkview mark the analyzer told it about, streams
 * (thread, probe index, instructions since the thread's previous event,
 * operand) to the analyzer. Protocol and counting: docs/emulation.md.
 *
 * Plugin arguments: ring=FD (the shared record ring, see stream.c), out=FD (the
 * pipe that wakes the analyzer), in=FD (the analyzer's replies), shm=FD (the
 * threads' states), so=FD (the memfd this file was loaded from), exec=1 (this QEMU was
 * exec'd by the plugin at the program's exec, see exec.c), tool=PID (the analyzer: QEMU's parent
 * while it lives), comm=NAME (the process's name, see process.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "qemu_plugin_v1.h"
#include "cilkview_wire.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- records, thread slots and the ring: cilkview_wire.h, rendered by build.rs from
 * src/wire.rs (their one definition; the tracer reads the same constants). A small hit is
 * cost << SMALL_PROBE_BITS | probe, 30 bits; (small << 2) | TAG_PAIR is half a word
 * (counting.c: small_half). ---- */

#define MAX_VCPUS 8192
#define TAIL_BITS 10  /* a block has at most 512 instructions */
#define NO_RA UINT64_MAX

/*
 * A thread's state. It lives in a slot of the shared memory the analyzer passes (shm=FD), at
 * offset vcpu * SLOT_BYTES: if QEMU dies without running the plugin's exit path (a fault of
 * the program, a kill from outside), the analyzer still reads each thread's buffered records
 * and count there. The first fields have the offsets of cilkview_wire.h (SLOT_*).
 */
struct vstate {
    uint64_t count; /* 0: instructions since the thread's last event (block counted at entry) */
    uint32_t len;   /* 8: records in buf[1..] */
    int32_t tid;    /* 12 */
    int32_t live;   /* 16 */
    uint32_t mixed; /* 20: buf holds a record that is not a hit without an operand */
    uint64_t rep_pc; /* REP string instruction last executed, and `count` after it */
    uint64_t rep_at;
    uint64_t ra;     /* return address at the last function entry (file-relative), or NO_RA */
    int64_t sc_num; /* the syscall in progress and its first arguments */
    uint64_t sc_a1, sc_a2, sc_a3;
    uint64_t buf[BUF_WORDS]; /* 80 */
} __attribute__((aligned(64)));
_Static_assert(offsetof(struct vstate, count) == SLOT_COUNT, "slot layout (wire.rs)");
_Static_assert(offsetof(struct vstate, len) == SLOT_LEN, "slot layout (wire.rs)");
_Static_assert(offsetof(struct vstate, tid) == SLOT_TID, "slot layout (wire.rs)");
_Static_assert(offsetof(struct vstate, live) == SLOT_LIVE, "slot layout (wire.rs)");
_Static_assert(offsetof(struct vstate, buf) == SLOT_BUF, "slot layout (wire.rs)");
#define SLOT_BYTES ((sizeof(struct vstate) + 4095) & ~(size_t)4095)

static struct vstate *vs[MAX_VCPUS];
static qemu_plugin_id_t g_id;
/* Counting mode (counting.c): while the program has one thread, blocks add their length to its
 * count inline; from its first thread on, through a callback per block. */
static int g_inline = 1, g_window;
static unsigned g_window_vcpu;
static uint64_t g_window_base;
static int g_out = -1, g_in = -1, g_shm = -1, g_so = -1, g_ring_fd = -1, g_execed;
static int g_slots_shared; /* the threads' states are slots of the analyzer's memfd */
/* The program closed or replaced one of those descriptors (fds.c): the next QEMU's options would
 * name the wrong ones, so execs are not followed (exec.c). */
static int g_fds_changed;
static pthread_mutex_t g_shm_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_started, g_finalized, g_first_init = 1;
static uint64_t g_guest_base;
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_fin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_write_lock = PTHREAD_MUTEX_INITIALIZER; /* one chunk at a time */
static __thread int tl_new_vcpu = -1;
static __thread uint64_t tl_sc_a4; /* the fourth argument of the syscall in progress */

static int tid_now(void) { return (int)syscall(SYS_gettid); }

static void die(const char *msg)
{
    char line[256];
    snprintf(line, sizeof line, "cilkview-rs plugin: %s\n", msg);
    if (write(2, line, strlen(line)) < 0) {
    }
    _exit(125);
}

static void register_callbacks(qemu_plugin_id_t id);

/* The parts of the plugin, one concern each (included: one translation unit). */
#include "stream.c"
#include "counting.c"
#include "files.c"
#include "translate.c"
#include "exec.c"
#include "fds.c"
#include "process.c"

/* ---------------------------- threads, syscalls ---------------------------- */

/* The state of vCPU `vcpu`: its slot of the shared memory (grown as needed), or private memory
 * without it. */
static struct vstate *new_slot(unsigned int vcpu)
{
    if (g_shm < 0) {
        struct vstate *s = aligned_alloc(64, sizeof *s);
        if (!s)
            die("out of memory");
        return s;
    }
    pthread_mutex_lock(&g_shm_lock);
    off_t need = (off_t)(vcpu + 1) * (off_t)SLOT_BYTES;
    struct stat st;
    if (fstat(g_shm, &st) != 0 || (st.st_size < need && ftruncate(g_shm, need) != 0))
        die("cannot grow the shared thread buffers");
    void *p = mmap(NULL, SLOT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, g_shm, (off_t)vcpu * (off_t)SLOT_BYTES);
    pthread_mutex_unlock(&g_shm_lock);
    if (p == MAP_FAILED)
        die("cannot map a thread's shared buffer");
    return p;
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (vcpu >= MAX_VCPUS)
        die("too many threads");
    struct vstate *s = vs[vcpu];
    if (!s)
        s = new_slot(vcpu);
    memset(s, 0, offsetof(struct vstate, buf));
    s->ra = NO_RA;
    s->live = 1;
    s->tid = g_first_init ? tid_now() : 0; /* others: set at clone's return, or lazily */
    vs[vcpu] = s;
    tl_new_vcpu = (int)vcpu;
    if (!g_first_init && g_inline)
        leave_inline_counting(vcpu);
    g_first_init = 0;
}

static void thread_exit_words(struct vstate *s, uint64_t w[2])
{
    w[0] = ctrl(K_THREAD_EXIT, (uint32_t)s->tid);
    w[1] = s->count;
}

/* The process ends (exit_group, or QEMU's exit path): every live thread's tail. */
static void finalize(int with_status, int64_t status)
{
    pthread_mutex_lock(&g_fin_lock);
    if (!g_finalized) {
        for (size_t i = 0; i < MAX_VCPUS; i++) {
            struct vstate *s = vs[i];
            if (!s || !s->live)
                continue;
            settle(i);
            flush(s);
            if (s->tid == 0)
                continue; /* never ran */
            uint64_t w[2];
            thread_exit_words(s, w);
            write_chunk(s->tid, w, 2);
            s->live = 0;
        }
        if (with_status) {
            uint64_t w = ctrl(K_EXIT, (uint64_t)status & 0xff);
            write_chunk(tid_now(), &w, 1);
        }
        g_finalized = 1;
    }
    pthread_mutex_unlock(&g_fin_lock);
}

/* Flush every thread's records and send its count so far (caller holds g_fin_lock). */
static void snapshot_all(void)
{
    for (size_t i = 0; i < MAX_VCPUS; i++) {
        struct vstate *t = vs[i];
        if (!t || !t->live)
            continue;
        settle(i);
        flush(t);
        if (t->tid == 0)
            continue;
        uint64_t w[2] = {ctrl(K_SNAPSHOT, (uint32_t)t->tid), t->count};
        write_chunk(t->tid, w, 2);
    }
}

static int is_our_task(int tid)
{
    char task[64];
    struct stat st;
    snprintf(task, sizeof task, "/proc/self/task/%d", tid);
    return tid > 0 && stat(task, &st) == 0;
}

static void read_guest_string(uint64_t gaddr, char *out, size_t cap)
{
    out[0] = 0;
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t r = pread(fd, out, cap - 1, (off_t)(gaddr + g_guest_base));
    close(fd);
    out[r > 0 ? r : 0] = 0;
    out[cap - 1] = 0;
}

/* QEMU 7.2 maps guest real-time signals to host ones two above; the guest's last two (SIGRTMAX-1
 * and SIGRTMAX: 63, 64) have none and are never delivered. */
static int undeliverable(uint64_t sig) { return sig == 63 || sig == 64; }

/* Tell the analyzer the emulator changed the program's world (once per what and detail). */
static void world(unsigned what, uint64_t detail)
{
    static uint8_t told[8][1024 / 8];
    if (detail < 1024) {
        if (told[what][detail / 8] & (1u << (detail % 8)))
            return;
        told[what][detail / 8] |= (uint8_t)(1u << (detail % 8));
    }
    uint64_t w = ctrl(K_WORLD, ((uint64_t)what << 16) | (detail & 0xffff));
    write_chunk(tid_now(), &w, 1);
}

static void vcpu_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2,
                         uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
    (void)id, (void)a5, (void)a6, (void)a7, (void)a8;
    guard_fds(num, a1, a2, a3);
    if (num == SYS_rt_sigaction && undeliverable(a1) && a2 != 0)
        world(W_RT_HANDLER, a1);
    struct vstate *s = vs[vcpu];
    s->sc_num = num;
    s->sc_a1 = a1, s->sc_a2 = a2, s->sc_a3 = a3;
    tl_sc_a4 = a4; /* the syscall returns on this thread */
    if (num == SYS_exit) {
        /* This thread ends; its count includes the syscall instruction. */
        pthread_mutex_lock(&g_fin_lock);
        settle(vcpu);
        flush(s);
        if (s->live) {
            if (s->tid == 0)
                s->tid = tid_now();
            uint64_t w[2];
            thread_exit_words(s, w);
            write_chunk(s->tid, w, 2);
            s->live = 0;
        }
        pthread_mutex_unlock(&g_fin_lock);
    } else if (num == SYS_exit_group) {
        finalize(1, (int64_t)a1);
    } else if (num == SYS_execve || num == SYS_execveat) {
        /* If it succeeds, qemu-user runs the new image natively: say so, with
         * every thread's count so far (the analyzer ends them there). */
        char path[2048];
        read_guest_string(num == SYS_execve ? a1 : a2, path, sizeof path);
        pthread_mutex_lock(&g_fin_lock);
        snapshot_all();
        size_t plen = strlen(path);
        uint64_t w[1 + sizeof path / 8 + 1];
        memset(w, 0, sizeof w);
        w[0] = ctrl(K_EXEC, plen);
        memcpy(&w[1], path, plen);
        write_chunk(tid_now(), w, 1 + (unsigned)((plen + 7) / 8));
        pthread_mutex_unlock(&g_fin_lock);
        core_limit_to_host(1); /* the exec'd image (followed or native) gets the program's */
        if (num == SYS_execve && plen + 1 < sizeof path) /* a path read whole */
            follow_exec(path, a2, a3);                      /* returns if it runs natively */
    } else if ((num == SYS_kill && ((int)a1 == getpid() || (int)a1 == 0) && a2 != 0) ||
               (num == SYS_tgkill && (int)a1 == getpid() && a3 != 0) ||
               (num == SYS_tkill && a2 != 0 && is_our_task((int)a1))) {
        /* The program signals itself: if the signal kills it, QEMU ends without
         * its exit path; send what is buffered and every thread's count now. */
        int sig = (int)(num == SYS_tgkill ? a3 : a2);
        if (undeliverable((uint64_t)sig))
            world(W_RT_SELF, (uint64_t)sig);
        pthread_mutex_lock(&g_fin_lock);
        snapshot_all();
        uint64_t w = ctrl(K_SELF_SIGNAL, (uint64_t)sig);
        write_chunk(tid_now(), &w, 1);
        pthread_mutex_unlock(&g_fin_lock);
    }
}

static void vcpu_syscall_ret(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, int64_t ret)
{
    (void)id;
    struct vstate *s = vs[vcpu];
    int ok = !(ret < 0 && ret >= -4095);
    if (ret == -ENOSYS && num >= 0)
        world(W_NOSYS, (uint64_t)num);
    else if (num == SYS_prctl && s->sc_a1 == 22 /* PR_SET_SECCOMP */ && ret == -EINVAL)
        world(W_SECCOMP, 0);
    if (!ok && num != SYS_execve && num != SYS_execveat)
        return;
    process_syscall_ret(num, s->sc_a1, s->sc_a2, s->sc_a3, tl_sc_a4);
    switch (num) {
    case SYS_mmap:
        if (s->sc_a3 & PROT_EXEC) {
            pthread_mutex_lock(&g_map_lock);
            scan_range((uint64_t)ret + g_guest_base, (uint64_t)ret + g_guest_base + s->sc_a2);
            pthread_mutex_unlock(&g_map_lock);
        }
        break;
    case SYS_mprotect:
        if (s->sc_a3 & PROT_EXEC) {
            pthread_mutex_lock(&g_map_lock);
            scan_range(s->sc_a1 + g_guest_base, s->sc_a1 + g_guest_base + s->sc_a2);
            pthread_mutex_unlock(&g_map_lock);
        }
        break;
    case SYS_munmap:
    case SYS_mremap:
        pthread_mutex_lock(&g_map_lock);
        forget_range(s->sc_a1 + g_guest_base, s->sc_a1 + g_guest_base + s->sc_a2);
        pthread_mutex_unlock(&g_map_lock);
        break;
    case SYS_clone:
    case SYS_clone3:
    case SYS_fork:
    case SYS_vfork:
        if (ret > 0) {
            if (is_our_task((int)ret)) {
                /* A new thread of ours: the vCPU created during this syscall. */
                if (tl_new_vcpu >= 0 && vs[tl_new_vcpu] && vs[tl_new_vcpu]->tid == 0)
                    vs[tl_new_vcpu]->tid = (int)ret;
            } else {
                uint64_t w = ctrl(K_FORK, (uint64_t)ret);
                push(s, &w, 1);
            }
        }
        break;
    case SYS_execve:
    case SYS_execveat: {
        core_limit_to_host(0);
        uint64_t w = ctrl(K_EXEC_FAILED, 0);
        write_chunk(tid_now(), &w, 1);
        break;
    }
    default:
        break;
    }
}

static void at_exit(qemu_plugin_id_t id, void *ud)
{
    (void)id, (void)ud;
    finalize(0, 0);
    uint64_t w = ctrl(K_ATEXIT, 0);
    write_chunk(tid_now(), &w, 1);
}

/* fork: the child runs on, uncounted; it must not write to the analyzer. */
static void prefork(void)
{
    pthread_mutex_lock(&g_map_lock);
    pthread_mutex_lock(&g_fin_lock);
    pthread_mutex_lock(&g_write_lock);
    pthread_mutex_lock(&g_shm_lock);
}
static void postfork_parent(void)
{
    pthread_mutex_unlock(&g_shm_lock);
    pthread_mutex_unlock(&g_write_lock);
    pthread_mutex_unlock(&g_fin_lock);
    pthread_mutex_unlock(&g_map_lock);
}
static void postfork_child(void)
{
    /* The child's buffers must not write into the parent's shared slots: private from now on
     * (zeroed: the child is not counted). */
    for (unsigned i = 0; i < MAX_VCPUS && g_slots_shared; i++)
        if (vs[i] && mmap(vs[i], SLOT_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            die("cannot unshare a thread buffer in a forked child");
    if (g_shm >= 0)
        close(g_shm);
    g_shm = -1;
    g_slots_shared = 0;
    g_gone = 1;
    if (g_ring)
        munmap(g_ring, RING_HDR_BYTES + RING_BYTES);
    g_ring = NULL;
    if (g_so >= 0)
        close(g_so);
    if (g_ring_fd >= 0)
        close(g_ring_fd);
    g_so = g_ring_fd = -1;
    g_qemu_nargs = 0; /* the child's execs run natively, as the child does */
    pthread_mutex_unlock(&g_shm_lock);
    pthread_mutex_unlock(&g_write_lock);
    pthread_mutex_unlock(&g_fin_lock);
    pthread_mutex_unlock(&g_map_lock);
    if (g_out >= 0)
        close(g_out);
    if (g_in >= 0)
        close(g_in);
    g_out = g_in = -1;
    g_finalized = 1;
}

/* The plugin's callbacks: at install, and again after the reset that leaves inline counting. */
static void register_callbacks(qemu_plugin_id_t id)
{
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, vcpu_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, vcpu_syscall_ret);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
}

/* Move fd above the range programs use, close-on-exec. The analyzer passes them there already
 * (sys::high_fds, same rule): growing the descriptor table here, with QEMU's threads running,
 * would wait for an RCU grace period (~10 ms). */
static int high_fd(int fd)
{
    struct rlimit rl;
    int min = 512;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1024)
        min = (int)rl.rlim_cur / 2;
    if (fd >= min) {
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        return fd;
    }
    int h = fcntl(fd, F_DUPFD_CLOEXEC, min);
    if (h < 0)
        h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (h < 0)
        die("cannot move the analyzer's pipe");
    close(fd);
    return h;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    int out = -1, in = -1, ring = -1;
    const char *comm = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "comm=", 5))
            comm = argv[i] + 5;
        if (!strncmp(argv[i], "tool=", 5))
            g_analyzer = atoi(argv[i] + 5); /* also right in a QEMU exec'd after the tool died */
        if (!strncmp(argv[i], "out=", 4))
            out = atoi(argv[i] + 4);
        else if (!strncmp(argv[i], "in=", 3))
            in = atoi(argv[i] + 3);
        else if (!strncmp(argv[i], "so=", 3))
            g_so = high_fd(atoi(argv[i] + 3)); /* kept for the next exec (exec.c) */
        else if (!strcmp(argv[i], "exec=1"))
            g_execed = 1;
        else if (!strncmp(argv[i], "shm=", 4))
            g_shm = high_fd(atoi(argv[i] + 4)), g_slots_shared = 1;
        else if (!strncmp(argv[i], "ring=", 5))
            ring = atoi(argv[i] + 5);
    }
    if (out < 0 || in < 0 || ring < 0) {
        qemu_plugin_outs("cilkview-rs plugin: needs ring=FD,out=FD,in=FD (it is run by cilkview-rs)\n");
        return -1;
    }
    void *r = mmap(NULL, RING_HDR_BYTES + RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, ring, 0);
    g_ring_fd = high_fd(ring); /* kept for the next exec (exec.c) */
    if (r == MAP_FAILED) {
        qemu_plugin_outs("cilkview-rs plugin: cannot map the record ring\n");
        return -1;
    }
    g_ring = r;
    g_ring_data = (char *)r + RING_HDR_BYTES;
    g_out = high_fd(out);
    fcntl(g_out, F_SETFL, fcntl(g_out, F_GETFL) | O_NONBLOCK);
    g_in = high_fd(in);
    g_id = id;
    if (g_analyzer <= 0)
        g_analyzer = getppid();
    process_setup(comm);
    pthread_atfork(prefork, postfork_parent, postfork_child);
    exec_setup();
    register_callbacks(id);
    return 0;
}
