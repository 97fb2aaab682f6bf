/*
 * counting.c -- counting instructions per thread and reporting the marks hit (the execution callbacks).
 * Part of cilkview_plugin.c, which includes it (one translation unit, so the hot paths inline).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

/* ---------------------------- counting ---------------------------- */

/*
 * Two ways to count a block's instructions at its entry:
 *
 * - inline (while the program has one thread): the block adds its length to the first thread's
 *   count with an inline TCG add, no call. QEMU 7.2's inline adds go to one fixed address for
 *   every thread, so they are exact only while a single thread runs.
 * - a callback per block (tb_cb), which adds to the executing thread's own count: exact with any
 *   number of threads, about twice bare QEMU's time on integer code.
 *
 * When the second vCPU is created (in the parent, inside its clone syscall), new translations
 * switch to callbacks and qemu_plugin_reset flushes the code cache, so the inline blocks go.
 * The flush is asynchronous: it runs in an exclusive section once the parent re-enters its
 * execution loop, which it leaves at once (the queued work kicks it) without executing a block.
 * Until then, the window, only the new thread can run inline blocks, and they add to the first
 * thread's count: everything added there beyond its value at the clone (g_window_base) is the
 * new thread's, moved to it by settle() before any of its counts is read and once more when the
 * flush is done. (Measured on QEMU 7.2: the flush always came before the new thread ran a
 * block, so nothing had to move; settle() keeps the counts exact if it ever does.)
 */

/* A block was entered: add its instructions (udata: how many). */
static void tb_cb(unsigned int vcpu, void *ud) { vs[vcpu]->count += (uintptr_t)ud; }

/* Give the window's thread what the inline blocks added for it to the first thread's count. */
static inline void settle(unsigned vcpu)
{
    if (unlikely(g_window) && vcpu == g_window_vcpu) {
        struct vstate *first = vs[0];
        vs[vcpu]->count += first->count - g_window_base;
        first->count = g_window_base;
    }
}

/* The reset is done (exclusive: no thread runs guest code), the code cache flushed: every block
 * from now on counts through tb_cb. QEMU dropped the plugin's callbacks: install them again. */
static void after_reset(qemu_plugin_id_t id)
{
    settle(g_window_vcpu);
    g_window = 0;
    register_callbacks(id);
}

/* vCPU `vcpu`, the program's second thread, is being created by the first (vCPU 0), which is
 * inside its clone syscall and executes nothing until the flush is done. */
static void leave_inline_counting(unsigned vcpu)
{
    g_inline = 0;
    g_window_base = vs[0]->count;
    g_window_vcpu = vcpu;
    g_window = 1;
    qemu_plugin_reset(g_id, after_reset);
}

/* An instruction counted on its own (one that may be a page-crossing phantom). */
static void one_cb(unsigned int vcpu, void *ud)
{
    (void)ud;
    vs[vcpu]->count += 1;
}

/* A block that starts with a REP string instruction at `ud` (the block is that
 * one instruction). QEMU runs each iteration as one execution of this block;
 * the instruction retires once. A continuation: the previous block this
 * thread executed was this instruction and nothing counted since. */
static void rep_tb_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    if (!(s->rep_pc == (uintptr_t)ud && s->rep_at == s->count))
        s->count += 1;
}

/* After the REP string instruction at `ud` (the last of its block) started. */
static void rep_insn_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    s->rep_pc = (uintptr_t)ud;
    s->rep_at = s->count;
}

static void push_hit(struct vstate *s, uint64_t idx, uint64_t cost, int has_op, uint64_t op)
{
    if (likely(idx < (1ull << HIT_PROBE_BITS) && cost < (1ull << HIT_COST_BITS))) {
        uint64_t w[2] = {(cost << 26) | (idx << 2) | (has_op ? TAG_HIT_OP : TAG_HIT), op};
        push(s, w, has_op ? 2 : 1);
    } else {
        uint64_t w[4] = {ctrl(K_BIGHIT, has_op ? 1 : 0), idx, cost, op};
        push(s, w, has_op ? 4 : 3);
    }
}

/* What the hot callbacks cannot do in place (a cost too large for a small hit, a full buffer):
 * the hit of probe `idx` with `cost`, the general way; then the thread's count becomes `tail`.
 * Apart, so that the callbacks' fast paths need no stack frame. */
static __attribute__((noinline)) void hit_slow(struct vstate *s, uint64_t idx, uint64_t cost,
                                               uint64_t tail)
{
    push_hit(s, idx, cost, 0, 0);
    s->count = tail;
}

/* Half a word of small hits (bits 0-31: TAG_PAIR, the probe index `idx` < 2^SMALL_PROBE_BITS,
 * the cost from SMALL_COST_SHIFT) without its cost. */
