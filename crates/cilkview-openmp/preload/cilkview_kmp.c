/*
 * cilkview_kmp.c -- the preload library of `cilkview-rs run --openmp` for LLVM's OpenMP runtime,
 * libomp (clang -fopenmp; one translation unit).
 *
 * As cilkview_omp.c does for libgomp: loaded with LD_PRELOAD into an unmodified clang OpenMP
 * program, it wraps libomp's `__kmpc_*` entry points so that the program runs as its serial
 * elision -- one thread, every task run where it is created -- with the same marks as
 * libgomp's library, so that a program built by gcc and by clang gives the same dag
 * (docs/openmp.md).  libomp itself is reached with dlsym(RTLD_NEXT).
 *
 *   state.c, depend.c, regions.c   shared with libgomp's library
 *   kmp_tasks.c    tasks, if(0) tasks, dependences, taskwait, taskgroup, taskloop
 *   team.c         --omp-team K: active regions as K virtual threads (shared with libgomp's)
 *   kmp_team.c     --omp-team K: static loops split, single/master/masked/copyprivate
 *   kmp_parallel.c parallel regions, static and dynamic loops, barriers, critical/ordered
 */
#define _GNU_SOURCE
#define RUNTIME_NAME "libomp"
#include "kmp_abi.h"
#include "state.c"
#include "depend.c"
#include "regions.c"
#include "kmp_tasks.c"
#include "team.c"
#include "kmp_team.c"
#include "kmp_parallel.c"
