/* team.c -- `--omp-team K` (both runtimes' libraries): an active parallel region runs as K virtual threads on this
 * one OS thread, each on its own stack, switched at barriers.  Code that splits work by thread
 * number (schedule(static) loops, omp_get_thread_num()) then runs as K strands between
 * barriers: a spawn per virtual thread's segment, a sync at each barrier.
 *
 * The virtual threads answer omp_get_thread_num()/omp_get_num_threads(); a worksharing
 * construct (loop, sections, single) is run, through the runtime's team of one, by the first
 * virtual thread that reaches it, and the others find it done (no iterations, not the single
 * one; copyprivate data from the one that ran it).  An active region nested in a virtual thread
 * (max-active-levels > 1) gets a virtual team of its own, run inside that thread's segment.
 * threadprivate data (gcc's and clang's: the executable's thread-local storage) is each virtual thread's:
 * the executable's TLS block is swapped with a copy of the virtual thread's own while it runs
 * (thread 0's is the OS thread's), and the copies persist from region to region, as a real
 * team's threads keep theirs. */

#include <link.h>
#include <sys/mman.h>
#include <ucontext.h>

#define VT_MAX 256
#define VT_STACK (8UL << 20)

/* What each virtual thread runs: the region's outlined function (libgomp's), or one that calls
   libomp's microtask with the region's arguments (kmp_parallel.c). */
typedef void (*vteam_fn)(void *);

struct vteam {
    vteam_fn fn;
    void *data;
    unsigned k, cur;
    unsigned claimed; /* worksharing constructs begun by some virtual thread */
    void *copy;       /* copyprivate data of the last single */
    ucontext_t sched;
    ucontext_t *ctx;
    void **stack;
    unsigned *seen; /* worksharing constructs each virtual thread has met */
    unsigned char *skipping, *done;
    unsigned level;      /* the nesting level of its region */
    struct vteam *outer; /* the team one of whose virtual threads runs this one's region */
};

/* The innermost running virtual team: a nested active region begun in one of its virtual
   threads gets its own, run inside that virtual thread's segment. */
static struct vteam *vteam;

/* ---- threadprivate: the executable's TLS block, one copy per virtual thread ---- */

static struct {
    char *block;      /* the OS thread's instance (NULL: the executable has no TLS) */
    size_t size;      /* PT_TLS p_memsz */
    const char *init; /* the initialization image, p_filesz bytes of it */
    size_t init_size;
    int found;
    char *copy[VT_MAX]; /* virtual thread i's data while another runs (0: the OS thread's) */
} tls;

/* The first object dl_iterate_phdr reports is the executable. */
static int exe_tls(struct dl_phdr_info *info, size_t size, void *unused)
{
    (void)size, (void)unused;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type == PT_TLS && p->p_memsz > 0 && info->dlpi_tls_data) {
            tls.block = info->dlpi_tls_data;
            tls.size = p->p_memsz;
            tls.init = (const char *)(info->dlpi_addr + p->p_vaddr);
            tls.init_size = p->p_filesz;
        }
    }
    return 1;
}

/* Room for virtual thread i's copy (a new one holds the initialization image, as a new
   thread's TLS does); 0 without memory. */
static int tls_prepare(unsigned i)
{
    if (!tls.found) {
        tls.found = 1;
        dl_iterate_phdr(exe_tls, NULL);
    }
    if (!tls.block || tls.copy[i])
        return 1;
    tls.copy[i] = calloc(1, tls.size);
    if (!tls.copy[i])
        return 0;
    if (i > 0)
        memcpy(tls.copy[i], tls.init, tls.init_size);
    return 1;
}

/* Virtual thread i (> 0) of the outermost team is about to run: its data in the block, thread
   0's kept (a nested team's threads share the data of the virtual thread that runs them). */
static void tls_swap_in(unsigned i)
{
    if (tls.block && i > 0 && level == 1) {
        memcpy(tls.copy[0], tls.block, tls.size);
        memcpy(tls.block, tls.copy[i], tls.size);
    }
}

/* Virtual thread i (> 0) of the outermost team stopped: its data kept, thread 0's back. */
static void tls_swap_out(unsigned i)
{
    if (tls.block && i > 0 && level == 1) {
        memcpy(tls.copy[i], tls.block, tls.size);
        memcpy(tls.block, tls.copy[0], tls.size);
    }
}

static inline int in_vteam(void)
{
    return vteam != NULL && level == vteam->level;
}

/* Whether the thread queries answer for the virtual team: not while a task reduction is
   registered (its per-thread slots are libgomp's team of one, and gcc's code combines
   omp_get_num_threads() of them). */
/* Whether the region just begun (at `level`) is nested directly in a virtual thread of the
   innermost team. */
static inline int in_vteam_below(void)
{
    return vteam != NULL && level == vteam->level + 1;
}

static inline int vteam_answers(void)
{
    return in_vteam() && task_reductions == 0;
}

static void vthread_main(void)
{
    struct vteam *t = vteam;
    t->fn(t->data);
    t->done[t->cur] = 1; /* uc_link returns to the scheduler */
}

