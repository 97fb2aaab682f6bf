/* kmp_parallel.c -- libomp's parallel regions (a team of one), static and dynamic loops,
   barriers, mutual exclusion shown as regions, the thread-number queries. */

#include <stdarg.h>

/* ---- parallel regions ---- */

/* The num_threads clause of the region about to be forked (0: none). */
static TLS kmp_int32 pushed_threads;
/* A fork of ours has not yet reached libomp's own __kmpc_serialized_parallel. */
static TLS int forking;

EXPORT void __kmpc_push_num_threads(ident_t *loc, kmp_int32 gtid, kmp_int32 num_threads)
{
    (void)loc, (void)gtid;
    pushed_threads = num_threads; /* the fork pushes 1 */
}

/* The most shared variables a region passes to its outlined function (clang passes one pointer
   per variable). */
#define FORK_ARGS 64
#define ARGS8(i) a[i], a[i + 1], a[i + 2], a[i + 3], a[i + 4], a[i + 5], a[i + 6], a[i + 7]
#define FORK_ARGS_LIST                                                                             \
    ARGS8(0), ARGS8(8), ARGS8(16), ARGS8(24), ARGS8(32), ARGS8(40), ARGS8(48), ARGS8(56)

static void empty_region(kmp_int32 *gtid, kmp_int32 *btid)
{
    (void)gtid, (void)btid;
}

/* libomp initializes its parallel machinery at the program's first region (~1.1M instructions
   here: the machine's topology, its thread pool): done once before that region's marks, by an
   empty region of one thread, so that it counts in the program's serial work, as libgomp's
   set-up (done before main) does, not in the region's. */
static void warm_up(ident_t *loc, kmp_int32 gtid)
{
    static int done;
    if (__atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
        return;
    (void)loc, (void)gtid;
    REAL(omp_get_num_procs)();
    REAL(omp_get_max_threads)();
}

/* A region of --omp-team's virtual team (team.c): each virtual thread calls the program's
   microtask with its arguments, its own bound thread number, and libomp's thread number. */
struct kmp_region {
    kmpc_micro microtask;
    kmp_int32 gtid;
    void *a[FORK_ARGS];
};

static void kmp_vthread(void *data)
{
    struct kmp_region *r = data;
    kmp_int32 gtid = r->gtid, btid = (kmp_int32)vteam->cur;
    void **a = r->a;
    r->microtask(&gtid, &btid, FORK_ARGS_LIST);
}

/* The microtask libomp's team of one runs for a virtual team: the virtual threads. */
static void kmp_vteam_microtask(kmp_int32 *gtid, kmp_int32 *btid, struct vteam *t)
{
    (void)gtid, (void)btid;
    vteam_trampoline(t);
}

/* A region runs in a team of one (__kmpc_push_num_threads 1 before libomp's fork), or as
   --omp-team's virtual threads in it; its outlined function gets the program's arguments,
   passed on as they came (pointers), the unused ones after them ignored as the SysV ABI
   allows. */
EXPORT void __kmpc_fork_call(ident_t *loc, kmp_int32 argc, kmpc_micro microtask, ...)
{
    struct kmp_region r = {.microtask = microtask};
    void **a = r.a;
    if (argc < 0 || argc > FORK_ARGS) {
        static const char msg[] = "cilkview-rs --openmp: a parallel region passes more than 64 "
                                  "variables to libomp: not supported\n";
        (void)!write(2, msg, sizeof msg - 1);
        _exit(127);
    }
    va_list ap;
    va_start(ap, microtask);
    for (kmp_int32 i = 0; i < argc; i++)
        a[i] = va_arg(ap, void *);
    va_end(ap);
    unsigned requested = pushed_threads > 0 ? (unsigned)pushed_threads : 0;
    pushed_threads = 0;
    kmp_int32 gtid = REAL(__kmpc_global_thread_num)(loc);
    r.gtid = gtid;
    warm_up(loc, gtid);
    parallel_begin(requested);
    struct vteam *t = vteam_open(kmp_vthread, &r);
    REAL(__kmpc_push_num_threads)(loc, gtid, 1);
    forking = 1;
    if (t) {
        REAL(__kmpc_fork_call)(loc, 1, (kmpc_micro)kmp_vteam_microtask, t);
        vteam_close(t);
    } else {
        REAL(__kmpc_fork_call)(loc, argc, microtask, FORK_ARGS_LIST);
    }
    forking = 0;
    parallel_end();
}

/* libomp's fork of a team of one serializes the region through the exported entry points
   (__kmpc_serialized_parallel and its end) before it runs the outlined function: those calls are
   not the program's.  `serialized_by_libomp`: which of the open serialized regions, by nesting
   depth (the first 64), libomp began. */
static TLS unsigned serialized_depth;
static TLS uint64_t serialized_by_libomp;

/* A region the program serializes itself (clang's if(0) parallel): one thread, as gcc's. */
EXPORT void __kmpc_serialized_parallel(ident_t *loc, kmp_int32 gtid)
{
    int by_libomp = forking;
    forking = 0;
    if (serialized_depth < 64)
        serialized_by_libomp = (serialized_by_libomp & ~(1ull << serialized_depth)) |
                               ((uint64_t)by_libomp << serialized_depth);
    serialized_depth++;
    if (!by_libomp) {
        parallel_begin(1);
    }
    REAL(__kmpc_serialized_parallel)(loc, gtid);
}

EXPORT void __kmpc_end_serialized_parallel(ident_t *loc, kmp_int32 gtid)
{
    REAL(__kmpc_end_serialized_parallel)(loc, gtid);
    int by_libomp = 0;
    if (serialized_depth > 0 && --serialized_depth < 64)
        by_libomp = (serialized_by_libomp >> serialized_depth) & 1;
    if (!by_libomp) {
        parallel_end();
    }
}

/* ---- loops ---- */

/* schedule(static): libomp gives the one thread the whole range, one strand, as gcc's inlined
   static loops: a thread query, reported by call site.  In a virtual team each virtual thread
   gets its part (kmp_team.c) without libomp (whose answer for a team of one costs ~5.5k
   instructions a call: measured by callgrind); a schedule it does not know is libomp's, run by
   the first virtual thread to reach it. */
#define STATIC_INIT(suffix, T, ST, UT)                                                             \
    EXPORT void __kmpc_for_static_init_##suffix(ident_t *loc, kmp_int32 gtid, kmp_int32 sched,     \
                                                kmp_int32 *plastiter, T *plower, T *pupper,        \
                                                ST *pstride, ST incr, ST chunk)                    \
    {                                                                                              \
        if (vteam_answers()) {                                                                     \
            T lower = *plower, upper = *pupper;                                                    \
            if (incr > 0 ? upper < lower : lower < upper) {                                        \
                *plastiter = 0, *pstride = incr; /* no iterations, as libomp says */               \
                return;                                                                            \
            }                                                                                      \
            if (vteam_static_##suffix(sched, plastiter, plower, pupper, pstride, incr, chunk,      \
                                      vteam->cur, vteam->k))                                       \
                return;                                                                            \
            REAL(__kmpc_for_static_init_##suffix)(loc, gtid, sched, plastiter, plower, pupper,     \
                                                  pstride, incr, chunk);                           \
            if (!vteam_claim())                                                                    \
                *plower = (T)(upper + incr), *plastiter = 0;                                       \
            return;                                                                                \
        }                                                                                          \
        note_thread_query(__builtin_return_address(0));                                            \
        REAL(__kmpc_for_static_init_##suffix)(loc, gtid, sched, plastiter, plower, pupper,         \
                                              pstride, incr, chunk);                               \
    }
