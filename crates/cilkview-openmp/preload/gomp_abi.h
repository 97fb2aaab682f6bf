/*
 * gomp_abi.h -- the libgomp entry points the preload library wraps, as gcc 11-14 call them
 * (libgomp's GOMP_5.0.1/GOMP_5.1 ABI: GOMP_task has the `detach` argument since gcc 11).
 * Declared here from the ABI, so that each wrapper's definition is checked against it and
 * REAL(name) has the right type.
 */
#ifndef CILKVIEW_GOMP_ABI_H
#define CILKVIEW_GOMP_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef unsigned long long gomp_ull;
typedef void (*gomp_fn)(void *);
typedef void (*gomp_cpyfn)(void *, void *);

/* Flags of GOMP_task / GOMP_taskloop(_ull). */
#define GOMP_TASK_FLAG_FINAL (1u << 1)
#define GOMP_TASK_FLAG_DEPEND (1u << 3)
#define GOMP_TASK_FLAG_UP (1u << 8)
#define GOMP_TASK_FLAG_GRAINSIZE (1u << 9)
#define GOMP_TASK_FLAG_IF (1u << 10)
#define GOMP_TASK_FLAG_NOGROUP (1u << 11)
#define GOMP_TASK_FLAG_REDUCTION (1u << 12)
#define GOMP_TASK_FLAG_DETACH (1u << 13)
#define GOMP_TASK_FLAG_STRICT (1u << 14)

/* `sched` of GOMP_loop_start and friends (the monotonic bit aside). */
#define GOMP_SCHED_MASK 0x7fffffffL
#define GOMP_SCHED_DYNAMIC 2L
#define GOMP_SCHED_GUIDED 3L

/* parallel.c */
void GOMP_parallel(gomp_fn, void *, unsigned, unsigned);
unsigned GOMP_parallel_reductions(gomp_fn, void *, unsigned, unsigned);
void GOMP_parallel_sections(gomp_fn, void *, unsigned, unsigned, unsigned);
void GOMP_parallel_loop_static(gomp_fn, void *, unsigned, long, long, long, long, unsigned);
void GOMP_parallel_loop_dynamic(gomp_fn, void *, unsigned, long, long, long, long, unsigned);
void GOMP_parallel_loop_guided(gomp_fn, void *, unsigned, long, long, long, long, unsigned);
void GOMP_parallel_loop_nonmonotonic_dynamic(gomp_fn, void *, unsigned, long, long, long, long,
                                             unsigned);
void GOMP_parallel_loop_nonmonotonic_guided(gomp_fn, void *, unsigned, long, long, long, long,
                                            unsigned);
void GOMP_parallel_loop_runtime(gomp_fn, void *, unsigned, long, long, long, unsigned);
void GOMP_parallel_loop_nonmonotonic_runtime(gomp_fn, void *, unsigned, long, long, long,
                                             unsigned);
void GOMP_parallel_loop_maybe_nonmonotonic_runtime(gomp_fn, void *, unsigned, long, long, long,
                                                   unsigned);

/* task.c */
void GOMP_task(gomp_fn, void *, gomp_cpyfn, long, long, bool, unsigned, void **, int, void *);
void GOMP_taskloop(gomp_fn, void *, gomp_cpyfn, long, long, unsigned, unsigned long, int, long,
                   long, long);
void GOMP_taskloop_ull(gomp_fn, void *, gomp_cpyfn, long, long, unsigned, unsigned long, int,
                       gomp_ull, gomp_ull, gomp_ull);
void GOMP_taskwait(void);
void GOMP_taskwait_depend(void **);
void GOMP_taskgroup_start(void);
bool GOMP_cancellation_point(int);
/* GOMP_cancellation_point's kind: a taskgroup (it also answers for the parallel region). */
#define GOMP_CANCEL_TASKGROUP 8
void GOMP_taskgroup_end(void);
void GOMP_taskgroup_reduction_register(uintptr_t *);
void GOMP_taskgroup_reduction_unregister(uintptr_t *);

