/* restore_preload.h -- a preload library removes itself from the program's LD_PRELOAD (shared
   by the libraries of --openmp and --locks). */
#ifndef CILKVIEW_RESTORE_PRELOAD_H
#define CILKVIEW_RESTORE_PRELOAD_H
#include <stdlib.h>
#include <string.h>

/* LD_PRELOAD without this library, whose path is in `library_variable` (removed too): the
   program sees the environment it would have without the tool; programs it starts are not
   preloaded. */
static void restore_preload(const char *library_variable)
{
    const char *ours = getenv(library_variable);
    const char *preload = getenv("LD_PRELOAD");
    if (ours && preload) {
        size_t n = strlen(ours);
        char *kept = malloc(strlen(preload) + 1);
        if (kept) {
            kept[0] = 0;
            const char *p = preload;
            while (*p) {
                size_t len = strcspn(p, ": ");
                if (!(len == n && memcmp(p, ours, n) == 0) && len > 0) {
                    if (kept[0])
                        strcat(kept, ":");
                    strncat(kept, p, len);
                }
                p += len;
                p += strspn(p, ": ");
            }
            if (kept[0])
                setenv("LD_PRELOAD", kept, 1);
            else
                unsetenv("LD_PRELOAD");
            free(kept);
        }
    }
    unsetenv(library_variable);
}

#endif
