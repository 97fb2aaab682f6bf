/*
 * cilkview_tbb.c -- the preload library of `cilkview-rs run --tbb`: an unmodified oneTBB
 * program (g++ ... -ltbb) runs as its serial elision, on one thread (docs/runtimes.md).
 *
 * oneTBB's templates (task_group, parallel_invoke, parallel_for, parallel_reduce, ...) are
 * compiled into the program and reach the scheduler through a few exported entry points of
 * libtbb, `tbb::detail::r1::...`, called through the PLT; this library defines them first
 * (LD_PRELOAD), by their mangled names:
 *
 *   spawn(task, ctx[, slot])     the task runs here and now: a spawn mark, its execute() in a
 *                                frame of its own (and the task it returns, if any: a bypass),
 *                                the spawn's return; the caller's code after it is the
 *                                continuation
 *   execute_and_wait(t, ..., w)  the root task runs as a call (a frame), then a sync
 *   wait(w, ctx)                 a sync: everything spawned has ended already
 *
 * A task runs with an execution_data of this library's (its dispatcher field is a marker), so
 * the entry points that read a real dispatcher from one (allocate, deallocate, execution_slot)
 * are wrapped too and answer without it. A task of a cancelled group has its cancel() run
 * instead of its body, as the scheduler would. A wait that still finds tasks to end (enqueued
 * ones, a flow graph's, a pipeline's: not spawned through here) is left to libtbb. A task that
 * throws: its exception unwinds through here (compiled with -fexceptions) from the spawn, the
 * frame's marks placed on the way, and the wait_context it did not release is released at the
 * next wait (oneTBB would catch it, cancel the group and rethrow it at the wait).
 */
#define _GNU_SOURCE
#include <stdbool.h>

#include "cilkview.h"
#include "cilkview_tbb_wire.h"
#include "counts_file.c"
#include "restore_preload.h"
#include "tbb_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* A runtime's preload library (cilkview-marks' RUNTIME_SECTION_NAME): its spawn marks are in
   the wrappers the program calls, so a profile names each spawn by that call. */
__asm__(".pushsection .cilkview_runtime,\"\",@progbits\n.byte 1\n.popsection");

#define REAL_MISSING "cilkview-rs --tbb: libtbb has no entry point "
#include "real.h"

/* The next definition of the mangled `sym`, of type `type`, resolved at its first use here. */
#define REAL_SYM(type, sym)                                                                        \
    ({                                                                                             \
        static __typeof__(type) real_;                                                             \
        if (__builtin_expect(real_ == NULL, 0))                                                    \
            real_ = (type)resolve(sym);                                                            \
        real_;                                                                                     \
    })

/* What marks an execution_data as this library's (its dispatcher field). */
static const char elision_marker;

static inline bool ours(const tbb_execution_data *ed)
{
    return ed && ((const tbb_execution_data_ext *)ed)->task_dispatcher == &elision_marker;
}

/* The context of the task running here (NULL outside the tasks run here). */
static TLS tbb_context *running_context;

typedef bool (*is_cancelled_fn)(tbb_context *);

/* ---- continuations: a task returned by execute() that was made by an earlier execute() ----
   In continuation-passing code (libstdc++'s parallel sort, parallel_scan) a task makes its
   continuation, spawns children of it and ends; the last child to end returns the continuation
   to run next. Here the spawned children have all ended when it is returned, but in the dag it
   must wait for them: for the siblings spawned in this frame since it was made (wait-for marks,
   by their ordinal among the frame's spawns since its last sync). A task returned by the
   execute() that made it (a child run at once) waits for nothing. */
#define DEPTHS 256
static TLS unsigned depth;             /* frames opened here and not ended */
static TLS unsigned spawned[DEPTHS];   /* the spawns of the open frame at each depth since its sync */
static TLS unsigned long executing;    /* the serial number of the execute() running here */
static TLS unsigned long executions;   /* execute() calls so far */

/* Where a task was made: the execute() running then, the frame and its spawns at that point. */
struct made {
    const void *task;
    unsigned long execution;
    unsigned depth, ordinal;
};
#define MADE_SLOTS 4096 /* the most recent allocations, by address */
static TLS struct made made[MADE_SLOTS];

static inline unsigned spawned_here(void)
{
    return depth < DEPTHS ? spawned[depth] : 0;
}