KMP_LOOP_TYPES(STATIC_INIT)

/* Every schedule is run monotonic and chunk by chunk: a nonmonotonic dynamic one (OpenMP 5's
   default for dynamic) is a work-stealing static one in libomp, and a serialized team (the team
   of one) merges a loop's chunks into one unless asked not to (libomp's `kmp_nm_*` schedules).
   guided is run as dynamic with the same chunk size (one thread would get the whole range as
   one guided chunk).  A conforming program allows these substitutions; libgomp's library makes
   the same. */
static kmp_int32 dispatch_schedule(kmp_int32 sched)
{
    kmp_int32 base = sched & ~KMP_SCH_MODIFIERS;
    if (base == KMP_SCH_GUIDED_CHUNKED || base == KMP_SCH_GUIDED_ITERATIVE_CHUNKED ||
        base == KMP_SCH_GUIDED_ANALYTICAL_CHUNKED)
        base = KMP_SCH_DYNAMIC_CHUNKED;
    else if (base == KMP_ORD_GUIDED_CHUNKED)
        base = KMP_ORD_DYNAMIC_CHUNKED;
    if ((base >= KMP_SCH_LOWER && base < KMP_SCH_UPPER) ||
        (base >= KMP_ORD_LOWER && base < KMP_ORD_UPPER))
        base += KMP_SCH_NOMERGE;
    return base | KMP_SCH_MONOTONIC;
}

