#!/usr/bin/env bash
# Usage: scripts/compare-outputs.sh BEFORE_BIN AFTER_BIN
#
# Runs two builds of cilkview-rs on the same fixture programs and checks that everything they
# write is byte-identical: the text report (stderr), the JSON report, the gnuplot .dat/.plt, the
# program's own stdout and every exit code. Cases: `run --counter step` on known_spawn,
# known_loop and known_regions (dynamically linked: the loader and libc are mapped, so probes are
# numbered across images), a `#!/bin/sh` wrapper exec'ing known_spawn (the wrapper-exec rule),
# `report` re-rendering a saved JSON with a failing --fail-below gate, two errors (an
# unwritable output path, a program that is not ELF), `schema` and `schema bench`; call-site
# profiles (`--profile`: every file it writes) of profile_known, known_spawn, qsort_profile,
# fib 12 (-fno-inline) and of profile_region's region, and `report --profile` of a saved one.
# No line of these is excluded: none may vary between two runs of one program under
# --counter step.
# Then `bench` (alone, against a saved analysis and one of its regions, `-` as standard output,
# a failing program, three refusals) and `run --bench`: their table, JSON, CSV, gnuplot files
# and SVG plot. Their times vary from run to run, so these outputs are compared masked: every
# decimal number and percentage becomes N, runs of spaces one space, a placement word PLACE, the
# "Below the predicted range" hint and the note of a speedup above P are dropped, and of an SVG only its words are kept (title,
# axes, legend). Cores, keys, columns, wording, order, exit codes and which files exist are
# still compared exactly.
# Exits 0 when all outputs match, 1 otherwise (with a diff of what differs).
set -uo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN" >&2
    exit 2
fi
before=$(realpath "$1")
after=$(realpath "$2")
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/prog"
for f in known_spawn known_loop known_regions profile_known qsort_profile profile_region; do
    cc -O2 -I "$root/crates/cilkview-marks/include" -I "$root/fixtures" \
        "$root/fixtures/$f.c" -o "$work/prog/$f" || exit 2
done
cc -O2 -fno-inline -I "$root/crates/cilkview-marks/include" "$root/fixtures/fib.c" \
    -o "$work/prog/fib" || exit 2
printf '#!/bin/sh\nexec "$(dirname "$0")/known_spawn" "$@"\n' >"$work/prog/wrapper.sh"
chmod +x "$work/prog/wrapper.sh"
printf 'not a program\n' >"$work/prog/text"
chmod +x "$work/prog/text"

# Single-stepping binds the program to the CPU the tracer runs on, and the report says which:
# pin the tool to one CPU so that both builds name the same one. Address-space randomization
# moves the stack by multiples of 16 bytes, which changes how many instructions the C start-up
# code's vector string functions run over the environment: turn it off (setarch -R) so that two
# runs of one program count the same.
pin=()
if command -v setarch >/dev/null; then
    pin+=(setarch -R)
fi
if command -v taskset >/dev/null; then
    pin+=(taskset -c 0)
fi

# case NAME ARGS...: runs both binaries in the same folder $work/run (same working directory,
# same environment: their sizes move the stack, which moves instruction counts of the C
# start-up code), records stdout, stderr and the exit code, then keeps the folder as
# $work/before/NAME or $work/after/NAME.
case_() {
    local name=$1
    shift
    mkdir -p "$work/before" "$work/after"
    for side in before after; do
        local bin=$before
        [ "$side" = after ] && bin=$after
        rm -rf "$work/run"
        mkdir "$work/run"
        (cd "$work/run" && "${pin[@]}" "$bin" "$@" >stdout 2>stderr; echo $? >exit_code)
        mv "$work/run" "$work/$side/$name"
    done
}

for f in known_spawn known_loop known_regions; do
    case_ "$f" run --counter step --json out.json --gnuplot out "$work/prog/$f"
done
case_ known_loop_args run --counter step --max-cores 8 --burden 500 --json out.json \
    "$work/prog/known_loop" 7
