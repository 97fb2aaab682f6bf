/* kmp_tasks.c -- libomp's explicit tasks: each runs where it is created (the serial elision),
 * through libomp's own path for an undeferred task (__kmpc_omp_task_begin_if0, the task's
 * routine, __kmpc_omp_task_complete_if0: libomp sets its current task, counts and frees it). */

/* The flags of the tasks allocated last (__kmpc_omp_task_alloc), by task: the compiler fills a
   task's data between its allocation and its submission. */
#define RECENT_TASKS 8
static TLS struct {
    kmp_task_t *task;
    kmp_int32 flags;
} recent[RECENT_TASKS];
static TLS unsigned recent_next;

EXPORT kmp_task_t *__kmpc_omp_task_alloc(ident_t *loc, kmp_int32 gtid, kmp_int32 flags,
                                         size_t sizeof_task, size_t sizeof_shareds,
                                         kmp_routine_entry_t entry)
{
    kmp_task_t *task =
        REAL(__kmpc_omp_task_alloc)(loc, gtid, flags, sizeof_task, sizeof_shareds, entry);
    unsigned i = recent_next++ % RECENT_TASKS;
    recent[i].task = task;
    recent[i].flags = flags;
    return task;
}

/* The allocation flags of `task` (0, untied, if it is not among the recent ones): the newest
   allocation at its address (libomp reuses a freed task's memory). */
static kmp_int32 task_flags(kmp_task_t *task)
{
    for (unsigned n = 1; n <= RECENT_TASKS; n++) {
        unsigned i = (recent_next - n) % RECENT_TASKS;
        if (recent[i].task == task)
            return recent[i].flags;
    }
    return 0;
}

/* The task this library runs now: an untied task submits itself again at each scheduling
   point (clang's continuation of an untied task), which is not a new task. */
static TLS kmp_task_t *running_task;

/* The body of one task, run at once by libomp: a tied task as an undeferred one (begin_if0,
   its routine, complete_if0); an untied one given to libomp, which runs it at once in the team
   of one (its task_serial flag), through the path that lets it continue itself.  The frame
   marks are in the entry point the program called (as tasks.c's), so that a profile names its
   task construct. */
static __attribute__((noinline)) void kmp_task_body(ident_t *loc, kmp_int32 gtid,
                                                    kmp_task_t *task, kmp_int32 flags)
{
    int final = (flags & KMP_TASK_FINAL) != 0;
    frame_entered();
    if (final)
        final_depth++;
    kmp_task_t *outer = running_task;
    running_task = task;
    if (flags & KMP_TASK_TIED) {
        REAL(__kmpc_omp_task_begin_if0)(loc, gtid, task);
        task->routine(gtid, task);
        REAL(__kmpc_omp_task_complete_if0)(loc, gtid, task);
    } else {
        REAL(__kmpc_omp_task)(loc, gtid, task);
    }
    running_task = outer;
    if (final)
        final_depth--;
    frame_ended();
}

/* A submitted task as gomp's GOMP_task does it (tasks.c): an undeferred one a call (after the
   siblings `depend` names: a gomp `depend` array, or NULL), a deferred one a spawn.  A macro, so
   that its marks are in the entry point the program called and not in an inlined function
   (DWARF would name the site by the inlined call). */