static inline void frame_entered(void)
{
    depth++;
    if (depth < DEPTHS)
        spawned[depth] = 0;
}

/* ---- groups: a wait is for its group's tasks (its context's), not every task of its frame ----
   The frame's spawns since its sync are kept as runs of consecutive ordinals of one context, on
   one per-thread stack ordered by depth (a frame's runs go when it syncs or ends). A wait whose
   frame has spawned only its group's tasks is a sync; one whose frame also spawned other
   groups' (a task_group run, then a function with its own task_group: recursion) waits for its
   group's only: a wait-for mark per task (counted: group_waits). Without memory: a sync. */
struct group_run {
    unsigned depth;
    unsigned first, count;
    tbb_context *ctx;
};
static TLS struct group_run *runs;
static TLS unsigned runs_top, runs_cap;
static TLS bool runs_lost; /* a run could not be kept: waits sync */

static void note_spawn(tbb_context *ctx)
{
    if (depth >= DEPTHS)
        return;
    unsigned ordinal = spawned[depth]++;
    struct group_run *top = runs_top ? &runs[runs_top - 1] : NULL;
    if (top && top->depth == depth && top->ctx == ctx && top->first + top->count == ordinal) {
        top->count++;
        return;
    }
    if (runs_top == runs_cap) {
        unsigned cap = runs_cap ? 2 * runs_cap : 256;
        struct group_run *grown = realloc(runs, cap * sizeof *grown);
        if (!grown) {
            runs_lost = true;
            return;
        }
        runs = grown;
        runs_cap = cap;
    }
    runs[runs_top++] = (struct group_run){depth, ordinal, 1, ctx};
}

/* The runs of frames at depth d and deeper are gone (the frame syncs or ends). */
static inline void runs_drop(unsigned d)
{
    while (runs_top && runs[runs_top - 1].depth >= d)
        runs_top--;
}

/* A wait for `ctx`'s tasks in the current frame: wait-for marks for them, and true, when the
   frame has spawned other groups' tasks since its sync; false when a sync is right. */
static bool wait_for_group(tbb_context *ctx)
{
    if (depth >= DEPTHS || runs_lost)
        return false;
    unsigned k = runs_top;
    bool others = false;
    while (k > 0 && runs[k - 1].depth == depth)
        others |= runs[--k].ctx != ctx;
    if (!others)
        return false;
    COUNT(C_GROUP_WAITS);
    unsigned kept = k;
    for (unsigned i = k; i < runs_top; i++) {
        if (runs[i].ctx != ctx) {
            runs[kept++] = runs[i];
            continue;
        }
        for (unsigned j = 0; j < runs[i].count; j++)
            cv__mark_wait_for(runs[i].first + j);
    }
    runs_top = kept;
    return true;
}

static inline void frame_synced(void)
{
    if (depth < DEPTHS)
        spawned[depth] = 0;
    runs_drop(depth);
}

static inline struct made *made_slot(const void *task)
{
    return &made[((uintptr_t)task >> 6) % MADE_SLOTS];
}

static inline void note_made(const void *task)
{
    if (task && depth < DEPTHS)
        *made_slot(task) = (struct made){task, executing, depth, spawned[depth]};
}

/* `next`, returned by the execute() numbered `execution`, about to run: a continuation waits for
   the siblings spawned since it was made. */
static void continuation_waits(const tbb_task *next, unsigned long execution)
{
    const struct made *m = made_slot(next);
    if (m->task != next || m->execution == execution || m->depth != depth)
        return;
    unsigned end = spawned_here();
    if (m->ordinal < end)
        COUNT(C_CONTINUATIONS);
    for (unsigned k = m->ordinal; k < end; k++)
        cv__mark_wait_for(k);
}

/* Tasks whose execute() threw (a C++ exception unwinding through here): their wait_context
   was not released (finish_wait releases it, so that no wait waits for them forever). */
static TLS unsigned long abandoned;

/* What run_task leaves as it was, on return or unwinding. */
struct running {
    tbb_context *outer;
    unsigned long outer_execution;
    bool returned;
};

static void end_running(struct running *r)
{
    running_context = r->outer;
    executing = r->outer_execution;
    if (!r->returned) {
        abandoned++;
        COUNT(C_EXCEPTIONS);
    }
}