#define SMALL_COST_SHIFT (SMALL_PROBE_BITS + 2)
static inline uint64_t small_half(uint64_t idx) { return (idx << 2) | TAG_PAIR; }

/* After the hot callbacks' stores of whole words: publish the thread's buffer length and set its
 * count to `count`. The compiler barrier keeps the records' stores before the length's: a reader
 * of the shared slot after a crash sees whole records only. */
static inline void publish_small(struct vstate *s, uint32_t len, uint64_t count)
{
    __asm__ volatile("" ::: "memory");
    s->len = len;
    s->count = count;
}

/* A small hit of `half` (see small_half) with `cost` in a word of its own (upper half zero: no
 * state carried from one callback to the next); then the thread's count becomes `tail`. */
static inline void small_hit(struct vstate *s, uint64_t half, uint64_t cost, uint64_t tail)
{
    uint32_t len = s->len;
    if (unlikely((cost >> SMALL_COST_BITS) | (len + 2 > BUF_WORDS)))
        return hit_slow(s, half >> 2, cost, tail);
    s->buf[len + 1] = (cost << SMALL_COST_SHIFT) | half;
    publish_small(s, len + 1, tail);
}

/* A mark: udata = small_half(probe index) << TAIL_BITS | tail, where tail is how many of the
 * instructions already added for this block are at or after the mark (the mark's NOP belongs to
 * the following strand). The hot path: about twenty instructions, no stack. */
static void mark_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1);
    small_hit(s, u >> TAIL_BITS, s->count - tail, tail);
}

/* The first mark of a folded block (see translate.c): the block added nothing at its entry, so
 * the `before` instructions ahead of the mark go to the cost here and the rest (`tail`) to the
 * count. udata = small_half(probe index) << 2 TAIL_BITS | before << TAIL_BITS | tail. */
static void mark_first_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), before = (u >> TAIL_BITS) & ((1u << TAIL_BITS) - 1);
    small_hit(s, u >> (2 * TAIL_BITS), s->count + before, tail);
}

/* A mark whose probe index is too large for a small hit (udata: index << TAIL_BITS | tail). */
static void mark_big_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1);
    hit_slow(s, u >> TAIL_BITS, s->count - tail, tail);
}

/* Marks of one block with nothing else instrumented between the first and the last: one
 * callback, at the last, reports them all (a helper call per mark is most of what a mark costs in
 * QEMU). Nothing between them changes the thread's count, so each cost is known from the tails:
 * the first is count - tail[0] (count + the instructions before it in a folded block), the
 * others tail[i-1] - tail[i] (< 2^TAIL_BITS), known when the block is translated: their words
 * are made then, two hits to a word, all but the first hit's cost. A block is left in the middle
 * only by a fault, which ends the program unless it handles the signal. */
struct mark_run {
    uint32_t n;        /* marks, >= 2, each with a probe index < 2^SMALL_PROBE_BITS */
    uint32_t words;    /* (n + 1) / 2 */
    uint64_t minus0;   /* the first mark's cost is the count minus this: its tail, or in a folded
                        * block (translate.c) minus the instructions before it, wrapping */
    uint64_t tail_end; /* the last mark's tail: the thread's count after the run */
    uint64_t word[];   /* the run's words; word[0] | cost << SMALL_COST_SHIFT completes the first */
};

/* The general way of mark_pair_cb and mark_run_cb (see hit_slow): the first mark's cost is
 * `cost`; every hit apart, as push_hit takes it. */
static __attribute__((noinline)) void mark_run_slow(struct vstate *s, const struct mark_run *r,
                                                    uint64_t cost)
{
    for (uint32_t i = 0; i < r->n; i++) {
        uint32_t h = (uint32_t)(r->word[i / 2] >> (32 * (i % 2)));
        hit_slow(s, (h >> 2) & ((1u << SMALL_PROBE_BITS) - 1), i ? h >> SMALL_COST_SHIFT : cost, 0);
    }
    s->count = r->tail_end;
}

/* A run of two marks (fib's blocks: function entry + spawn, sync + function exit): the hottest
 * callback, one word. */
static void mark_pair_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    const struct mark_run *r = ud;
    uint64_t cost = s->count - r->minus0;
    uint32_t len = s->len;
    if (unlikely((cost >> SMALL_COST_BITS) | (len + 2 > BUF_WORDS)))
        return mark_run_slow(s, r, cost);
    s->buf[len + 1] = (cost << SMALL_COST_SHIFT) | r->word[0];
    publish_small(s, len + 1, r->tail_end);
}

