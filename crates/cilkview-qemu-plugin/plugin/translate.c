/*
 * translate.c -- instrumenting each translation block: its count, its marks, function entries.
 * Part of cilkview_plugin.c, which includes it (one translation unit, so the hot paths inline).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

static const uint8_t MARK_NOP[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};

/* Plain marks (no operand, no return address, an index that fits a small hit) met in a block
 * and not instrumented yet: the instructions, probe indices and tails. */
struct pending_marks {
    size_t n;
    struct qemu_plugin_insn *insn[512];
    uint32_t index[512], tail[512];
};

/*
 * Folded blocks. A block counts its instructions at its entry (an inline add, or tb_cb once the
 * program has threads), and each mark's callback takes its cost from the count. A block whose
 * first callback that reads the count is a run of small marks needs no count at its entry: that
 * callback adds the instructions before the first mark itself (mark_first_cb, or minus0 in a
 * run), and sets the count to the rest, as it does anyway. So fib's blocks, which are mostly
 * marked, save the add (or, with threads, a call) at their entry. What differs is a block left
 * in the middle, by a fault before its first mark: the instructions it executed before the fault
 * are not counted, where an unfolded block counts those after the fault that it did not execute
 * (either way the program ends unless it handles the signal). Blocks with an instruction counted
 * apart (a page-crossing phantom, one_cb) are not folded.
 */
struct fold {
    int open;        /* nothing that reads the count instrumented yet in this block */
    int done;        /* the block's first callback takes its count */
    uint32_t counted; /* instructions the block would add at its entry */
};

/* A callback that reads the count is instrumented: the block can no longer fold. */
static inline void close_fold(struct fold *fo) { fo->open = 0; }

/* Instrument the pending marks: one callback each, or, for several, one at the last that reports
 * them all (mark_pair_cb, mark_run_cb); the block's first, if it can, folds. Called before
 * anything else is instrumented, and at the block's end. */
static void flush_marks(struct pending_marks *pm, struct fold *fo)
{
    int fold = pm->n && fo->open;
    uint64_t before = fo->counted - pm->tail[0]; /* if it folds */
    if (pm->n)
        fo->open = 0, fo->done |= fold;
    if (pm->n == 1) {
        uint64_t half = small_half(pm->index[0]);
        if (fold)
            qemu_plugin_register_vcpu_insn_exec_cb(
                pm->insn[0], mark_first_cb, QEMU_PLUGIN_CB_NO_REGS,
                (void *)(uintptr_t)((half << (2 * TAIL_BITS)) | (before << TAIL_BITS) | pm->tail[0]));
        else
            qemu_plugin_register_vcpu_insn_exec_cb(pm->insn[0], mark_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)((half << TAIL_BITS) | pm->tail[0]));
    } else if (pm->n > 1) {
        uint32_t words = (uint32_t)(pm->n + 1) / 2;
        struct mark_run *r = calloc(1, sizeof *r + words * sizeof r->word[0]);
        if (!r)
            die("out of memory");
        r->n = (uint32_t)pm->n;
        r->words = words;
        r->minus0 = fold ? (uint64_t)0 - before : pm->tail[0];
        r->tail_end = pm->tail[pm->n - 1];
        for (size_t i = 0; i < pm->n; i++) {
            uint64_t cost = i ? pm->tail[i - 1] - pm->tail[i] : 0;
            uint64_t h = (cost << SMALL_COST_SHIFT) | small_half(pm->index[i]);
            r->word[i / 2] |= h << (32 * (i % 2));
        }
        qemu_plugin_register_vcpu_insn_exec_cb(pm->insn[pm->n - 1], pm->n == 2 ? mark_pair_cb : mark_run_cb,
                                               QEMU_PLUGIN_CB_NO_REGS, r);
    }
    pm->n = 0;
}

