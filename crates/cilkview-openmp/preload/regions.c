/* regions.c -- what both runtimes' wrappers mark alike: parallel regions (a team of one) and
   worksharing constructs seen chunk by chunk. */
/* ---- parallel regions ---- */

/* A region: one frame (its end is the implicit barrier), in the region labeled `parallel`.  It is parallel
   in the real program when it asks for more than one thread (if(0) and num_threads(1) give
   1) and is not nested deeper than max-active-levels allows.  The marks are in the entry point
   the program called, so that a profile names its parallel construct as the call site. */
static __attribute__((noinline)) void parallel_entered(unsigned num_threads)
{
    int active = num_threads != 1 && level < (unsigned)REAL(omp_get_max_active_levels)();
    requested_threads = num_threads;
    frame_entered();
    level++;
    parallel_active[lvl()] = (unsigned char)active;
    ws_loop_open[lvl()] = ws_chunk_open[lvl()] = 0;
    COUNT(active ? C_PARALLEL_REGIONS : C_SERIAL_PARALLEL_REGIONS);
}

static __attribute__((noinline)) void parallel_leaving(void)
{
    level--;
    frame_ended();
}

/* The region `parallel` is the outermost parallel regions' (a nested one is inside it: its own
   would count its work twice in the label's sum). */
#define parallel_begin(num_threads)                                                                \
    do {                                                                                           \
        if (level == 0)                                                                            \
            MARK_REGION_BEGIN("parallel");                                                         \
        MARK_ENTER();                                                                              \
        parallel_entered(num_threads);                                                             \
    } while (0)
#define parallel_end()                                                                             \
    do {                                                                                           \
        parallel_leaving();                                                                        \
        MARK_EXIT();                                                                               \
        if (level == 0)                                                                            \
            MARK_REGION_END("parallel");                                                           \
    } while (0)

/* ---- worksharing: each chunk (or section) is an iteration of a parallel loop ---- */

/* A chunk was asked for and `got` says whether there was one: the previous chunk ends; the
   loop begins at its first chunk and ends when there is none left. */
static __attribute__((noinline)) void ws_next(int got, enum counter kind)
{
    unsigned l = lvl();
    if (!parallel_here()) {
        if (got && !ws_loop_open[l]) {
            ws_loop_open[l] = 1; /* serial: counted once, not marked */
            COUNT(C_SERIAL_WORKSHARING);
        } else if (!got) {
            ws_loop_open[l] = 0;
        }
        return;
    }
    if (ws_chunk_open[l]) {
        frame_ended();
        MARK_ITERATION_END();
        ws_chunk_open[l] = 0;
    }
    if (got) {
        if (!ws_loop_open[l]) {
            MARK_LOOP_BEGIN();
            ws_loop_open[l] = 1;
            COUNT(kind);
        }
        COUNT(C_CHUNKS);
        MARK_ITERATION_BEGIN();
        frame_entered();
        ws_chunk_open[l] = 1;
    } else if (ws_loop_open[l]) {
        MARK_LOOP_END();
        ws_loop_open[l] = 0;
    }
}