/* A run of more than two marks. */
static void mark_run_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    const struct mark_run *r = ud;
    uint64_t cost = s->count - r->minus0;
    uint32_t len = s->len, words = r->words;
    if (unlikely((cost >> SMALL_COST_BITS) | (len + words + 1 > BUF_WORDS)))
        return mark_run_slow(s, r, cost);
    s->buf[len + 1] = (cost << SMALL_COST_SHIFT) | r->word[0];
    for (uint32_t i = 1; i < words; i++)
        s->buf[len + 1 + i] = r->word[i];
    publish_small(s, len + words, r->tail_end);
}

/* QEMU's register order (R_EAX, R_ECX, R_EDX, R_EBX, R_ESP, R_EBP, R_ESI, R_EDI, r8..) for
 * each DWARF x86-64 register number (rax, rdx, rcx, rbx, rsi, rdi, rbp, rsp, r8..). */
static const uint8_t qemu_reg_of_dwarf[16] = {0, 2, 1, 3, 6, 7, 5, 4, 8, 9, 10, 11, 12, 13, 14, 15};

/* A mark with an operand; it begins its block, so every guest register is in
 * CPUX86State. `env`: TCG's env pointer (see the trampoline below);
 * CPUX86State starts with `target_ulong regs[16]` in QEMU 7.2. udata =
 * probe index << 14 | DWARF register << TAIL_BITS | tail. */
__attribute__((used, visibility("hidden"))) void cv_mark_op_cb(unsigned int vcpu, void *ud,
                                                              const uint64_t *env)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), reg = (u >> TAIL_BITS) & 15, idx = u >> 14;
    uint64_t cost = s->count - tail;
    s->count = tail;
    push_hit(s, idx, cost, 1, env[qemu_reg_of_dwarf[reg]]);
}

/* TCG on an x86-64 host keeps env (TCG_AREG0) in %rbp in generated code and
 * calls plugin callbacks directly from it; %rbp is callee-saved, so at our
 * entry it still holds env. Pass it as the third argument. */
void cv_mark_op_tramp(unsigned int vcpu, void *ud);
__asm__(".text\n"
        ".p2align 4\n"
        ".type cv_mark_op_tramp,@function\n"
        "cv_mark_op_tramp:\n"
        "    mov %rbp, %rdx\n"
        "    jmp cv_mark_op_cb\n"
        ".size cv_mark_op_tramp, .-cv_mark_op_tramp\n");

/* A function entry mark's probe (call-site profiles): report the return address the thread
 * read when it last entered the function (see cv_entry_cb), if it could. */
static void mark_ra_cb(unsigned int vcpu, void *ud)
{
    settle(vcpu);
    struct vstate *s = vs[vcpu];
    uint64_t u = (uintptr_t)ud;
    uint64_t tail = u & ((1u << TAIL_BITS) - 1), idx = u >> TAIL_BITS;
    uint64_t cost = s->count - tail, ra = s->ra;
    s->count = tail;
    s->ra = NO_RA;
    push_hit(s, idx, cost, ra != NO_RA, ra);
}

/* The entry of a function whose entry mark reports the return address. A call
 * target begins a translation block, so env holds every guest register:
 * the return address is at guest [rsp] (env->regs[R_ESP]), which in user mode
 * is host memory at guest_base + rsp. udata: the load address (guest) of the
 * function's file, so the value kept is file-relative. */
__attribute__((used, visibility("hidden"))) void cv_entry_cb(unsigned int vcpu, void *ud,
                                                            const uint64_t *env)
{
    uint64_t rsp = env[4];
    uint64_t ra;
    memcpy(&ra, (const void *)(uintptr_t)(rsp + g_guest_base), 8);
    vs[vcpu]->ra = ra - (uint64_t)(uintptr_t)ud;
}

void cv_entry_tramp(unsigned int vcpu, void *ud);
__asm__(".text\n"
        ".p2align 4\n"
        ".type cv_entry_tramp,@function\n"
        "cv_entry_tramp:\n"
        "    mov %rbp, %rdx\n"
        "    jmp cv_entry_cb\n"
        ".size cv_entry_tramp, .-cv_entry_tramp\n");

/* A function entry inside a block (reached by falling through): registers are
 * not readable exactly there, so the return address is unknown. */
static void entry_unknown_cb(unsigned int vcpu, void *ud)
{
    (void)ud;
    vs[vcpu]->ra = NO_RA;
}

/* A mark whose operand cannot be read exactly (it does not begin its block). */
static void mark_no_operand_cb(unsigned int vcpu, void *ud)
{
    struct vstate *s = vs[vcpu];
    uint64_t w = ctrl(K_NO_OPERAND, (uintptr_t)ud);
    push(s, &w, 1);
    flush(s);
}

