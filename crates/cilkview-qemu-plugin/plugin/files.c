/*
 * files.c -- the guest's mapped files and their probes, asked from the analyzer.
 * Part of cilkview_plugin.c, which includes it (one translation unit, so the hot paths inline).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

/* ------------------------- mapped files and probes ------------------------- */

struct probe {
    uint64_t gaddr;
    uint64_t index;
    int32_t operand; /* DWARF register or -1 */
    int32_t ra;      /* 1: report the return address (see mark_ra_cb) */
};

struct file {
    char dev[16];
    uint64_t inode;
    char *path;
    uint64_t base, lo, hi; /* host: lowest mapping, span of its contiguous mappings */
    int dead;
    size_t n;
    struct probe *probes; /* sorted by gaddr */
    size_t nentries;
    uint64_t *entries; /* guest addresses of the functions of `ra` probes, sorted */
};

static struct file *files;
static size_t nfiles, capfiles;
/* Executable code outside any file (anonymous memory): host ranges, no probes. */
static uint64_t (*anon)[2];
static size_t nanon, capanon;

struct mapline {
    uint64_t lo, hi, inode;
    char perms[5];
    char dev[16];
    const char *path; /* "" if none */
};

static char *maps_text;
static struct mapline *maps;
static size_t nmaps, capmaps;

static void read_maps(void)
{
    static size_t cap;
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        die("cannot open /proc/self/maps");
    size_t len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 1 << 16;
            maps_text = realloc(maps_text, cap);
            if (!maps_text)
                die("out of memory");
        }
        ssize_t r = read(fd, maps_text + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    maps_text[len] = 0;
    nmaps = 0;
    for (char *line = maps_text; *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        struct mapline m;
        int pos = 0;
        unsigned long long lo, hi, off, inode;
        memset(&m, 0, sizeof m);
        if (sscanf(line, "%llx-%llx %4s %llx %15s %llu %n", &lo, &hi, m.perms, &off, m.dev, &inode,
                   &pos) >= 6) {
            m.lo = lo;
            m.hi = hi;
            m.inode = inode;
            m.path = pos > 0 ? line + pos : "";
            if (nmaps == capmaps) {
                capmaps = capmaps ? capmaps * 2 : 256;
                maps = realloc(maps, capmaps * sizeof *maps);
                if (!maps)
                    die("out of memory");
            }
            maps[nmaps++] = m;
        }
        if (!nl)
            break;
        line = nl + 1;
    }
}

static int same_file(const struct mapline *a, const struct mapline *b)
{
    return a->inode == b->inode && !strcmp(a->dev, b->dev) && !strcmp(a->path, b->path);
}

static long find_map(uint64_t h)
{
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].lo <= h && h < maps[i].hi)
            return (long)i;
    return -1;
}

/* The contiguous run of mappings of the same file around maps[i]. */
static void file_span(size_t i, uint64_t *lo, uint64_t *hi)
{
    size_t a = i, b = i;
    while (a > 0 && maps[a - 1].hi == maps[a].lo && same_file(&maps[a - 1], &maps[i]))
        a--;
    while (b + 1 < nmaps && maps[b].hi == maps[b + 1].lo && same_file(&maps[b + 1], &maps[i]))
        b++;
    *lo = maps[a].lo;
    *hi = maps[b].hi;
}

static struct file *live_file_at(uint64_t h)
{
    for (size_t i = 0; i < nfiles; i++)
        if (!files[i].dead && files[i].lo <= h && h < files[i].hi)
            return &files[i];
    return NULL;
}

