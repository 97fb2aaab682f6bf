#!/usr/bin/env bash
# Where the marks' cost on fully marked recursive programs (fib, qsort) comes from. Each program is
# built five ways, with gcc and clang at -O2 and -O3:
#   elision          -DCILKVIEW_DISABLE (the baseline)
#   +barrier         the elision with an empty `asm volatile("" ::: "memory")` after the cv_sync()
#                    that follows the last recursive call: no instruction, but the compiler may no
#                    longer turn that call into a loop (what any mark after the last call imposes)
#   marks, no NOPs   the shipped header with the 5 NOP bytes removed from every mark (label and
#                    record kept): the marks' placement constraints, without executing anything
#   marks            the shipped header
#   marks, big dup   (gcc only) the marks built with --param max-grow-copy-bb-insns=5000: a
#                    diagnostic, see docs/benchmarks.md ("shrink-wrapping")
#   no NOPs, big dup (gcc only) both: the marks' placement, shrink-wrapped, nothing executed
# and compared by instructions (valgrind --tool=callgrind, exact), calls of the recursive function
# (from the same callgrind profile) and CPU time (user + system of the larger argument, RUNS runs,
# all builds of one program/compiler/-O interleaved): the median of the ratios to the elision's time
# of the same round, and the ratio of the 10th percentiles (the fastest tenth of each build's runs:
# on a shared VM, the runs closest to an idle core). On a shared machine, run it under
# `nice -n -20` (as root) to keep other load from taking turns with it.
# Prints a markdown table for docs/benchmarks.md.
#
# Usage: scripts/bench-marks-anatomy.sh [--header FILE]
# Environment: RUNS (default 21), COMPILERS (default "gcc clang"), OPTS (default "2 3"),
#              PROGRAMS (default "fib qsort").
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header=crates/cilkview-marks/include/cilkview.h
if [[ ${1:-} == --header ]]; then
    header=$2
fi
mkdir -p "$work/marks" "$work/nonop"
cp "$header" "$work/marks/cilkview.h"
# Only the NOP bytes go: "1:" stays, so every record still has its address.
sed 's/^#define CV__NOP_ASM .*/#define CV__NOP_ASM "1:\\n\\t"/' "$header" >"$work/nonop/cilkview.h"
if cmp -s "$work/marks/cilkview.h" "$work/nonop/cilkview.h"; then
    echo "error: $header has no CV__NOP_ASM definition to strip" >&2
    exit 1
fi
runs=${RUNS:-21}
compilers=${COMPILERS:-gcc clang}
opts=${OPTS:-2 3}
programs=${PROGRAMS:-fib qsort}

# program, source, recursive function, arguments under callgrind, arguments for timing
declare -A cases=(
    [fib]="fib.c fib 27 37"
    [qsort]="qsort.cpp sample_qsort 50000 500000"
)

profile() { # exe arg function -> "instructions calls"
    valgrind --tool=callgrind --callgrind-out-file="$work/cg" "$1" "$2" >/dev/null 2>&1
    python3 - "$work/cg" "$3" <<'PY'
import re, sys
names, current, calls, total = {}, None, 0, 0
for line in open(sys.argv[1]):
    m = re.match(r"cfn=\((\d+)\)(?: (.*))?", line)
    if m:
        if m.group(2):
            names[m.group(1)] = m.group(2)
        current = names.get(m.group(1), "")
        continue
    m = re.match(r"calls=(\d+)", line)
    if m and re.match(r"(\S+ )?" + sys.argv[2] + r"\b", current):
        calls += int(m.group(1))
    m = re.match(r"summary: (\d+)", line)
    if m:
        total = int(m.group(1))
print(total, calls)
PY
}
cpu_ms() { # exe args... -> user + system CPU time in ms
    local TIMEFORMAT='%3U %3S' t
    t=$({ time "$@" >/dev/null; } 2>&1)
    awk '{printf "%d\n", ($1 + $2) * 1000}' <<<"$t"
}

echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo "header: $header ($(sha256sum "$header" | cut -c1-12)); $(gcc --version | head -1); $(clang --version | head -1)"
echo
echo "| program (instr. / time arg) | compiler | -O | build | instructions | vs elision | calls | CPU ms, median | time vs elision, median | fastest tenth |"
echo "|---|---|---|---|---:|---:|---:|---:|---:|---:|"
for name in $programs; do
    read -r src fn iarg targ <<<"${cases[$name]}"
    # The +barrier source: the elision, with a barrier after the sync that follows the last call.
    sed 's/^\( *\)cv_sync();/\1cv_sync(); __asm__ __volatile__("" ::: "memory");/' "fixtures/$src" >"$work/barrier_$src"
    if ! grep -q '__asm__' "$work/barrier_$src"; then
        echo "error: no cv_sync(); line to put the barrier after in fixtures/$src" >&2
        exit 1
    fi
    for cc in $compilers; do
        driver=$cc
        if [[ $src == *.cpp ]]; then
            driver=${cc/clang/clang++}
            driver=${driver/gcc/g++}
        fi
        for opt in $opts; do
            base=(-O"$opt" -I fixtures)
            builds=(elision +barrier "marks, no NOPs" marks)
            "$driver" "${base[@]}" -I "$work/marks" -DCILKVIEW_DISABLE "fixtures/$src" -o "$work/b0"
            "$driver" "${base[@]}" -I "$work/marks" -DCILKVIEW_DISABLE "$work/barrier_$src" -o "$work/b1"
            "$driver" "${base[@]}" -I "$work/nonop" "fixtures/$src" -o "$work/b2"
            "$driver" "${base[@]}" -I "$work/marks" "fixtures/$src" -o "$work/b3"
            if [[ $cc == gcc ]]; then
                builds+=("marks, big dup" "no NOPs, big dup")
                "$driver" "${base[@]}" --param max-grow-copy-bb-insns=5000 -I "$work/marks" \
                    "fixtures/$src" -o "$work/b4"
                "$driver" "${base[@]}" --param max-grow-copy-bb-insns=5000 -I "$work/nonop" \
                    "fixtures/$src" -o "$work/b5"
            fi
            n=${#builds[@]}
            expected=$("$work/b0" "$iarg")
            for i in $(seq 0 $((n - 1))); do
                if [[ $("$work/b$i" "$iarg") != "$expected" ]]; then
                    echo "error: $name ($cc -O$opt, ${builds[$i]}) prints a different result" >&2
                    exit 1
                fi
                prof[i]=$(profile "$work/b$i" "$iarg" "$fn")
                cpu[i]=""
            done
            for _ in $(seq "$runs"); do
                for i in $(seq 0 $((n - 1))); do
                    cpu[i]+="$(cpu_ms "$work/b$i" "$targ") "
                done
            done
            for i in $(seq 0 $((n - 1))); do
                python3 - "$name" "$iarg" "$targ" "$cc" "$opt" "${builds[$i]}" "${prof[0]}" "${prof[$i]}" \
                    "${cpu[0]}" "${cpu[$i]}" <<'PY'
import statistics, sys
name, iarg, targ, cc, opt, build = sys.argv[1:7]
i0, _ = map(int, sys.argv[7].split())
ii, calls = map(int, sys.argv[8].split())
t0 = [int(x) for x in sys.argv[9].split()]
ti = [int(x) for x in sys.argv[10].split()]
ratio = statistics.median(b / a for a, b in zip(t0, ti) if a > 0)
def p10(t):
    return sorted(t)[len(t) // 10]
print(f"| {name} ({iarg} / {targ}) | {cc} | {opt} | {build} | {ii:,} | {(ii / i0 - 1) * 100:+.1f}% "
      f"| {calls:,} | {statistics.median(ti)} | {ratio:.2f} | {p10(ti) / max(p10(t0), 1):.2f} |")
PY
            done
        done
    done
done
