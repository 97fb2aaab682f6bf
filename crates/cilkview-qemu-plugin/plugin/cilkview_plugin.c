/*
 * cilkview_plugin.c -- the TCG plugin of cilkview-rs's emulation backend.
 *
 * Loaded into qemu-x86_64 (user mode, plugin API v1, QEMU 7.2) by
 * cilkview-tracer's `run_emulated`. Counts each guest thread's instructions
 * exactly, and at each cilkview mark the analyzer told it about, streams
 * (thread, probe index, instructions since the thread's previous event,
 * operand) to the analyzer. Protocol and counting: docs/emulation.md.
 *
 * Plugin arguments: out=FD (records to the analyzer), in=FD (the analyzer's
 * replies), so=FD (the memfd this file was loaded from; closed at install).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- records (keep in sync with crates/cilkview-tracer/src/emulate/protocol.rs) ---- */
#define TAG_HIT 0u    /* probe: bits 2..25, cost: bits 26..63 */
#define TAG_HIT_OP 1u /* the same, then one word: the operand */
#define TAG_CTRL 3u   /* kind: bits 2..9, arg: bits 10..63, then kind-specific words */
#define K_BIGHIT 1       /* arg: has operand; words: probe, cost[, operand] */
#define K_THREAD_EXIT 2  /* arg: tid; word: cost */
#define K_REQUEST 3      /* arg: path length; words: host base, path (zero padded) */
#define K_START 4        /* the executable and its loader were announced */
#define K_FORK 6         /* arg: child pid */
#define K_EXEC 7         /* arg: path length; words: path */
#define K_EXEC_FAILED 8  /* the exec announced by K_EXEC returned */
#define K_SNAPSHOT 9     /* arg: tid; word: cost (a thread's count at an exec) */
#define K_EXIT 10        /* arg: exit_group status */
#define K_ATEXIT 11      /* QEMU's exit path ran (normal exit or the guest's fatal signal) */
#define K_NO_OPERAND 12  /* arg: probe index: its operand cannot be read exactly */
#define K_SELF_SIGNAL 13 /* arg: signal the program sends itself (kill, tkill, tgkill) */
#define HIT_PROBE_BITS 24
#define HIT_COST_BITS 38

#define MAX_VCPUS 8192
#define BUF_WORDS 8192 /* one chunk: header + records, 64 KiB, written under g_write_lock */
#define TAIL_BITS 10  /* a block has at most 512 instructions */
#define NO_RA UINT64_MAX

struct vstate {
    uint64_t count;  /* instructions since the thread's last event (block counted at entry) */
    uint64_t rep_pc; /* REP string instruction last executed, and `count` after it */
    uint64_t rep_at;
    uint32_t len; /* records in buf[1..] */
    int32_t tid;
    int live;
    uint64_t ra;     /* return address at the last function entry (file-relative), or NO_RA */
    int64_t sc_num; /* the syscall in progress and its first arguments */
    uint64_t sc_a1, sc_a2, sc_a3;
    uint64_t buf[BUF_WORDS];
} __attribute__((aligned(64)));

static struct vstate *vs[MAX_VCPUS];
static int g_out = -1, g_in = -1;
static int g_started, g_finalized, g_first_init = 1;
static uint64_t g_guest_base;
static pthread_mutex_t g_map_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_fin_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_write_lock = PTHREAD_MUTEX_INITIALIZER; /* one chunk at a time */
static __thread int tl_new_vcpu = -1;

static int tid_now(void) { return (int)syscall(SYS_gettid); }

static void die(const char *msg)
{
    char line[256];
    snprintf(line, sizeof line, "cilkview-rs plugin: %s\n", msg);
    if (write(2, line, strlen(line)) < 0) {
    }
    _exit(125);
}

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
    for (unsigned i = 0; i < n; i++)
        s->buf[++s->len] = w[i];
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

/* ---------------------------- counting ---------------------------- */

/* A block was entered: add its instructions (udata: how many). */
static void tb_cb(unsigned int vcpu, void *ud) { vs[vcpu]->count += (uintptr_t)ud; }

/* An instruction counted on its own (one that may be a page-crossing phantom). */
static void one_cb(unsigned int vcpu, void *ud)
{
    (void)ud;
    vs[vcpu]->count += 1;
}

/* A block that starts with a REP string instruction at `ud` (the block is that
 * one instruction). QEMU runs each iteration as one execution of this block;
 * the instruction retires once. A continuation: the previous block this
 * thread executed was this instruction and nothing counted since. */