static int cmp_probe(const void *a, const void *b)
{
    const struct probe *x = a, *y = b;
    return x->gaddr < y->gaddr ? -1 : x->gaddr > y->gaddr;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ask the analyzer for the probes of the file mapped at maps[i] (a new one). */
static struct file *request(size_t i)
{
    uint64_t lo, hi;
    file_span(i, &lo, &hi);
    const char *path = maps[i].path;
    size_t plen = strlen(path);
    if (plen > 3000)
        die("mapped file path too long");
    uint64_t w[2 + 3000 / 8 + 1];
    memset(w, 0, sizeof w);
    uint64_t head[3] = {1, 0, 0}; /* status, first index, count */
    if (g_in < 0) {
        /* The program closed the reply pipe (fds.c): no probes; the analyzer names the file. */
        w[0] = ctrl(K_UNSEEN, plen);
        memcpy(&w[1], path, plen);
        write_chunk(tid_now(), w, 1 + (unsigned)((plen + 7) / 8));
    } else {
        w[0] = ctrl(K_REQUEST, plen);
        w[1] = lo;
        memcpy(&w[2], path, plen);
        write_chunk(tid_now(), w, 2 + (unsigned)((plen + 7) / 8));
        read_all(head, sizeof head);
    }
    if (nfiles == capfiles) {
        capfiles = capfiles ? capfiles * 2 : 32;
        files = realloc(files, capfiles * sizeof *files);
        if (!files)
            die("out of memory");
    }
    struct file *f = &files[nfiles++];
    memset(f, 0, sizeof *f);
    snprintf(f->dev, sizeof f->dev, "%s", maps[i].dev);
    f->inode = maps[i].inode;
    f->path = strdup(path);
    f->base = f->lo = lo;
    f->hi = hi;
    if (head[0] != 0)
        f->n = 0; /* the analyzer refused (it stops the run) */
    else
        f->n = head[2];
    f->probes = calloc(f->n ? f->n : 1, sizeof *f->probes);
    f->entries = calloc(f->n ? f->n : 1, sizeof *f->entries);
    if (!f->probes || !f->entries)
        die("out of memory");
    /* Per probe: offset, operand register or all ones, function entry or all ones; read at once
     * (a read per probe was a system call per probe while QEMU waits). */
    uint64_t (*reply)[3] = malloc((f->n ? f->n : 1) * sizeof *reply);
    if (!reply)
        die("out of memory");
    read_all(reply, f->n * sizeof *reply);
    for (size_t k = 0; k < f->n; k++) {
        const uint64_t *p = reply[k];
        f->probes[k].gaddr = lo - g_guest_base + p[0];
        f->probes[k].index = head[1] + k;
        f->probes[k].operand = p[1] > 15 ? -1 : (int32_t)p[1];
        f->probes[k].ra = p[2] != UINT64_MAX;
        if (f->probes[k].ra)
            f->entries[f->nentries++] = lo - g_guest_base + p[2];
    }
    free(reply);
    qsort(f->probes, f->n, sizeof *f->probes, cmp_probe);
    qsort(f->entries, f->nentries, sizeof *f->entries, cmp_u64);
    return f;
}

static int known(size_t i)
{
    uint64_t lo, hi;
    file_span(i, &lo, &hi);
    for (size_t k = 0; k < nfiles; k++)
        if (!files[k].dead && files[k].base == lo && files[k].inode == maps[i].inode &&
            !strcmp(files[k].dev, maps[i].dev) && !strcmp(files[k].path, maps[i].path))
            return 1;
    return 0;
}

/* Files newly mapped executable in the host range [lo, hi), in address order. (The
 * guest asked for PROT_EXEC; QEMU need not give the host mapping execute permission.) */
static void scan_range(uint64_t lo, uint64_t hi)
{
    read_maps();
    for (size_t i = 0; i < nmaps; i++)
        if (maps[i].lo < hi && lo < maps[i].hi && maps[i].path[0] == '/' &&
            !known(i))
            request(i);
}

/* The host range [lo, hi) was unmapped or moved: forget the files whose lowest
 * mapping is gone (their indices are not reused), and anonymous ranges there. */
static void forget_range(uint64_t lo, uint64_t hi)
{
    read_maps();
    for (size_t k = 0; k < nfiles; k++) {
        struct file *f = &files[k];
        if (f->dead || !(f->lo < hi && lo < f->hi))
            continue;
        long i = find_map(f->base);
        if (i < 0 || maps[i].lo != f->base || maps[i].inode != f->inode || strcmp(maps[i].path, f->path))
            f->dead = 1;
        else {
            uint64_t a, b;
            file_span((size_t)i, &a, &b);
            f->hi = b;
        }
    }
    for (size_t k = 0; k < nanon;)
        if (anon[k][0] < hi && lo < anon[k][1])
            anon[k][0] = anon[--nanon][0], anon[k][1] = anon[nanon][1];
        else
            k++;
}

/* Where the code at host address h comes from: a known file, NULL for anonymous memory. */
static struct file *file_of_code(uint64_t h)
{
    struct file *f = live_file_at(h);
    if (f)
        return f;
    for (size_t k = 0; k < nanon; k++)
        if (anon[k][0] <= h && h < anon[k][1])
            return NULL;
    read_maps();
    long i = find_map(h);
    if (i >= 0 && maps[i].path[0] == '/')
        return request((size_t)i);
    if (nanon == capanon) {
        capanon = capanon ? capanon * 2 : 16;
        anon = realloc(anon, capanon * sizeof *anon);
        if (!anon)
            die("out of memory");
    }
    anon[nanon][0] = i >= 0 ? maps[i].lo : h;
    anon[nanon][1] = i >= 0 ? maps[i].hi : h + 1;
    nanon++;
    return NULL;
}

/* In a QEMU the plugin exec'd (exec.c): tell the analyzer a new image begins, and wait for its
 * word, skipping any reply before it (to a request of a thread the exec ended). */
static void announce_image(void)
{
    uint64_t w = ctrl(K_IMAGE, 0);
    write_chunk(tid_now(), &w, 1);
    for (;;) {
        uint64_t head[3]; /* status (2: this word), first index, count */
        read_all(head, sizeof head);
        if (head[0] == 2)
            return;
        for (uint64_t k = 0; k < head[2]; k++) {
            uint64_t p[3];
            read_all(p, sizeof p);
        }
    }
}

/* The first block: learn guest_base; announce the executable, then its loader. */
static void start(uint64_t vaddr, uint64_t haddr)
{
    if (g_execed)
        announce_image();
    g_guest_base = haddr - vaddr;
    read_maps();
    long exe = find_map(qemu_plugin_start_code() + g_guest_base);
    if (exe >= 0 && maps[exe].path[0] == '/')
        request((size_t)exe);
    read_maps();
    long ld = find_map(qemu_plugin_entry_code() + g_guest_base);
    if (ld >= 0 && maps[ld].path[0] == '/' && !known((size_t)ld))
        request((size_t)ld);
    uint64_t w = ctrl(K_START, 0);
    write_chunk(tid_now(), &w, 1);
    g_started = 1;
}

static int is_rep_string(const uint8_t *b, size_t n)
{
    int rep = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = b[i];
        if (c == 0xf2 || c == 0xf3)
            rep = 1;
        else if (c == 0x66 || c == 0x67 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 ||
                 c == 0x64 || c == 0x65 || c == 0xf0 || (c >= 0x40 && c <= 0x4f))
            continue;
        else
            return rep && ((c >= 0x6c && c <= 0x6f) || (c >= 0xa4 && c <= 0xa7) || (c >= 0xaa && c <= 0xaf));
    }
    return 0;
}

