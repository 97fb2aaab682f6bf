/*
 * tbb_abi.h -- what the oneTBB preload library knows of oneTBB's binary interface (oneTBB
 * 2021, interface version 12: include/oneapi/tbb/detail/_task.h and _small_object_pool.h, and
 * src/tbb/task_dispatcher.h's execution_data_ext): the layouts it reads and the exported
 * `tbb::detail::r1` entry points it wraps, by their mangled names.
 */
#ifndef CILKVIEW_TBB_ABI_H
#define CILKVIEW_TBB_ABI_H
#include <stddef.h>
#include <stdint.h>

/* d1::task: a vtable pointer first (a virtual destructor, two entries, then execute and
   cancel), then task_traits and 6 reserved words; 64 bytes. */
typedef struct tbb_task tbb_task;
/* d1::task_group_context, opaque. */
typedef struct tbb_context tbb_context;
/* d1::small_object_pool, opaque. */
typedef struct tbb_pool tbb_pool;

/* d1::wait_context: a version word, then the count of what is still to end. */
typedef struct tbb_wait_context {
    uint64_t version_and_traits;
    uint64_t ref_count;
} tbb_wait_context;

/* d1::execution_data, what execute() gets. */
typedef struct tbb_execution_data {
    tbb_context *context;
    unsigned short original_slot;
    unsigned short affinity_slot;
} tbb_execution_data;

/* r1::execution_data_ext, what the real scheduler passes: the entry points taking an
   execution_data read its dispatcher. The wrappers' own put a marker there instead. */
typedef struct tbb_execution_data_ext {
    tbb_execution_data base;
    void *task_dispatcher;
    intptr_t isolation;
    tbb_wait_context *wait_ctx;
} tbb_execution_data_ext;

/* d1::no_slot: no affinity. */
#define TBB_NO_SLOT ((unsigned short)~0)

typedef tbb_task *(*tbb_task_fn)(tbb_task *, tbb_execution_data *);
/* The vtable slots of execute() and cancel(). */
#define TBB_EXECUTE_SLOT 2
#define TBB_CANCEL_SLOT 3

static inline tbb_task_fn tbb_virtual(tbb_task *t, int slot)
{
    return (*(tbb_task_fn **)t)[slot];
}

/* The wrapped entry points (tbb::detail::r1::...): SYM_* in the wire header, from src/wire.rs. */

#endif
