/*
 * stream.c -- the record stream to the analyzer: per-thread buffers, chunks, the pipes.
 * Part of cilkview_plugin.c, which includes it (one translation unit, so the hot paths inline).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

static void write_all(const void *p, size_t n)
{
    pthread_mutex_lock(&g_write_lock);
    const char *c = p;
    while (n > 0 && g_out >= 0) {
        ssize_t w = write(g_out, c, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            g_out = -1; /* the analyzer is gone: stop writing */
            break;
        }
        c += w;
        n -= (size_t)w;
    }
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

static void flush(struct vstate *s)
{
    if (s->len == 0)
        return;
    if (s->tid == 0)
        s->tid = tid_now();
    s->buf[0] = (uint32_t)s->tid | ((uint64_t)s->len << 32);
    write_all(s->buf, (s->len + 1) * 8);
    s->len = 0;
}

/* Append words to a thread's buffer (flushing first if they do not fit). */
static void push(struct vstate *s, const uint64_t *w, unsigned n)
{
    if (s->len + n >= BUF_WORDS)
        flush(s);
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
    write_all(buf, (n + 1) * 8);
}

