#!/usr/bin/env bash
# The Barcelona OpenMP Tasks Suite (BOTS), unmodified, under `cilkview-rs run --openmp`: each
# program built with gcc -fopenmp -O3 from BOTS's own sources, run under the tool with BOTS's own
# check (-c), its "parallel" region's measures read from the JSON report, and (TIMING=1) its
# speedup at 2 threads measured natively beside the range the tool predicts for it.
#
#   scripts/bench-bots.sh [BOTS_DIR]
#
# BOTS is GPL-2: it is not in this repository. BOTS_DIR is a checkout of it; without one the
# script clones https://github.com/bsc-pm/bots (commit $BOTS_COMMIT) into a temporary folder.
# Environment: COUNTER (default emulate), TIMING=1 (also time each program natively at 1 and 2
# threads, ROUNDS rounds, default 7, alternated; the speedup is the median of the rounds'
# ratios of BOTS's own "Time Program", which times the parallel kernel only; RT=1: under
# SCHED_FIFO, chrt -f 10, as scripts/bench-omp-task-cost.sh), ONLY=name,...
# (a subset), TOOL=path (a cilkview-rs already built). Prints a markdown table for docs/openmp.md; exits non-zero if a program fails
# its check or the tool fails.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
BOTS_COMMIT=2607a695128727a3f6c98754367705443663136d
counter=${COUNTER:-emulate}
rounds=${ROUNDS:-7}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ $# -ge 1 ]; then
    bots=$(cd "$1" && pwd)
else
    git clone -q https://github.com/bsc-pm/bots "$work/bots"
    git -C "$work/bots" checkout -q "$BOTS_COMMIT" 2>/dev/null || true
    bots=$work/bots
fi
[ -f "$bots/common/bots_main.c" ] || { echo "error: $bots is not a BOTS checkout" >&2; exit 2; }

if [ -z "${TOOL:-}" ]; then
    cargo build --release --quiet -p cilkview-cli
    TOOL=$repo/target/release/cilkview-rs
fi
tool=$TOOL
in=$bots/inputs

# name | folder under omp-tasks | sources | defines | libraries | arguments (besides -c)
programs=$(cat <<EOF
fib|fib|fib.c|||-n 30
fib-manual|fib|fib.c|-DMANUAL_CUTOFF||-n 32 -x 12
nqueens|nqueens|nqueens.c|||-n 10
nqueens-manual|nqueens|nqueens.c|-DMANUAL_CUTOFF||-n 12
nqueens-final|nqueens|nqueens.c|-DFINAL_CUTOFF||-n 12
nqueens-if|nqueens|nqueens.c|-DIF_CUTOFF||-n 12
sort|sort|sort.c|||-n 4194304
fft|fft|fft.c||-lm|-n 1048576
health|health|health.c||-lm|-f $in/health/test.input
health-manual|health|health.c|-DMANUAL_CUTOFF|-lm|-f $in/health/small.input
sparselu-single|sparselu/sparselu_single|sparselu.c|||-n 50 -m 50
sparselu-for|sparselu/sparselu_for|sparselu.c|||-n 50 -m 50
strassen-manual|strassen|strassen.c|-DMANUAL_CUTOFF||-n 1024
alignment-single|alignment/alignment_single|alignment.c sequence.c||-lm|-f $in/alignment/prot.20.aa
alignment-for|alignment/alignment_for|alignment.c sequence.c||-lm|-f $in/alignment/prot.20.aa
uts|uts|uts.c brg_sha1.c||-lm|-f $in/uts/test.input
floorplan-manual|floorplan|floorplan.c|-DMANUAL_CUTOFF||-f $in/floorplan/input.15
knapsack-manual|knapsack|knapsack.c|-DMANUAL_CUTOFF||-f $in/knapsack/knapsack-024.input
EOF
)

echo "machine: $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "BOTS: $(git -C "$bots" rev-parse --short HEAD 2>/dev/null || echo "$bots"); $(gcc --version | head -1); counter $counter"
echo
header="| program | arguments | check | tasks | instructions per spawn | region parallelism | predicted at 2 (Cilkview) | predicted at 2 (--openmp) |"
rule="|---|---|---|---:|---:|---:|---|---|"
if [ "${TIMING:-0}" = 1 ]; then
    header="$header measured at 2 |"
    rule="$rule---:|"
