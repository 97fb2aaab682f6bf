/*
 * cilkview.h -- Cilkview-style parallelism annotations for C and C++ (x86-64, gcc/clang).
 *
 * Header only, no library.  Every annotation compiles to one 5-byte NOP
 * (0f 1f 44 00 00) at the marked point plus a record in the non-allocated ELF
 * section `.cilkview_marks` (never loaded; see docs/marks-format.md).  The
 * program runs serially and computes the same results as its serial elision;
 * `cilkview-rs` finds the NOPs through the records and measures work and span.
 *
 * API (the only public names):
 *
 *   cv_function();            first statement of every function that uses
 *                             cv_spawn / cv_sync.  Marks the entry and, on
 *                             every return path, the exit (the exit is an
 *                             implicit sync, as in Cilk).
 *   cv_spawn(stmt);           `stmt` (e.g. `x = f(a)` or `f(a)`) runs as a
 *                             spawned child.  Serial elision: `stmt;`.
 *   cv_sync();                waits for the children spawned by this function.
 *   cv_for (init; cond; step) body
 *                             parallel loop, used exactly like `for`
 *                             (C++ range-for works too).  Grain size 1.
 *   cv_for_grain(g, init; cond; step) body
 *                             the same with grain size g (any integer
 *                             expression, evaluated once, may be a run-time
 *                             value).
 *   cv_region_begin("label"); cv_region_end("label");
 *                             a labeled region (label: a string literal).
 *
 * Rules (as for cilk_spawn / cilk_for):
 *   - cv_spawn or cv_sync in a function without cv_function() is a compile
 *     error mentioning `cv_function_must_be_called_first_in_this_function`.
 *     (A C++ lambda inside such a function sees its enclosing function's
 *     cv_function(); give the lambda its own cv_function() if it spawns.)
 *   - The body of cv_for must not leave the loop by `break`, `return` or
 *     `goto`; `continue` is fine.  (break would end one iteration without its
 *     iteration-end mark and not end the loop.)
 *   - Iterations of cv_for and a spawned statement must not depend on each
 *     other, exactly as with cilk_for / cilk_spawn: the analyzer assumes they
 *     could run in parallel.
 *   - The spawned statement should be (or contain) a call to a function with
 *     side effects.  The marks are compiler memory barriers, so calls, loads
 *     and stores stay between them; but a call the compiler can prove to be
 *     pure/const may legally be moved across a mark, like any other
 *     side-effect-free computation.
 *   - Labels must be string literals; keep them short.
 *
 * #define CILKVIEW_DISABLE before including this header (or compile with
 * -DCILKVIEW_DISABLE) to compile every mark out: pure serial elision, no NOPs,
 * no section.  The cv_function() compile-time check stays.
 *
 * Requires C99 or C++11 or later, with GNU extensions (attributes, inline asm).
 */
#ifndef CILKVIEW_H
#define CILKVIEW_H

/* Format version of the records this header emits (docs/marks-format.md). */
#define CILKVIEW_MARKS_VERSION 1

#define CV__CAT2(a, b) a##b
#define CV__CAT(a, b) CV__CAT2(a, b)
#ifdef __COUNTER__
#define CV__UNIQUE(name) CV__CAT(name, __COUNTER__)
#else
#define CV__UNIQUE(name) CV__CAT(name, __LINE__)
#endif

/* The compile-time check: only cv_function() declares this name. */
#define CV__REQUIRE_FUNCTION() ((void)sizeof(cv_function_must_be_called_first_in_this_function))
#define CV__DECLARE_FUNCTION()                                                                     \
    typedef int cv_function_must_be_called_first_in_this_function __attribute__((unused))

#if defined(CILKVIEW_DISABLE)

/* ---------------------------- serial elision ---------------------------- */

#define cv_function() CV__DECLARE_FUNCTION()
#define cv_spawn(...)                                                                              \
    do {                                                                                           \
        CV__REQUIRE_FUNCTION();                                                                    \
        __VA_ARGS__;                                                                               \
    } while (0)
#define cv_sync() CV__REQUIRE_FUNCTION()
#define cv_for(...) for (__VA_ARGS__)
#define cv_for_grain(g, ...) for (__VA_ARGS__)
#define cv_region_begin(label) ((void)sizeof(label))
#define cv_region_end(label) ((void)sizeof(label))

#else /* marks enabled */