/* schedule(dynamic|guided|runtime): each chunk is an iteration of a parallel loop (regions.c). */
#define DISPATCH(suffix, T, ST, UT)                                                                \
    EXPORT void __kmpc_dispatch_init_##suffix(ident_t *loc, kmp_int32 gtid, kmp_int32 sched, T lb, \
                                              T ub, ST st, ST chunk)                               \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return;                                                                                \
        REAL(__kmpc_dispatch_init_##suffix)(loc, gtid, dispatch_schedule(sched), lb, ub, st,       \
                                            chunk);                                                \
    }                                                                                              \
    EXPORT int __kmpc_dispatch_next_##suffix(ident_t *loc, kmp_int32 gtid, kmp_int32 *p_last,      \
                                             T *p_lb, T *p_ub, ST *p_st)                           \
    {                                                                                              \
        if (vteam_skipped())                                                                       \
            return 0;                                                                              \
        int r = REAL(__kmpc_dispatch_next_##suffix)(loc, gtid, p_last, p_lb, p_ub, p_st);          \
        ws_next(r != 0, C_LOOPS);                                                                  \
        return r;                                                                                  \
    }
KMP_LOOP_TYPES(DISPATCH)

/* ---- barriers: the team's tasks end there ---- */

EXPORT void __kmpc_barrier(ident_t *loc, kmp_int32 gtid)
{
    REAL(__kmpc_barrier)(loc, gtid);
    if (parallel_here()) {
        COUNT(C_BARRIERS);
        MARK_SYNC();
        deps_synced();
    }
    vbarrier();
}

/* ---- mutual exclusion, shown as regions (how much work runs under it) and as locks (the
   report's locks, by the construct's call site: docs/locks.md), one lock per critical name as
   in libgomp's wrappers ---- */

EXPORT __attribute__((noinline)) void __kmpc_critical(ident_t *loc, kmp_int32 gtid,
                                                      kmp_critical_name *lock)
{
    REAL(__kmpc_critical)(loc, gtid, lock);
    COUNT(C_CRITICAL);
    ACQUIRED(0, lock);
    MARK_REGION_BEGIN("critical");
}

EXPORT __attribute__((noinline)) void __kmpc_critical_with_hint(ident_t *loc, kmp_int32 gtid,
                                                                kmp_critical_name *lock,
                                                                uint32_t hint)
{
    REAL(__kmpc_critical_with_hint)(loc, gtid, lock, hint);
    COUNT(C_CRITICAL);
    ACQUIRED(0, lock);
    MARK_REGION_BEGIN("critical");
}

EXPORT void __kmpc_end_critical(ident_t *loc, kmp_int32 gtid, kmp_critical_name *lock)
{
    MARK_REGION_END("critical");
    RELEASING(lock);
    REAL(__kmpc_end_critical)(loc, gtid, lock);
}

/* A reduction's combine: gcc combines one variable with an inline atomic instruction (no call,
   nothing seen) and several under GOMP_atomic_start (an `atomic` region, the atomic lock);
   clang calls __kmpc_reduce(_nowait) for any number. Where it returns 1 (this thread combines:
   always in a team of one) and combines several variables, the combine is shown as gcc's: an
   `atomic` region and lock; one variable, nothing, as gcc's inline atomic. */
static char atomic_lock;
static TLS unsigned reduce_marked; /* the combine being run is an `atomic` region */

#define REDUCE(name)                                                                               \
    EXPORT __attribute__((noinline)) kmp_int32 __kmpc_##name(                                      \
        ident_t *loc, kmp_int32 gtid, kmp_int32 num_vars, size_t size, void *data,                 \
        void (*func)(void *, void *), kmp_critical_name *lck)                                      \
    {                                                                                              \
        kmp_int32 r = REAL(__kmpc_##name)(loc, gtid, num_vars, size, data, func, lck);            \
        reduce_marked = r == 1 && num_vars > 1;                                                    \
        if (reduce_marked) {                                                                       \
            COUNT(C_ATOMIC);                                                                       \
            ACQUIRED(0, &atomic_lock);                                                             \
            MARK_REGION_BEGIN("atomic");                                                           \
        }                                                                                          \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT void __kmpc_end_##name(ident_t *loc, kmp_int32 gtid, kmp_critical_name *lck)            \
    {                                                                                              \
        if (reduce_marked) {                                                                       \
            MARK_REGION_END("atomic");                                                             \
            RELEASING(&atomic_lock);                                                               \
            reduce_marked = 0;                                                                     \
        }                                                                                          \
        REAL(__kmpc_end_##name)(loc, gtid, lck);                                                   \
    }
REDUCE(reduce)
REDUCE(reduce_nowait)

EXPORT void __kmpc_ordered(ident_t *loc, kmp_int32 gtid)
{
    REAL(__kmpc_ordered)(loc, gtid);
    COUNT(C_ORDERED);
    MARK_REGION_BEGIN("ordered");
}

EXPORT void __kmpc_end_ordered(ident_t *loc, kmp_int32 gtid)
{
    MARK_REGION_END("ordered");
    REAL(__kmpc_end_ordered)(loc, gtid);
}

