/*
 * count_plugin.c -- the floor of exact counting under QEMU 7.2, for scripts/bench.sh: a TCG
 * plugin that only adds each translation block's length to one counter inline at its entry, as
 * the cilkview plugin does while the program has one thread, and reports no mark. Bare QEMU,
 * QEMU with this plugin and `--counter emulate` side by side tell what the counting itself
 * costs and what the marks' callbacks, the ring and the analysis add.
 *
 * Built by bench.sh: cc -O2 -shared -fPIC -I crates/cilkview-qemu-plugin/plugin
 *
 * SPDX-License-Identifier: GPL-2.0-or-later (it uses QEMU's plugin API header)
 */
#include <stdint.h>
#include <stdio.h>

#include "qemu_plugin_v1.h"

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

static uint64_t count;

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &count,
                                             qemu_plugin_tb_n_insns(tb));
}

/* With `verbose` as an argument: the count, on stderr, at the end. */
static void at_exit(qemu_plugin_id_t id, void *verbose)
{
    (void)id;
    if (verbose)
        fprintf(stderr, "count_plugin: %llu instructions\n", (unsigned long long)count);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                           char **argv)
{
    (void)info;
    (void)argv;
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, argc > 0 ? (void *)1 : NULL);
    return 0;
}