/* Runs `t` and the tasks it returns, one after the other, here. */
static __attribute__((noinline)) void run_task(tbb_task *t, tbb_context *ctx)
{
    tbb_execution_data_ext ed = {
        .base = {.context = ctx, .original_slot = 0, .affinity_slot = TBB_NO_SLOT},
        .task_dispatcher = (void *)&elision_marker,
    };
    struct running running __attribute__((cleanup(end_running))) = {running_context, executing,
                                                                    false};
    running_context = ctx;
    while (t) {
        int slot = TBB_EXECUTE_SLOT;
        if (REAL_SYM(is_cancelled_fn, SYM_IS_CANCELLED)(ctx)) {
            COUNT(C_CANCELLED);
            slot = TBB_CANCEL_SLOT;
        }
        unsigned long execution = executing = ++executions;
        tbb_task *next = tbb_virtual(t, slot)(t, &ed.base);
        if (next) {
            COUNT(C_BYPASSES);
            if (next != t)
                continuation_waits(next, execution);
        }
        t = next;
    }
    running.returned = true;
}

/* The end of a wait for `w`: tasks not run here still to end are left to libtbb; a sync.
   Tasks that threw are taken as ended (their count released). */
static void finish_wait(tbb_wait_context *w, tbb_context *ctx)
{
    uint64_t left = __atomic_load_n(&w->ref_count, __ATOMIC_ACQUIRE);
    if (left != 0 && abandoned > 0) {
        uint64_t ended = left < abandoned ? left : abandoned;
        __atomic_fetch_sub(&w->ref_count, ended, __ATOMIC_ACQ_REL);
        abandoned -= ended;
    }
    if (__atomic_load_n(&w->ref_count, __ATOMIC_ACQUIRE) != 0) {
        COUNT(C_WAITS_LEFT_TO_TBB);
        REAL_SYM(void (*)(tbb_wait_context *, tbb_context *), SYM_WAIT)(w, ctx);
    }
    if (wait_for_group(ctx))
        return;
    CV__MARK(CV__KIND_SYNC);
    frame_synced();
}

/* The marks ending a spawned task's frame, placed on return or unwinding (a task that threw:
   its exception leaves from the spawn). */
static inline void end_spawned(const bool *unused)
{
    (void)unused;
    runs_drop(depth);
    depth--;
    CV__MARK(CV__KIND_FUNCTION_EXIT);
    CV__MARK(CV__KIND_SPAWN_RETURN);
}

/* A root's frame's end, likewise. */
static inline void end_root(const bool *unused)
{
    (void)unused;
    runs_drop(depth);
    depth--;
    CV__MARK(CV__KIND_FUNCTION_EXIT);
}

/* A spawn: the task runs as a frame of its own, in parallel with the caller's continuation. */
#define SPAWN_HERE(t, ctx)                                                                         \
    do {                                                                                           \
        COUNT(C_SPAWNS);                                                                           \
        note_spawn(ctx);                                                                           \
        CV__MARK(CV__KIND_SPAWN);                                                                  \
        CV__MARK(CV__KIND_FUNCTION_ENTER);                                                         \
        frame_entered();                                                                           \
        bool frame __attribute__((cleanup(end_spawned), unused)) = true;                           \
        run_task(t, ctx);                                                                          \
    } while (0)

EXPORT void tbb_spawn(tbb_task *t, tbb_context *ctx) __asm__(SYM_SPAWN);
void tbb_spawn(tbb_task *t, tbb_context *ctx)
{
    SPAWN_HERE(t, ctx);
}

/* The slot (an affinity_partitioner's wish) does not matter on one thread. */
EXPORT void tbb_spawn_slot(tbb_task *t, tbb_context *ctx, unsigned short slot)
    __asm__(SYM_SPAWN_SLOT);
void tbb_spawn_slot(tbb_task *t, tbb_context *ctx, unsigned short slot)
{
    (void)slot;
    SPAWN_HERE(t, ctx);
}

EXPORT void tbb_execute_and_wait(tbb_task *t, tbb_context *t_ctx, tbb_wait_context *w,
                                 tbb_context *w_ctx) __asm__(SYM_EXECUTE_AND_WAIT);
