/* worksharing.c -- libgomp's parallel regions (a team of one, or --omp-team's virtual team), loops
   and sections chunk by chunk (regions.c), barriers, mutual exclusion shown as regions, the
   thread-number queries. */

EXPORT void GOMP_parallel(gomp_fn fn, void *data, unsigned num_threads, unsigned flags)
{
    parallel_begin(num_threads);
    struct vteam *t = vteam_open(fn, data);
    if (t) {
        REAL(GOMP_parallel)(vteam_trampoline, t, 1, flags);
        vteam_close(t);
    } else {
        REAL(GOMP_parallel)(fn, data, 1, flags);
    }
    parallel_end();
}

EXPORT unsigned GOMP_parallel_reductions(gomp_fn fn, void *data, unsigned num_threads,
                                         unsigned flags)
{
    parallel_begin(num_threads);
    unsigned r = REAL(GOMP_parallel_reductions)(fn, data, 1, flags);
    parallel_end();
    return r;
}

EXPORT void GOMP_parallel_sections(gomp_fn fn, void *data, unsigned num_threads, unsigned count,
                                   unsigned flags)
{
    parallel_begin(num_threads);
    struct vteam *t = vteam_open(fn, data);
    if (t) {
        REAL(GOMP_parallel_sections)(vteam_trampoline, t, 1, count, flags);
        vteam_close(t);
    } else {
        REAL(GOMP_parallel_sections)(fn, data, 1, count, flags);
    }
    parallel_end();
}

/* `parallel for` with a schedule: the loop's chunks come from GOMP_loop_*_next inside fn.
   guided is run as dynamic with the same chunk size (one thread would get the whole range
   as one guided chunk; a conforming program allows the substitution). */
