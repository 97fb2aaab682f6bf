/*
 * stream.c -- the record stream to the analyzer: per-thread buffers, chunks, the ring, the pipes.
 * Part of cilkview_plugin.c, which includes it (one translation unit, so the hot paths inline).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

/*
 * The record ring (ring=FD, shared with the analyzer, which reads the chunks in place): a header
 * page, then RING_BYTES of data. `head` counts the bytes written (published with release order
 * once a chunk is whole), `tail` the bytes the analyzer is done with. A chunk never wraps: one
 * that does not fit before the end is preceded by a wrap word (RING_WRAP) and starts at 0. The
 * out pipe carries no records: a byte written to it wakes the analyzer when it waits for records
 * (reader_waiting), and its end tells the analyzer that QEMU is gone. A writer that finds the
 * ring full waits on a futex on `tail` (writer_waiting) and gives up if the analyzer is gone.
 * Either side is woken once RING_WAKE_BYTES are ready for it, not at each chunk (a wake-up is a
 * system call on one side and a sleep and a switch on the other: fully marked fib(32) wrote
 * 1,790 chunks, and the plugin waited for room before 1,650 of them): the writer asks for its
 * chunk's room and that much more (writer_wake); the reader gets a bell once that much is unread,
 * or at once for a chunk that must be seen now (every chunk but a thread's full buffer).
 * Offsets and sizes: cilkview_wire.h (RING_*), read by crates/cilkview-tracer/src/emulate/ring.rs.
 */
struct ring_hdr {
    _Atomic uint64_t head; /* 0 */
    char pad0[56];
    _Atomic uint64_t tail; /* 64 */
    char pad1[56];
    _Atomic uint32_t reader_waiting; /* 128 */
    _Atomic uint32_t writer_waiting; /* 132 */
    _Atomic uint64_t writer_wake;    /* 136 */
};
_Static_assert(offsetof(struct ring_hdr, head) == RING_HEAD, "ring layout (wire.rs)");
_Static_assert(offsetof(struct ring_hdr, tail) == RING_TAIL, "ring layout (wire.rs)");
_Static_assert(offsetof(struct ring_hdr, reader_waiting) == RING_READER_WAITING, "ring layout (wire.rs)");
_Static_assert(offsetof(struct ring_hdr, writer_waiting) == RING_WRITER_WAITING, "ring layout (wire.rs)");
_Static_assert(offsetof(struct ring_hdr, writer_wake) == RING_WRITER_WAKE, "ring layout (wire.rs)");
_Static_assert(sizeof(struct ring_hdr) <= RING_HDR_BYTES, "ring layout (wire.rs)");
_Static_assert(2 * BUF_WORDS * 8 + RING_WAKE_BYTES <= RING_BYTES, "a writer's wake-up tail is written");
static struct ring_hdr *g_ring;
static char *g_ring_data;
/* The analyzer is gone (killed): nothing more is written, the program runs on. */
static int g_gone;
/* The analyzer's pid (QEMU's parent): if QEMU is reparented, the analyzer is gone, whatever the
 * program did to the descriptors. */
static pid_t g_analyzer;

