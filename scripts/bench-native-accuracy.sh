#!/usr/bin/env bash
# How close --counter native's parallelism (time) comes to --counter emulate's (instructions), and
# what on this machine takes time from a running program without a context switch. Prints:
#   - the pauses a busy loop sees (consecutive rdtsc reads more than 3 us apart) over 1 s, at the
#     normal policy and at real-time priority (chrt -f 10: no other program preempts it): how
#     many, their median and total, and the most common interval between them (4 ms: the 250 Hz
#     timer tick of CONFIG_HZ=250; pauses of a millisecond and more are preemptions, or, at
#     real-time priority, the kernel's RT throttling: 50 ms of every second a real-time task
#     spins);
#   - a markdown table: each fixture's parallelism by emulation, then ROUNDS native runs at the
#     normal policy, ROUNDS under chrt -f 10, and ROUNDS with each --repeat of REPEATS (default
#     "5 15 100": each strand's minimum over that many runs) (min-max), with the load average.
# The tool is target/release/cilkview-rs (built here) unless CILKVIEW_BIN names another.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CILKVIEW_BIN:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
fi
bin=${CILKVIEW_BIN:-target/release/cilkview-rs}
rounds=${ROUNDS:-4}
read -r -a repeats <<<"${REPEATS:-5 15 100}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
inc="-I crates/cilkview-marks/include -I fixtures"
echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
rt=(chrt -f 10)
if ! chrt -f 10 true 2>/dev/null; then
    echo "chrt -f 10: not permitted here (the real-time columns are left out)"
    rt=()
fi

cat >"$work/pauses.c" <<'EOF'
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>
static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
int main(void) {
    double n0 = now_ns();
    uint64_t c0 = __rdtsc();
    while (now_ns() - n0 < 2e7) {}
    double ghz = (__rdtsc() - c0) / (now_ns() - n0);
    static double at[200000], len[200000], gap[200000];
    int n = 0;
    uint64_t prev = __rdtsc(), end = prev + (uint64_t)(1e9 * ghz);
    while (prev < end) {
        uint64_t t = __rdtsc();
        if (t - prev > 3000 * ghz && n < 200000) {
            at[n] = (prev - c0) / ghz;
            len[n++] = (t - prev) / ghz;
        }
        prev = t;
    }
    double total = 0, shorter = 0; /* all pauses; those under 1 ms (no preemption) */
    for (int i = 0; i < n; i++) {
        total += len[i];
        if (len[i] < 1e6) shorter += len[i];
    }
    for (int i = 0; i + 1 < n; i++) gap[i] = (int)((at[i + 1] - at[i]) / 1e5) * 0.1; /* ms */
    qsort(len, n, sizeof *len, cmp);
    qsort(gap, n > 1 ? n - 1 : 0, sizeof *gap, cmp);
    double mode = 0;
    for (int i = 0, best = 0; i + 1 < n;) {
        int j = i;
        while (j + 1 < n && gap[j] == gap[i]) j++;
        if (j - i > best) best = j - i, mode = gap[i];
        i = j;
    }
    printf("%d pauses > 3 us in 1 s, median %.1f us, 90th percentile %.1f us, %.2f%% of the time "
           "(%.2f%% in pauses under 1 ms); most common interval %.1f ms\n",
           n, n ? len[n / 2] / 1e3 : 0, n ? len[n * 9 / 10] / 1e3 : 0, total / 1e7, shorter / 1e7,
           mode);
    return 0;
}
EOF
cc -O2 "$work/pauses.c" -o "$work/pauses"
echo "pauses, normal policy: $("$work/pauses")"
if [ ${#rt[@]} -gt 0 ]; then
    echo "pauses, chrt -f 10:    $("${rt[@]}" "$work/pauses")"
fi
echo

for f in stencil_outer matmul coarse_tree coarse_matmul; do
    cc -O2 -static $inc "fixtures/$f.c" -o "$work/$f"
done
# parallelism LABEL COUNTER PREFIX... -- EXE ARGS: the region LABEL's (or the whole program's,
# LABEL "-") parallelism of one run (COUNTER may carry options: "native --repeat 5").
parallelism() {
    local label=$1 counter=$2
    shift 2
    local -a pre=()
    while [ "$1" != "--" ]; do
        pre+=("$1")
        shift
    done
    shift
    # shellcheck disable=SC2086
    "${pre[@]}" "$bin" run --counter $counter --json "$work/r.json" "$@" >/dev/null 2>&1
    python3 - "$work/r.json" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if sys.argv[2] != "-":
    r = next(g for g in r["regions"] if g["label"] == sys.argv[2])
print(f"{r['parallelism']:.2f}")
PY
}
range() { python3 -c "import sys; v=sorted(map(float, sys.argv[1:])); print(f'{v[0]:.2f}–{v[-1]:.2f}')" "$@"; }

head="| fixture (args, measured part) | emulate | native ($rounds runs) | native under chrt -f 10 ($rounds runs) |"
rule="|---|---:|---:|---:|"
for n in "${repeats[@]}"; do
    head+=" --repeat $n ($rounds runs) |"
    rule+="---:|"
done
echo "$head load |"
echo "$rule---:|"
while IFS='|' read -r name label args; do
    # shellcheck disable=SC2086
    e=$(parallelism "$label" emulate -- "$work/$name" $args)
    plain=() fifo=()
    for _ in $(seq "$rounds"); do
        # shellcheck disable=SC2086
        plain+=("$(parallelism "$label" native env -- "$work/$name" $args)")
        if [ ${#rt[@]} -gt 0 ]; then
            # shellcheck disable=SC2086
            fifo+=("$(parallelism "$label" native "${rt[@]}" -- "$work/$name" $args)")
        fi
    done
    f=-
    [ ${#fifo[@]} -gt 0 ] && f=$(range "${fifo[@]}")
    row="| $name $args ($label) | $e | $(range "${plain[@]}") | $f |"
    for n in "${repeats[@]}"; do
        min=()
        for _ in $(seq "$rounds"); do
            # shellcheck disable=SC2086
            min+=("$(parallelism "$label" "native --repeat $n" env -- "$work/$name" $args)")
        done
        row+=" $(range "${min[@]}") |"
    done
    echo "$row $(cut -d' ' -f1 /proc/loadavg) |"
done <<'EOF'
stencil_outer|stencil|256 400
matmul|-|64
coarse_tree|tree|4 2000000
coarse_matmul|rounds|4
EOF