fi
echo "$header"
echo "$rule"
failed=0
while IFS='|' read -r name dir sources defines libs args; do
    [ -n "$name" ] || continue
    if [ -n "${ONLY:-}" ] && [[ ",$ONLY," != *",$name,"* ]]; then
        continue
    fi
    src=$bots/omp-tasks/$dir
    exe=$work/$name
    info=(-DCDATE='""' -DCC='"gcc -fopenmp"' -DLD='"gcc -fopenmp"' -DCMESSAGE='""'
        -DCFLAGS='"-O3"' -DLDFLAGS='""')
    objs=()
    for s in "$bots/common/bots_main.c" "$bots/common/bots_common.c" $sources; do
        [ "${s#/}" = "$s" ] && s=$src/$s
        o=$work/$name.$(basename "$s" .c).o
        # shellcheck disable=SC2086
        gcc -O3 -fopenmp -w -c -I"$bots/common" -I"$src" $defines "${info[@]}" "$s" -o "$o"
        objs+=("$o")
    done
    # shellcheck disable=SC2086
    gcc -O3 -fopenmp "${objs[@]}" -o "$exe" $libs
    # shellcheck disable=SC2086
    if ! "$tool" run --openmp --counter "$counter" --json "$work/$name.json" "$exe" $args -c \
        >"$work/$name.out" 2>"$work/$name.err"; then
        echo "| $name | \`$args\` | tool failed: $(grep -m1 error "$work/$name.err") | | | | | |"
        failed=1
        continue
    fi
    check=$(sed -n 's/^Verification *= *//p' "$work/$name.out")
    [ "$check" = successful ] || failed=1
    speedup=""
    if [ "${TIMING:-0}" = 1 ]; then
        # shellcheck disable=SC2086
        speedup=$(python3 - "$rounds" "${RT:-0}" "$exe" $args <<'PY'
import os, re, statistics, subprocess, sys
rounds, cmd = int(sys.argv[1]), sys.argv[3:]
if sys.argv[2] == "1":
    cmd = ["chrt", "-f", "10"] + cmd
def kernel(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True).stdout
    return float(re.search(r"Time Program\s*=\s*([0-9.]+)", out).group(1))
ratios = []
for _ in range(rounds):
    one, two = kernel(1), kernel(2)
    ratios.append(one / two)
print(f"{statistics.median(ratios):.2f}")
PY
)
    fi
    python3 - "$work/$name.json" "$name" "$args" "$check" "$speedup" "$in" <<'PY'
import json, sys
path, name, args, check, speedup, inputs = sys.argv[1:7]
r = json.load(open(path))
region = next(g for g in r["regions"] if g["label"] == "parallel")
w, spawns, bspan = region["work"], region["spawns"], region["burdened_span"]
par, delta, cost = region["parallelism"], r["span_coefficient"], r.get("runtime", r.get("openmp"))["task_cost"]
tasks = {c["name"]: c["value"] for c in r.get("runtime", r.get("openmp"))["counts"]}
def lower(c, p=2):  # docs/openmp.md: the lower bound with a cost per spawn on the work
    return w / ((w + spawns * c) / p + 2 * delta * (1 - 1 / p) * bspan)
upper = min(2.0, par)
per = f"{w / spawns:,.0f}" if spawns else "-"
row = (f"| {name} | `{args.replace(inputs + '/', '')}` | {check or 'none'} | "
       f"{tasks.get('tasks', 0):,} | {per} | {par:,.2f} | "
       f"{lower(0):.2f} – {upper:.2f} | {lower(cost):.2f} – {upper:.2f} |")
if speedup:
    s = float(speedup)
    place = "inside" if lower(cost) - 0.05 <= s <= upper + 0.05 else ("above" if s > upper else "BELOW")
    row += f" {s:.2f} ({place}) |"
print(row)
PY
done <<<"$programs"
exit $failed