static void rep_tb_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    if (!(s->rep_pc == (uintptr_t)ud && s->rep_at == s->count))
        s->count += 1;
}

/* After the REP string instruction at `ud` (the last of its block) started. */
static void rep_insn_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    s->rep_pc = (uintptr_t)ud;
    s->rep_at = s->count;
}

static void push_hit(struct vstate *s, uint64_t idx, uint64_t cost, int has_op, uint64_t op)
{
    if (likely(idx < (1ull << HIT_PROBE_BITS) && cost < (1ull << HIT_COST_BITS))) {
        uint64_t w[2] = {(cost << 26) | (idx << 2) | (has_op ? TAG_HIT_OP : TAG_HIT), op};
        push(s, w, has_op ? 2 : 1);
    } else {
        uint64_t w[4] = {ctrl(K_BIGHIT, has_op ? 1 : 0), idx, cost, op};
        push(s, w, has_op ? 4 : 3);
    }
}

/* A mark: udata = probe index << TAIL_BITS | tail, where tail is how many of
 * the instructions already added for this block are at or after the mark
 * (the mark's NOP belongs to the following strand). The hot path. */
static void mark_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), idx = u >> TAIL_BITS;
    uint64_t cost = s->count - tail;
    s->count = tail;
    if (likely(idx < (1ull << HIT_PROBE_BITS) && cost < (1ull << HIT_COST_BITS) &&
               s->len + 1 < BUF_WORDS)) {
        s->buf[++s->len] = (cost << 26) | (idx << 2) | TAG_HIT;
        return;
    }
    push_hit(s, idx, cost, 0, 0);
}

/* QEMU's register order (R_EAX, R_ECX, R_EDX, R_EBX, R_ESP, R_EBP, R_ESI, R_EDI, r8..) for
 * each DWARF x86-64 register number (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..). */
static const uint8_t qemu_reg_of_dwarf[16] = {0, 2, 1, 3, 6, 7, 5, 4, 8, 9, 10, 11, 12, 13, 14, 15};

/* A mark with an operand; it begins its block, so every guest register is in
 * CPUX86State. `env`: TCG's env pointer (see the trampoline below);
 * CPUX86State starts with `target_ulong regs[16]` in QEMU 7.2. udata =
 * probe index << 14 | DWARF register << TAIL_BITS | tail. */
__attribute__((used, visibility("hidden"))) void cv_mark_op_cb(unsigned int vcpu, void *ud,
                                                              const uint64_t *env)
{
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), reg = (u >> TAIL_BITS) & 15, idx = u >> 14;
    uint64_t cost = s->count - tail;
    s->count = tail;
    push_hit(s, idx, cost, 1, env[qemu_reg_of_dwarf[reg]]);
}

/* TCG on an x86-64 host keeps env (TCG_AREG0) in %rbp in generated code and
 * calls plugin callbacks directly from it; %rbp is callee-saved, so at our
 * entry it still holds env. Pass it as the third argument. */
void cv_mark_op_tramp(unsigned int vcpu, void *ud);
__asm__(".text\n"
        ".p2align 4\n"
        ".type cv_mark_op_tramp,@function\n"
        "cv_mark_op_tramp:\n"
        "    mov %rbp, %rdx\n"
        "    jmp cv_mark_op_cb\n"
        ".size cv_mark_op_tramp, .-cv_mark_op_tramp\n");

/* A function entry mark's probe (call-site profiles): report the return address the thread
 * read when it last entered the function (see cv_entry_cb), if it could. */
static void mark_ra_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), idx = u >> TAIL_BITS;
    uint64_t cost = s->count - tail, ra = s->ra;
    s->count = tail;
    s->ra = NO_RA;
    push_hit(s, idx, cost, ra != NO_RA, ra);
}

/* The entry of a function whose entry mark reports the return address. A call
 * target begins a translation block, so env holds every guest register:
 * the return address is at guest [rsp] (env->regs[R_ESP]), which in user mode
 * is host memory at guest_base + rsp. udata: the load address (guest) of the
 * function's file, so the value kept is file-relative. */
__attribute__((used, visibility("hidden"))) void cv_entry_cb(unsigned int vcpu, void *ud,
                                                            const uint64_t *env)
{
    uint64_t rsp = env[4];
    uint64_t ra;
    memcpy(&ra, (const void *)(uintptr_t)(rsp + g_guest_base), 8);
    vs[vcpu]->ra = ra - (uint64_t)(uintptr_t)ud;
}

