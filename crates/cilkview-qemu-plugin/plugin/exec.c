/*
 * exec.c -- following the program's execs under the emulator.
 * Part of cilkview_plugin.c, which includes it (one translation unit).
 *
 * qemu-user runs an image the guest execs natively, outside the emulator and uncounted. At the
 * guest's execve the plugin execs QEMU itself instead: the options QEMU was started with (this
 * plugin among them, told exec=1; its memfd and the analyzer's descriptors stay open across the
 * exec) and the new image as the program, run as the kernel would run it: an x86-64 ELF file
 * directly, a `#!` script through its interpreter. The new instance tells the analyzer
 * (K_IMAGE, see files.c) before it asks for the new image's marks. Where it cannot follow (a
 * set-user-ID or set-group-ID file, which would run without its privileges; another
 * architecture; an interpreter that is not an x86-64 ELF file; an exec that fails here),
 * QEMU's own exec runs the image natively, as before, and the analyzer reports that.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

static char **g_qemu_args; /* QEMU's arguments before "-0", the plugin's with exec=1 */
static size_t g_qemu_nargs;     /* 0: execs are not followed */
static char g_qemu_exe[PATH_MAX];
static size_t g_plugin_arg; /* the index of the plugin's argument in g_qemu_args */

/* At install: QEMU's own command line and executable, to exec it again. */
static void exec_setup(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf)
            die("out of memory");
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
    }
    close(fd);
    buf[len] = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        n++;
    char **args = calloc(n + 1, sizeof *args);
    if (!args)
        die("out of memory");
    size_t k = 0, before_0 = 0;
    int skip = 0;
    for (size_t i = 0; i < len && k < n; i += strlen(buf + i) + 1) {
        if (!before_0 && !strcmp(buf + i, "-0"))
            before_0 = k;
        /* The -E options were this image's environment's (follow_exec makes the next's). */
        if (!before_0 && (skip || !strcmp(buf + i, "-E"))) {
            skip = !skip;
            continue;
        }
        args[k++] = buf + i;
    }
    ssize_t r = readlink("/proc/self/exe", g_qemu_exe, sizeof g_qemu_exe - 1);
    if (r <= 0 || before_0 == 0) {
        free(args);
        free(buf);
        return; /* not started by cilkview-rs: execs run natively */
    }
    g_qemu_exe[r] = 0;
    for (size_t i = 0; i + 1 < before_0; i++) {
        if (!strcmp(args[i], "-plugin")) {
            /* The next instance's: exec=1, and no comm= (follow_exec adds the next image's). */
            char *p = malloc(strlen(args[i + 1]) + 8);
            if (!p)
                die("out of memory");
            strcpy(p, args[i + 1]);
            char *c = strstr(p, ",comm=");
            if (c) {
                char *end = strchr(c + 1, ',');
                memmove(c, end ? end : c + strlen(c), strlen(end ? end : c + strlen(c)) + 1);
            }
            if (!strstr(p, ",exec=1"))
                strcat(p, ",exec=1");
            args[i + 1] = p;
            g_plugin_arg = i + 1;
        }
    }
    g_qemu_args = args;
    g_qemu_nargs = before_0;
}

/* The file at `path` is an x86-64 ELF file. */
static int is_x86_64_elf(const char *path)
{
    unsigned char h[20];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = pread(fd, h, sizeof h, 0);
    close(fd);
    return r == (ssize_t)sizeof h && !memcmp(h, "\x7f" "ELF", 4) && h[4] == 2 && h[18] == 62 && h[19] == 0;
}

/* A `#!` line (the kernel's rules: the first 256 bytes; the interpreter, then at most one
 * argument, the rest of the line with its ends' blanks stripped). 0 if `path` is no script. */
static int shebang(const char *path, char interp[256], char arg[256])
{
    char b[257];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = pread(fd, b, 256, 0);
    close(fd);
    if (r < 2 || b[0] != '#' || b[1] != '!')
        return 0;
    b[r] = 0;
    char *nl = strchr(b, '\n');
    if (nl)
        *nl = 0;
    char *p = b + 2;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, " \t");
    if (n == 0 || n >= 256)
        return 0;
    memcpy(interp, p, n);
    interp[n] = 0;
    p += n;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t m = strlen(p);
    while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
        m--;
    memcpy(arg, p, m);
    arg[m] = 0;
    return 1;
}