/* A barrier in a virtual thread: back to the scheduler until every one has arrived. */
static void vbarrier(void)
{
    if (in_vteam()) {
        struct vteam *t = vteam;
        swapcontext(&t->ctx[t->cur], &t->sched);
    }
}

/* A worksharing construct begins in this virtual thread: 1 if it runs it (the first to reach
   it), 0 if another did (then its end must not reach libgomp). */
static int vteam_claim(void)
{
    struct vteam *t = vteam;
    unsigned i = t->cur;
    unsigned index = t->seen[i]++;
    int runs = index >= t->claimed;
    if (runs)
        t->claimed++;
    t->skipping[i] = (unsigned char)!runs;
    return runs;
}

/* The end of a worksharing construct: whether this virtual thread skipped it. */
static int vteam_skipped(void)
{
    return in_vteam() && vteam->skipping[vteam->cur];
}

/* Runs in the runtime's team of one: the virtual threads, phase by phase. */
static void vteam_trampoline(void *arg)
{
    struct vteam *t = arg;
    for (unsigned i = 0; i < t->k; i++) {
        getcontext(&t->ctx[i]);
        t->ctx[i].uc_stack.ss_sp = t->stack[i];
        t->ctx[i].uc_stack.ss_size = VT_STACK;
        t->ctx[i].uc_link = &t->sched;
        makecontext(&t->ctx[i], vthread_main, 0);
    }
    for (;;) {
        unsigned alive = 0;
        for (unsigned i = 0; i < t->k; i++) {
            if (t->done[i])
                continue;
            t->cur = i;
            MARK_SPAWN();
            frame_entered();
            tls_swap_in(i);
            swapcontext(&t->sched, &t->ctx[i]);
            tls_swap_out(i);
            frame_ended();
            MARK_SPAWN_RETURN();
            alive += !t->done[i];
        }
        MARK_SYNC();
        deps_synced();
        if (!alive)
            break;
    }
}

/* A virtual team for the region just begun, if wanted (--omp-team, an active region: the
   outermost, or one nested in a virtual thread of the team below when max-active-levels lets
   it be parallel); NULL: run it as a team of one. */
static struct vteam *vteam_open(vteam_fn fn, void *data)
{
    if (team_size < 2 || level >= MAX_LEVELS || !parallel_active[level])
        return NULL;
    if (vteam ? !(in_vteam_below()) : level != 1)
        return NULL;
    /* A num_threads clause asks for at most that many. */
    unsigned k = team_size < VT_MAX ? team_size : VT_MAX;
    if (requested_threads > 1 && requested_threads < k)
        k = requested_threads;
    struct vteam *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->k = k;
    t->fn = fn;
    t->data = data;
    t->ctx = calloc(k, sizeof *t->ctx);
    t->stack = calloc(k, sizeof *t->stack);
    t->seen = calloc(k, sizeof *t->seen);
    t->skipping = calloc(k, 1);
    t->done = calloc(k, 1);
    int ok = t->ctx && t->stack && t->seen && t->skipping && t->done;
    for (unsigned i = 0; ok && i < k; i++)
        ok = tls_prepare(i);
    for (unsigned i = 0; ok && i < k; i++) {
        t->stack[i] = mmap(NULL, VT_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        ok = t->stack[i] != MAP_FAILED;
        if (!ok)
            t->stack[i] = NULL;
    }
    if (!ok)
        WARN(W_TEAM_NO_MEMORY);
    if (ok) {
        COUNT(C_VIRTUAL_TEAM_REGIONS);
        t->level = level;
        t->outer = vteam;
        vteam = t;
        return t;
    }
    for (unsigned i = 0; t->stack && i < k; i++)
        if (t->stack[i])
            munmap(t->stack[i], VT_STACK);
    free(t->ctx), free(t->stack), free(t->seen), free(t->skipping), free(t->done), free(t);
    return NULL;
}

static void vteam_close(struct vteam *t)
{
    vteam = t->outer;
    for (unsigned i = 0; i < t->k; i++)
        munmap(t->stack[i], VT_STACK);
    free(t->ctx), free(t->stack), free(t->seen), free(t->skipping), free(t->done), free(t);
}

/* ---- the thread queries (both runtimes export them under the same names): a virtual thread's
   answers; outside a virtual team, code split by thread id is noted by its call site ---- */

/* With --omp-team K, outside the regions: K, the team a region would get (programs size their
   per-thread arrays with it). */
EXPORT int omp_get_max_threads(void)
{
    if (team_size > 1 && (level == 0 || in_vteam()))
        return (int)team_size;
    return REAL(omp_get_max_threads)();
}

EXPORT int omp_get_num_threads(void)
{
    if (vteam_answers())
        return (int)vteam->k;
    note_thread_query(__builtin_return_address(0));
    return REAL(omp_get_num_threads)();
}

EXPORT int omp_get_thread_num(void)
{
    if (vteam_answers())
        return (int)vteam->cur;
    note_thread_query(__builtin_return_address(0));
    return REAL(omp_get_thread_num)();
}