void cv_entry_tramp(unsigned int vcpu, void *ud);
__asm__(".text\n"
        ".p2align 4\n"
        ".type cv_entry_tramp,@function\n"
        "cv_entry_tramp:\n"
        "    mov %rbp, %rdx\n"
        "    jmp cv_entry_cb\n"
        ".size cv_entry_tramp, .-cv_entry_tramp\n");

/* A function entry inside a block (reached by falling through): registers are
 * not readable exactly there, so the return address is unknown. */
static void entry_unknown_cb(unsigned int vcpu, void *ud)
{
    (void)ud;
    vs[vcpu]->ra = NO_RA;
}

/* A mark whose operand cannot be read exactly (it does not begin its block). */
static void mark_no_operand_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    uint64_t w = ctrl(K_NO_OPERAND, (uintptr_t)ud);
    push(s, &w, 1);
    flush(s);
}

/* ------------------------- mapped files and probes ------------------------- */

struct probe {
    uint64_t gaddr;
    uint64_t index;
    int32_t operand; /* DWARF register or -1 */
    int32_t ra;      /* 1: report the return address (see mark_ra_cb) */
};

struct file {
    char dev[16];
    uint64_t inode;
    char *path;
    uint64_t base, lo, hi; /* host: lowest mapping, span of its contiguous mappings */
    int dead;
    size_t n;
    struct probe *probes; /* sorted by gaddr */
    size_t nentries;
    uint64_t *entries; /* guest addresses of the functions of `ra` probes, sorted */
};

static struct file *files;
static size_t nfiles, capfiles;
/* Executable code outside any file (anonymous memory): host ranges, no probes. */
static uint64_t (*anon)[2];
static size_t nanon, capanon;

struct mapline {
    uint64_t lo, hi, inode;
    char perms[5];
    char dev[16];
    const char *path; /* "" if none */
};

static char *maps_text;
static struct mapline *maps;
static size_t nmaps, capmaps;

static void read_maps(void)
{
    static size_t cap;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("cannot open /proc/self/maps");
    size_t len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 1 << 16;
            maps_text = realloc(maps_text, cap);
            if (!maps_text)
                die("out of memory");
        }
        ssize_t r = read(fd, maps_text + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    maps_text[len] = 0;
    nmaps = 0;
    for (char *line = maps_text; *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        struct mapline m;
        int pos = 0;
        unsigned long long lo, hi, off, inode;
        memset(&m, 0, sizeof m);
        if (sscanf(line, "%llx-%llx %4s %llx %15s %llu %n", &lo, &hi, m.perms, &off, m.dev, &inode,
                   &pos) >= 6) {
            m.lo = lo;
            m.hi = hi;
            m.inode = inode;
            m.path = pos > 0 ? line + pos : "";
            if (nmaps == capmaps) {
                capmaps = capmaps ? capmaps * 2 : 256;
                maps = realloc(maps, capmaps * sizeof *maps);
                if (!maps)
                    die("out of memory");
            }
            maps[nmaps++] = m;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

static int same_file(const struct mapline *a, const struct mapline *b)
{
    return a->inode == b->inode && !strcmp(a->dev, b->dev) && !strcmp(a->path, b->path);
}

static long find_map(uint64_t h)
{
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].lo <= h && h < maps[i].hi)
            return (long)i;
    return -1;
}

/* The contiguous run of mappings of the same file around maps[i]. */
static void file_span(size_t i, uint64_t *lo, uint64_t *hi)
{
    size_t a = i, b = i;
    while (a > 0 && maps[a - 1].hi == maps[a].lo && same_file(&maps[a - 1], &maps[i]))
        a--;
    while (b + 1 < nmaps && maps[b].hi == maps[b + 1].lo && same_file(&maps[b + 1], &maps[i]))
        b++;
    *lo = maps[a].lo;
    *hi = maps[b].hi;
}

static struct file *live_file_at(uint64_t h)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!files[i].dead && files[i].lo <= h && h < files[i].hi)
            return &files[i];
    return NULL;
}

