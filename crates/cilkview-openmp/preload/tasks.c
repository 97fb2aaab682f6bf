/* tasks.c -- explicit tasks: each runs where it is created (the serial elision). */

/* The body of one task: firstprivate data copied as libgomp copies it for an undeferred task
   (`cpyfn` into an `arg_size`/`arg_align` buffer), `fn` run on it.  `bounds` (a taskloop's
   task): its first and last iteration, written over the first two 8-byte fields of its data.
   The task's frame marks (TASK_CALL, TASK_SPAWN) are in the entry point the program called, so
   that a profile names the program's task construct as the call site (the return address at
   the entry mark). */
static __attribute__((noinline)) void task_body(gomp_fn fn, void *data, gomp_cpyfn cpyfn,
                                                long arg_size, long arg_align, int final,
                                                const uint64_t *bounds)
{
    frame_entered();
    if (final)
        final_depth++;
    if (cpyfn) {
        if (arg_align < 1)
            arg_align = 1;
        char buf[arg_size + arg_align - 1];
        char *arg = (char *)(((uintptr_t)buf + arg_align - 1) & ~(uintptr_t)(arg_align - 1));
        cpyfn(arg, data);
        if (bounds)
            memcpy(arg, bounds, 2 * sizeof *bounds);
        fn(arg);
    } else {
        if (bounds)
            memcpy(data, bounds, 2 * sizeof *bounds);
        fn(data);
    }
    if (final)
        final_depth--;
    frame_ended();
}

/* A task as a frame of the dag (a function instance: its end syncs its children, as a Cilk
   function's does): called (undeferred), or spawned (run in parallel with its creator by the
   real program). */
#define TASK_CALL(...)                                                                             \
    do {                                                                                           \
        MARK_ENTER();                                                                              \
        task_body(__VA_ARGS__);                                                                    \
        MARK_EXIT();                                                                               \
    } while (0)
#define TASK_SPAWN(...)                                                                            \
    do {                                                                                           \
        MARK_SPAWN();                                                                              \
        MARK_ENTER();                                                                              \
        task_body(__VA_ARGS__);                                                                    \
        MARK_EXIT();                                                                               \
        MARK_SPAWN_RETURN();                                                                       \
    } while (0)


/* Whether a task created now is discarded: cancellation is on (OMP_CANCELLATION=true) and its
   taskgroup or its parallel region was cancelled. libgomp then drops it at its creation: the
   wrappers hand it over, so that it does not run where the program without the tool would not
   run it. */
static int discarded(void) { return REAL(GOMP_cancellation_point)(GOMP_CANCEL_TASKGROUP); }

EXPORT void GOMP_task(gomp_fn fn, void *data, gomp_cpyfn cpyfn, long arg_size, long arg_align,
                      bool if_clause, unsigned flags, void **depend, int priority, void *detach)
{
    if (discarded()) {
        REAL(GOMP_task)(fn, data, cpyfn, arg_size, arg_align, if_clause, flags, depend, priority,
                        detach);
        return;
    }
    if (flags & GOMP_TASK_FLAG_DETACH) {
        /* Completes when its event is fulfilled, maybe by a later task: left to libgomp
           (deferred; it runs at the next scheduling point, inside that strand). */
        COUNT(C_DETACHED_TASKS);
        REAL(GOMP_task)(fn, data, cpyfn, arg_size, arg_align, if_clause, flags, depend,
                        priority, detach);
        return;
    }
    int final = (flags & GOMP_TASK_FLAG_FINAL) != 0;
    if (undeferred(if_clause)) {
        COUNT(C_UNDEFERRED_TASKS);
        if ((flags & GOMP_TASK_FLAG_DEPEND) && parallel_here()) {
            /* Its creator is suspended until it ends, and it starts after the siblings it
               depends on: the creator waits for those (depend.c), then calls it. */
            COUNT(C_DEPEND_TASKS);
            deps_wait(depend);
        }
        TASK_CALL(fn, data, cpyfn, arg_size, arg_align, final, NULL);
    } else {
        COUNT(C_TASKS);
        int recorded = 1;
        if (flags & GOMP_TASK_FLAG_DEPEND) {
            /* It may start only after the siblings it depends on (depend.c). */
            COUNT(C_DEPEND_TASKS);
            recorded = deps_before_spawn(depend);
        }
        TASK_SPAWN(fn, data, cpyfn, arg_size, arg_align, final, NULL);
        if (!recorded) {
            MARK_SYNC();
            deps_synced();
        }
    }
}

EXPORT void GOMP_taskwait(void)
{
    COUNT(C_TASKWAITS);
    REAL(GOMP_taskwait)();
    MARK_SYNC();
    deps_synced();
}

/* Waits for the sibling tasks the dependences name (all have ended here), not the others: a
   wait-for mark per sibling it depends on (depend.c). */
EXPORT void GOMP_taskwait_depend(void **depend)
{
    COUNT(C_TASKWAIT_DEPENDS);
    REAL(GOMP_taskwait_depend)(depend);
    deps_wait(depend);
}

/* A taskgroup is a frame: its end waits for the tasks created in it (and theirs), not for
   the siblings created before it. */
EXPORT void GOMP_taskgroup_start(void)
{
    COUNT(C_TASKGROUPS);
    REAL(GOMP_taskgroup_start)();
    MARK_ENTER();
    frame_entered();
}

EXPORT void GOMP_taskgroup_end(void)
{
    frame_ended();
    MARK_EXIT();
    REAL(GOMP_taskgroup_end)();
}

/* Task reductions (taskgroup task_reduction, taskloop reduction): counted while registered. */
EXPORT void GOMP_taskgroup_reduction_register(uintptr_t *data)
{
    REAL(GOMP_taskgroup_reduction_register)(data);
    task_reductions++;
}

EXPORT void GOMP_taskgroup_reduction_unregister(uintptr_t *data)
{
    REAL(GOMP_taskgroup_reduction_unregister)(data);
    if (task_reductions)
        task_reductions--;
}


/* The tasks of a taskloop over n iterations: how many, and how many iterations the first
   `bigger` of them get (one more than the others). */
struct split {
    unsigned long tasks, size, bigger;
};

static struct split split_taskloop(unsigned flags, unsigned long num_tasks, unsigned long n)
{
    struct split s;
    if (flags & GOMP_TASK_FLAG_GRAINSIZE) {
        unsigned long grain = num_tasks ? num_tasks : 1;
        if (flags & GOMP_TASK_FLAG_STRICT) {
            /* Tasks of exactly `grain` iterations, the last one shorter. */
            s.tasks = n / grain + (n % grain != 0);
            s.size = grain;
            s.bigger = 0;
            return s;
        }
        s.tasks = n / grain ? n / grain : 1;
    } else {
        s.tasks = num_tasks ? num_tasks : TASKLOOP_DEFAULT_TASKS;
        if (s.tasks > n)
            s.tasks = n;
    }
    s.size = n / s.tasks;
    s.bigger = n % s.tasks;
    return s;
}

#define TASKLOOP_TYPE long
#define TASKLOOP_NAME GOMP_taskloop
#include "taskloop.c"
#define TASKLOOP_TYPE gomp_ull
#define TASKLOOP_NAME GOMP_taskloop_ull
#define TASKLOOP_UNSIGNED
#include "taskloop.c"
