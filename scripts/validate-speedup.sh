#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Checks the tool's predicted speedup ranges against real parallel runs, beyond the two cores of
# our machines: BOTS programs (gcc -fopenmp -O3, unmodified) measured by `cilkview-rs run
# --openmp` with an exact counter (emulate) and with time (native), then run natively at
# P = 1, 2, 4, 8, 16 workers by `cilkview-rs bench`, each measured speedup printed beside both
# predicted ranges.
#
#   scripts/validate-speedup.sh prepare BUNDLE [BOTS_DIR]   build, analyse, pack (this machine)
#   scripts/validate-speedup.sh native BUNDLE               time and compare (any x86-64 Linux)
#   scripts/validate-speedup.sh all BUNDLE [BOTS_DIR]       both here
#
# `prepare` needs gcc with libgomp, qemu-user (scripts/setup.sh) and a BOTS checkout (cloned if
# not given; BOTS is GPL-2 and not in this repository). It writes BUNDLE: the tool, the built
# programs, libgomp, BOTS's inputs, each program's two analyses (JSON) and their predicted ranges
# (predicted.tsv), and this script. `native` needs only that folder, bash, coreutils and awk: no
# compiler, no network (a lent 16-core machine: copy the folder there and run it). It uses the
# worker counts of 1, 2, 4, 8, 16 that the machine has CPUs for, and takes about 4 minutes on 16
# cores (3 timed runs and a warm-up at each count; each program runs ~0.5-4 s on one core).
# Environment: ONLY=name,... (a subset), TRIALS (default 3), TOOL (prepare: a cilkview-rs built
# already; default: cargo build --release).
#
# The comparison is whole program against whole program: bench times the whole run, so the
# prediction is the whole run's (its serial start-up included), from the analysis of the same
# arguments. A measured speedup should lie inside the predicted range (Cilkview's lower and upper
# bounds); "above" or "BELOW" names a miss.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# The programs validated: a BOTS name (scripts/bench/bots.sh) and its arguments here.
validated() {
    cat <<'TABLE'
fib|-n 32
nqueens-manual|-n 12
sort|-n 4194304
fft|-n 4194304
strassen-manual|-n 1024
sparselu-single|-n 50 -m 50
alignment-for|-f $in/alignment/prot.20.aa
uts|-f $in/uts/test.input
health-manual|-f $in/health/small.input
floorplan-manual|-f $in/floorplan/input.15
TABLE
}