case_ wrapper run --counter step --json out.json "$work/prog/wrapper.sh"
cp "$work/before/known_regions/out.json" "$work/saved.json"
case_ report report --fail-below parallelism=100 --fail-below region:step:parallelism=1 \
    --gnuplot again "$work/saved.json"
case_ unwritable run --counter step --json missing/out.json "$work/prog/known_spawn"
case_ not_elf run --counter step --json out.json "$work/prog/text"
case_ schema schema
# Call-site profiles: the report's table, the JSON's call sites and contexts, PREFIX.csv, the
# folded stacks and flame graphs of span and work, the callgrind file; of a region too, and
# re-rendered from a saved JSON.
for f in profile_known known_spawn; do
    case_ "profile_$f" run --counter step --profile prof --json out.json "$work/prog/$f"
done
case_ profile_qsort run --counter step --profile prof --top 20 --json out.json \
    "$work/prog/qsort_profile" 300
case_ profile_fib run --counter step --profile prof --json out.json "$work/prog/fib" 12
case_ profile_region run --counter step --profile prof --profile-region kernel --json out.json \
    "$work/prog/profile_region"
cp "$work/before/profile_qsort/out.json" "$work/saved_profile.json"
case_ profile_report report --profile again --json again.json "$work/saved_profile.json"
case_ schema_bench schema bench

# mask NAME: the time-dependent parts of case NAME's outputs, on both sides (see the top).
mask() {
    local side f
    for side in before after; do
        for f in "$work/$side/$1"/*; do
            case "$f" in
            *.svg)
                grep -o '>[^<]*[A-Za-z][^<]*<' "$f" | sed -E 's/[0-9]+(\.[0-9]+)?/N/g' >"$f.words"
                rm "$f"
                ;;
            */exit_code) ;;
            *)
                sed -E -i -e '/^Below the predicted range/d' -e '/^note: at P=[0-9]+ the speedup/d' \
                    -e 's/ABOVE \(faster than predicted\)|BELOW \(slower than predicted\)/PLACE/g' \
                    -e 's/"(inside|above|below)"/"PLACE"/g; s/,(inside|above|below)$/,PLACE/' \
                    -e 's/ inside$/ PLACE/' \
                    -e 's/-?[0-9]+\.[0-9]+(e-?[0-9]+)?/N/g; s/[0-9]+%/N%/g; s/ +/ /g' "$f"
                ;;
            esac
        done
    done
}
bench_case() {
    case_ "$@"
    mask "$1"
}
tune=(--cores 1,2 --oversubscribe --trials 2 --warmup 0)
bench_case bench bench "${tune[@]}" --json out.json --csv out.csv --plot out.svg \
    "$work/prog/known_regions"
bench_case bench_analysis bench "${tune[@]}" --analysis "$work/saved.json" --json - \
    --csv out.csv --plot out.svg "$work/prog/known_regions"
bench_case bench_region bench "${tune[@]}" --analysis "$work/saved.json" --region step \
    --csv - --plot out.svg "$work/prog/known_regions"
bench_case bench_fails bench --cores 1 --trials 1 --warmup 0 --json out.json --plot out.svg false
bench_case bench_two_stdout bench "${tune[@]}" --json - --csv - "$work/prog/known_regions"
bench_case bench_no_region bench "${tune[@]}" --analysis "$work/saved.json" --region nowhere \
    --json out.json "$work/prog/known_regions"
bench_case bench_unwritable bench "${tune[@]}" --json out.json --csv missing/out.csv \
    "$work/prog/known_regions"
bench_case run_bench run --counter step --bench "${tune[@]}" --json out.json --gnuplot out \
    --plot out.svg --fail-below parallelism=100 "$work/prog/known_regions"

status=0
for dir in "$work"/before/*; do
    name=$(basename "$dir")
    if diff -r "$dir" "$work/after/$name" >"$work/diff" 2>&1; then
        echo "same: $name ($(ls "$dir" | tr '\n' ' '))"
    else
        echo "DIFFERENT: $name"
        cat "$work/diff"
        status=1
    fi
done
exit $status