#if !defined(__x86_64__)
#error "cilkview.h marks are for x86-64 only; define CILKVIEW_DISABLE to compile them out"
#endif
#if !defined(__GNUC__)
#error "cilkview.h needs GNU C extensions (gcc or clang)"
#endif

/* Record kinds (docs/marks-format.md). */
#define CV__KIND_FUNCTION_ENTER 1
#define CV__KIND_FUNCTION_EXIT 2
#define CV__KIND_SPAWN 3
#define CV__KIND_SPAWN_RETURN 4
#define CV__KIND_SYNC 5
#define CV__KIND_LOOP_BEGIN 6
#define CV__KIND_ITERATION_BEGIN 7
#define CV__KIND_ITERATION_END 8
#define CV__KIND_LOOP_END 9
#define CV__KIND_REGION_BEGIN 10
#define CV__KIND_REGION_END 11
#define CV__KIND_SPAWN_AFTER 12
#define CV__KIND_WAIT_FOR 13

#define CV__STR2(x) #x
#define CV__STR(x) CV__STR2(x)

/* The 5-byte NOP (nopl 0x0(%rax,%rax,1)), labeled 1: for the record. */
#define CV__NOP_ASM "1: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"

/* A 16-byte record: version, kind, operand register, flags, length, address. */
#define CV__RECORD_ASM(kind, reg)                                                                  \
    ".pushsection .cilkview_marks,\"\",@progbits\n\t"                                              \
    ".balign 8\n\t"                                                                                \
    ".byte 1, " CV__STR(kind) ", " CV__STR(reg) ", 0\n\t"                                          \
    ".long 16\n\t"                                                                                 \
    ".quad 1b\n\t"                                                                                 \
    ".popsection\n\t"

/*
 * `asm inline` (gcc >= 9): for inlining and unrolling decisions, gcc sizes an asm
 * statement by the lines of its template, so each mark (one NOP, but 7 lines with its
 * record) would weigh like 7 instructions and stop gcc from inlining small marked
 * functions, fib's recursion included.  `inline` makes it weigh as the one instruction it
 * is.  (clang sizes asm by other means and gets nothing from it.)
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9
#define CV__ASM_INLINE __inline__
#else
#define CV__ASM_INLINE
#endif

/*
 * A plain mark: a volatile asm with a "memory" clobber.  volatile: never deleted,
 * duplicated only with its record, kept in order with the other volatile asms and with
 * calls.  "memory": loads and stores also stay on the side of the mark where the source
 * put them.  The clobber costs nothing measurable (docs/benchmarks.md): clang treats a
 * volatile asm as reading and writing memory with or without it, and for gcc dropping it
 * saved nothing on fib, qsort, nqueens or matmul.
 */
#define CV__MARK(kind)                                                                             \
    __asm__ __volatile__ CV__ASM_INLINE(CV__NOP_ASM CV__RECORD_ASM(kind, 0xff) ::: "memory")

/* Marks usable inside expressions (the loop macros need them there). */
__attribute__((always_inline, unused)) static inline int cv__mark_loop_begin(unsigned long grain)
{
    /* Operand: the grain, held in %rax (DWARF register 0) at the NOP.  The jmp
       to the NOP (one instruction) makes the NOP begin a basic block, so that an
       emulator (QEMU, which has every guest register in memory at a block's
       start) can read %rax exactly there (docs/emulation.md). */
    __asm__ __volatile__("jmp 2f\n2:\n\t" CV__NOP_ASM CV__RECORD_ASM(CV__KIND_LOOP_BEGIN, 0)
                         ::"a"(grain)
                         : "memory");
    return 0;
}

/* Before a spawn mark: the child it spawns starts only after its sibling number `sibling`
   (counted from 0 among the spawns of the current frame since its last sync) has ended.  One
   per dependence; the operand is in %rax, at a NOP that begins a basic block, as the grain. */
__attribute__((always_inline, unused)) static inline void cv__mark_spawn_after(unsigned long sibling)
{
    __asm__ __volatile__("jmp 2f\n2:\n\t" CV__NOP_ASM CV__RECORD_ASM(CV__KIND_SPAWN_AFTER, 0)
                         ::"a"(sibling)
                         : "memory");
}
/* The strand after it starts only after the current frame's child number `sibling` (among its
   spawns since its last sync, 0 = the first) ends; the other children stay out until the next
   sync (`run --openmp`'s `taskwait depend`). Operand as cv__mark_spawn_after's. */