/* The guest's NULL-terminated array of strings at `gaddr`, as host pointers (the strings stay
 * in guest memory, which is host memory at guest_base: the kernel checks them at the exec).
 * NULL if the array cannot be read. */
static char **guest_strings(uint64_t gaddr, size_t *count)
{
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t n = 0, cap = 64;
    char **v = malloc(cap * sizeof *v);
    for (;; n++) {
        uint64_t p;
        if (!v || n > (1u << 20) ||
            pread(fd, &p, 8, (off_t)(gaddr + g_guest_base + 8 * n)) != 8) {
            free(v);
            v = NULL;
            break;
        }
        if (n + 1 == cap)
            v = realloc(v, (cap *= 2) * sizeof *v);
        if (!v)
            break;
        v[n] = p ? (char *)(uintptr_t)(p + g_guest_base) : NULL;
        if (!p)
            break;
    }
    close(fd);
    *count = n;
    return v;
}

/* The descriptors QEMU's next instance needs open across the exec (or closed at it again). */
static void keep_across_exec(int keep)
{
    int fds[] = {g_so, g_ring_fd, g_out, g_in, g_shm};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFD, keep ? 0 : FD_CLOEXEC);
}

/* The guest's execve(path, argv at gargv, envp at genvp) is about to run (its K_EXEC sent):
 * exec QEMU on the new image instead, if it can be emulated. Returns only if it was not. */
static void follow_exec(const char *path, uint64_t gargv, uint64_t genvp)
{
    struct stat st;
    char interp[256], iarg[256];
    if (!g_qemu_nargs || g_gone || g_fds_changed || !g_ring || !path[0] || stat(path, &st) != 0 ||
        !S_ISREG(st.st_mode) || (st.st_mode & (S_ISUID | S_ISGID)) || access(path, X_OK) != 0)
        return;
    int script = shebang(path, interp, iarg);
    if (!is_x86_64_elf(script ? interp : path))
        return;
    size_t argc = 0, envc = 0;
    char **argv = gargv ? guest_strings(gargv, &argc) : calloc(1, sizeof(char *));
    char **envp = genvp ? guest_strings(genvp, &envc) : calloc(1, sizeof(char *));
    char **a = calloc(g_qemu_nargs + argc + 2 * envc + 8, sizeof *a);
    char **qenv = calloc(envc + 1, sizeof *qenv);
    if (argv && envp && a && qenv) {
        size_t k = 0, q = 0;
        a[k++] = g_qemu_args[0];
        /* As the analyzer's launch (launch.rs, qemu_environment): QEMU's environment is the
         * guest's reversed (QEMU 7.2 reverses it), without the QEMU_* variables, which QEMU would
         * take as its own options; those go to the guest by -E (first in its environment). */
        for (size_t i = envc; i-- > 0;) {
            if (strncmp(envp[i], "QEMU_", 5) != 0)
                qenv[q++] = envp[i];
            else if (!strchr(envp[i], ','))
                a[k++] = "-E", a[k++] = envp[i];
        }
        qenv[q] = NULL;
        /* The new image's name (process.c): its file's, as the kernel would give it. */
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        char plugin[PATH_MAX + 64];
        for (size_t i = 1; i < g_qemu_nargs; i++)
            a[k++] = g_qemu_args[i];
        if (g_plugin_arg && !strchr(base, ',') &&
            snprintf(plugin, sizeof plugin, "%s,comm=%.15s", g_qemu_args[g_plugin_arg], base) <
                (int)sizeof plugin)
            a[k - g_qemu_nargs + g_plugin_arg] = plugin;
        a[k++] = "-0";
        if (script) {
            /* As the kernel: interpreter [argument] script arguments-after-the-first. */
            a[k++] = interp;
            a[k++] = interp;
            if (iarg[0])
                a[k++] = iarg;
        } else {
            a[k++] = argc ? argv[0] : "";
        }
        a[k++] = (char *)path;
        for (size_t i = 1; i < argc; i++)
            a[k++] = argv[i];
        a[k] = NULL;
        keep_across_exec(1);
        execve(g_qemu_exe, a, qenv);
        keep_across_exec(0); /* failed: QEMU's own exec tries it, natively */
    }
    free(qenv);
    free(a);
    free(argv);
    free(envp);
}
