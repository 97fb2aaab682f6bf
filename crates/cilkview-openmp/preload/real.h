/* real.h -- what a preload library's wrapper calls: the function it wraps, the next definition
   past this library (RTLD_NEXT), resolved at its first use at each call site (shared by the
   libraries of --openmp and --locks). The including file defines REAL_MISSING, the start of the
   one line said before exiting (127) when the function is not there. */
#ifndef CILKVIEW_REAL_H
#define CILKVIEW_REAL_H
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

static void *resolve(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        static const char msg[] = REAL_MISSING;
        (void)!write(2, msg, sizeof msg - 1);
        (void)!write(2, name, strlen(name));
        (void)!write(2, "\n", 1);
        _exit(127);
    }
    return p;
}
/* The real `name`, resolved at its first use at this call site. */
#define REAL(name)                                                                                 \
    ({                                                                                             \
        static __typeof__(&name) real_;                                                            \
        if (__builtin_expect(real_ == NULL, 0))                                                    \
            real_ = (__typeof__(&name))resolve(#name);                                             \
        real_;                                                                                     \
    })
#endif