/* The index of the first probe of file `f` at or after guest address `v`. */
static size_t first_probe_from(const struct file *f, uint64_t v)
{
    size_t a = 0, b = f->n;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (f->probes[m].gaddr < v)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* The index of the first wanted function entry of file `f` at or after guest address `v`. */
static size_t first_entry_from(const struct file *f, uint64_t v)
{
    size_t a = 0, b = f->nentries;
    while (a < b) {
        size_t m = (a + b) / 2;
        if (f->entries[m] < v)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* The callback of mark `p` at instruction `insn` (the block's `i`-th), `tail` block-counted
 * instructions from its end: a plain small hit joins the pending run `pm`, others close the
 * run and the fold and get their own callback. */
static void register_mark(struct qemu_plugin_insn *insn, size_t i, const struct probe *p, uint64_t tail,
                          struct pending_marks *pm, struct fold *fo)
{
    if (!p->ra && p->operand < 0 && p->index < (1u << SMALL_PROBE_BITS)) {
        pm->insn[pm->n] = insn;
        pm->index[pm->n] = (uint32_t)p->index;
        pm->tail[pm->n] = (uint32_t)tail;
        pm->n++;
        return;
    }
    flush_marks(pm, fo);
    close_fold(fo);
    if (p->ra)
        qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_ra_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)((p->index << TAIL_BITS) | tail));
    else if (p->operand < 0) /* a probe index too large for a small hit */
        qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_big_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)((p->index << TAIL_BITS) | tail));
    else if (i == 0)
        qemu_plugin_register_vcpu_insn_exec_cb(
            insn, cv_mark_op_tramp, QEMU_PLUGIN_CB_R_REGS,
            (void *)(uintptr_t)((p->index << 14) | ((uint64_t)p->operand << TAIL_BITS) | tail));
    else
        qemu_plugin_register_vcpu_insn_exec_cb(insn, mark_no_operand_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)p->index);
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0)
        return;
    struct qemu_plugin_insn *first = qemu_plugin_tb_get_insn(tb, 0);
    uint64_t v0 = qemu_plugin_insn_vaddr(first);
    uint64_t h0 = (uint64_t)(uintptr_t)qemu_plugin_insn_haddr(first);

    /* A block that is one REP string instruction: iterations are re-executions. */
    if (n == 1 && is_rep_string(qemu_plugin_insn_data(first), qemu_plugin_insn_size(first))) {
        qemu_plugin_register_vcpu_tb_exec_cb(tb, rep_tb_cb, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)v0);
        qemu_plugin_register_vcpu_insn_exec_cb(first, rep_insn_cb, QEMU_PLUGIN_CB_NO_REGS,
                                               (void *)(uintptr_t)v0);
        return;
    }

    pthread_mutex_lock(&g_map_lock);
    if (!g_started)
        start(v0, h0);
    struct file *f = file_of_code(h0);
    pthread_mutex_unlock(&g_map_lock);

    /* Phantom fix: an instruction (not the first) that starts within 15 bytes of
     * a page end may be dropped from the block while still listed; count it
     * with its own callback, which runs only if it executes here. */
    uint8_t alone[512];
    size_t counted = 0;
    for (size_t i = 0; i < n && i < 512; i++) {
        uint64_t v = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i));
        alone[i] = i > 0 && (v & 0xfff) > 0xfff - 15;
        counted += !alone[i];
    }
    struct fold fo = {.open = counted == n, .done = 0, .counted = (uint32_t)counted};

    /* Probes of this block, and function entries whose return address is wanted, if its
     * file has any. */
    uint64_t vlast = qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, n - 1));
    struct probe *p = NULL, *pend = NULL;
    if (f && f->n) {
        p = f->probes + first_probe_from(f, v0);
        pend = p;
        while (pend < f->probes + f->n && pend->gaddr <= vlast)
            pend++;
    }
    uint64_t *e = NULL, *eend = NULL;
    if (f && f->nentries) {
        e = f->entries + first_entry_from(f, v0);
        eend = e;
        while (eend < f->entries + f->nentries && *eend <= vlast)
            eend++;
    }

    size_t after = counted; /* block-counted instructions at index >= i */
    static __thread struct pending_marks pm; /* (translation runs in the translating thread) */
    pm.n = 0;
    for (size_t i = 0; i < n && i < 512; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t v = qemu_plugin_insn_vaddr(insn);
        if (alone[i]) {
            flush_marks(&pm, &fo);
            qemu_plugin_register_vcpu_insn_exec_cb(insn, one_cb, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        while (e && e < eend && *e < v)
            e++;
        if (e && e < eend && *e == v) {
            flush_marks(&pm, &fo);
            if (i == 0)
                qemu_plugin_register_vcpu_insn_exec_cb(insn, cv_entry_tramp, QEMU_PLUGIN_CB_R_REGS,
                                                       (void *)(uintptr_t)(f->base - g_guest_base));
            else
                qemu_plugin_register_vcpu_insn_exec_cb(insn, entry_unknown_cb, QEMU_PLUGIN_CB_NO_REGS, NULL);
        }
        while (p && p < pend && p->gaddr < v)
            p++;
        if (p && p < pend && p->gaddr == v && qemu_plugin_insn_size(insn) == 5 &&
            !memcmp(qemu_plugin_insn_data(insn), MARK_NOP, 5))
            register_mark(insn, i, p, after + alone[i], &pm, &fo);
        if (i == n - 1 && is_rep_string(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn))) {
            flush_marks(&pm, &fo);
            close_fold(&fo);
            qemu_plugin_register_vcpu_insn_exec_cb(insn, rep_insn_cb, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)v);
        }
        after -= !alone[i];
    }
    flush_marks(&pm, &fo);
    if (fo.done)
        return;
    if (g_inline && vs[0])
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &vs[0]->count, counted);
    else
        qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_cb, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)counted);
}