/* barrier.c, single.c, critical.c, ordered.c */
void GOMP_barrier(void);
bool GOMP_barrier_cancel(void);
void GOMP_critical_start(void);
void GOMP_critical_end(void);
void GOMP_critical_name_start(void **);
void GOMP_critical_name_end(void **);
void GOMP_atomic_start(void);
void GOMP_atomic_end(void);
void GOMP_ordered_start(void);
void GOMP_ordered_end(void);
bool GOMP_single_start(void);
void *GOMP_single_copy_start(void);
void GOMP_single_copy_end(void *);

/* sections.c */
unsigned GOMP_sections_start(unsigned);
unsigned GOMP_sections2_start(unsigned, uintptr_t *, void **);
unsigned GOMP_sections_next(void);
void GOMP_sections_end(void);
void GOMP_sections_end_nowait(void);
bool GOMP_sections_end_cancel(void);

/* loop.c */
bool GOMP_loop_start(long, long, long, long, long, long *, long *, uintptr_t *, void **);
bool GOMP_loop_ordered_start(long, long, long, long, long, long *, long *, uintptr_t *, void **);
void GOMP_loop_end(void);
void GOMP_loop_end_nowait(void);
bool GOMP_loop_end_cancel(void);
bool GOMP_loop_ull_start(bool, gomp_ull, gomp_ull, gomp_ull, long, gomp_ull, gomp_ull *,
                         gomp_ull *, uintptr_t *, void **);
bool GOMP_loop_ull_ordered_start(bool, gomp_ull, gomp_ull, gomp_ull, long, gomp_ull, gomp_ull *,
                                 gomp_ull *, uintptr_t *, void **);

#define GOMP_LOOP_KINDS(X)                                                                         \
    X(static)                                                                                      \
    X(dynamic)                                                                                     \
    X(nonmonotonic_dynamic)                                                                        \
    X(ordered_static)                                                                              \
    X(ordered_dynamic)
#define GOMP_GUIDED_KINDS(X)                                                                       \
    X(guided, dynamic)                                                                             \
    X(nonmonotonic_guided, nonmonotonic_dynamic)                                                   \
    X(ordered_guided, ordered_dynamic)
#define GOMP_RUNTIME_KINDS(X)                                                                      \
    X(runtime)                                                                                     \
    X(nonmonotonic_runtime)                                                                        \
    X(maybe_nonmonotonic_runtime)                                                                  \
    X(ordered_runtime)

#define GOMP_DECLARE_CHUNKED(kind)                                                                 \
    bool GOMP_loop_##kind##_start(long, long, long, long, long *, long *);                         \
    bool GOMP_loop_##kind##_next(long *, long *);                                                  \
    bool GOMP_loop_ull_##kind##_start(bool, gomp_ull, gomp_ull, gomp_ull, gomp_ull, gomp_ull *,    \
                                      gomp_ull *);                                                 \
    bool GOMP_loop_ull_##kind##_next(gomp_ull *, gomp_ull *);
#define GOMP_DECLARE_GUIDED(kind, as) GOMP_DECLARE_CHUNKED(kind)
#define GOMP_DECLARE_RUNTIME(kind)                                                                 \
    bool GOMP_loop_##kind##_start(long, long, long, long *, long *);                               \
    bool GOMP_loop_##kind##_next(long *, long *);                                                  \
    bool GOMP_loop_ull_##kind##_start(bool, gomp_ull, gomp_ull, gomp_ull, gomp_ull *, gomp_ull *); \
    bool GOMP_loop_ull_##kind##_next(gomp_ull *, gomp_ull *);
GOMP_LOOP_KINDS(GOMP_DECLARE_CHUNKED)
GOMP_GUIDED_KINDS(GOMP_DECLARE_GUIDED)
GOMP_RUNTIME_KINDS(GOMP_DECLARE_RUNTIME)

#include "omp_api.h"

#endif