static int cmp_probe(const void *a, const void *b)
{
    const struct probe *x = a, *y = b;
    return x->gaddr < y->gaddr ? -1 : x->gaddr > y->gaddr;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ask the analyzer for the probes of the file mapped at maps[i] (a new one). */
static struct file *request(size_t i)
{
    uint64_t lo, hi;
    file_span(i, &lo, &hi);
    const char *path = maps[i].path;
    size_t plen = strlen(path);
    if (plen > 3000)
        die("mapped file path too long");
    uint64_t w[2 + 3000 / 8 + 1];
    memset(w, 0, sizeof w);
    w[0] = ctrl(K_REQUEST, plen);
    w[1] = lo;
    memcpy(&w[2], path, plen);
    write_chunk(tid_now(), w, 2 + (unsigned)((plen + 7) / 8));
    uint64_t head[3]; /* status, first index, count */
    read_all(head, sizeof head);
    if (nfiles == capfiles) {
        capfiles = capfiles ? capfiles * 2 : 32;
        files = realloc(files, capfiles * sizeof *files);
        if (!files)
            die("out of memory");
    }
    struct file *f = &files[nfiles++];
    memset(f, 0, sizeof *f);
    snprintf(f->dev, sizeof f->dev, "%s", maps[i].dev);
    f->inode = maps[i].inode;
    f->path = strdup(path);
    f->base = f->lo = lo;
    f->hi = hi;
    if (head[0] != 0)
        f->n = 0; /* the analyzer refused (it stops the run) */
    else
        f->n = head[2];
    f->probes = calloc(f->n ? f->n : 1, sizeof *f->probes);
    f->entries = calloc(f->n ? f->n : 1, sizeof *f->entries);
    if (!f->probes || !f->entries)
        die("out of memory");
    for (size_t k = 0; k < f->n; k++) {
        uint64_t p[3]; /* offset, operand register or all ones, function entry or all ones */
        read_all(p, sizeof p);
        f->probes[k].gaddr = lo - g_guest_base + p[0];
        f->probes[k].index = head[1] + k;
        f->probes[k].operand = p[1] > 15 ? -1 : (int32_t)p[1];
        f->probes[k].ra = p[2] != UINT64_MAX;
        if (f->probes[k].ra)
            f->entries[f->nentries++] = lo - g_guest_base + p[2];
    }
    qsort(f->probes, f->n, sizeof *f->probes, cmp_probe);
    qsort(f->entries, f->nentries, sizeof *f->entries, cmp_u64);
    return f;
}

static int known(size_t i)
{
    uint64_t lo, hi;
    file_span(i, &lo, &hi);
    for (size_t k = 0; k < nfiles; k++)
        if (!files[k].dead && files[k].base == lo && files[k].inode == maps[i].inode &&
            !strcmp(files[k].dev, maps[i].dev) && !strcmp(files[k].path, maps[i].path))
            return 1;
    return 0;
}

/* Files newly mapped executable in the host range [lo, hi), in address order. (The
 * guest asked for PROT_EXEC; QEMU need not give the host mapping execute permission.) */
static void scan_range(uint64_t lo, uint64_t hi)
{
    read_maps();
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].lo < hi && lo < maps[i].hi && maps[i].path[0] == '/' &&
            !known(i))
            request(i);
}

/* The host range [lo, hi) was unmapped or moved: forget the files whose lowest
 * mapping is gone (their indices are not reused), and anonymous ranges there. */
static void forget_range(uint64_t lo, uint64_t hi)
{
    read_maps();
    for (size_t k = 0; k < nfiles; k++) {
        struct file *f = &files[k];
        if (f->dead || !(f->lo < hi && lo < f->hi))
            continue;
        long i = find_map(f->base);
        if (i < 0 || maps[i].lo != f->base || maps[i].inode != f->inode || strcmp(maps[i].path, f->path))
            f->dead = 1;
        else {
            uint64_t a, b;
            file_span((size_t)i, &a, &b);
            f->hi = b;
        }
    }
    for (size_t k = 0; k < nanon;)
        if (anon[k][0] < hi && lo < anon[k][1])
            anon[k][0] = anon[--nanon][0], anon[k][1] = anon[nanon][1];
        else
            k++;
}

