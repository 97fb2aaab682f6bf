#!/usr/bin/env bash
# What the marks cost a program that is not being analyzed: each fixture built fully marked and
# as its serial elision (-DCILKVIEW_DISABLE), with gcc and clang at -O2 and -O3, compared by
#   - instructions executed (valgrind --tool=callgrind, "Collected"), exact and repeatable;
#   - wall time, median of RUNS runs, the marked and elided builds interleaved (read the ratio:
#     timings on a shared VM drift).
# Prints a markdown table for docs/benchmarks.md.
#
# Usage: scripts/bench-marks.sh [--header FILE]
#   --header FILE   use FILE as cilkview.h instead of crates/cilkview-marks/include/cilkview.h
#                   (e.g. an older version: git show REV:crates/cilkview-marks/include/cilkview.h)
# Environment: RUNS (default 5), COMPILERS (default "gcc clang"), OPTS (default "2 3").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/include"
header=crates/cilkview-marks/include/cilkview.h
if [[ ${1:-} == --header ]]; then
    header=$2
fi
cp "$header" "$work/include/cilkview.h"
runs=${RUNS:-5}
compilers=${COMPILERS:-gcc clang}
opts=${OPTS:-2 3}

# fixture, source, arguments under callgrind (~10-50M instructions), arguments for timing (~0.1-0.5 s)
cases=(
    "fib fib.c 27 35"
    "qsort qsort.cpp 50000 500000"
    "nqueens nqueens.c 9 11"
    "matmul matmul.c 128 512"
)


echo "machine: $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F)"
echo "header: $header ($(sha256sum "$header" | cut -c1-12)); $(gcc --version | head -1); $(clang --version | head -1)"
echo
echo "| program (instr. args / time args) | compiler | -O | instructions, marked | elision | extra | time marked | elision | time ratio |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for cc in $compilers; do
    for opt in $opts; do
        for case in "${cases[@]}"; do
            read -r name src iargs targs <<<"$case"
            driver=$cc
            if [[ $src == *.cpp ]]; then
                driver=${cc/clang/clang++}
                driver=${driver/gcc/g++}
            fi
            flags=(-O"$opt" -I "$work/include" -I fixtures)
            "$driver" "${flags[@]}" "fixtures/$src" -o "$work/$name.m"
            "$driver" "${flags[@]}" -DCILKVIEW_DISABLE "fixtures/$src" -o "$work/$name.e"
            # Same output, or the comparison means nothing.
            if [[ $("$work/$name.m" "$iargs") != $("$work/$name.e" "$iargs") ]]; then
                echo "error: $name ($cc -O$opt): marked and elided builds print different results" >&2
                exit 1
            fi
            im=$(instructions "$work/$name.m" "$iargs")
            ie=$(instructions "$work/$name.e" "$iargs")
            tm=() te=()
            for _ in $(seq "$runs"); do
                tm+=("$(microseconds "$work/$name.m" "$targs")")
                te+=("$(microseconds "$work/$name.e" "$targs")")
            done
            python3 - "$name" "$iargs" "$targs" "$cc" "$opt" "$im" "$ie" \
                "$(median "${tm[@]}")" "$(median "${te[@]}")" <<'PY'
import sys
name, iargs, targs, cc, opt = sys.argv[1:6]
im, ie, tm, te = map(int, sys.argv[6:10])
print(f"| {name} ({iargs} / {targs}) | {cc} | {opt} | {im:,} | {ie:,} | {(im / ie - 1) * 100:+.1f}% "
      f"| {tm / 1e6:.3f} s | {te / 1e6:.3f} s | {tm / te:.2f} |")
PY
        done
    done
done
