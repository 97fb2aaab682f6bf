/* taskloop.c -- GOMP_taskloop and GOMP_taskloop_ull (included twice by tasks.c, with
   TASKLOOP_TYPE the type of the bounds; TASKLOOP_UNSIGNED for the _ull one, whose direction
   is the UP flag).  Each task's bounds go into the first two TYPE fields of its data, as
   libgomp does. */

EXPORT void TASKLOOP_NAME(gomp_fn fn, void *data, gomp_cpyfn cpyfn, long arg_size,
                          long arg_align, unsigned flags, unsigned long num_tasks, int priority,
                          TASKLOOP_TYPE start, TASKLOOP_TYPE end, TASKLOOP_TYPE step)
{
    if (discarded()) {
        /* Cancelled: libgomp's own answer (it creates no task). */
        REAL(TASKLOOP_NAME)(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, priority,
                            start, end, step);
        return;
    }
    unsigned long n;
#ifdef TASKLOOP_UNSIGNED
    int up = (flags & GOMP_TASK_FLAG_UP) != 0;
    if (up ? start >= end : start <= end)
        n = 0;
    else
        n = up ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
#else
    if (step > 0 ? start >= end : start <= end)
        n = 0;
    else
        n = step > 0 ? (unsigned long)((end - start + step - 1) / step)
                     : (unsigned long)((end - start + step + 1) / step);
#endif
    if (n == 0) {
        /* No task: libgomp's own answer (it tells a reduction nothing was registered). */
        REAL(TASKLOOP_NAME)(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, priority,
                            start, end, step);
        return;
    }
    COUNT(C_TASKLOOPS);
    struct split s = split_taskloop(flags, num_tasks, n);
    int group = !(flags & GOMP_TASK_FLAG_NOGROUP);
    if (group) {
        REAL(GOMP_taskgroup_start)();
        if (flags & GOMP_TASK_FLAG_REDUCTION) {
            struct head {
                TASKLOOP_TYPE t1, t2;
                uintptr_t *ptr;
            };
            REAL(GOMP_taskgroup_reduction_register)(((struct head *)data)->ptr);
            task_reductions++; /* until the program's GOMP_taskgroup_reduction_unregister */
        }
        MARK_ENTER();
        frame_entered();
    }
    int call = undeferred((flags & GOMP_TASK_FLAG_IF) != 0);
    int final = (flags & GOMP_TASK_FLAG_FINAL) != 0;
    unsigned long left = n;
    for (unsigned long i = 0; i < s.tasks && left > 0; i++) {
        unsigned long iters = s.size + (i < s.bigger);
        if (iters > left)
            iters = left;
        left -= iters;
        TASKLOOP_TYPE bounds[2];
        bounds[0] = start;
        start += (TASKLOOP_TYPE)iters * step;
        bounds[1] = start;
        COUNT(C_TASKLOOP_TASKS);
        if (call)
            TASK_CALL(fn, data, cpyfn, arg_size, arg_align, final, (const uint64_t *)bounds);
        else
            TASK_SPAWN(fn, data, cpyfn, arg_size, arg_align, final, (const uint64_t *)bounds);
    }
    (void)priority;
    if (group) {
        frame_ended();
        MARK_EXIT();
        REAL(GOMP_taskgroup_end)();
    }
}

#undef TASKLOOP_TYPE
#undef TASKLOOP_NAME
#undef TASKLOOP_UNSIGNED