/* Where the code at host address h comes from: a known file, NULL for anonymous memory. */
static struct file *file_of_code(uint64_t h)
{
    struct file *f = live_file_at(h);
    if (f)
        return f;
    for (size_t k = 0; k < nanon; k++)
        if (anon[k][0] <= h && h < anon[k][1])
            return NULL;
    read_maps();
    long i = find_map(h);
    if (i >= 0 && maps[i].path[0] == '/')
        return request((size_t)i);
    if (nanon == capanon) {
        capanon = capanon ? capanon * 2 : 16;
        anon = realloc(anon, capanon * sizeof *anon);
        if (!anon)
            die("out of memory");
    }
    anon[nanon][0] = i >= 0 ? maps[i].lo : h;
    anon[nanon][1] = i >= 0 ? maps[i].hi : h + 1;
    nanon++;
    return NULL;
}

/* The first block: learn guest_base; announce the executable, then its loader. */
static void start(uint64_t vaddr, uint64_t haddr)
{
    g_guest_base = haddr - vaddr;
    read_maps();
    long exe = find_map(qemu_plugin_start_code() + g_guest_base);
    if (exe >= 0 && maps[exe].path[0] == '/')
        request((size_t)exe);
    read_maps();
    long ld = find_map(qemu_plugin_entry_code() + g_guest_base);
    if (ld >= 0 && maps[ld].path[0] == '/' && !known((size_t)ld))
        request((size_t)ld);
    uint64_t w = ctrl(K_START, 0);
    write_chunk(tid_now(), &w, 1);
    g_started = 1;
}

static int is_rep_string(const uint8_t *b, size_t n)
{
    int rep = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        if (c == 0xf2 || c == 0xf3)
            rep = 1;
        else if (c == 0x66 || c == 0x67 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 ||
                 c == 0x64 || c == 0x65 || c == 0xf0 || (c >= 0x40 && c <= 0x4f))
            continue;
        else
            return rep && ((c >= 0x6c && c <= 0x6f) || (c >= 0xa4 && c <= 0xa7) || (c >= 0xaa && c <= 0xaf));
    }
    return 0;
}

static const uint8_t MARK_NOP[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0)
        return;
    struct qemu_plugin_insn *first = qemu_plugin_tb_get_insn(tb, 0);
    uint64_t v0 = qemu_plugin_insn_vaddr(first);
    uint64_t h0 = (uint64_t)(uintptr_t)qemu_plugin_insn_haddr(first);

    /* A block that is one REP string instruction: iterations are re-executions. */
    if (n == 1 && is_rep_string(qemu_plugin_insn_data(first), qemu_plugin_insn_size(first))) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, rep_tb_cb, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)v0);
        qemu_plugin_register_vcpu_insn_exec_cb(first, rep_insn_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)v0);
        return;
    }

    pthread_mutex_lock(&g_map_lock);
    if (!g_started)
        start(v0, h0);
    struct file *f = file_of_code(h0);
    pthread_mutex_unlock(&g_map_lock);

    /* Phantom fix: an instruction (not the first) that starts within 15 bytes of
     * a page end may be dropped from the block while still listed; count it
     * with its own callback, which runs only if it executes here. */
    uint8_t alone[512];
    size_t counted = 0;
    for (size_t i = 0; i < n && i < 512; i++) {
        uint64_t v = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
        alone[i] = i > 0 && (v & 0xfff) > 0xfff - 15;
        counted += !alone[i];
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_cb, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)counted);

    /* Probes of this block, if its file has any. */
    struct probe *p = NULL, *pend = NULL;
    if (f && f->n) {
        uint64_t vlast = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, n - 1));
        size_t a = 0, b = f->n;
        while (a < b) {
            size_t m = (a + b) / 2;
            if (f->probes[m].gaddr < v0)
                a = m + 1;
            else
                b = m;
        }
        p = f->probes + a;
        pend = p;
        while (pend < f->probes + f->n && pend->gaddr <= vlast)
            pend++;
    }
    /* Function entries of this block whose return address is wanted. */
    uint64_t *e = NULL, *eend = NULL;
    if (f && f->nentries) {
        uint64_t vlast = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, n - 1));
        size_t a = 0, b = f->nentries;
        while (a < b) {
            size_t m = (a + b) / 2;
            if (f->entries[m] < v0)
                a = m + 1;
            else
                b = m;
        }
        e = f->entries + a;
        eend = e;
        while (eend < f->entries + f->nentries && *eend <= vlast)
            eend++;
    }

    size_t after = counted; /* block-counted instructions at index >= i */
    for (size_t i = 0; i < n && i < 512; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t v = qemu_plugin_insn_vaddr(insn);
        if (alone[i])
            qemu_plugin_register_vcpu_insn_exec_cb(insn, one_cb, QEMU_PLUGIN_CB_NO_REGS, NULL);
        while (e && e < eend && *e < v)
            e++;
        if (e && e < eend && *e == v) {
            if (i == 0)
                qemu_plugin_register_vcpu_insn_exec_cb(insn, cv_entry_tramp, QEMU_PLUGIN_CB_R_REGS,
                                                       (void *)(uintptr_t)(f->base - g_guest_base));
            else
                qemu_plugin_register_vcpu_insn_exec_cb(insn, entry_unknown_cb, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        while (p && p < pend && p->gaddr < v)
            p++;
        if (p && p < pend && p->gaddr == v && qemu_plugin_insn_size(insn) == 5 &&
            !memcmp(qemu_plugin_insn_data(insn), MARK_NOP, 5)) {
            uint64_t tail = after + alone[i];
            if (p->ra)
                qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_ra_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)((p->index << TAIL_BITS) | tail));
            else if (p->operand < 0)
                qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)((p->index << TAIL_BITS) | tail));
            else if (i == 0)
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn, cv_mark_op_tramp, QEMU_PLUGIN_CB_R_REGS,
                    (void *)(uintptr_t)((p->index << 14) | ((uint64_t)p->operand << TAIL_BITS) | tail));
            else
                qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_no_operand_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                       (void *)(uintptr_t)p->index);
        }
        if (i == n - 1 && is_rep_string(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn)))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, rep_insn_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)v);
        after -= !alone[i];
    }
}