/* The analyzer is gone: QEMU was reparented, or it closed the bell pipe's read end. */
static int analyzer_gone(void)
{
    if (g_gone || getppid() != g_analyzer)
        return 1;
    struct pollfd p = {.fd = g_out, .events = POLLOUT};
    return g_out >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

/* Wake the analyzer. If it is gone, the write fails with EPIPE and raises SIGPIPE, which must
 * not reach the program: blocked for the write, and taken back if it came. */
static void ring_bell(void)
{
    if (g_out < 0) {
        /* The program closed the bell pipe (fds.c): the analyzer waits on this futex instead. */
        atomic_store(&g_ring->reader_waiting, 0);
        syscall(SYS_futex, (uint32_t *)&g_ring->reader_waiting, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
        return;
    }
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    char bell = 0;
    if (write(g_out, &bell, 1) < 0 && errno == EPIPE) {
        struct timespec none = {0, 0};
        sigtimedwait(&pipe_set, NULL, &none);
        g_gone = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Wait until the ring has `need` free bytes after `head`; 0 if the analyzer is gone. The
 * analyzer wakes us once it has freed RING_WAKE_BYTES more (writer_wake, before the flag); we
 * look whether it is gone only when 20 ms pass without a wake-up. */
static int ring_room(uint64_t head, uint64_t need)
{
    for (;;) {
        uint64_t tail = atomic_load_explicit(&g_ring->tail, memory_order_acquire);
        if (head + need - tail <= RING_BYTES)
            return 1;
        atomic_store(&g_ring->writer_wake, head + need - RING_BYTES + RING_WAKE_BYTES);
        atomic_store(&g_ring->writer_waiting, 1);
        tail = atomic_load(&g_ring->tail);
        long slept = 0;
        if (head + need - tail > RING_BYTES) {
            struct timespec ts = {0, 20 * 1000 * 1000};
            slept = syscall(SYS_futex, (uint32_t *)&g_ring->tail, FUTEX_WAIT, (uint32_t)tail, &ts, NULL, 0);
        }
        atomic_store(&g_ring->writer_waiting, 0);
        if (slept != 0 && errno == ETIMEDOUT && analyzer_gone())
            return 0;
    }
}

/* One chunk into the ring, whole (the caller holds g_write_lock); `lazy`: a thread's full buffer,
 * which rings the bell only once RING_WAKE_BYTES are unread. */
static void ring_write(const void *p, size_t n, int lazy)
{
    uint64_t head = atomic_load_explicit(&g_ring->head, memory_order_relaxed);
    size_t off = head % RING_BYTES;
    size_t skip = off + n > RING_BYTES ? RING_BYTES - off : 0;
    if (!ring_room(head, skip + n)) {
        g_gone = 1; /* the analyzer is gone: stop writing */
        return;
    }
    if (skip) {
        memcpy(g_ring_data + off, &(uint64_t){RING_WRAP}, 8);
        head += skip;
        off = 0;
    }
    memcpy(g_ring_data + off, p, n);
    atomic_store_explicit(&g_ring->head, head + n, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&g_ring->reader_waiting, memory_order_relaxed) &&
        (!lazy || head + n - atomic_load(&g_ring->tail) >= RING_WAKE_BYTES))
        ring_bell();
}

static void write_all(const void *p, size_t n, int lazy)
{
    pthread_mutex_lock(&g_write_lock);
    if (!g_gone && g_ring)
        ring_write(p, n, lazy);
    pthread_mutex_unlock(&g_write_lock);
}

static void read_all(void *p, size_t n)
{
    char *c = p;
    while (n > 0) {
        ssize_t r = g_in >= 0 ? read(g_in, c, n) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("the analyzer closed its reply pipe");
        c += r;
        n -= (size_t)r;
    }
}

static inline uint64_t ctrl(unsigned kind, uint64_t arg)
{
    return (arg << 10) | ((uint64_t)kind << 2) | TAG_CTRL;
}

/* A thread's buffered records into the ring (`lazy`: the buffer is full, see ring_write). */
static void flush_as(struct vstate *s, int lazy)
{
    if (s->len == 0)
        return;
    if (s->tid == 0)
        s->tid = tid_now();
    s->buf[0] = (uint32_t)s->tid | ((uint64_t)s->len << 32) | (s->mixed ? 0 : CHUNK_HITS_ONLY);
    write_all(s->buf, (s->len + 1) * 8, lazy);
    s->len = 0;
    s->mixed = 0;
}

/* A thread's buffered records into the ring, to be seen now. */
static void flush(struct vstate *s) { flush_as(s, 0); }

/* Append words to a thread's buffer (flushing first if they do not fit). A record of one word
 * with bit 0 clear is a hit without an operand (TAG_HIT, TAG_PAIR); any other makes the chunk
 * mixed. (The hot callbacks store their small hits' words themselves: never mixed.) */
static void push(struct vstate *s, const uint64_t *w, unsigned n)
{
    if (s->len + n >= BUF_WORDS)
        flush_as(s, 1);
    if (n > 1 || (w[0] & 1))
        s->mixed = 1;
    /* The word first, then the length: a reader of the shared slot after a crash sees whole
     * records only. */
    for (unsigned i = 0; i < n; i++) {
        s->buf[s->len + 1] = w[i];
        s->len++;
    }
}

/* A chunk of control words written at once, outside any thread buffer. */
static void write_chunk(int tid, const uint64_t *w, unsigned n)
{
    uint64_t buf[512];
    if (n >= 512)
        die("control record too long");
    buf[0] = (uint32_t)tid | ((uint64_t)n << 32);
    memcpy(buf + 1, w, n * 8);
    write_all(buf, (n + 1) * 8, 0);
}

