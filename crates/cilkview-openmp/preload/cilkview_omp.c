/*
 * cilkview_omp.c -- the preload library of `cilkview-rs run --openmp` (one translation unit).
 *
 * Loaded with LD_PRELOAD into an unmodified gcc OpenMP program, it wraps libgomp's entry
 * points so that the program runs as its serial elision -- one thread, every task run where
 * it is created -- and places cilkview.h's marks where the elision's dag has its spawns,
 * syncs, loops and regions (docs/openmp.md).  libgomp itself is reached with
 * dlsym(RTLD_NEXT).  At exit it writes what it saw to the file named by
 * CILKVIEW_OPENMP_COUNTS (the tool reads it for the report).
 *
 *   state.c        per-thread state, the marks, counters, the counts file
 *   depend.c       task dependences: a sync only where a task depends on a sibling
 *   tasks.c        GOMP_task, GOMP_taskloop(_ull), taskwait, taskgroup
 *   team.c         --omp-team K: active regions as K virtual threads switched at barriers
 *   regions.c      parallel regions and worksharing chunks, as libomp's library marks them too
 *   worksharing.c  parallel regions, loops, sections, barriers, critical/atomic/ordered
 */
#define _GNU_SOURCE
#define RUNTIME_NAME "libgomp"
#include "gomp_abi.h"
#include "state.c"
#include "depend.c"
#include "tasks.c"
#include "team.c"
#include "regions.c"
#include "worksharing.c"