/* ---------------------------- threads, syscalls ---------------------------- */

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu)
{
    (void)id;
    if (vcpu >= MAX_VCPUS)
        die("too many threads");
    struct vstate *s = vs[vcpu];
    if (!s) {
        s = aligned_alloc(64, sizeof *s);
        if (!s)
            die("out of memory");
    }
    memset(s, 0, offsetof(struct vstate, buf));
    s->ra = NO_RA;
    s->live = 1;
    s->tid = g_first_init ? tid_now() : 0; /* others: set at clone's return, or lazily */
    g_first_init = 0;
    vs[vcpu] = s;
    tl_new_vcpu = (int)vcpu;
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

static void vcpu_syscall(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2,
                         uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
    (void)id, (void)a4, (void)a5, (void)a6, (void)a7, (void)a8;
    struct vstate *s = vs[vcpu];
    s->sc_num = num;
    s->sc_a1 = a1, s->sc_a2 = a2, s->sc_a3 = a3;
    if (num == SYS_exit) {
        /* This thread ends; its count includes the syscall instruction. */
        pthread_mutex_lock(&g_fin_lock);
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
    } else if ((num == SYS_kill && ((int)a1 == getpid() || (int)a1 == 0) && a2 != 0) ||
               (num == SYS_tgkill && (int)a1 == getpid() && a3 != 0) ||
               (num == SYS_tkill && a2 != 0 && is_our_task((int)a1))) {
        /* The program signals itself: if the signal kills it, QEMU ends without
         * its exit path; send what is buffered and every thread's count now. */
        int sig = (int)(num == SYS_tgkill ? a3 : a2);
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
    if (!ok && num != SYS_execve && num != SYS_execveat)
        return;
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
}
static void postfork_parent(void)
{
    pthread_mutex_unlock(&g_write_lock);
    pthread_mutex_unlock(&g_fin_lock);
    pthread_mutex_unlock(&g_map_lock);
}
static void postfork_child(void)
{
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

/* Move fd above the range programs use, close-on-exec. */
static int high_fd(int fd)
{
    struct rlimit rl;
    int min = 512;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1024)
        min = (int)rl.rlim_cur / 2;
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
    int out = -1, in = -1;
    for (int i = 0; i < argc; i++) {
        if (!strncmp(argv[i], "out=", 4))
            out = atoi(argv[i] + 4);
        else if (!strncmp(argv[i], "in=", 3))
            in = atoi(argv[i] + 3);
        else if (!strncmp(argv[i], "so=", 3))
            close(atoi(argv[i] + 3));
    }
    if (out < 0 || in < 0) {
        qemu_plugin_outs("cilkview-rs plugin: needs out=FD,in=FD (it is run by cilkview-rs)\n");
        return -1;
    }
    g_out = high_fd(out);
    g_in = high_fd(in);
    pthread_atfork(prefork, postfork_parent, postfork_child);
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, vcpu_syscall);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, vcpu_syscall_ret);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
