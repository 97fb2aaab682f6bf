/*
 * kmp_abi.h -- the libomp entry points the preload library wraps, as clang calls them (LLVM's
 * OpenMP runtime, libomp.so.5; Intel's libiomp5 has the same `__kmpc_*` ABI).  Declared here
 * from the ABI (openmp/runtime/src/kmp.h), so that each wrapper's definition is checked against
 * it and REAL(name) has the right type.
 */
#ifndef CILKVIEW_KMP_ABI_H
#define CILKVIEW_KMP_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "omp_api.h"

typedef int32_t kmp_int32;
typedef uint32_t kmp_uint32;
typedef int64_t kmp_int64;
typedef uint64_t kmp_uint64;
typedef struct ident ident_t; /* the source location the compiler passes: opaque here */
typedef void (*kmpc_micro)(kmp_int32 *gtid, kmp_int32 *btid, ...);
typedef kmp_int32 (*kmp_routine_entry_t)(kmp_int32 gtid, void *task);
typedef kmp_int32 kmp_critical_name[8];

/* The head of a task as the compiler fills it (kmp_task_t); its private data follows. */
typedef struct {
    void *shareds;
    kmp_routine_entry_t routine;
    kmp_int32 part_id;
} kmp_task_t;

/* `flags` of __kmpc_omp_task_alloc (kmp_tasking_flags_t's compiler bits). */
#define KMP_TASK_TIED (1u << 0)
#define KMP_TASK_FINAL (1u << 1)
#define KMP_TASK_DETACHABLE (1u << 6)

/* One dependence (kmp_depend_info_t): its flags' `in` bit alone reads; out, mutexinoutset and
   inoutset write. */
typedef struct {
    intptr_t base_addr;
    size_t len;
    uint8_t flags;
} kmp_depend_info_t;
#define KMP_DEP_IN 1u

/* Schedules of __kmpc_for_static_init_* and __kmpc_dispatch_init_* (enum sched_type), the
   modifier bits aside. */
#define KMP_SCH_STATIC_CHUNKED 33
#define KMP_SCH_STATIC 34
#define KMP_SCH_STATIC_BALANCED 41
#define KMP_SCH_STATIC_BALANCED_CHUNKED 45
#define KMP_ORD_STATIC_CHUNKED 65
#define KMP_ORD_STATIC 66
#define KMP_SCH_MONOTONIC (1 << 29)
#define KMP_SCH_NONMONOTONIC (1 << 30)
#define KMP_SCH_MODIFIERS (KMP_SCH_MONOTONIC | KMP_SCH_NONMONOTONIC)
#define KMP_SCH_DYNAMIC_CHUNKED 35
#define KMP_SCH_GUIDED_CHUNKED 36
#define KMP_SCH_GUIDED_ITERATIVE_CHUNKED 42
#define KMP_SCH_GUIDED_ANALYTICAL_CHUNKED 43
#define KMP_ORD_DYNAMIC_CHUNKED 67
#define KMP_ORD_GUIDED_CHUNKED 68
/* The same schedules not merged into one chunk in a serialized team: + (kmp_nm_lower - kmp_sch_lower). */
#define KMP_SCH_NOMERGE (160 - 32)
#define KMP_SCH_LOWER 32
#define KMP_SCH_UPPER 44 /* static_steal and later: as they are */
#define KMP_ORD_LOWER 64
#define KMP_ORD_UPPER 72

/* kmp_csupport.cpp */
kmp_int32 __kmpc_global_thread_num(ident_t *);
void __kmpc_fork_call(ident_t *, kmp_int32 argc, kmpc_micro, ...);
void __kmpc_push_num_threads(ident_t *, kmp_int32 gtid, kmp_int32 num_threads);
void __kmpc_serialized_parallel(ident_t *, kmp_int32 gtid);
void __kmpc_end_serialized_parallel(ident_t *, kmp_int32 gtid);
void __kmpc_barrier(ident_t *, kmp_int32 gtid);
void __kmpc_critical(ident_t *, kmp_int32 gtid, kmp_critical_name *);
void __kmpc_critical_with_hint(ident_t *, kmp_int32 gtid, kmp_critical_name *, uint32_t hint);
void __kmpc_end_critical(ident_t *, kmp_int32 gtid, kmp_critical_name *);
void __kmpc_ordered(ident_t *, kmp_int32 gtid);
void __kmpc_end_ordered(ident_t *, kmp_int32 gtid);
kmp_int32 __kmpc_single(ident_t *, kmp_int32 gtid);
void __kmpc_end_single(ident_t *, kmp_int32 gtid);
kmp_int32 __kmpc_master(ident_t *, kmp_int32 gtid);
void __kmpc_end_master(ident_t *, kmp_int32 gtid);
kmp_int32 __kmpc_masked(ident_t *, kmp_int32 gtid, kmp_int32 filter);
void __kmpc_end_masked(ident_t *, kmp_int32 gtid);
void __kmpc_copyprivate(ident_t *, kmp_int32 gtid, size_t cpy_size, void *cpy_data,
                        void (*cpy_func)(void *, void *), kmp_int32 didit);
