/* lock_marks.h -- the marks of a lock acquired and released (docs/locks.md), placed by the
   --locks library's wrappers and by the --openmp library's critical/atomic wrappers. */
#ifndef CILKVIEW_LOCK_MARKS_H
#define CILKVIEW_LOCK_MARKS_H
#include "cilkview.h"
#include "cilkview_lock_labels.h"

/* A labelled region-begin mark whose operand, `value`, is in %rax (DWARF register 0) at a NOP
   that begins a basic block (as cilkview.h's loop begin: an emulator reads %rax exactly there). */
#define LOCK_MARK(label, value)                                                                    \
    __asm__ __volatile__("jmp 2f\n2:\n\t" CV__NOP_ASM                                              \
                         ".pushsection .cilkview_marks,\"\",@progbits\n\t"                         \
                         ".balign 8\n\t"                                                           \
                         "3: .byte 1, " CV__STR(CV__KIND_REGION_BEGIN) ", 0, 0\n\t"                \
                         ".long 4f - 3b\n\t"                                                       \
                         ".quad 1b\n\t"                                                            \
                         ".asciz \"" label "\"\n\t"                                                \
                         ".balign 8, 0\n\t"                                                        \
                         "4:\n\t"                                                                  \
                         ".popsection\n\t" ::"a"(value)                                            \
                         : "memory")

/* After a successful acquire of `lock` by the call returning to `site`. */
#define ACQUIRED(result, lock)                                                                     \
    do {                                                                                           \
        if ((result) == 0) {                                                                       \
            LOCK_MARK(LOCK_SITE_LABEL, __builtin_return_address(0));                               \
            LOCK_MARK(LOCK_ACQUIRE_LABEL, (void *)(lock));                                         \
        }                                                                                          \
    } while (0)
#define RELEASING(lock) LOCK_MARK(LOCK_RELEASE_LABEL, (void *)(lock))

#endif
