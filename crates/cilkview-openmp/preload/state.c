/* state.c -- per-thread state, the marks, the counters and the counts file. */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cilkview.h"
#include "cilkview_runtime_wire.h"
#include "lock_marks.h"
#include "omp_api.h"
#include "restore_preload.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* This is a runtime's preload library (cilkview-marks' RUNTIME_SECTION_NAME): its spawn marks
   are in the wrappers the program calls, so a profile names each spawn by that call. */
__asm__(".pushsection .cilkview_runtime,\"\",@progbits\n.byte 1\n.popsection");

/* ---- the marks (cilkview.h's records, placed by hand: the frames are libgomp's) ---- */
#define MARK_ENTER() CV__MARK(CV__KIND_FUNCTION_ENTER)
#define MARK_EXIT() CV__MARK(CV__KIND_FUNCTION_EXIT)
/* Every spawn is counted in its frame (depend.c): dependences name siblings by ordinal. */
#define MARK_SPAWN()                                                                               \
    do {                                                                                           \
        frame_spawned();                                                                           \
        CV__MARK(CV__KIND_SPAWN);                                                                  \
    } while (0)
#define MARK_SPAWN_AFTER(sibling) cv__mark_spawn_after(sibling)
#define MARK_WAIT_FOR(sibling) cv__mark_wait_for(sibling)
#define MARK_SPAWN_RETURN() CV__MARK(CV__KIND_SPAWN_RETURN)
#define MARK_SYNC() CV__MARK(CV__KIND_SYNC)
#define MARK_LOOP_BEGIN() cv__mark_loop_begin(1)
#define MARK_ITERATION_BEGIN() CV__MARK(CV__KIND_ITERATION_BEGIN)
#define MARK_ITERATION_END() CV__MARK(CV__KIND_ITERATION_END)
#define MARK_LOOP_END() CV__MARK(CV__KIND_LOOP_END)
#define MARK_REGION_BEGIN(label) CV__REGION_MARK(CV__KIND_REGION_BEGIN, label)
#define MARK_REGION_END(label) CV__REGION_MARK(CV__KIND_REGION_END, label)

/* ---- the runtime (RUNTIME_NAME: libgomp, libomp), reached past this library ---- */
#define REAL_MISSING "cilkview-rs --openmp: " RUNTIME_NAME " has no entry point "
#include "real.h"

/* ---- per-thread state ---- */
#define MAX_LEVELS 64
/* Nesting of parallel regions (0: none); parallel_active[l]: region l has (in the real
   program) more than one thread, so its tasks and loops are parallel. */
static TLS unsigned level;
static TLS unsigned char parallel_active[MAX_LEVELS];
/* The num_threads of the region being begun (0: no clause). */
static TLS unsigned requested_threads;
/* The worksharing construct (loop or sections) of each level: open, and a chunk open. */
static TLS unsigned char ws_loop_open[MAX_LEVELS], ws_chunk_open[MAX_LEVELS];
/* --omp-team K (team.c): CILKVIEW_OPENMP_TEAM at start-up; below 2: off. */
static unsigned team_size;
/* > 0 inside a final task: its descendants are included (calls). */
static TLS unsigned final_depth;

/* Task reductions registered and not yet unregistered: their per-thread slots are those of
   libgomp's team of one, so the thread queries answer for it meanwhile (team.c). */
static TLS unsigned task_reductions;

static inline unsigned lvl(void)
{
    return level < MAX_LEVELS ? level : MAX_LEVELS - 1;
}
/* Whether what is created here may run in parallel in the real program. */
static inline int parallel_here(void)
{
    return level > 0 && parallel_active[lvl()];
}

/* Whether a task created here is included/undeferred (a call): its if clause is false, it is
   created in a final task, or no parallel region with more than one thread encloses it. */
static inline int undeferred(int if_clause)
{
    return !if_clause || final_depth > 0 || !parallel_here();
}

/* Tasks of a taskloop without grainsize or num_tasks (libgomp makes one per thread). */
#define TASKLOOP_DEFAULT_TASKS 64

#include "counts_file.c"

/* Code asking for the thread number or count inside a parallel region (static loops, split by
   thread id): where it is, by return address. */
#define MAX_QUERY_SITES 64
static void *query_sites[MAX_QUERY_SITES];
static unsigned long query_counts[MAX_QUERY_SITES];

static void note_thread_query(void *site)
{
    /* Not gcc's own slot lookups of task reductions (per-thread slots of libgomp's team). */
    if (!parallel_here() || task_reductions > 0)
        return;
    for (unsigned i = 0; i < MAX_QUERY_SITES; i++) {
        void *s = __atomic_load_n(&query_sites[i], __ATOMIC_RELAXED);
        if (s == site) {
            __atomic_fetch_add(&query_counts[i], 1, __ATOMIC_RELAXED);
            return;
        }
        if (s == NULL) {
            void *expected = NULL;
            if (__atomic_compare_exchange_n(&query_sites[i], &expected, site, 0,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED) ||
                expected == site) {
                __atomic_fetch_add(&query_counts[i], 1, __ATOMIC_RELAXED);
                return;
            }
        }
    }
}

/* ---- the counts file (counts_file.c), with the thread queries ---- */
__attribute__((constructor)) static void cilkview_omp_init(void)
{
    counts_init();
    const char *team = getenv("CILKVIEW_OPENMP_TEAM");
    if (team)
        team_size = (unsigned)strtoul(team, NULL, 10);
    unsetenv("CILKVIEW_OPENMP_TEAM");
    restore_preload("CILKVIEW_OPENMP_LIBRARY");
}

__attribute__((destructor)) static void cilkview_omp_fini(void)
{
    int fd = counts_open();
    if (fd < 0)
        return;
    char line[4200];
    for (unsigned i = 0; i < MAX_QUERY_SITES && query_sites[i]; i++) {
        Dl_info info;
        if (dladdr(query_sites[i], &info) && info.dli_fname && info.dli_fname[0]) {
            /* A return address: the call is the instruction before it. */
            unsigned long offset =
                (unsigned long)((char *)query_sites[i] - (char *)info.dli_fbase) - 1;
            snprintf(line, sizeof line, "thread_query %lu %#lx %s\n", query_counts[i], offset,
                     info.dli_fname);
            counts_put(fd, line);
        }
    }
    counts_close(fd);
}