/* A reduction's combine of num_vars variables: returns 1 where this thread combines its copies
   itself (always in a team of one), 2 where it combines them with atomics, 0 where another
   thread does (the tree method). */
kmp_int32 __kmpc_reduce(ident_t *, kmp_int32 gtid, kmp_int32 num_vars, size_t reduce_size,
                        void *reduce_data, void (*reduce_func)(void *, void *),
                        kmp_critical_name *lck);
void __kmpc_end_reduce(ident_t *, kmp_int32 gtid, kmp_critical_name *lck);
kmp_int32 __kmpc_reduce_nowait(ident_t *, kmp_int32 gtid, kmp_int32 num_vars, size_t reduce_size,
                               void *reduce_data, void (*reduce_func)(void *, void *),
                               kmp_critical_name *lck);
void __kmpc_end_reduce_nowait(ident_t *, kmp_int32 gtid, kmp_critical_name *lck);

/* kmp_tasking.cpp */
kmp_task_t *__kmpc_omp_task_alloc(ident_t *, kmp_int32 gtid, kmp_int32 flags,
                                  size_t sizeof_kmp_task_t, size_t sizeof_shareds,
                                  kmp_routine_entry_t task_entry);
kmp_int32 __kmpc_omp_task(ident_t *, kmp_int32 gtid, kmp_task_t *);
void __kmpc_omp_task_begin_if0(ident_t *, kmp_int32 gtid, kmp_task_t *);
void __kmpc_omp_task_complete_if0(ident_t *, kmp_int32 gtid, kmp_task_t *);
kmp_int32 __kmpc_omp_taskwait(ident_t *, kmp_int32 gtid);
kmp_int32 __kmpc_cancellationpoint(ident_t *, kmp_int32 gtid, kmp_int32 kind);
/* __kmpc_cancellationpoint's kinds (libomp's kmp_cancel_kind_t). */
#define KMP_CANCEL_PARALLEL 1
#define KMP_CANCEL_TASKGROUP 4
void __kmpc_taskgroup(ident_t *, kmp_int32 gtid);
void __kmpc_end_taskgroup(ident_t *, kmp_int32 gtid);
void __kmpc_taskloop(ident_t *, int gtid, kmp_task_t *, int if_val, kmp_uint64 *lb,
                     kmp_uint64 *ub, kmp_int64 st, int nogroup, int sched, kmp_uint64 grainsize,
                     void *task_dup);

/* kmp_taskdeps.cpp */
kmp_int32 __kmpc_omp_task_with_deps(ident_t *, kmp_int32 gtid, kmp_task_t *, kmp_int32 ndeps,
                                    kmp_depend_info_t *, kmp_int32 ndeps_noalias,
                                    kmp_depend_info_t *);
void __kmpc_omp_wait_deps(ident_t *, kmp_int32 gtid, kmp_int32 ndeps, kmp_depend_info_t *,
                          kmp_int32 ndeps_noalias, kmp_depend_info_t *);

/* kmp_sched.cpp, kmp_dispatch.cpp: the loops of each bound type (4, 4u, 8, 8u). */
/* (suffix, the bound type, its signed type, its unsigned type) */
#define KMP_LOOP_TYPES(X)                                                                          \
    X(4, kmp_int32, kmp_int32, kmp_uint32)                                                         \
    X(4u, kmp_uint32, kmp_int32, kmp_uint32)                                                       \
    X(8, kmp_int64, kmp_int64, kmp_uint64)                                                         \
    X(8u, kmp_uint64, kmp_int64, kmp_uint64)
#define KMP_DECLARE_LOOP(suffix, T, ST, UT)                                                        \
    void __kmpc_for_static_init_##suffix(ident_t *, kmp_int32 gtid, kmp_int32 schedtype,          \
                                         kmp_int32 *plastiter, T *plower, T *pupper, ST *pstride, \
                                         ST incr, ST chunk);                                      \
    void __kmpc_dispatch_init_##suffix(ident_t *, kmp_int32 gtid, kmp_int32 schedule, T lb, T ub, \
                                       ST st, ST chunk);                                          \
    int __kmpc_dispatch_next_##suffix(ident_t *, kmp_int32 gtid, kmp_int32 *p_last, T *p_lb,     \
                                      T *p_ub, ST *p_st);
KMP_LOOP_TYPES(KMP_DECLARE_LOOP)

#endif
