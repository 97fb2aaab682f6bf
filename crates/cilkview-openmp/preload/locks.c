/*
 * locks.c -- the preload library of `cilkview-rs run --locks` (docs/locks.md).
 *
 * Loaded with LD_PRELOAD into an unmodified dynamically linked program, it wraps the calls that
 * take and release a lock exclusively -- pthread_mutex_lock/trylock/timedlock/unlock,
 * pthread_spin_lock/trylock/unlock, pthread_rwlock_wrlock/trywrlock/timedwrlock/unlock -- and
 * marks them, nothing else: the real functions are reached with dlsym(RTLD_NEXT).  A lock
 * taken is two marks after the real call succeeded: the acquiring call's return address (the
 * site that names the lock), then the lock's address; a release is one mark with the lock's
 * address before the real call.  The analysis charges the work between acquire and release to
 * the acquiring site (a read lock's release matches no acquire and is ignored).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cilkview.h"
#include "lock_marks.h"
#include "restore_preload.h"

#define EXPORT __attribute__((visibility("default")))

/* A runtime's preload library (cilkview-marks' RUNTIME_SECTION_NAME): the analysis reads the
   lock labels' marks only in such a library. */
__asm__(".pushsection .cilkview_runtime,\"\",@progbits\n.byte 1\n.popsection");

#define REAL_MISSING "cilkview-rs --locks: no libc function "
#include "real.h"

__attribute__((constructor)) static void cilkview_locks_init(void)
{
    restore_preload("CILKVIEW_LOCKS_LIBRARY");
}

/* Each wrapper: the real call, then the marks (an acquire), or the mark then the real call (a
   release).  __builtin_return_address(0) is the program's call: the wrappers are never
   inlined into each other. */
#define WRAP_ACQUIRE(name, type)                                                                   \
    EXPORT __attribute__((noinline)) int name(type *lock)                                          \
    {                                                                                              \
        int r = REAL(name)(lock);                                                                  \
        ACQUIRED(r, lock);                                                                         \
        return r;                                                                                  \
    }
#define WRAP_TIMED_ACQUIRE(name, type)                                                             \
    EXPORT __attribute__((noinline)) int name(type *restrict lock,                                 \
                                              const struct timespec *restrict until)               \
    {                                                                                              \
        int r = REAL(name)(lock, until);                                                           \
        ACQUIRED(r, lock);                                                                         \
        return r;                                                                                  \
    }
#define WRAP_RELEASE(name, type)                                                                   \
    EXPORT __attribute__((noinline)) int name(type *lock)                                          \
    {                                                                                              \
        RELEASING(lock);                                                                           \
        return REAL(name)(lock);                                                                   \
    }

WRAP_ACQUIRE(pthread_mutex_lock, pthread_mutex_t)
WRAP_ACQUIRE(pthread_mutex_trylock, pthread_mutex_t)
WRAP_TIMED_ACQUIRE(pthread_mutex_timedlock, pthread_mutex_t)
WRAP_RELEASE(pthread_mutex_unlock, pthread_mutex_t)
WRAP_ACQUIRE(pthread_spin_lock, pthread_spinlock_t)
WRAP_ACQUIRE(pthread_spin_trylock, pthread_spinlock_t)
WRAP_RELEASE(pthread_spin_unlock, pthread_spinlock_t)
WRAP_ACQUIRE(pthread_rwlock_wrlock, pthread_rwlock_t)
WRAP_ACQUIRE(pthread_rwlock_trywrlock, pthread_rwlock_t)
WRAP_TIMED_ACQUIRE(pthread_rwlock_timedwrlock, pthread_rwlock_t)
WRAP_RELEASE(pthread_rwlock_unlock, pthread_rwlock_t)