void tbb_execute_and_wait(tbb_task *t, tbb_context *t_ctx, tbb_wait_context *w,
                          tbb_context *w_ctx)
{
    COUNT(C_ROOTS);
    CV__MARK(CV__KIND_FUNCTION_ENTER);
    frame_entered();
    {
        bool frame __attribute__((cleanup(end_root), unused)) = true;
        run_task(t, t_ctx);
    }
    finish_wait(w, w_ctx);
}

EXPORT void tbb_wait(tbb_wait_context *w, tbb_context *ctx) __asm__(SYM_WAIT);
void tbb_wait(tbb_wait_context *w, tbb_context *ctx)
{
    COUNT(C_WAITS);
    finish_wait(w, ctx);
}

/* ---- the entry points that read the dispatcher of an execution_data ---- */
typedef void *(*allocate_fn)(tbb_pool **, size_t);
typedef void *(*allocate_ed_fn)(tbb_pool **, size_t, const tbb_execution_data *);
typedef void (*deallocate_fn)(tbb_pool *, void *, size_t);
typedef void (*deallocate_ed_fn)(tbb_pool *, void *, size_t, const tbb_execution_data *);

EXPORT void *tbb_allocate_ed(tbb_pool **pool, size_t n, const tbb_execution_data *ed)
    __asm__(SYM_ALLOCATE_ED);
void *tbb_allocate_ed(tbb_pool **pool, size_t n, const tbb_execution_data *ed)
{
    void *p = ours(ed) ? REAL_SYM(allocate_fn, SYM_ALLOCATE)(pool, n)
                       : REAL_SYM(allocate_ed_fn, SYM_ALLOCATE_ED)(pool, n, ed);
    note_made(p);
    return p;
}

EXPORT void *tbb_allocate(tbb_pool **pool, size_t n) __asm__(SYM_ALLOCATE);
void *tbb_allocate(tbb_pool **pool, size_t n)
{
    void *p = REAL_SYM(allocate_fn, SYM_ALLOCATE)(pool, n);
    note_made(p);
    return p;
}

EXPORT void tbb_deallocate_ed(tbb_pool *pool, void *p, size_t n, const tbb_execution_data *ed)
    __asm__(SYM_DEALLOCATE_ED);
void tbb_deallocate_ed(tbb_pool *pool, void *p, size_t n, const tbb_execution_data *ed)
{
    if (ours(ed))
        REAL_SYM(deallocate_fn, SYM_DEALLOCATE)(pool, p, n);
    else
        REAL_SYM(deallocate_ed_fn, SYM_DEALLOCATE_ED)(pool, p, n, ed);
}

/* A task run here is never stolen: it runs in the slot it was spawned from. */
EXPORT unsigned short tbb_execution_slot(const tbb_execution_data *ed)
    __asm__(SYM_EXECUTION_SLOT);
unsigned short tbb_execution_slot(const tbb_execution_data *ed)
{
    if (ours(ed))
        return ed->original_slot;
    return REAL_SYM(unsigned short (*)(const tbb_execution_data *), SYM_EXECUTION_SLOT)(ed);
}

EXPORT tbb_context *tbb_current_context(void) __asm__(SYM_CURRENT_CONTEXT);
tbb_context *tbb_current_context(void)
{
    if (running_context)
        return running_context;
    return REAL_SYM(tbb_context * (*)(void), SYM_CURRENT_CONTEXT)();
}

/* libtbb runs a pipeline's stages as its own tasks, spawned through the entry points above: each
   token's stages are one chain of bypasses here, so the pipeline's parallelism is not seen
   (counted, warned). */
EXPORT void tbb_parallel_pipeline(tbb_context *ctx, unsigned long tokens, const void *filters)
    __asm__(SYM_PARALLEL_PIPELINE);
void tbb_parallel_pipeline(tbb_context *ctx, unsigned long tokens, const void *filters)
{
    COUNT(C_PIPELINES);
    REAL_SYM(void (*)(tbb_context *, unsigned long, const void *), SYM_PARALLEL_PIPELINE)
    (ctx, tokens, filters);
}

/* ---- start and end ---- */
__attribute__((constructor)) static void cilkview_tbb_init(void)
{
    counts_init();
    restore_preload("CILKVIEW_OPENMP_LIBRARY");
}

__attribute__((destructor)) static void cilkview_tbb_fini(void)
{
    int fd = counts_open();
    if (fd >= 0)
        counts_close(fd);
}
