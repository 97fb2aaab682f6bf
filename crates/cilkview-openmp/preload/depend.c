/* depend.c -- task dependences: a task with `depend` clauses starts only after the siblings it
 * depends on, those created since the creator's last sync with the same address, one of the
 * two writing (out, inout, mutexinoutset, inoutset): one spawn-after mark per such sibling
 * before the task's spawn mark, its operand the sibling's ordinal among the frame's spawns
 * since its last sync (docs/engine.md, "Dependences between siblings"); a wait on dependences
 * (taskwait depend, an undeferred task) is one wait-for mark per such sibling instead.  Only the
 * edges that are not implied are emitted: for each address, the readers since its last writer
 * and that writer when there are none (an earlier writer is ordered before a later one).
 *
 * The dependences of the siblings since the last sync are kept per frame (a task, a parallel
 * region, a taskgroup) on one per-thread stack, ordered by frame depth: a frame's entries go
 * when it ends or syncs.  The spawns of each open frame since its last sync are counted per
 * depth (every MARK_SPAWN), so that a task's ordinal is the engine's. */

struct dep {
    void *addr;
    unsigned depth;
    unsigned ordinal; /* of the task, among its frame's spawns since the frame's last sync */
    unsigned char writes;
};

static TLS unsigned frame_depth; /* frames opened by this library and not ended */
static TLS struct dep *deps;     /* grown at tasks with dependences */
static TLS unsigned dep_top, dep_cap;
/* The spawns of the open frame at each depth since its last sync: the first SPAWNS_NEAR depths
   here (no allocation: a malloc would be counted in the program's work), deeper ones in `deep`
   (depth SPAWNS_NEAR + i at i). */
#define SPAWNS_NEAR 64
static TLS unsigned spawns_near[SPAWNS_NEAR];
static TLS unsigned *spawns_deep;
static TLS unsigned spawns_deep_cap;

/* The counter of the frame at depth d >= SPAWNS_NEAR, NULL with no memory for it. */
static __attribute__((noinline)) unsigned *spawn_count_deep(unsigned d)
{
    d -= SPAWNS_NEAR;
    if (d >= spawns_deep_cap) {
        unsigned cap = spawns_deep_cap ? 2 * spawns_deep_cap : 64;
        while (cap <= d)
            cap *= 2;
        unsigned *grown = realloc(spawns_deep, cap * sizeof *grown);
        if (!grown)
            return NULL;
        memset(grown + spawns_deep_cap, 0, (cap - spawns_deep_cap) * sizeof *grown);
        spawns_deep = grown;
        spawns_deep_cap = cap;
    }
    return &spawns_deep[d];
}

/* The counter of the current frame's spawns, NULL with no memory for it. */
static inline unsigned *spawn_count(void)
{
    if (__builtin_expect(frame_depth < SPAWNS_NEAR, 1))
        return &spawns_near[frame_depth];
    return spawn_count_deep(frame_depth);
}

/* The current frame's spawns since its last sync are none. */
static inline void spawns_reset(void)
{
    unsigned *n = spawn_count();
    if (n)
        *n = 0;
}

/* A spawn in the current frame (MARK_SPAWN). */
static inline void frame_spawned(void)
{
    unsigned *n = spawn_count();
    if (n)
        ++*n;
}

/* The current frame syncs: its siblings' dependences are satisfied, its spawns counted anew. */
static inline void deps_synced(void)
{
    while (dep_top && deps[dep_top - 1].depth >= frame_depth)
        dep_top--;
    spawns_reset();
}

static inline void frame_entered(void)
{
    frame_depth++;
    spawns_reset();
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

/* Room for n more dependences on the stack. */
static int deps_reserve(size_t n)
{
    if (n > (1u << 30))
        return 0;
    if (dep_top + n <= dep_cap)
        return 1;
    unsigned cap = dep_cap ? 2 * dep_cap : 256;
    while (cap < dep_top + n)
        cap *= 2;
    struct dep *grown = realloc(deps, cap * sizeof *grown);
    if (!grown)
        return 0;
    deps = grown;
    dep_cap = cap;
    return 1;
}

#define DEP_TRACKED 64 /* a task with more dependences gets an edge per conflicting sibling */

/* One edge from a sibling: a spawn-after mark (the next task spawned starts after it) or, with
   `wait`, a wait-for mark (the creator's next strand does) -- unless it names the sibling the
   last one named (`last`). */
static inline void dep_edge(unsigned ordinal, unsigned *last, int wait)
{
    if (ordinal != *last) {
        COUNT(C_DEPEND_EDGES);
        if (wait)
            MARK_WAIT_FOR(ordinal);
        else
            MARK_SPAWN_AFTER(ordinal);
        *last = ordinal;
    }
}

/* The edges (dep_edge) of a task with these n dependences, or of a wait on them: newest sibling
   first, per dependence the readers since the last writer of its address (when it writes) and
   that writer unless a reader came after it; then the older entries of that address are
   implied. */
static void deps_edges(void **depend, size_t n, int wait)
{
    unsigned last = UINT_MAX;
    unsigned k = dep_top;
    if (n > DEP_TRACKED) {
        for (; k > 0 && deps[k - 1].depth == frame_depth; k--) {
            for (size_t i = 0; i < n; i++) {
                void *addr;
                int writes;
                dep_at(depend, i, &addr, &writes);
                if (deps[k - 1].addr == addr && (writes || deps[k - 1].writes))
                    dep_edge(deps[k - 1].ordinal, &last, wait);
            }
        }
        return;
    }
    void *addr[DEP_TRACKED];
    unsigned char writes[DEP_TRACKED], state[DEP_TRACKED]; /* state 1: a reader seen; 2: done */
    for (size_t i = 0; i < n; i++) {
        int w;
        dep_at(depend, i, &addr[i], &w);
        writes[i] = (unsigned char)w;
        state[i] = 0;
    }
    size_t open = n;
    for (; k > 0 && open && deps[k - 1].depth == frame_depth; k--) {
        const struct dep *e = &deps[k - 1];
        for (size_t i = 0; i < n; i++) {
            if (state[i] == 2 || e->addr != addr[i] || !(writes[i] || e->writes))
                continue;
            if (!(e->writes && state[i] == 1))
                dep_edge(e->ordinal, &last, wait);
            state[i] = e->writes ? 2 : 1;
            open -= e->writes;
        }
    }
}

/* A task with dependences is about to be spawned: a spawn-after mark per sibling it depends
   on, then its dependences recorded.  Returns 0 when they could not be recorded (no memory):
   it then syncs before the task, and the caller after it, so that no later sibling can miss
   them. */
static int deps_before_spawn(void **depend)
{
    size_t n = dep_count(depend);
    unsigned *ordinal = spawn_count();
    if (!ordinal || !deps_reserve(n)) {
        MARK_SYNC();
        deps_synced();
        return 0;
    }
    deps_edges(depend, n, 0);
    for (size_t i = 0; i < n; i++) {
        struct dep *d = &deps[dep_top++];
        int writes;
        dep_at(depend, i, &d->addr, &writes);
        d->writes = (unsigned char)writes;
        d->depth = frame_depth;
        d->ordinal = *ordinal;
    }
    return 1;
}

/* The creator waits for the siblings these dependences name (taskwait depend, an undeferred task
   with dependences): a wait-for mark per edge; the others stay out. */
static void deps_wait(void **depend)
{
    if (deps)
        deps_edges(depend, dep_count(depend), 1);
}