__attribute__((always_inline, unused)) static inline void cv__mark_wait_for(unsigned long sibling)
{
    __asm__ __volatile__("jmp 2f\n2:\n\t" CV__NOP_ASM CV__RECORD_ASM(CV__KIND_WAIT_FOR, 0)
                         ::"a"(sibling)
                         : "memory");
}
__attribute__((always_inline, unused)) static inline int cv__mark_iteration_begin(void)
{
    CV__MARK(CV__KIND_ITERATION_BEGIN);
    return 0;
}
__attribute__((always_inline, unused)) static inline int cv__mark_iteration_end(void)
{
    CV__MARK(CV__KIND_ITERATION_END);
    return 1;
}
__attribute__((always_inline, unused)) static inline int cv__mark_loop_end(void)
{
    CV__MARK(CV__KIND_LOOP_END);
    return 1;
}
/* The cleanup of cv_function(): runs on every return path (and, in C++, on
 * unwinding).  always_inline, so even -O0 has no call here. */
__attribute__((always_inline, unused)) static inline void cv__function_exit(char *unused_guard)
{
    (void)unused_guard;
    CV__MARK(CV__KIND_FUNCTION_EXIT);
}

#define cv_function()                                                                              \
    CV__DECLARE_FUNCTION();                                                                        \
    CV__MARK(CV__KIND_FUNCTION_ENTER);                                                             \
    char cv__function_guard __attribute__((cleanup(cv__function_exit), unused))

#define cv_spawn(...)                                                                              \
    do {                                                                                           \
        CV__REQUIRE_FUNCTION();                                                                    \
        CV__MARK(CV__KIND_SPAWN);                                                                  \
        __VA_ARGS__;                                                                               \
        CV__MARK(CV__KIND_SPAWN_RETURN);                                                           \
    } while (0)

#define cv_sync()                                                                                  \
    do {                                                                                           \
        CV__REQUIRE_FUNCTION();                                                                    \
        CV__MARK(CV__KIND_SYNC);                                                                   \
    } while (0)

/*
 * cv_for_grain(g, init; cond; step) body  expands to
 *
 *   for (int o = loop_begin(g); !o; o = loop_end())        -- runs once
 *     for (init; cond; step)                               -- the user's loop
 *       for (int i = iteration_begin(); !i; i = iteration_end())  -- once per iteration
 *         body
 *
 * `continue` in body ends the innermost (once) loop through its step, so the
 * iteration-end mark still runs.  At -O1 and above the once-loops vanish; at
 * -O0 they cost a few instructions each.
 */
#define CV__FOR(outer, inner, g, ...)                                                              \
    for (int outer = cv__mark_loop_begin((unsigned long)(g)); !outer; outer = cv__mark_loop_end())  \
        for (__VA_ARGS__)                                                                          \
            for (int inner = cv__mark_iteration_begin(); !inner; inner = cv__mark_iteration_end())
#define cv_for_grain(g, ...) CV__FOR(CV__UNIQUE(cv__loop_), CV__UNIQUE(cv__iter_), g, __VA_ARGS__)
#define cv_for(...) cv_for_grain(1, __VA_ARGS__)

/*
 * Region marks put the label into the record.  They use basic asm (no
 * operands), so `%`, `{`, `|`, `}` in the label are taken literally, between
 * two empty "memory"-clobbering asm statements acting as compiler barriers.
 * `#label` re-quotes the string literal for the assembler.
 */
#define CV__REGION_MARK(kind, label)                                                               \
    do {                                                                                           \
        __asm__ __volatile__("" ::: "memory");                                                     \
        __asm__ __volatile__ CV__ASM_INLINE(CV__NOP_ASM                                            \
                             ".pushsection .cilkview_marks,\"\",@progbits\n\t"                     \
                             ".balign 8\n\t"                                                       \
                             "2: .byte 1, " CV__STR(kind) ", 0xff, 0\n\t"                          \
                             ".long 3f - 2b\n\t"                                                   \
                             ".quad 1b\n\t"                                                        \
                             ".asciz " #label "\n\t"                                               \
                             ".balign 8, 0\n\t"                                                    \
                             "3:\n\t"                                                              \
                             ".popsection\n\t");                                                   \
        __asm__ __volatile__("" ::: "memory");                                                     \
    } while (0)

#define cv_region_begin(label) CV__REGION_MARK(CV__KIND_REGION_BEGIN, label)
#define cv_region_end(label) CV__REGION_MARK(CV__KIND_REGION_END, label)

#endif /* CILKVIEW_DISABLE */

#endif /* CILKVIEW_H */
