/* kmp_team.c -- `--omp-team K` under libomp (team.c's virtual threads): what libomp's team of
 * one would answer for the whole team, answered for each virtual thread.  libomp's worksharing
 * is not inlined as gcc's static loops are: each static loop's bounds come from
 * __kmpc_for_static_init, which a team of one answers with the whole range, so a virtual thread
 * gets its own part here, computed as libomp computes it for a real team of K (balanced
 * `schedule(static)`: the first n % K threads one iteration more; chunked round-robin);
 * single, master and masked answer for the virtual thread; copyprivate hands the data of the
 * one that ran the single to the others. */

/* The part of a static loop [*plower, *pupper] (libomp has checked it is not empty) that
   virtual thread `tid` of `nth` gets, as libomp's __kmp_for_static_init gives it to a real
   team's thread; 0 where the schedule is not one of those (the first thread to reach it then
   runs it all). */
#define VTEAM_STATIC_SPLIT(suffix, T, ST, UT)                                                      \
    static int vteam_static_##suffix(kmp_int32 sched, kmp_int32 *plast, T *plower, T *pupper,     \
                                     ST *pstride, ST incr, ST chunk, UT tid, UT nth)              \
    {                                                                                              \
        UT trip = incr == 1    ? (UT)(*pupper - *plower) + 1                                       \
                  : incr == -1 ? (UT)(*plower - *pupper) + 1                                       \
                  : incr > 0   ? (UT)(*pupper - *plower) / (UT)incr + 1                            \
                               : (UT)(*plower - *pupper) / (UT)(-incr) + 1;                        \
        sched &= ~KMP_SCH_MODIFIERS;                                                               \
        if (sched == KMP_SCH_STATIC || sched == KMP_SCH_STATIC_BALANCED ||                        \
            sched == KMP_ORD_STATIC) {                                                             \
            if (trip < nth) {                                                                      \
                if (tid < trip)                                                                    \
                    *pupper = *plower = (T)(*plower + (T)tid * incr);                              \
                else                                                                               \
                    *plower = (T)(*pupper + incr);                                                 \
                if (plast)                                                                         \
                    *plast = tid == trip - 1;                                                      \
            } else {                                                                               \
                UT small = trip / nth, extras = trip % nth;                                        \
                *plower = (T)(*plower + incr * (ST)(tid * small + (tid < extras ? tid : extras))); \
                *pupper = (T)(*plower + (ST)small * incr - (tid < extras ? 0 : incr));             \
                if (plast)                                                                         \
                    *plast = tid == nth - 1;                                                       \
            }                                                                                      \
            *pstride = (ST)trip;                                                                   \
            return 1;                                                                              \
        }                                                                                          \
        if (sched == KMP_SCH_STATIC_CHUNKED || sched == KMP_ORD_STATIC_CHUNKED) {                  \
            if (chunk < 1)                                                                         \
                chunk = 1;                                                                         \
            ST span = chunk * incr;                                                                \
            *pstride = span * (ST)nth;                                                             \
            *plower = (T)(*plower + span * (ST)tid);                                               \
            *pupper = (T)(*plower + span - incr);                                                  \
            if (plast)                                                                             \
                *plast = tid == ((trip - 1) / (UT)chunk) % nth;                                    \
            return 1;                                                                              \
        }                                                                                          \
        if (sched == KMP_SCH_STATIC_BALANCED_CHUNKED) {                                            \
            T old_upper = *pupper;                                                                 \
            UT part = (trip + nth - 1) / nth;                                                      \
            chunk = (ST)((part + (UT)chunk - 1) & ~((UT)chunk - 1));                               \
            ST span = chunk * incr;                                                                \
            *plower = (T)(*plower + span * (ST)tid);                                               \
            *pupper = (T)(*plower + span - incr);                                                  \
            if (incr > 0 ? *pupper > old_upper : *pupper < old_upper)                              \
                *pupper = old_upper;                                                               \
            if (plast)                                                                             \
                *plast = tid == (trip - 1) / (UT)chunk;                                            \
            return 1;                                                                              \
        }                                                                                          \
        return 0;                                                                                  \
    }
KMP_LOOP_TYPES(VTEAM_STATIC_SPLIT)

/* ---- single, master, masked, copyprivate ---- */

EXPORT kmp_int32 __kmpc_single(ident_t *loc, kmp_int32 gtid)
{
    if (in_vteam() && !vteam_claim())
        return 0;
    return REAL(__kmpc_single)(loc, gtid);
}

EXPORT kmp_int32 __kmpc_master(ident_t *loc, kmp_int32 gtid)
{
    if (vteam_answers() && vteam->cur != 0)
        return 0;
    return REAL(__kmpc_master)(loc, gtid);
}

EXPORT kmp_int32 __kmpc_masked(ident_t *loc, kmp_int32 gtid, kmp_int32 filter)
{
    if (vteam_answers()) {
        if (vteam->cur != (unsigned)filter)
            return 0;
        filter = 0; /* the team of one's thread */
    }
    return REAL(__kmpc_masked)(loc, gtid, filter);
}

/* single copyprivate: libomp keeps the data of the thread that ran the single (didit) in its
   team, the others copy from it, and everyone waits at a barrier (two in libomp: the data must
   stay until all have copied).  A barrier here: a virtual thread that ran the single is
   suspended until the others have copied. */
EXPORT void __kmpc_copyprivate(ident_t *loc, kmp_int32 gtid, size_t size, void *data,
                               void (*copy)(void *, void *), kmp_int32 didit)
{
    REAL(__kmpc_copyprivate)(loc, gtid, size, data, copy, didit);
    if (parallel_here()) {
        COUNT(C_BARRIERS);
        MARK_SYNC();
        deps_synced();
    }
    vbarrier();
}
