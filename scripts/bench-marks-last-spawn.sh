#!/usr/bin/env bash
# What the marks cost when a function's last recursive call is spawned too (the Cilk-5 style:
# `cv_spawn(a); cv_spawn(b); cv_sync();`) against the fixtures' style (`cv_spawn(a); b;
# cv_sync();`), on fib, qsort and matmul; nqueens spawns every child in a loop either way.
# Each form is built fully marked and as its serial elision (-DCILKVIEW_DISABLE: the same
# program for both forms), static, with gcc and clang at -O2 and -O3; instructions executed
# (valgrind --tool=callgrind, "Collected") are exact and repeatable. The Cilk-5 forms are made
# from the fixtures by the sed expressions below. Prints a markdown table for docs/benchmarks.md
# (docs/marks.md's table "Cost of the marks" quotes it).
#
# Usage: scripts/bench-marks-last-spawn.sh
# Environment: COMPILERS (default "gcc clang"), OPTS (default "2 3").
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/bench/lib.sh
source scripts/bench/lib.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compilers=${COMPILERS:-gcc clang}
opts=${OPTS:-2 3}

# name, source, arguments (~5-25M instructions), the sed expression making the Cilk-5 form
# (empty: the fixture already spawns every child)
cases=(
    "fib|fib.c|25|s/^    y = fib(n - 2);/    cv_spawn(y = fib(n - 2));/"
    "qsort|qsort.cpp|50000|s/^        sample_qsort(std::max(begin + 1, middle), end);/        cv_spawn(sample_qsort(std::max(begin + 1, middle), end));/"
    "matmul|matmul.c|128|s/^    mm(c22, \(a2[12]\), \(b[12]2\), h, ld);/    cv_spawn(mm(c22, \1, \2, h, ld));/"
    "nqueens|nqueens.c|9|"
)


echo "machine: $(uname -m), $(date -u +%F); $(gcc --version | head -1); $(clang --version | head -1); $(valgrind --version)"
echo
header="| program (args) | form |"
rule="|---|---|"
for cc in $compilers; do
    for opt in $opts; do
        header+=" $cc -O$opt |"
        rule+="---:|"
    done
done
echo "$header"
echo "$rule"
for case in "${cases[@]}"; do
    IFS='|' read -r name src args expr <<<"$case"
    ext=${src##*.}
    cp "fixtures/$src" "$work/$name.fixture.$ext"
    forms=(fixture)
    if [[ -n $expr ]]; then
        sed "$expr" "fixtures/$src" >"$work/$name.cilk5.$ext"
        # The expression must have changed the program (the fixture's text moved: update it).
        if cmp -s "fixtures/$src" "$work/$name.cilk5.$ext"; then
            echo "error: the sed expression for $name no longer matches fixtures/$src" >&2
            exit 1
        fi
        forms+=(cilk5)
    fi
    declare -A row=()
    for cc in $compilers; do
        driver=$cc
        if [[ $ext == cpp ]]; then
            driver=${cc/clang/clang++}
            driver=${driver/gcc/g++}
        fi
        for opt in $opts; do
            flags=(-O"$opt" -static -I crates/cilkview-marks/include -I fixtures)
            "$driver" "${flags[@]}" -DCILKVIEW_DISABLE "$work/$name.fixture.$ext" -o "$work/e"
            elided=$(instructions "$work/e" "$args")
            expected=$("$work/e" "$args")
            for form in "${forms[@]}"; do
                "$driver" "${flags[@]}" "$work/$name.$form.$ext" -o "$work/m"
                if [[ $("$work/m" "$args") != "$expected" ]]; then
                    echo "error: $name ($form, $cc -O$opt) prints another result than its elision" >&2
                    exit 1
                fi
                marked=$(instructions "$work/m" "$args")
                row[$form]+=" $(python3 -c "print(f'{($marked / $elided - 1) * 100:+.1f}%')") |"
            done
        done
    done
    for form in "${forms[@]}"; do
        case $form in
        fixture) what="fixtures/$src" ;;
        cilk5) what="last call spawned too" ;;
        esac
        echo "| $name ($args) | $what |${row[$form]}"
    done
    unset row
done
