/* counts_file.c -- a preload library's counters and warnings, and the counts file it writes at
   the program's exit (src/counts.rs reads it): shared by the libraries of every runtime. The
   including file has included its wire header (`enum counter`, `counter_names`, `enum warning`,
   `warning_names`, COUNTS_HEADER: rendered from src/wire.rs). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long counters[C_COUNT];
static unsigned char warned[W_COUNT];
#define COUNT(c) __atomic_fetch_add(&counters[c], 1, __ATOMIC_RELAXED)
/* The report says it (the counts file names it; the text is the tool's). */
#define WARN(w) __atomic_store_n(&warned[w], 1, __ATOMIC_RELAXED)

static char *counts_path;

/* Where to write the counts (CILKVIEW_OPENMP_COUNTS, then removed from the environment). */
static void counts_init(void)
{
    const char *path = getenv("CILKVIEW_OPENMP_COUNTS");
    if (path)
        counts_path = strdup(path);
    unsetenv("CILKVIEW_OPENMP_COUNTS");
}

static void counts_put(int fd, const char *line)
{
    (void)!write(fd, line, strlen(line));
}

/* The counts file opened, its header, counters and warnings written; -1 when there is none.
   The caller may add its lines, then calls counts_close. */
static int counts_open(void)
{
    if (!counts_path)
        return -1;
    int fd = open(counts_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char line[200];
    counts_put(fd, COUNTS_HEADER "\n");
    for (int c = 0; c < C_COUNT; c++) {
        snprintf(line, sizeof line, "%s %lu\n", counter_names[c],
                 __atomic_load_n(&counters[c], __ATOMIC_RELAXED));
        counts_put(fd, line);
    }
    for (int w = 0; w < W_COUNT; w++) {
        if (__atomic_load_n(&warned[w], __ATOMIC_RELAXED)) {
            snprintf(line, sizeof line, "warning %s\n", warning_names[w]);
            counts_put(fd, line);
        }
    }
    return fd;
}

/* The file's last line (a file without it was cut short), and closed. */
static void counts_close(int fd)
{
    counts_put(fd, "end\n");
    close(fd);
}
