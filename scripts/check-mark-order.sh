#!/usr/bin/env bash
# Checks that optimization does not move marks: every fixture, built with gcc and clang at
# -O0, -O1, -O2, -O3 and -Os, must execute exactly the same sequence of marks (kind and label,
# in order) as its gcc -O0 build. A call moved out of its spawn, a sync moved before the spawned
# calls it waits for, or a lost copy of a mark shows up as a different sequence.
# The sequence is recorded with gdb (a breakpoint on every mark's NOP; scripts/bench/mark_sequence.py).
# The Rust fixtures (fixtures/rust, marked with the cilkview crate) are checked the same way,
# built at opt-level 0, 1, 2, 3, s and z against opt-level 0, and each against its C twin
# (fixtures/twin_*.c, gcc -O0): the same sequence of marks. They run with RAYON_NUM_THREADS=1.
#
# Usage: scripts/check-mark-order.sh [--header FILE] [--rust-only]   (exit status 1 if any sequence differs)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/include"
header=crates/cilkview-marks/include/cilkview.h
rust_only=false
while [[ $# -gt 0 ]]; do
    case $1 in
    --header) header=$2; shift 2 ;;
    --rust-only) rust_only=true; shift ;;
    *) echo "usage: $0 [--header FILE] [--rust-only]" >&2; exit 2 ;;
    esac
done
cp "$header" "$work/include/cilkview.h"

# fixture source, arguments (small: every mark hit is a gdb stop)
cases=(
    "fib.c 10"
    "qsort.cpp 60"
    "nqueens.c 5"
    "matmul.c 16"
    "known_spawn.c"
    "known_scope.c"
    "known_loop.c 1"
    "known_regions.c"
    "snippet_a.c 10"
    "snippet_b.c 10"
    "stencil_inner.c"
    "stencil_outer.c"
    "deep.c 50"
)

sequence() { # exe args... -> the mark sequence in $work/seq
    local exe=$1
    shift
    objcopy --dump-section .cilkview_marks="$work/section" "$exe" "$work/junk"
    MARK_SECTION="$work/section" MARK_SEQUENCE_OUT="$work/seq" \
        gdb -q -batch -nx -x scripts/bench/mark_sequence.py --args "$exe" "$@" >/dev/null 2>&1
}

status=0
$rust_only && cases=()
for case in "${cases[@]}"; do
    read -r src args <<<"$case"
    name=${src%.*}
    line="$name ($args):"
    for cc in gcc clang; do
        driver=$cc
        if [[ $src == *.cpp ]]; then
            driver=${cc/clang/clang++}
            driver=${driver/gcc/g++}
        fi
        for opt in 0 1 2 3 s; do
            exe="$work/$name.$cc.$opt"
            "$driver" -O"$opt" -g -fno-pie -no-pie -I "$work/include" -I fixtures "fixtures/$src" -o "$exe"
            # shellcheck disable=SC2086
            sequence "$exe" $args
            if [[ $cc == gcc && $opt == 0 ]]; then
                cp "$work/seq" "$work/reference"
                if [[ ! -s $work/reference ]]; then
                    echo "error: $name: no mark hit at gcc -O0 (gdb failed?)" >&2
                    exit 1
                fi
                line+=" $(wc -l <"$work/reference") marks hit;"
            elif cmp -s "$work/seq" "$work/reference"; then
                line+=" $cc -O$opt same;"
            else
                line+=" $cc -O$opt DIFFERENT ($(wc -l <"$work/seq") marks hit);"
                diff "$work/reference" "$work/seq" | head -5 >&2 || true
                status=1
            fi
        done
    done
    echo "$line"
done

# Rust: binary, arguments, C twin (or -)
rust_cases=(
    "rs_fib 6 twin_fib"
    "rs_quicksort 64 twin_quicksort"
    "rs_matmul 8 twin_matmul"
    "rs_loop 3 twin_loop"
    "rs_fib_cutoff 10 -"
    "rs_scale 40,2,8 -"
)
for opt in 0 1 2 3 s z; do
    level=$opt
    [[ $opt == [sz] ]] && level="\"$opt\""
    # Non-PIE static: gdb's breakpoints are at the records' link-time addresses.
    RUSTFLAGS="-C relocation-model=static -C target-feature=+crt-static" \
        cargo build -q --release --bins -p cilkview-rust-fixtures --target-dir "$work/rust-$opt" \
        --config profile.release.lto=false --config "profile.release.opt-level=$level"
done
for case in "${rust_cases[@]}"; do
    read -r name args twin <<<"$case"
    IFS=, read -r -a argv <<<"$args"
    line="$name ($args):"
    for opt in 0 1 2 3 s z; do
        RAYON_NUM_THREADS=1 sequence "$work/rust-$opt/release/$name" "${argv[@]}"
        if [[ $opt == 0 ]]; then
            cp "$work/seq" "$work/reference"
            if [[ ! -s $work/reference ]]; then
                echo "error: $name: no mark hit at opt-level 0 (gdb failed?)" >&2
                exit 1
            fi
            line+=" $(wc -l <"$work/reference") marks hit;"
        elif cmp -s "$work/seq" "$work/reference"; then
            line+=" -O$opt same;"
        else
            line+=" -O$opt DIFFERENT ($(wc -l <"$work/seq") marks hit);"
            diff "$work/reference" "$work/seq" | head -5 >&2 || true
            status=1
        fi
    done
    if [[ $twin != - ]]; then
        gcc -O0 -g -fno-pie -no-pie -I "$work/include" -I fixtures "fixtures/$twin.c" -o "$work/$twin"
        cp "$work/reference" "$work/rust-reference"
        sequence "$work/$twin" "${argv[@]}"
        if cmp -s "$work/seq" "$work/rust-reference"; then
            line+=" C twin same."
        else
            line+=" C twin DIFFERENT."
            diff "$work/rust-reference" "$work/seq" | head -5 >&2 || true
            status=1
        fi
    fi
    echo "$line"
done
exit $status