#define KMP_SUBMIT(loc, gtid, task, depend)                                                        \
    do {                                                                                           \
        kmp_int32 flags_ = task_flags(task);                                                       \
        if (undeferred(1)) {                                                                       \
            COUNT(C_UNDEFERRED_TASKS);                                                             \
            if ((depend) && parallel_here()) {                                                     \
                COUNT(C_DEPEND_TASKS);                                                             \
                deps_wait(depend);                                                                 \
            }                                                                                      \
            MARK_ENTER();                                                                          \
            kmp_task_body(loc, gtid, task, flags_);                                                \
            MARK_EXIT();                                                                           \
        } else {                                                                                   \
            COUNT(C_TASKS);                                                                        \
            int recorded_ = 1;                                                                     \
            if (depend) {                                                                          \
                COUNT(C_DEPEND_TASKS);                                                             \
                recorded_ = deps_before_spawn(depend);                                             \
            }                                                                                      \
            MARK_SPAWN();                                                                          \
            MARK_ENTER();                                                                          \
            kmp_task_body(loc, gtid, task, flags_);                                                \
            MARK_EXIT();                                                                           \
            MARK_SPAWN_RETURN();                                                                   \
            if (!recorded_) {                                                                      \
                MARK_SYNC();                                                                       \
                deps_synced();                                                                     \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Whether libomp keeps the task: an untied task's continuation (it is running), a detached
   task (it completes when its event is fulfilled), or a task created once its taskgroup or its
   parallel region was cancelled (OMP_CANCELLATION=true: libomp discards it instead of running
   it, where the program without the tool would not run it). */
static int left_to_libomp(ident_t *loc, kmp_int32 gtid, kmp_task_t *task)
{
    if (task == running_task)
        return 1;
    if (REAL(__kmpc_cancellationpoint)(loc, gtid, KMP_CANCEL_TASKGROUP) ||
        REAL(__kmpc_cancellationpoint)(loc, gtid, KMP_CANCEL_PARALLEL))
        return 1;
    if (task_flags(task) & KMP_TASK_DETACHABLE) {
        COUNT(C_DETACHED_TASKS);
        return 1;
    }
    return 0;
}

EXPORT kmp_int32 __kmpc_omp_task(ident_t *loc, kmp_int32 gtid, kmp_task_t *task)
{
    if (left_to_libomp(loc, gtid, task))
        return REAL(__kmpc_omp_task)(loc, gtid, task);
    void **no_depend = NULL;
    KMP_SUBMIT(loc, gtid, task, no_depend);
    return 0; /* TASK_CURRENT_NOT_QUEUED */
}

/* libomp's dependences as a gomp `depend` array ([n, writers, writers' addresses, readers'
   addresses]: depend.c reads that), in `out`, which holds 2 + n. */
static void **gomp_depend(void **out, kmp_int32 n1, const kmp_depend_info_t *d1, kmp_int32 n2,
                          const kmp_depend_info_t *d2)
{
    size_t n = (size_t)n1 + (size_t)n2, w = 0, r = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            const kmp_depend_info_t *d = i < (size_t)n1 ? &d1[i] : &d2[i - (size_t)n1];
            int writes = d->flags != KMP_DEP_IN;
            if (pass == 0 && writes)
                out[2 + w++] = (void *)d->base_addr;
            else if (pass == 1 && !writes)
                out[2 + w + r++] = (void *)d->base_addr;
        }
    }
    out[0] = (void *)n;
    out[1] = (void *)w;
    return out;
}

/* A task's dependences on the stack, as a gomp `depend` array (`name`). */
#define GOMP_DEPEND(name, n1, d1, n2, d2)                                                          \
    size_t name##_n = (size_t)(n1 > 0 ? n1 : 0) + (size_t)(n2 > 0 ? n2 : 0);                       \
    void *name##_buf[name##_n <= 4096 ? 2 + name##_n : 1];                                         \
    void **name = name##_n <= 4096 && name##_n > 0                                                 \
                      ? gomp_depend(name##_buf, n1 > 0 ? n1 : 0, d1, n2 > 0 ? n2 : 0, d2)         \
                      : NULL

EXPORT kmp_int32 __kmpc_omp_task_with_deps(ident_t *loc, kmp_int32 gtid, kmp_task_t *task,
                                           kmp_int32 ndeps, kmp_depend_info_t *deps,
                                           kmp_int32 ndeps_noalias,
                                           kmp_depend_info_t *noalias)
{
    if (left_to_libomp(loc, gtid, task))
        return REAL(__kmpc_omp_task_with_deps)(loc, gtid, task, ndeps, deps, ndeps_noalias,
                                               noalias);
    GOMP_DEPEND(depend, ndeps, deps, ndeps_noalias, noalias);
    KMP_SUBMIT(loc, gtid, task, depend);
    return 0;
}

/* A wait on dependences: `taskwait depend(...)`, or an if(0) task's wait before it runs. */
EXPORT void __kmpc_omp_wait_deps(ident_t *loc, kmp_int32 gtid, kmp_int32 ndeps,
                                 kmp_depend_info_t *deps, kmp_int32 ndeps_noalias,
                                 kmp_depend_info_t *noalias)
{
    COUNT(C_TASKWAIT_DEPENDS);
    REAL(__kmpc_omp_wait_deps)(loc, gtid, ndeps, deps, ndeps_noalias, noalias);
    GOMP_DEPEND(depend, ndeps, deps, ndeps_noalias, noalias);
    if (depend)
        deps_wait(depend);
}

/* An if(0) task, which the program runs itself between these two: a call.  Whether each is
   final, by nesting depth (the first 64). */
static TLS unsigned if0_depth;
static TLS uint64_t if0_final;

EXPORT void __kmpc_omp_task_begin_if0(ident_t *loc, kmp_int32 gtid, kmp_task_t *task)
{
    COUNT(C_UNDEFERRED_TASKS);
    REAL(__kmpc_omp_task_begin_if0)(loc, gtid, task);
    MARK_ENTER();
    frame_entered();
    int final = (task_flags(task) & KMP_TASK_FINAL) != 0;
    if (if0_depth < 64) {
        if0_final = (if0_final & ~(1ull << if0_depth)) | ((uint64_t)final << if0_depth);
        final_depth += (unsigned)final;
    }
    if0_depth++;
}

EXPORT void __kmpc_omp_task_complete_if0(ident_t *loc, kmp_int32 gtid, kmp_task_t *task)
{
    if (if0_depth > 0 && --if0_depth < 64)
        final_depth -= (unsigned)((if0_final >> if0_depth) & 1);
    frame_ended();
    MARK_EXIT();
    REAL(__kmpc_omp_task_complete_if0)(loc, gtid, task);
}

EXPORT kmp_int32 __kmpc_omp_taskwait(ident_t *loc, kmp_int32 gtid)
{
    COUNT(C_TASKWAITS);
    kmp_int32 r = REAL(__kmpc_omp_taskwait)(loc, gtid);
    MARK_SYNC();
    deps_synced();
    return r;
}

/* A taskgroup is a frame (tasks.c). */
EXPORT void __kmpc_taskgroup(ident_t *loc, kmp_int32 gtid)
{
    COUNT(C_TASKGROUPS);
    REAL(__kmpc_taskgroup)(loc, gtid);
    MARK_ENTER();
    frame_entered();
}

EXPORT void __kmpc_end_taskgroup(ident_t *loc, kmp_int32 gtid)
{
    frame_ended();
    MARK_EXIT();
    REAL(__kmpc_end_taskgroup)(loc, gtid);
}

/* taskloop: libomp splits the loop and runs each of its tasks (copies of the pattern task) at
   once in the team of one; the pattern's routine is replaced by taskloop_task, which marks each
   as a task (a spawn, or a call where the taskloop is undeferred) around the routine. */
static TLS struct taskloop {
    kmp_routine_entry_t routine;
    int call, final;
    unsigned long tasks;
} taskloop;

static kmp_int32 taskloop_task(kmp_int32 gtid, void *task)
{
    struct taskloop t = taskloop;
    COUNT(C_TASKLOOP_TASKS);
    taskloop.tasks++;
    if (!t.call)
        MARK_SPAWN();
    MARK_ENTER();
    frame_entered();
    final_depth += (unsigned)t.final;
    kmp_task_t *outer = running_task;
    running_task = task;
    kmp_int32 r = t.routine(gtid, task);
    running_task = outer;
    final_depth -= (unsigned)t.final;
    frame_ended();
    MARK_EXIT();
    if (!t.call)
        MARK_SPAWN_RETURN();
    return r;
}

EXPORT void __kmpc_taskloop(ident_t *loc, int gtid, kmp_task_t *task, int if_val,
                            kmp_uint64 *lb, kmp_uint64 *ub, kmp_int64 st, int nogroup, int sched,
                            kmp_uint64 grainsize, void *task_dup)
{
    struct taskloop outer = taskloop;
    taskloop.routine = task->routine;
    taskloop.call = undeferred(if_val);
    taskloop.final = (task_flags(task) & KMP_TASK_FINAL) != 0;
    taskloop.tasks = 0;
    task->routine = taskloop_task;
    if (sched == 0) {
        /* Neither grainsize nor num_tasks: as many tasks as libgomp's library makes. */
        sched = 2;
        grainsize = TASKLOOP_DEFAULT_TASKS;
    }
    if (!nogroup) {
        MARK_ENTER();
        frame_entered();
    }
    REAL(__kmpc_taskloop)(loc, gtid, task, if_val, lb, ub, st, nogroup, sched, grainsize,
                          task_dup);
    if (!nogroup) {
        frame_ended();
        MARK_EXIT();
    }
    if (taskloop.tasks > 0)
        COUNT(C_TASKLOOPS);
    taskloop = outer;
}