wanted() {
    [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$1,"* ]]
}

prepare() {
    local bundle=$1 bots_dir=${2:-} repo scratch name args dir sources defines libs a counter
    repo=$(cd "$here/.." && pwd)
    # shellcheck source=bench/bots.sh
    source "$here/bench/bots.sh"
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' RETURN
    bots_locate "$bots_dir" "$scratch"
    if [ -z "${TOOL:-}" ]; then
        (cd "$repo" && cargo build --release --quiet -p cilkview-cli)
        TOOL=$repo/target/release/cilkview-rs
    fi
    mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/programs" "$bundle/analysis"
    cp "$TOOL" "$bundle/bin/cilkview-rs"
    strip "$bundle/bin/cilkview-rs" 2>/dev/null || true
    cp "$(gcc -print-file-name=libgomp.so.1)" "$bundle/lib/"
    cp -r "$bots_inputs" "$bundle/inputs"
    cp "$0" "$bundle/validate-speedup.sh"
    : >"$bundle/programs.tsv"
    echo -e "program\tcounter\tcores\tlower\tupper" >"$bundle/predicted.tsv"
    while IFS='|' read -r name args; do
        wanted "$name" || continue
        IFS='|' read -r _ dir sources defines libs _ < <(bots_programs | grep "^$name|")
        bots_build "$name" "$dir" "$sources" "$defines" "$libs" "$scratch/$name"
        cp "$scratch/$name" "$bundle/programs/$name"
        printf '%s\t%s\n' "$name" "$args" >>"$bundle/programs.tsv"
        a=$(bots_args "$args")
        for counter in emulate native; do
            echo "prepare: $name $a: --counter $counter" >&2
            # shellcheck disable=SC2086
            "$TOOL" run --openmp --counter "$counter" --max-cores 16 \
                --json "$bundle/analysis/$name.$counter.json" "$bundle/programs/$name" $a \
                >/dev/null 2>"$scratch/$name.$counter.err" || {
                cat "$scratch/$name.$counter.err" >&2
                return 1
            }
            predicted "$bundle/analysis/$name.$counter.json" "$name" "$counter" \
                >>"$bundle/predicted.tsv"
        done
    done < <(validated)
    echo "prepare: $bundle is ready ($(du -sh "$bundle" | cut -f1)): $0 native $bundle" >&2
}

# predicted JSON NAME COUNTER: the tool's range at P = 1, 2, 4, 8, 16 (the formula of
# docs/engine.md with the runtime's cost per task of docs/openmp.md: what `bench` shows).
predicted() {
    python3 - "$@" <<'PY'
import json, sys
path, name, counter = sys.argv[1:4]
r = json.load(open(path))
w, span, bspan, spawns = r["work"], r["span"], r["burdened_span"], r["spawns"]
delta = r["span_coefficient"]
cost = (r.get("openmp") or {}).get("task_cost", 0)
for p in (1, 2, 4, 8, 16):
    upper = min(p, w / span) if span else p
    runtime = spawns * cost if p > 1 else 0
    lower = min(w / ((w + runtime) / p + 2 * delta * (1 - 1 / p) * bspan), upper) if w else 1.0
    print(f"{name}\t{counter}\t{p}\t{lower:.3f}\t{upper:.3f}")
PY
}

native() {
    local bundle cpus cores p name args csv
    bundle=$(cd "$1" && pwd)
    [ -x "$bundle/bin/cilkview-rs" ] || { echo "error: $1 is not a prepared bundle" >&2; exit 2; }
    cpus=$(nproc)
    cores=1
    for p in 2 4 8 16; do
        [ "$p" -le "$cpus" ] && cores=$cores,$p
    done
    export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "machine: $(uname -m), $cpus CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg); worker counts $cores"
    echo
    echo "| program | P | measured speedup, median [min – max] | predicted (exact) | predicted (time) | exact | time |"
    echo "|---|---:|---|---|---|---|---|"
    while IFS=$'\t' read -r name args; do
        wanted "$name" || continue
        csv=$(mktemp)
        # shellcheck disable=SC2086
        "$bundle/bin/cilkview-rs" bench --cores "$cores" --trials "${TRIALS:-3}" \
            --analysis "$bundle/analysis/$name.emulate.json" --csv "$csv" \
            "$bundle/programs/$name" ${args//\$in/$bundle/inputs} 2>/dev/null
        awk -F'[,\t]' -v name="$name" '
            FNR == NR { if ($1 == name) { lo[$2 "," $3] = $4; hi[$2 "," $3] = $5 }; next }
            FNR == 1 { next }
            function place(s, l, h) { return s < l - 0.05 ? "BELOW" : (s > h + 0.05 ? "above" : "inside") }
            {
                p = $1; s = $5
                el = lo["emulate," p]; eh = hi["emulate," p]; tl = lo["native," p]; th = hi["native," p]
                printf "| %s | %d | %.2f [%.2f – %.2f] | %.2f – %.2f | %.2f – %.2f | %s | %s |\n",
                    name, p, s, $6, $7, el, eh, tl, th, place(s, el, eh), place(s, tl, th)
            }' "$bundle/predicted.tsv" "$csv"
        rm -f "$csv"
    done <"$bundle/programs.tsv"
}

case "${1:-}" in
    prepare) [ $# -ge 2 ] || set -- "$1" ""; prepare "$2" "${3:-}" ;;
    native) native "$2" ;;
    all) prepare "$2" "${3:-}" && native "$2" ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
        exit 2
        ;;
esac
