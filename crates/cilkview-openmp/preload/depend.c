/* depend.c -- task dependences: a task with `depend` clauses waits (a sync in the dag) only
 * when it depends on a sibling created since the creator's last sync: same address, one of
 * the two writing (out, inout, mutexinoutset, inoutset).  Exact for chains and for graphs
 * whose dependences go from one wave of siblings to the next (a diamond); where a task
 * depends on only some of the siblings before it, the sync waits for all of them (a lower
 * bound on the parallelism).
 *
 * The dependences of the siblings since the last sync are kept per frame (a task, a parallel
 * region, a taskgroup) on one per-thread stack, ordered by frame depth: a frame's entries go
 * when it ends or syncs. */

#define DEP_CAPACITY 4096

struct dep {
    void *addr;
    unsigned depth;
    unsigned char writes;
};

static TLS unsigned frame_depth; /* frames opened by this library and not ended */
static TLS struct dep *deps;     /* allocated at the first task with dependences */
static TLS unsigned dep_top;

/* The current frame syncs: its siblings' dependences are satisfied. */
static inline void deps_synced(void)
{
    while (dep_top && deps[dep_top - 1].depth >= frame_depth)
        dep_top--;
}

static inline void frame_entered(void)
{
    frame_depth++;
}

static inline void frame_ended(void)
{
    deps_synced();
    frame_depth--;
}

/* Dependence i of a GOMP_task `depend` array: its address and whether it writes. */
static void dep_at(void **depend, size_t i, void **addr, int *writes)
{
    if ((uintptr_t)depend[0]) {
        /* [n, nout, out/inout addresses…, in addresses…] */
        *addr = depend[2 + i];
        *writes = i < (uintptr_t)depend[1];
        return;
    }
    /* [0, n, nout, nmutexinoutset, nin, addresses…, depobjs…] */
    size_t normal = (uintptr_t)depend[2] + (uintptr_t)depend[3] + (uintptr_t)depend[4];
    if (i < normal) {
        *addr = depend[5 + i];
        *writes = i < (uintptr_t)depend[2] + (uintptr_t)depend[3];
    } else {
        void **obj = (void **)depend[5 + i];
        *addr = obj[0];
        *writes = (uintptr_t)obj[1] != 1; /* GOMP_DEPEND_IN */
    }
}

static size_t dep_count(void **depend)
{
    return (uintptr_t)depend[0] ? (uintptr_t)depend[0] : (uintptr_t)depend[1];
}

/* Whether a sibling since the last sync conflicts with these dependences. */
static int deps_conflict(void **depend)
{
    size_t n = dep_count(depend);
    for (unsigned k = dep_top; k > 0 && deps[k - 1].depth == frame_depth; k--) {
        for (size_t i = 0; i < n; i++) {
            void *addr;
            int writes;
            dep_at(depend, i, &addr, &writes);
            if (deps[k - 1].addr == addr && (writes || deps[k - 1].writes))
                return 1;
        }
    }
    return 0;
}

/* A task with dependences is about to be spawned: sync first if it depends on a sibling, then
   record its dependences.  Returns 0 when they could not be recorded (no memory, too many):
   the caller then syncs after the task too, so that no later sibling can miss them. */
static int deps_before_spawn(void **depend)
{
    if (!deps) {
        deps = calloc(DEP_CAPACITY, sizeof *deps);
        if (!deps) {
            MARK_SYNC();
            return 0;
        }
    }
    if (deps_conflict(depend)) {
        COUNT(C_DEPEND_SYNCS);
        MARK_SYNC();
        deps_synced();
    }
    size_t n = dep_count(depend);
    if (dep_top + n > DEP_CAPACITY) {
        MARK_SYNC();
        deps_synced();
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct dep *d = &deps[dep_top++];
        int writes;
        dep_at(depend, i, &d->addr, &writes);
        d->writes = (unsigned char)writes;
        d->depth = frame_depth;
    }
    return 1;
}

/* taskwait with depend clauses: waits when a sibling since the last sync conflicts. */
static int deps_wait_needed(void **depend)
{
    return deps && deps_conflict(depend);
}