#define PARALLEL_LOOP(kind, as)                                                                    \
    EXPORT void GOMP_parallel_loop_##kind(gomp_fn fn, void *data, unsigned num_threads,            \
                                          long start, long end, long incr, long chunk,             \
                                          unsigned flags)                                          \
    {                                                                                              \
        parallel_begin(num_threads);                                                               \
        struct vteam *t = vteam_open(fn, data);                                                    \
        if (t) {                                                                                   \
            REAL(GOMP_parallel_loop_##as)(vteam_trampoline, t, 1, start, end, incr, chunk, flags); \
            vteam_close(t);                                                                        \
        } else {                                                                                   \
            REAL(GOMP_parallel_loop_##as)(fn, data, 1, start, end, incr, chunk, flags);            \
        }                                                                                          \
        parallel_end();                                                                            \
    }
PARALLEL_LOOP(static, static)
PARALLEL_LOOP(dynamic, dynamic)
PARALLEL_LOOP(guided, dynamic)
PARALLEL_LOOP(nonmonotonic_dynamic, nonmonotonic_dynamic)
PARALLEL_LOOP(nonmonotonic_guided, nonmonotonic_dynamic)

#define PARALLEL_LOOP_RUNTIME(kind)                                                                \
    EXPORT void GOMP_parallel_loop_##kind(gomp_fn fn, void *data, unsigned num_threads,            \
                                          long start, long end, long incr, unsigned flags)         \
    {                                                                                              \
        parallel_begin(num_threads);                                                               \
        struct vteam *t = vteam_open(fn, data);                                                    \
        if (t) {                                                                                   \
            REAL(GOMP_parallel_loop_##kind)(vteam_trampoline, t, 1, start, end, incr, flags);      \
            vteam_close(t);                                                                        \
        } else {                                                                                   \
            REAL(GOMP_parallel_loop_##kind)(fn, data, 1, start, end, incr, flags);                 \
        }                                                                                          \
        parallel_end();                                                                            \
    }
PARALLEL_LOOP_RUNTIME(runtime)
PARALLEL_LOOP_RUNTIME(nonmonotonic_runtime)
PARALLEL_LOOP_RUNTIME(maybe_nonmonotonic_runtime)


/* The end of a worksharing construct; `barrier`: it waits for the team (and its tasks). */
static __attribute__((noinline)) void ws_end(int barrier)
{
    ws_next(0, C_LOOPS);
    if (barrier && parallel_here()) {
        COUNT(C_BARRIERS);
        MARK_SYNC();
        deps_synced();
    }
}

#define LOOP_CHUNKED(kind, as)                                                                     \
    EXPORT bool GOMP_loop_##kind##_start(long start, long end, long incr, long chunk,              \
                                         long *istart, long *iend)                                 \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_loop_##as##_start)(start, end, incr, chunk, istart, iend);              \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_##kind##_next(long *istart, long *iend)                                  \
    {                                                                                              \
        bool r = REAL(GOMP_loop_##as##_next)(istart, iend);                                        \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_ull_##kind##_start(bool up, gomp_ull start, gomp_ull end, gomp_ull incr, \
                                             gomp_ull chunk, gomp_ull *istart, gomp_ull *iend)     \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_loop_ull_##as##_start)(up, start, end, incr, chunk, istart, iend);      \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_ull_##kind##_next(gomp_ull *istart, gomp_ull *iend)                      \
    {                                                                                              \
        bool r = REAL(GOMP_loop_ull_##as##_next)(istart, iend);                                    \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }
#define LOOP_SAME(kind) LOOP_CHUNKED(kind, kind)
GOMP_LOOP_KINDS(LOOP_SAME)
GOMP_GUIDED_KINDS(LOOP_CHUNKED)

#define LOOP_RUNTIME(kind)                                                                         \
    EXPORT bool GOMP_loop_##kind##_start(long start, long end, long incr, long *istart,            \
                                         long *iend)                                               \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_loop_##kind##_start)(start, end, incr, istart, iend);                   \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_##kind##_next(long *istart, long *iend)                                  \
    {                                                                                              \
        bool r = REAL(GOMP_loop_##kind##_next)(istart, iend);                                      \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_ull_##kind##_start(bool up, gomp_ull start, gomp_ull end, gomp_ull incr, \
                                             gomp_ull *istart, gomp_ull *iend)                     \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_loop_ull_##kind##_start)(up, start, end, incr, istart, iend);           \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }                                                                                              \
    EXPORT bool GOMP_loop_ull_##kind##_next(gomp_ull *istart, gomp_ull *iend)                      \
    {                                                                                              \
        bool r = REAL(GOMP_loop_ull_##kind##_next)(istart, iend);                                  \
        ws_next(r, C_LOOPS);                                                                       \
        return r;                                                                                  \
    }
GOMP_RUNTIME_KINDS(LOOP_RUNTIME)

/* The gcc 9+ generic entry points (reductions, schedule modifiers): guided as dynamic. */
static inline long sched_of(long sched)
{
    return (sched & GOMP_SCHED_MASK) == GOMP_SCHED_GUIDED
               ? (sched & ~GOMP_SCHED_MASK) | GOMP_SCHED_DYNAMIC
               : sched;
}

#define LOOP_GENERIC(name)                                                                         \
    EXPORT bool GOMP_##name(long start, long end, long incr, long sched, long chunk,               \
                            long *istart, long *iend, uintptr_t *reductions, void **mem)           \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_##name)(start, end, incr, sched_of(sched), chunk, istart, iend,         \
                                   reductions, mem);                                               \
        if (istart)                                                                                \
            ws_next(r, C_LOOPS);                                                                   \
        return r;                                                                                  \
    }
LOOP_GENERIC(loop_start)
LOOP_GENERIC(loop_ordered_start)

#define LOOP_ULL_GENERIC(name)                                                                     \
    EXPORT bool GOMP_##name(bool up, gomp_ull start, gomp_ull end, gomp_ull incr, long sched,      \
                            gomp_ull chunk, gomp_ull *istart, gomp_ull *iend,                      \
                            uintptr_t *reductions, void **mem)                                     \
    {                                                                                              \
        if (in_vteam() && !vteam_claim())                                                          \
            return false;                                                                          \
        bool r = REAL(GOMP_##name)(up, start, end, incr, sched_of(sched), chunk, istart, iend,     \
                                   reductions, mem);                                               \
        if (istart)                                                                                \
            ws_next(r, C_LOOPS);                                                                   \
        return r;                                                                                  \
    }
LOOP_ULL_GENERIC(loop_ull_start)
LOOP_ULL_GENERIC(loop_ull_ordered_start)

/* The end of a worksharing construct: in a virtual team, libgomp hears only the ends of the
   constructs it started, and a barrier switches virtual threads. */
EXPORT void GOMP_loop_end(void)
{
    ws_end(1);
    if (!vteam_skipped())
        REAL(GOMP_loop_end)();
    vbarrier();
}

EXPORT void GOMP_loop_end_nowait(void)
{
    ws_end(0);
    if (!vteam_skipped())
        REAL(GOMP_loop_end_nowait)();
}

EXPORT bool GOMP_loop_end_cancel(void)
{
    ws_end(1);
    bool r = vteam_skipped() ? false : REAL(GOMP_loop_end_cancel)();
    vbarrier();
    return r;
}

/* Sections: each section is a chunk. */
EXPORT unsigned GOMP_sections_start(unsigned count)
{
    if (in_vteam() && !vteam_claim())
        return 0;
    unsigned r = REAL(GOMP_sections_start)(count);
    ws_next(r != 0, C_SECTIONS);
    return r;
}

EXPORT unsigned GOMP_sections2_start(unsigned count, uintptr_t *reductions, void **mem)
{
    if (in_vteam() && !vteam_claim())
        return 0;
    unsigned r = REAL(GOMP_sections2_start)(count, reductions, mem);
    ws_next(r != 0, C_SECTIONS);
    return r;
}

EXPORT unsigned GOMP_sections_next(void)
{
    unsigned r = REAL(GOMP_sections_next)();
    ws_next(r != 0, C_SECTIONS);
    return r;
}

EXPORT void GOMP_sections_end(void)
{
    ws_end(1);
    if (!vteam_skipped())
        REAL(GOMP_sections_end)();
    vbarrier();
}

EXPORT void GOMP_sections_end_nowait(void)
{
    ws_end(0);
    if (!vteam_skipped())
        REAL(GOMP_sections_end_nowait)();
}

EXPORT bool GOMP_sections_end_cancel(void)
{
    ws_end(1);
    bool r = vteam_skipped() ? false : REAL(GOMP_sections_end_cancel)();
    vbarrier();
    return r;
}

/* single: the first virtual thread to reach it runs it. */
EXPORT bool GOMP_single_start(void)
{
    if (in_vteam() && !vteam_claim())
        return false;
    return REAL(GOMP_single_start)();
}

EXPORT void *GOMP_single_copy_start(void)
{
    if (in_vteam() && !vteam_claim())
        return vteam->copy;
    return REAL(GOMP_single_copy_start)();
}

EXPORT void GOMP_single_copy_end(void *data)
{
    if (in_vteam())
        vteam->copy = data;
    REAL(GOMP_single_copy_end)(data);
}

/* ---- barriers: the team's tasks end there ---- */

EXPORT void GOMP_barrier(void)
{
    REAL(GOMP_barrier)();
    if (parallel_here()) {
        COUNT(C_BARRIERS);
        MARK_SYNC();
        deps_synced();
    }
    vbarrier();
}

EXPORT bool GOMP_barrier_cancel(void)
{
    bool r = REAL(GOMP_barrier_cancel)();
    if (parallel_here()) {
        COUNT(C_BARRIERS);
        MARK_SYNC();
        deps_synced();
    }
    vbarrier();
    return r;
}

/* ---- mutual exclusion, shown as regions (how much work runs under it) and as locks (the
   report's locks, by the construct's call site: docs/locks.md); the unnamed critical section
   and the atomic fallback are one lock each, as in libgomp ---- */
static char unnamed_critical, atomic_lock;

EXPORT __attribute__((noinline)) void GOMP_critical_start(void)
{
    REAL(GOMP_critical_start)();
    COUNT(C_CRITICAL);
    ACQUIRED(0, &unnamed_critical);
    MARK_REGION_BEGIN("critical");
}

EXPORT void GOMP_critical_end(void)
{
    MARK_REGION_END("critical");
    RELEASING(&unnamed_critical);
    REAL(GOMP_critical_end)();
}

EXPORT __attribute__((noinline)) void GOMP_critical_name_start(void **lock)
{
    REAL(GOMP_critical_name_start)(lock);
    COUNT(C_CRITICAL);
    ACQUIRED(0, lock);
    MARK_REGION_BEGIN("critical");
}

EXPORT void GOMP_critical_name_end(void **lock)
{
    MARK_REGION_END("critical");
    RELEASING(lock);
    REAL(GOMP_critical_name_end)(lock);
}

EXPORT __attribute__((noinline)) void GOMP_atomic_start(void)
{
    REAL(GOMP_atomic_start)();
    COUNT(C_ATOMIC);
    ACQUIRED(0, &atomic_lock);
    MARK_REGION_BEGIN("atomic");
}

EXPORT void GOMP_atomic_end(void)
{
    MARK_REGION_END("atomic");
    RELEASING(&atomic_lock);
    REAL(GOMP_atomic_end)();
}

EXPORT void GOMP_ordered_start(void)
{
    REAL(GOMP_ordered_start)();
    COUNT(C_ORDERED);
    MARK_REGION_BEGIN("ordered");
}

EXPORT void GOMP_ordered_end(void)
{
    MARK_REGION_END("ordered");
    REAL(GOMP_ordered_end)();
}

/* Inside a final task run by this library (libgomp does not know it runs a task). */
EXPORT int omp_in_final(void)
{
    return final_depth > 0 || REAL(omp_in_final)();
}
